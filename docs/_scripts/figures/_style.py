"""The shared look of the figures: colours, fonts, number formats, and the SVG they become.

Every figure module draws with these colours and this ``rc`` context, and hands its
matplotlib ``Figure`` to [`render_svg`][], so all figures share one style and every SVG is
fit for inlining into a page (no XML prolog, ids unique to the figure, responsive, labelled).

The size of text is ruled here, once, for each [`Screen`][] a figure is read on: no text may
appear smaller than 11 CSS pixels on a desktop ([`DESKTOP`][]) or 10 on a phone
([`PHONE`][]). A figure is inlined at its natural size (a point is 4/3 CSS pixel) unless it is
wider than the page's text column, which scales it down, its text with it;
[`min_font_size`][] is the least size a figure of a given width may use on the screens it is
read on. [`new_figure`][] and [`render_svg`][] raise matplotlib's sizes to it, and the canvas
raises every text it draws to it.

A figure too wide to read on a phone is drawn twice: a desktop layout and a phone layout
(stacked, narrower), which [`render_svg`][] puts into one ``<svg>``. The site's stylesheet
shows the phone layout when the column is narrower than [`PHONE_LAYOUT_BELOW_PX`][]: down to
that width the desktop layout's text stays at the phone's least size or more.

Colours have one meaning each, across the site ([`COLOUR_ROLES`][]): an id (a row of the
table), a form of the embedding (in the charts), a bound or threshold, or none (the greys of
text, grids and zeros).
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

__all__ = [
    "BODY",
    "BOUND",
    "COLOUR_ROLES",
    "COLUMN_PX",
    "DARK_GREY",
    "DESKTOP",
    "EVERY_SCREEN",
    "FAINT_TEXT",
    "FORM_COLOURS",
    "GRID",
    "ID_COLOURS",
    "MID_GREY",
    "MIN_TEXT_PX",
    "MUTED",
    "NEUTRAL",
    "PAPER",
    "PHONE",
    "PHONE_LAYOUT_BELOW_PX",
    "RC",
    "SMALL",
    "SYMBOL",
    "TEXT",
    "TITLE",
    "ZERO_FILL",
    "Screen",
    "figure_rc",
    "figure_style",
    "fmt",
    "fmt_short",
    "id_colour",
    "inline_svg",
    "log_tick_labels",
    "min_font_size",
    "new_figure",
    "page_scale",
    "render_svg",
    "responsive_svg",
    "screens_of",
    "tidy_axes",
    "tint",
]

#: One colour per distinct id, that is per row of the table (the tensor figures); ids beyond
#: cycle through them.
ID_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2", "#edc948")
#: One colour per form of the embedding, the same in every chart; no tensor figure uses them.
#: Darker than the ids' colours, so that a form is not read as an id.
FORM_COLOURS = {
    "lookup": "#00734d",
    "lookup (sparse grad)": "#0a9396",
    "one-hot matmul": "#9c2c8c",
    "linear": "#1d3f8f",
    "sparse matmul": "#b35c00",
}
#: The colour of bounds and thresholds (an error bound, ``max_norm``), and of nothing else.
BOUND = "#d93025"
GRID = "#9aa0a6"
MUTED = "#c8ccd0"
TEXT = "#202124"
FAINT_TEXT = "#80868b"
PAPER = "#ffffff"
ZERO_FILL = "#f1f3f4"
_LIGHT_GRID = "#e8eaed"
#: Greys between the text's and the grid's: second-rank text, boxes, a changed value.
DARK_GREY = "#3c4043"
MID_GREY = "#5f6368"
#: The greys: text, grids, zeros, the paper, boxes; none of them stands for anything.
NEUTRAL = (TEXT, DARK_GREY, MID_GREY, FAINT_TEXT, GRID, MUTED, ZERO_FILL, PAPER, _LIGHT_GRID)
#: Every colour a figure may draw with, and its one meaning; a fill may be a tint of one.
COLOUR_ROLES: dict[str, str] = {
    **{c: f"id {v}" for v, c in enumerate(ID_COLOURS)},
    **{c: f"form {form}" for form, c in FORM_COLOURS.items()},
    BOUND: "bound or threshold",
    **dict.fromkeys(NEUTRAL, "none"),
}


@dataclass(frozen=True)
class Screen:
    """A screen a figure is read on: the width of the page's text column there, and the least
    size its text may appear at, both in CSS pixels.

    Attributes:
        name: ``"desktop"`` or ``"phone"``.
        column_px: the width of Material's text column on that screen; a figure wider than
            the column is scaled down to fit it (``max-width: 100%``).
        min_text_px: no text of a figure may appear smaller.
    """

    name: str
    column_px: float
    min_text_px: float


#: A desktop: the narrowest column Material gets in a window 960 px wide or more (686 px at
#: 960; 688 px from 1220 to 1600, its grid less both sidebars; wider elsewhere).
DESKTOP = Screen("desktop", 686.0, 11.0)
#: The narrowest phone the site supports, 375 px wide (iPhone SE and mini): below 960 px
#: Material's column is the window less 16 px each side. A phone layout wider than that column
#: is scaled down to it, so on a wider phone its text only grows (10 px here is 10.4 px at
#: 390 px).
PHONE = Screen("phone", 343.0, 10.0)
#: A figure with one layout is read on both.
EVERY_SCREEN = (DESKTOP, PHONE)
#: The smallest text of a figure, in CSS pixels, as a reader sees it on a desktop screen.
MIN_TEXT_PX = DESKTOP.min_text_px
#: The width of the page's text column, in CSS pixels, on a desktop screen.
COLUMN_PX = DESKTOP.column_px
#: Below this column width, in CSS pixels, a page shows a figure's phone layout (the
#: stylesheet switches at the matching window width: the column plus Material's 2 x 16 px).
#: Down to it, a desktop layout's text (at least 11 px in a 686 px column) stays at 10 px or
#: more.
PHONE_LAYOUT_BELOW_PX = DESKTOP.column_px * PHONE.min_text_px / DESKTOP.min_text_px
_PX_PER_INCH = 96.0  # CSS pixels
_PT_PER_INCH = 72.0  # matplotlib's points, the SVG's user unit

# Font sizes in points, by role. At a figure's natural size a point is 4/3 CSS pixel, so all
# are at least MIN_TEXT_PX in a figure no wider than the column; a wider figure raises them
# to its `min_font_size` (a figure read on a phone too, from 3.9 inches).
#: Column indices, notes and legends.
SMALL = 8.5
#: Cells, row labels, axis labels and ticks: the default.
BODY = 9.0
#: Titles of matrices and axes.
TITLE = 9.5
#: The operators between matrices (``@``, ``=``).
SYMBOL = 14.0


def screens_of(phone: bool) -> tuple[Screen]:
    """The screen one of a figure's two layouts is read on: ``(PHONE,)`` or ``(DESKTOP,)``."""
    return (PHONE,) if phone else (DESKTOP,)


