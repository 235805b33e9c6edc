"""The contributors' map: the data path of a verification and the module at each stage.

[`DATA_PATH`][] is the one source of the "Architecture" page: [`data_path_figure`][]
draws it, [`architecture_table`][] lists it, and ``tests/test_architecture.py`` imports
every module it names, so a renamed or removed module fails the tests instead of leaving the
page out of date.
"""

from __future__ import annotations

import itertools
import textwrap
from dataclasses import dataclass

from ._canvas import Canvas
from ._style import DARK_GREY, MID_GREY, TEXT, screens_of, tint

__all__ = ["DATA_PATH", "Part", "Stage", "architecture_table", "data_path_figure", "modules"]

#: The package the module names of [`DATA_PATH`][] are relative to.
PACKAGE = "embedding_equivalence"


@dataclass(frozen=True)
class Part:
    """One module's share of a stage.

    Attributes:
        module: the module, relative to the package (``"_engine.check"`` is
            ``embedding_equivalence._engine.check``).
        role: what the module does at this stage, one or two sentences.
    """

    module: str
    role: str


@dataclass(frozen=True)
class Stage:
    """One box of the data path.

    Attributes:
        name: the stage, as the box's title.
        summary: what the stage does, a few words for the box.
        hands_on: what the stage hands to the next row, written beside its arrows.
        parts: the modules that make up the stage.
    """

    name: str
    summary: str
    hands_on: str
    parts: tuple[Part, ...]


_CHECK = "_engine.check"

#: The data path, row by row: every stage of a row feeds every stage of the next.
DATA_PATH: tuple[tuple[Stage, ...], ...] = (
    (
        Stage(
            "strategy",
            "public Hypothesis strategies",
            "a recipe",
            (
                Part(
                    "strategies",
                    "Public Hypothesis strategies: draw a recipe (vocabulary, ids, table, dtype, "
                    "device, memory layout, options).",
                ),
            ),
        ),
    ),
    (
        Stage(
            "Case",
            "one call, only plain values: .build() makes fresh tensors, .source() the code",
            "fresh tensors",
            (
                Part(
                    "_draw.cases",
                    "`EmbeddingCase`, `EmbeddingBagCase`: one drawn call made only of plain "
                    "values (`IdsRecipe`, `WeightRecipe` of `_draw.recipes`, options, grad seed); "
                    "`.build()` makes fresh tensors, `.source()` writes the Python that rebuilds "
                    "them.",
                ),
            ),
        ),
    ),
    (
        Stage(
            "runner (seam 1)",
            "runs the candidate: your kernel or a form of FORMS",
            "Outcome",
            (
                Part(
                    _CHECK,
                    "Seam 1, the runner: how the candidate is run (`run_in_process`, or on the "
                    "ranks of a process group). Returns an Outcome, one a rank: output, "
                    "gradients and table after the call, or the exception and the stage that "
                    "raised it.",
                ),
                Part(
                    "distributed._group",
                    "The runner on ranks: `WorkerGroup` spawns the ranks, sends each the call, "
                    "gathers every rank's Outcome, and turns a hung or dead rank into a failing "
                    "report (`distributed._rank` is what one rank does).",
                ),
                Part(
                    "forms.registry",
                    "`FORMS`: the package's own implementations, read by the CLI, the "
                    "benchmark, the tests and the docs.",
                ),
                Part("forms.options", "The one table of options and bag modes."),
            ),
        ),
        Stage(
            "oracle (seam 2)",
            "exact float64 reference and its error bound",
            "reference, bound",
            (
                Part(
                    _CHECK,
                    "Seam 2, the oracle: which exact float64 reference and error bound judge "
                    "the call (any `Oracle`, built from the call's tensors before the "
                    "candidate runs).",
                ),
                Part(
                    "oracle",
                    "The exact float64 references, `EmbeddingOracle` (`embedding.py`) and "
                    "`BagOracle` (`bag.py`, its max mode and ties in `max_ties.py`), with the "
                    "error bounds derived in `bounds.py`; `expected.py` is the `Oracle` protocol "
                    "that the judge asks.",
                ),
            ),
        ),
    ),
    (
        Stage(
            "judge",
            "outcome within the bound? Else EquivalenceError at the first differing position",
            "pass or failure",
            (
                Part(
                    _CHECK,
                    "The judge: compares the Outcome with the oracle within the bound; raises "
                    "`EquivalenceError` with the first differing position, both values, the "
                    "bound and the repro snippet.",
                ),
            ),
        ),
    ),
    (
        Stage(
            "report",
            "VerificationReport or assertion",
            "",
            (
                Part(
                    "_engine.verify",
                    "`verify_embedding`, `verify_embedding_bag`, `verify_quantized_embedding`: "
                    "descriptions (cases, boundary examples, an oracle, parts) for the driver.",
                ),
                Part(
                    "distributed._verify",
                    "`verify_sharded_embedding`: a description whose parts run on the ranks "
                    "of a process group, with a `torchrun` repro script.",
                ),
                Part(
                    "_engine.driver",
                    "The one driver: the budget split, the boundary phase, Hypothesis, the "
                    "diagnosis of torch's defects, the merge of the parts' reports.",
                ),
                Part(
                    "_engine.report",
                    "The typed `VerificationReport`, one record per kind of run, and its one "
                    "renderer (text, table row, JSON).",
                ),
                Part(
                    "testing",
                    "Public assertion helpers: the engine on one call the user gives.",
                ),
            ),
        ),
        Stage(
            "repro",
            "a snippet that reruns the failing call",
            "",
            (
                Part(
                    "_engine.repro",
                    "The runnable repro snippet of a failure, and the one rule for naming the "
                    "candidate in it (`candidate_source`).",
                ),
            ),
        ),
    ),
)


