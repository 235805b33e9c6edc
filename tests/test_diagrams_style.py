"""The figures' shared style: legible text on every screen, one meaning per colour, and
legends true to what they label.

The text check reads each figure's SVG as the page will show it: at its natural size (a point
is 4/3 CSS pixel) or scaled down to the text column when wider (``max-width: 100%``), on each
screen the layout is read on: a figure of one layout on a desktop (11 px in a 686 px column)
and on the narrowest phone (10 px in a 343 px column, a 375 px phone's); a figure of two
layouts, its desktop layout on a desktop and down to the column where the stylesheet
switches, its phone layout on a phone.
The browser test (``tests/test_browser.py``) measures the same on the built site. The colour
check reads every colour a figure draws with and finds its one meaning in the style's
registry. The legend check catches the matplotlib figures as they are saved and compares each
legend entry's colour with the colours of the artists it stands for.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from matplotlib.artist import Artist
from matplotlib.colors import to_hex, to_rgb
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

# The figures are the docs' own package (docs/_scripts/figures), as the pages import it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_scripts"))

import figures
from figures._canvas import Canvas
from figures._style import (
    COLOUR_ROLES,
    DESKTOP,
    EVERY_SCREEN,
    PHONE,
    PHONE_LAYOUT_BELOW_PX,
    Screen,
    new_figure,
    render_svg,
)

DOCS = Path(__file__).resolve().parents[1] / "docs"
_PX_PER_PT = 96 / 72  # matplotlib's SVG is sized in points
_SVG = "{http://www.w3.org/2000/svg}"
_FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")
#: The narrowest column a desktop layout is shown in (below it the phone layout is), and the
#: least size of its text there.
_SWITCH = Screen("screen where the layouts switch", PHONE_LAYOUT_BELOW_PX, PHONE.min_text_px)
#: Material's column is the window less 16 px each side below 960 px.
_MARGINS_PX = 32

#: Figures of modules outside this file's scope that do not meet the bar yet, and why.
_TOO_SMALL: dict[str, str] = {}
#: The charts (matplotlib axes): their colours are forms, bounds and greys; every other figure
#: is a tensor figure, whose colours are ids and greys.
_CHARTS = {"renorm_figure", "work_figure", "error_bound_figure"}


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


def _svg_elements(html: str) -> list[str]:
    """Every outermost ``<svg class="ee-figure" ...>...</svg>`` element of an HTML fragment."""
    found = []
    for start in (m.start() for m in re.finditer(r'<svg class="ee-figure"', html)):
        depth, at = 0, start
        for tag in re.finditer(r"<(/?)svg\b", html[start:]):
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                at = start + tag.end()
                break
        found.append(html[start : html.index(">", at) + 1])
    return found


@functools.cache
def _bench_figures() -> dict[str, str]:
    """The benchmark section's figures, drawn from the docs' ``bench.json``."""
    html = figures.bench_section(DOCS / "bench")
    return {ET.fromstring(svg).get("aria-label", ""): svg for svg in _svg_elements(html)}


# --------------------------------------------------------------------------------------------
# Text size
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """One layout of a figure: where it is read, its natural width, and its texts."""

    name: str
    screens: tuple[Screen, ...]
    width_pt: float
    texts: list[tuple[float, str]]  # (font size in points, text)


def _texts(element: ET.Element) -> list[tuple[float, str]]:
    found = []
    for e in element.iter():
        text = (e.text or "").strip()
        if e.tag not in (f"{_SVG}text", f"{_SVG}tspan") or not text:
            continue
        size = _FONT_SIZE.search(e.get("style", ""))
        assert size, f"no font size on {text!r}"
        found.append((float(size.group(1)), text))
    return found


def _layouts(svg: str) -> list[_Layout]:
    """The layouts of ``svg``: one read everywhere, or a desktop and a phone layout."""
    root = ET.fromstring(svg)
    width_pt = float(root.get("width", "").removesuffix("pt"))
    phone = root.find(f"{_SVG}svg[@class='ee-phone']")
    if phone is None:
        return [_Layout("the figure", (*EVERY_SCREEN, _SWITCH), width_pt, _texts(root))]
    desktop = root.find(f"{_SVG}g[@class='ee-desktop']")
    assert desktop is not None, "a phone layout without a desktop layout"
    phone_width = float(phone.get("viewBox", "").split()[2])
    return [
        _Layout("the desktop layout", (DESKTOP, _SWITCH), width_pt, _texts(desktop)),
        _Layout("the phone layout", (PHONE,), phone_width, _texts(phone)),
    ]


def _small_texts(layout: _Layout, screen: Screen) -> list[tuple[float, str]]:
    """The texts of ``layout`` that render below ``screen``'s least size, in CSS pixels."""
    scale = min(1.0, screen.column_px / (layout.width_pt * _PX_PER_PT))
    shown = sorted((size * _PX_PER_PT * scale, text) for size, text in layout.texts)
    return [(px, text) for px, text in shown if px < screen.min_text_px]