def page_scale(width: float, screen: Screen = DESKTOP) -> float:
    """The factor a figure ``width`` inches wide is shown at in the column (1: natural size)."""
    return min(1.0, screen.column_px / (width * _PX_PER_INCH))


def min_font_size(width: float, screens: Sequence[Screen] = EVERY_SCREEN) -> float:
    """The least font size, in points, of a figure ``width`` inches wide read on ``screens``.

    Text of that size appears at each screen's ``min_text_px`` or more: a point is 4/3 CSS
    pixel, and a figure wider than a screen's column is scaled down by [`page_scale`][].
    Rounded up to the next hundredth of a point above it, so that neither the size written
    into the SVG nor a browser's rounding of the scale takes the text under the least size.
    """
    return max(
        math.floor(s.min_text_px * _PT_PER_INCH / _PX_PER_INCH / page_scale(width, s) * 100 + 1)
        / 100
        for s in screens
    )


#: The matplotlib settings every figure is drawn and saved under (see [`figure_rc`][]).
RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays text: searchable, selectable, small
    "font.family": "sans-serif",
    "font.size": BODY,
    "axes.titlesize": TITLE,
    "axes.labelsize": BODY,
    "xtick.labelsize": BODY,
    "ytick.labelsize": BODY,
    "legend.fontsize": SMALL,
    "legend.title_fontsize": SMALL,
    "figure.titlesize": TITLE,
    "text.color": TEXT,
    "axes.edgecolor": TEXT,
    "axes.labelcolor": TEXT,
    "xtick.color": TEXT,
    "ytick.color": TEXT,
}
_FONT_SIZES = [k for k in RC if k.endswith("size")]