def modules() -> list[str]:
    """Every module [`DATA_PATH`][] names, fully qualified, once each, in path order."""
    names = (p.module for row in DATA_PATH for stage in row for p in stage.parts)
    return [f"{PACKAGE}.{m}" for m in dict.fromkeys(names)]


def architecture_table() -> str:
    """A Markdown table of [`DATA_PATH`][]: stage, module, and what the module does there.

    Returns:
        The table, for a page to print from a ``markdown-exec`` block.
    """
    lines = ["| stage | module | responsibility |", "| --- | --- | --- |"]
    for row in DATA_PATH:
        for stage in row:
            for part in stage.parts:
                role = part.role.replace("|", "\\|")  # a bar would end the cell
                lines.append(f"| {stage.name} | `{PACKAGE}.{part.module}` | {role} |")
    return "\n".join(lines)


# Layout, in inches: the width on a desktop and on a phone (shown scaled down to a phone's
# column, 11 pt reads at 10.5 px on a 390 px phone, 10.1 px on the narrowest, 375 px).
_WIDTH = 7.0
_PHONE_WIDTH = 5.2
_MARGIN = 0.2
_GAP_X = 0.4  # between the boxes of a row
_GAP_Y = 0.55  # between rows: room for the arrows and their labels
_PAD = 0.12
_INSET = 0.3  # of an arrow from the ends of a box
_TITLE_H = 0.27
_LINE_H = 0.21
_CHARS_PER_INCH = 11.0  # of 11 pt text, to wrap the summaries
_LABEL_EM = 0.6  # the width of a character of a label, in em (sans-serif, generous)
_FONT = 11.0  # the smallest text of the figure, in points
_SUMMARY = DARK_GREY
#: The stages' boxes: grey, for a colour would read as an id's (the tensor figures' colours).
_BOX = MID_GREY


@dataclass(frozen=True)
class _Box:
    stage: Stage
    x: float
    y: float
    width: float
    height: float

    @property
    def centre(self) -> float:
        return self.x + self.width / 2


def _lines(stage: Stage, width: float) -> list[str]:
    """The summary of ``stage`` wrapped to a box ``width`` inches wide."""
    return textwrap.wrap(stage.summary, int((width - 2 * _PAD) * _CHARS_PER_INCH))