def _assert_legible(svg: str, what: str) -> None:
    __tracebackhide__ = True
    for layout in _layouts(svg):
        assert layout.texts, f"{what}: no text in {layout.name}"
        for screen in layout.screens:
            small = _small_texts(layout, screen)
            if small:
                shown = [f"{text!r} at {px:.2f} px" for px, text in small]
                raise AssertionError(
                    f"{what}: {len(small)} texts of {layout.name} render below "
                    f"{screen.min_text_px} px on a {screen.name} ({screen.column_px:.0f} px "
                    f"column): {', '.join(shown[:8])}"
                )


@pytest.mark.parametrize("name", _figure_params())
def test_figure_text_is_legible_on_every_screen(name: str) -> None:
    _assert_legible(_figure(name), name)


@pytest.mark.slow  # every benchmark figure drawn; the browser test reads them too
def test_the_benchmark_figures_are_legible_on_every_screen() -> None:
    shown = _bench_figures()
    assert len(shown) == 3, sorted(shown)
    for label, svg in shown.items():
        _assert_legible(svg, label)


@pytest.mark.parametrize(
    "width", [2.0, DESKTOP.column_px / 96, 12.0], ids=["narrow", "column", "wide"]
)
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


def test_the_text_check_reads_the_phone_layout() -> None:
    desktop, _ = new_figure(4.0, 2.0, screens=(DESKTOP,))
    desktop.text(0.5, 0.5, "wide enough", fontsize=9)
    phone, _ = new_figure(6.0, 2.0, screens=(PHONE,))
    phone.text(0.5, 0.5, "tiny", fontsize=7.5)  # 10 px at 6 inches, but shown in 343 px
    svg = render_svg(desktop, "pair", "a pair", phone=phone)
    with pytest.raises(AssertionError, match=r"the phone layout render below 10.0 px on a phone"):
        _assert_legible(svg, "pair")