def figure_rc(width: float, screens: Sequence[Screen] = EVERY_SCREEN) -> dict[Any, Any]:
    """[`RC`][] for a figure ``width`` inches wide: its font sizes raised to [`min_font_size`][]."""
    floor = min_font_size(width, screens)
    return {**RC, **{k: max(RC[k], floor) for k in _FONT_SIZES}}


def figure_style(
    width: float, screens: Sequence[Screen] = EVERY_SCREEN
) -> AbstractContextManager[Any]:
    """The ``rc`` context to draw a figure ``width`` inches wide in ([`figure_rc`][]).

    Matplotlib sizes a title, a label or a legend when it is made: drawn outside this context,
    they take matplotlib's default sizes instead.

    Args:
        width: in inches.
        screens: where the figure is read: both screens for a figure of one layout,
            ``(DESKTOP,)`` for the desktop layout of a figure that has a phone layout too,
            ``(PHONE,)`` for that phone layout.

    Examples:
        ```python
        with figure_style(7.0, (DESKTOP,)):
            fig, (ax,) = new_figure(7.0, 2.6, screens=(DESKTOP,))
            ax.set_title("titled in TITLE size")
        ```
    """
    return mpl.rc_context(figure_rc(width, screens))


def id_colour(v: int) -> str:
    """The colour of id (table row) ``v``."""
    return ID_COLOURS[v % len(ID_COLOURS)]


def tint(colour: str, amount: float) -> tuple[float, float, float]:
    """Mix ``colour`` with white: 0 gives white, 1 the colour itself."""
    r, g, b = to_rgb(colour)
    return (1 - amount * (1 - r), 1 - amount * (1 - g), 1 - amount * (1 - b))


