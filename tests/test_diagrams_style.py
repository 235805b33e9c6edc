"""The figures' shared style: legible text on the page, and legends true to what they label.

The text check reads each figure's SVG as the page will show it: at its natural size (a point
is 4/3 CSS pixel) or scaled down to the text column when wider (``max-width: 100%``). The
browser test (``tests/test_browser.py``) measures the same on the built site. The legend check
catches the matplotlib figures as they are saved and compares each legend entry's colour with
the colours of the artists it stands for.
"""

from __future__ import annotations

import functools
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.artist import Artist
from matplotlib.colors import to_hex
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

# The figures are the docs' own package (docs/_scripts/figures), as the pages import it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_scripts"))

import figures
from figures._canvas import Canvas
from figures._style import COLUMN_PX, new_figure, render_svg

#: The issue's bar: no text of a figure smaller than this on a desktop screen, in CSS pixels.
MIN_TEXT_PX = 11.0
_PX_PER_PT = 96 / 72  # matplotlib's SVG is sized in points
_SVG = "{http://www.w3.org/2000/svg}"
_FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")

#: Figures of modules outside this file's scope that do not meet the bar yet, and why.
_TOO_SMALL: dict[str, str] = {}


def _figure_params() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=[pytest.mark.xfail(reason=_TOO_SMALL[name], strict=True, raises=AssertionError)],
        )
        if name in _TOO_SMALL
        else name
        for name in figures.FIGURES
    ]


@functools.cache
def _figure(name: str) -> str:
    return figures.FIGURES[name]()


# --------------------------------------------------------------------------------------------
# Text size
# --------------------------------------------------------------------------------------------


def _text_px(svg: str) -> list[tuple[float, str]]:
    """Each text of ``svg`` as ``(CSS pixels on the page, text)``, smallest first."""
    root = ET.fromstring(svg)
    width_pt = float(root.get("width", "").removesuffix("pt"))
    scale = min(1.0, COLUMN_PX / (width_pt * _PX_PER_PT))
    found = []
    for element in root.iter():
        text = (element.text or "").strip()
        if element.tag not in (f"{_SVG}text", f"{_SVG}tspan") or not text:
            continue
        size = _FONT_SIZE.search(element.get("style", ""))
        assert size, f"no font size on {text!r}"
        found.append((float(size.group(1)) * _PX_PER_PT * scale, text))
    return sorted(found)


def _assert_legible(svg: str, what: str) -> None:
    __tracebackhide__ = True
    sizes = _text_px(svg)
    assert sizes, f"{what}: no text"
    if sizes[0][0] < MIN_TEXT_PX:
        small = [f"{text!r} at {px:.2f} px" for px, text in sizes if px < MIN_TEXT_PX]
        raise AssertionError(
            f"{what}: {len(small)} texts render below {MIN_TEXT_PX} px in a {COLUMN_PX} px "
            f"column: {', '.join(small[:8])}"
        )


@pytest.mark.parametrize("name", _figure_params())
def test_figure_text_is_legible_in_the_column(name: str) -> None:
    _assert_legible(_figure(name), name)


@pytest.mark.parametrize("width", [2.0, COLUMN_PX / 96, 12.0], ids=["narrow", "column", "wide"])
def test_a_canvas_raises_small_text_to_the_floor(width: float) -> None:
    # The rule lives in the style: whatever size a figure asks for, and however wide it is.
    c = Canvas(width, 1.0)
    c.text(width / 2, 0.5, "tiny", fontsize=4)
    _assert_legible(c.svg("tiny", "a tiny text"), f"canvas {width:.2f} in wide")


def test_the_text_check_fails_on_small_text() -> None:
    fig, (ax,) = new_figure(4.0, 2.0)
    ax.text(0.5, 0.5, "tiny", fontsize=6)
    with pytest.raises(AssertionError, match=re.escape("'tiny' at 8.00 px")):
        _assert_legible(render_svg(fig, "tiny", "a tiny text"), "tiny")


# --------------------------------------------------------------------------------------------
# Legends
# --------------------------------------------------------------------------------------------


def _saved_figures(make: Callable[[], str]) -> list[Figure]:
    """The matplotlib figures ``make`` saves while it draws its SVG."""
    saved: list[Figure] = []
    savefig = Figure.savefig

    def spy(self: Figure, *args: Any, **kwargs: Any) -> Any:
        saved.append(self)
        return savefig(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", spy)
        make()
    return saved


def _colours(artist: Any) -> set[str]:
    """The colours ``artist`` is drawn in: its face for a patch, its line for a line."""
    if isinstance(artist, Container):
        return set().union(*(_colours(child) for child in artist.get_children()))
    if isinstance(artist, Line2D):
        return {to_hex(artist.get_color())}
    if isinstance(artist, Patch):
        return {to_hex(artist.get_facecolor())}
    return set()


def _legend_mismatches(fig: Figure) -> list[str]:
    """Every legend entry of ``fig`` whose colour is not that of what it labels."""
    legends = [*fig.legends, *(legend for ax in fig.axes if (legend := ax.get_legend()))]
    drawn: dict[str, list[Artist]] = {}
    for ax in fig.axes:
        for artist, label in zip(*ax.get_legend_handles_labels(), strict=True):
            drawn.setdefault(label, []).append(artist)
    everything = set().union(
        *(_colours(a) for ax in fig.axes for a in [*ax.patches, *ax.lines, *ax.containers])
    )
    problems = []
    for legend in legends:
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
            label, shown = text.get_text(), _colours(handle)
            if label in drawn:  # the series it labels: every one of its members
                actual = set().union(*(_colours(a) for a in drawn[label]))
                if actual != shown:
                    problems.append(
                        f"{label!r} shows {sorted(shown)}, its series is {sorted(actual)}"
                    )
            elif not shown <= everything:  # a stand-in handle: its colour must be drawn
                problems.append(
                    f"{label!r} shows {sorted(shown)}, which nothing drawn has "
                    f"(drawn: {sorted(everything)})"
                )
    return problems


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_legend_colours_are_those_of_what_they_label(name: str) -> None:
    for fig in _saved_figures(figures.FIGURES[name]):
        assert not _legend_mismatches(fig), name


def test_the_renorm_legend_is_checked() -> None:
    (fig,) = _saved_figures(figures.renorm_figure)
    assert fig.legends
    assert fig.legends[0].legend_handles


def _bars(colours: list[str], label: str) -> Figure:
    fig, (ax,) = new_figure(4.0, 2.0)
    ax.bar(range(len(colours)), [1.0] * len(colours), color=colours, label=label)
    return fig


def test_the_legend_check_fails_on_a_stand_in_of_another_colour() -> None:
    fig = _bars(["#59a14f", "#b07aa1"], "")
    fig.legend(handles=[Patch(facecolor="#4e79a7", label="after")])
    (problem,) = _legend_mismatches(fig)
    assert "'after' shows ['#4e79a7'], which nothing drawn has" in problem


def test_the_legend_check_fails_on_a_series_of_several_colours() -> None:
    fig = _bars(["#59a14f", "#b07aa1"], "after")
    fig.legend(*fig.axes[0].get_legend_handles_labels())
    (problem,) = _legend_mismatches(fig)
    assert "its series is ['#59a14f', '#b07aa1']" in problem


def test_the_legend_check_passes_a_legend_made_from_its_series() -> None:
    fig = _bars(["#59a14f", "#59a14f"], "after")
    fig.legend(*fig.axes[0].get_legend_handles_labels())
    assert _legend_mismatches(fig) == []