def test_the_desktop_layout_stays_legible_down_to_the_switch() -> None:
    # 11 px in a 686 px column is 10 px in a 624 px one: where the stylesheet switches.
    assert DESKTOP.min_text_px * _SWITCH.column_px / DESKTOP.column_px == pytest.approx(10.0)
    css = (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    widths = {int(w) for w in re.findall(r"@media screen and \(max-width: (\d+)px\)", css)}
    # The phone layout shows in every window whose column is narrower than the switch.
    assert widths == {math.ceil(PHONE_LAYOUT_BELOW_PX) - 1 + _MARGINS_PX}, widths


def test_a_phone_layout_keeps_its_size_and_ratio() -> None:
    # The stylesheet sizes a figure on a phone from its custom properties: they must be those
    # of the phone layout, and its nested <svg> must fill the box they give.
    svg = _figure("lookup_figure")
    root = ET.fromstring(svg)
    phone = root.find(f"{_SVG}svg[@class='ee-phone']")
    assert phone is not None
    assert phone.get("display") == "none"  # hidden unless the stylesheet shows it
    _, _, width, height = map(float, phone.get("viewBox", "").split())
    style = root.get("style", "")
    assert f"--ee-phone-width: {width * _PX_PER_PT:.1f}px" in style
    assert f"--ee-phone-ratio: {width:g} / {height:g}" in style
    box = float(phone.get("width", "")) / float(phone.get("height", ""))
    assert box == pytest.approx(width / height, rel=1e-3)
    _, _, outer_w, _ = map(float, root.get("viewBox", "").split())
    assert float(phone.get("width", "")) == pytest.approx(outer_w, rel=1e-3)
    assert root.get("preserveAspectRatio") == "xMinYMin meet"


def test_powers_are_written_with_raised_exponents() -> None:
    # A log axis labels its ticks 10^3; the SVG raises the exponent, no smaller than the floor.
    svgs = {**{n: _figure(n) for n in ("work_figure", "error_bound_figure")}, **_bench_figures()}
    for name, svg in svgs.items():
        texts = ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{_SVG}text")]
        assert not [t for t in texts if re.search(r"\d\^", t)], name
        assert '<tspan dy="-' in svg, name


# --------------------------------------------------------------------------------------------
# Colours
# --------------------------------------------------------------------------------------------

_COLOUR = re.compile(r"(?:fill|stroke):\s*(#[0-9a-fA-F]{6})\b")


def _roles(colour: str) -> set[str]:
    """The meanings ``colour`` may have: a registered colour, or a tint of one (a pale fill)."""
    if colour.lower() in COLOUR_ROLES:
        return {COLOUR_ROLES[colour.lower()]}
    c = to_rgb(colour)
    found = set()
    for base, role in COLOUR_ROLES.items():
        b = to_rgb(base)
        far = max(range(3), key=lambda i: 1 - b[i])
        if 1 - b[far] < 1e-6:
            continue  # white: no tint but white itself
        amount = (1 - c[far]) / (1 - b[far])
        # matplotlib rounds each channel to 8 bits
        if 0 < amount <= 1 and all(
            abs(1 - amount * (1 - b[i]) - c[i]) <= 1.5 / 255 for i in range(3)
        ):
            found.add(role)
    return found


def _colour_problems(svg: str, allowed: Callable[[str], bool]) -> list[str]:
    problems = []
    for colour in sorted(set(_COLOUR.findall(svg))):
        roles = _roles(colour)
        if len(roles) != 1:
            problems.append(f"{colour} means {sorted(roles) or 'nothing registered'}")
        elif not allowed(next(iter(roles))):
            problems.append(f"{colour} means {next(iter(roles))}, out of place here")
    return problems


def _chart_role(role: str) -> bool:
    return role.startswith("form ") or role in ("bound or threshold", "none")


def _tensor_role(role: str) -> bool:
    return role.startswith("id ") or role == "none"


def test_every_colour_has_one_meaning() -> None:
    assert len(set(COLOUR_ROLES)) == len(COLOUR_ROLES)
    # No colour is a tint of a colour of another meaning (a pale form would read as an id).
    for colour, role in COLOUR_ROLES.items():
        assert _roles(colour) == {role}, (colour, _roles(colour))


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_figure_colours_have_one_meaning(name: str) -> None:
    allowed = _chart_role if name in _CHARTS else _tensor_role
    assert not _colour_problems(_figure(name), allowed), name


def test_the_benchmark_figures_colour_forms_only() -> None:
    for label, svg in _bench_figures().items():
        assert not _colour_problems(svg, _chart_role), label


def test_the_colour_check_fails_on_an_unregistered_colour() -> None:
    fig, (ax,) = new_figure(4.0, 2.0)
    ax.plot([0, 1], [0, 1], color="#e15759")
    problems = _colour_problems(render_svg(fig, "red", "a red line"), _chart_role)
    assert problems == ["#e15759 means nothing registered"]


def test_the_colour_check_fails_on_an_id_colour_in_a_chart() -> None:
    fig, (ax,) = new_figure(4.0, 2.0)
    ax.plot([0, 1], [0, 1], color=figures._style.ID_COLOURS[0])
    (problem,) = _colour_problems(render_svg(fig, "id", "an id's line"), _chart_role)
    assert "means id 0, out of place here" in problem


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
    saved = _saved_figures(figures.renorm_figure)
    assert len(saved) == 2  # the desktop and the phone layout
    for fig in saved:
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