def fmt(x: float) -> str:
    """Format like torch's default print (4 decimals), keeping the sign of zero."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4f}"


def fmt_short(x: float) -> str:
    """Format an integral value without decimals (``-0`` stays ``-0``), others to 4 digits."""
    if math.isnan(x) or math.isinf(x):
        return fmt(x)
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x)}" if not (x == 0 and math.copysign(1, x) < 0) else "-0"
    return f"{x:.4g}"


def new_figure(
    width: float,
    height: float,
    *,
    rect: tuple[float, float, float, float] | None = None,
    ncols: int = 1,
    nrows: int = 1,
    screens: Sequence[Screen] = EVERY_SCREEN,
) -> tuple[Figure, list[Axes]]:
    """A ``width x height`` inches figure and its axes, both created under [`figure_rc`][].

    Draw on them inside [`figure_style`][] with the same ``screens``: text made outside it
    takes matplotlib's default sizes, and text given an explicit ``fontsize`` must not go below
    [`min_font_size`][].

    Args:
        width: in inches.
        height: in inches.
        rect: one axes at ``(left, bottom, width, height)`` in figure fractions; else
            ``nrows x ncols`` axes.
        ncols: how many axes side by side (without ``rect``).
        nrows: how many axes one above the other (without ``rect``).
        screens: where the figure is read (see [`figure_style`][]).

    Returns:
        ``(figure, axes)``, the axes row by row.
    """
    with figure_style(width, screens):
        fig = Figure(figsize=(width, height))
        if rect is not None:
            return fig, [fig.add_axes(rect)]
        return fig, list(fig.subplots(nrows, ncols, squeeze=False).flat)


def tidy_axes(ax: Axes, *, grid: bool = True) -> None:
    """Drop the top and right spines, and draw a light major grid unless ``grid`` is false."""
    if grid:
        ax.grid(True, which="major", color=_LIGHT_GRID, linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)


def log_tick_labels(axis: Axis, base: int, *, powers: bool = True) -> None:
    """Label the ticks of a log ``axis`` as powers, the exponent raised as a superscript.

    Matplotlib's own mathtext sets an exponent at 0.7 of the tick's size: smaller than
    [`min_font_size`][] allows. These labels are plain text ``10^3``, which [`render_svg`][]
    writes as ``10`` and a raised ``3`` no smaller than the figure's least size. Call after
    ``set_xscale("log")`` or ``set_yscale("log")``, which reset the labels.

    Args:
        axis: ``ax.xaxis`` or ``ax.yaxis``, on a log scale of ``base``.
        base: the scale's base.
        powers: label a tick ``2^-10``; else by its value (``1024``, fit for counts).
    """

    def label(x: float, _: object) -> str:
        return f"{base}^{round(math.log(x, base))}" if powers else f"{x:g}"

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())


def render_svg(fig: Figure, name: str, label: str, *, phone: Figure | None = None) -> str:
    """Render ``fig`` as an inline SVG element with ids unique to ``name``.

    Args:
        fig: the figure: read on every screen, or only on a desktop when ``phone`` is given.
        name: a prefix unique to the figure among those of a page (ids become ``name-...``).
        label: the ``aria-label``, a sentence that says what the figure shows.
        phone: the same figure's phone layout, drawn for [`PHONE`][]: both layouts go into
            one ``<svg>`` (see [`responsive_svg`][]).

    Returns:
        The ``<svg ...>...</svg>`` element, with no XML prolog.
    """
    if phone is None:
        return inline_svg(_saved(fig, name, EVERY_SCREEN), name, label)
    return responsive_svg(
        _saved(fig, name, (DESKTOP,)), _saved(phone, f"{name}-phone", (PHONE,)), name, label
    )


def _saved(fig: Figure, name: str, screens: Sequence[Screen]) -> str:
    """``fig`` as an SVG document, its ``base^exponent`` labels with raised exponents."""
    buf = io.StringIO()
    width = float(fig.get_size_inches()[0])
    # Ticks are made while the figure is drawn: under the same sizes as the rest of it.
    with mpl.rc_context({**figure_rc(width, screens), "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, facecolor=PAPER)
    return _raise_exponents(buf.getvalue(), min_font_size(width, screens))


# A text element with a power `base^exponent` in it (a label of `log_tick_labels`, a title).
_POWER_TEXT = re.compile(
    r'(<text style="font-size: ([\d.]+)px;[^>]*>)([^<]*\d\^[-\u2212]?\d[^<]*)(</text>)'
)
_EXPONENT = re.compile(r"(?<=\d)\^([-\u2212]?\d+)")


def _raise_exponents(svg: str, floor: float) -> str:
    """Write each ``base^exponent`` of a text as ``base`` and the exponent raised.

    The exponent is set at 0.8 of the text's size, but never below ``floor``, and raised by
    0.4 of the text's size; the text after it goes back down to the baseline.
    """

    def raised(m: re.Match[str]) -> str:
        size = float(m.group(2))
        small, lift = max(floor, round(0.8 * size, 2)), round(0.4 * size, 2)
        parts = _EXPONENT.split(m.group(3))
        text = parts[0]
        for exponent, tail in zip(parts[1::2], parts[2::2], strict=True):
            minus = exponent.replace("-", "\u2212")
            text += f'<tspan dy="-{lift:g}" style="font-size: {small:g}px">{minus}</tspan>'
            if tail:
                text += f'<tspan dy="{lift:g}" style="font-size: {size:g}px">{tail}</tspan>'
        return f"{m.group(1)}{text}{m.group(4)}"

    return _POWER_TEXT.sub(raised, svg)


def inline_svg(text: str, prefix: str, label: str) -> str:
    """Make an SVG document fit for inlining: no prolog, unique ids, responsive, labelled.

    Args:
        text: an SVG document.
        prefix: prepended to every id (and every reference to one), as ``prefix-id``.
        label: the ``aria-label``.

    Returns:
        The ``<svg ...>...</svg>`` element.

    Raises:
        ValueError: ``text`` holds no ``<svg`` element.
    """
    body = _prefixed(text, prefix)
    attrs = (
        f'<svg class="ee-figure" role="img" aria-label="{html.escape(label, quote=True)}" '
        'style="max-width: 100%; height: auto;"'
    )
    return body.replace("<svg", attrs, 1)


def _prefixed(text: str, prefix: str) -> str:
    """The ``<svg`` element of ``text``, every id (and reference to one) as ``prefix-id``."""
    start = text.find("<svg")
    if start < 0:
        raise ValueError(f"{prefix}: not an SVG document")
    body = text[start:].strip()
    ids = set(re.findall(r'\bid="([^"]+)"', body))
    if ids:
        pattern = re.compile(
            r'(\bid="|href="#|url\(#)(' + "|".join(re.escape(i) for i in ids) + r')(?=["\)])'
        )
        body = pattern.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", body)
    return body


_OPENING = re.compile(r"<svg\b[^>]*>")
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)


def _size_pt(opening: str, attribute: str) -> float:
    found = re.search(rf'\b{attribute}="([\d.]+)pt"', opening)
    if found is None:
        raise ValueError(f"no {attribute} in points: {opening[:120]}")
    return float(found.group(1))


def responsive_svg(desktop: str, phone: str, prefix: str, label: str) -> str:
    """One inline ``<svg>`` that holds a figure's desktop layout and its phone layout.

    The desktop layout is the figure itself (its width, height and ``viewBox``), in a
    ``<g class="ee-desktop">``; the phone layout is a nested ``<svg class="ee-phone">``,
    hidden (``display="none"``) unless the site's stylesheet shows it. On a narrow screen the
    stylesheet hides the desktop layout, shows the phone one, and gives the figure the phone
    layout's width and aspect ratio (``--ee-phone-width``, ``--ee-phone-ratio``). The
    ``viewBox`` stays the desktop one, aligned top left (``xMinYMin meet``), so the nested
    ``<svg>`` is sized to fill whatever the figure's box then holds beyond it.

    Args:
        desktop: the SVG document of the desktop layout.
        phone: the SVG document of the phone layout.
        prefix: prepended to every id, ``prefix-...`` and ``prefix-phone-...``.
        label: the ``aria-label`` of the figure.

    Returns:
        The ``<svg ...>...</svg>`` element.
    """
    outer = _prefixed(desktop, prefix)
    inner = _METADATA.sub("", _prefixed(phone, f"{prefix}-phone"))
    top, inner_top = _OPENING.match(outer), _OPENING.match(inner)
    assert top is not None
    assert inner_top is not None
    width, height = _size_pt(top.group(), "width"), _size_pt(top.group(), "height")
    p_width, p_height = _size_pt(inner_top.group(), "width"), _size_pt(inner_top.group(), "height")
    # The box of the figure, in the desktop viewBox's units, once it has the phone's ratio.
    box_w, box_h = max(width, height * p_width / p_height), max(height, width * p_height / p_width)
    nested = (
        f'<svg class="ee-phone" display="none" x="0" y="0" width="{box_w:.3f}" '
        f'height="{box_h:.3f}" viewBox="0 0 {p_width:g} {p_height:g}">'
        + inner[inner_top.end() : inner.rindex("</svg>")]
        + "</svg>"
    )
    body = outer[top.end() : outer.rindex("</svg>")]
    style = (
        "max-width: 100%; height: auto; "
        f"--ee-phone-width: {p_width * _PX_PER_INCH / _PT_PER_INCH:.1f}px; "
        f"--ee-phone-ratio: {p_width:g} / {p_height:g};"
    )
    opening = top.group().replace(
        "<svg",
        f'<svg class="ee-figure" role="img" aria-label="{html.escape(label, quote=True)}" '
        f'style="{style}" preserveAspectRatio="xMinYMin meet"',
        1,
    )
    return f'{opening}\n<g class="ee-desktop">{body}</g>\n{nested}\n</svg>'