def _layout(figure_width: float) -> list[list[_Box]]:
    """Place every stage: one row of boxes per row of [`DATA_PATH`][], each row centred."""
    rows: list[list[_Box]] = []
    y = 0.55 if figure_width == _WIDTH else 0.75  # a phone's title takes two lines
    for row in DATA_PATH:
        count = len(row)
        width = min(4.6, (figure_width - 2 * _MARGIN - (count - 1) * _GAP_X) / count)
        x = (figure_width - count * width - (count - 1) * _GAP_X) / 2
        heights = [
            2 * _PAD + _TITLE_H + _LINE_H * (len(s.parts) + len(_lines(s, width))) for s in row
        ]
        height = max(heights)
        boxes = []
        for stage in row:
            boxes.append(_Box(stage, x, y, width, height))
            x += width + _GAP_X
        rows.append(boxes)
        y += height + _GAP_Y
    return rows


def _draw_box(c: Canvas, box: _Box) -> None:
    c.box(box.x, box.y, box.width, box.height, tint(_BOX, 0.1), _BOX)
    left = box.x + _PAD
    y = box.y + _PAD + _TITLE_H / 2
    c.text(left, y, box.stage.name, ha="left", fontsize=12.5, fontweight="bold")
    y += _TITLE_H / 2 + _LINE_H / 2
    for part in box.stage.parts:
        c.text(left, y, part.module, ha="left", fontsize=_FONT, family="monospace")
        y += _LINE_H
    for line in _lines(box.stage, box.width):
        c.text(left, y, line, ha="left", fontsize=_FONT, color=_SUMMARY)
        y += _LINE_H


def _link(c: Canvas, upper: _Box, lower: _Box) -> None:
    """The arrow from ``upper`` to ``lower``, labelled with what ``upper`` hands on."""
    # Straight down through the span the two boxes share, else from centre to centre.
    lo = max(upper.x, lower.x) + _INSET
    hi = min(upper.x + upper.width, lower.x + lower.width) - _INSET
    start_x, end_x = ((lo + hi) / 2,) * 2 if lo <= hi else (upper.centre, lower.centre)
    top, bottom = upper.y + upper.height, lower.y
    c.arrow((start_x, top), (end_x, bottom), TEXT, width=1.4)
    if upper.stage.hands_on:  # on the outer side of the arrow, clear of the others
        mid_x, mid_y = (start_x + end_x) / 2, (top + bottom) / 2
        # Inward where the outer side has no room for it (a phone's narrower figure).
        room = len(upper.stage.hands_on) * _FONT * _LABEL_EM / 72 + 0.1 + _MARGIN / 2
        left = mid_x < c.width / 2 - 0.01 or mid_x + room > c.width
        x = mid_x - 0.1 if left else mid_x + 0.1
        c.text(x, mid_y, upper.stage.hands_on, ha="right" if left else "left", fontsize=_FONT)


def data_path_figure() -> str:
    """The data path of a verification, with each module of the package on its stage.

    Drawn from [`DATA_PATH`][]: strategy, then Case, then the candidate run by the runner
    beside the oracle, then the judge, then the report and the repro. Module names are
    relative to ``embedding_equivalence``; no text is smaller than 11 pt. A phone gets the
    same layout, narrower.

    Returns:
        An SVG document.
    """
    rows = _layout(_WIDTH)
    stages = " -> ".join("/".join(b.stage.name for b in row) for row in rows)
    return _draw_data_path(phone=False).svg(
        "architecture",
        f"the data path: {stages}, each with its modules",
        _draw_data_path(phone=True),
    )


def _draw_data_path(*, phone: bool) -> Canvas:
    width = _PHONE_WIDTH if phone else _WIDTH
    rows = _layout(width)
    last = rows[-1][0]
    c = Canvas(width, last.y + last.height + 0.2, screens_of(phone))
    title = f"one verification, stage by stage (modules of {PACKAGE})"
    c.text(
        width / 2,
        0.25,
        title.replace(" (", "\n(") if phone else title,
        fontsize=_FONT,
        color=_SUMMARY,
        va="top" if phone else "center",
    )
    for upper_row, lower_row in itertools.pairwise(rows):
        for upper in upper_row:
            for lower in lower_row:
                _link(c, upper, lower)
    for row in rows:
        for box in row:
            _draw_box(c, box)
    return c
