"""The shared look of the figures: colours, fonts, number formats, and the SVG they become.

Every figure module draws with these colours and this ``rc`` context, and hands its
matplotlib ``Figure`` to [`render_svg`][], so all figures share one style and every SVG is
fit for inlining into a page (no XML prolog, ids unique to the figure, responsive, labelled).

The size of text is ruled here, once: no text of a figure may appear smaller than
[`MIN_TEXT_PX`][] on a desktop screen. A figure is inlined at its natural size (a point is
4/3 CSS pixel) unless it is wider than the page's text column, [`COLUMN_PX`][], which scales
it down, its text with it; [`min_font_size`][] is the least size a figure of a given width
may use. [`new_figure`][] and [`render_svg`][] raise matplotlib's sizes to it, and the
canvas raises every text it draws to it.
"""

from __future__ import annotations

import html
import io
import math
import re
from contextlib import AbstractContextManager
from typing import Any

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

__all__ = [
    "BODY",
    "COLUMN_PX",
    "FAINT_TEXT",
    "GRID",
    "ID_COLOURS",
    "MIN_TEXT_PX",
    "MUTED",
    "PAPER",
    "RC",
    "RED",
    "SMALL",
    "SYMBOL",
    "TEXT",
    "TITLE",
    "ZERO_FILL",
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
    "tidy_axes",
    "tint",
]

#: One colour per distinct id (rows of the table); ids beyond cycle through them.
ID_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948")
GRID = "#9aa0a6"
MUTED = "#c8ccd0"
TEXT = "#202124"
FAINT_TEXT = "#80868b"
PAPER = "#ffffff"
ZERO_FILL = "#f1f3f4"
#: The colour of bounds, thresholds and the dense one-hot matmul.
RED = "#d93025"
_LIGHT_GRID = "#e8eaed"

#: The smallest text of a figure, in CSS pixels, as a reader sees it on a desktop screen.
MIN_TEXT_PX = 11.0
#: The width of the page's text column, in CSS pixels, on a desktop screen: the narrowest
#: Material's column gets in a window 960 px wide or more (686 px at 960; 688 px from 1220 to
#: 1600, its grid less both sidebars; wider elsewhere). A figure wider than the column is
#: scaled down to fit it (``max-width: 100%``).
COLUMN_PX = 686.0
_PX_PER_INCH = 96.0  # CSS pixels
_PT_PER_INCH = 72.0  # matplotlib's points, the SVG's user unit

# Font sizes in points, by role. At a figure's natural size a point is 4/3 CSS pixel, so all
# are at least MIN_TEXT_PX in a figure no wider than the column; a wider figure raises them
# to its `min_font_size`.
#: Column indices, notes and legends.
SMALL = 8.5
#: Cells, row labels, axis labels and ticks: the default.
BODY = 9.0
#: Titles of matrices and axes.
TITLE = 9.5
#: The operators between matrices (``@``, ``=``).
SYMBOL = 14.0


def page_scale(width: float) -> float:
    """The factor a figure ``width`` inches wide is shown at in the column (1: natural size)."""
    return min(1.0, COLUMN_PX / (width * _PX_PER_INCH))


def min_font_size(width: float) -> float:
    """The least font size, in points, of a figure ``width`` inches wide.

    Text of that size appears at [`MIN_TEXT_PX`][] on the page: a point is 4/3 CSS pixel, and
    a figure wider than [`COLUMN_PX`][] is scaled down by [`page_scale`][]. Rounded up to a
    hundredth of a point, so that the size written into the SVG does not fall short of it.
    """
    return math.ceil(MIN_TEXT_PX * _PT_PER_INCH / _PX_PER_INCH / page_scale(width) * 100) / 100


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


def figure_rc(width: float) -> dict[Any, Any]:
    """[`RC`][] for a figure ``width`` inches wide: its font sizes raised to [`min_font_size`][]."""
    floor = min_font_size(width)
    return {**RC, **{k: max(RC[k], floor) for k in _FONT_SIZES}}


def figure_style(width: float) -> AbstractContextManager[Any]:
    """The ``rc`` context to draw a figure ``width`` inches wide in ([`figure_rc`][]).

    Matplotlib sizes a title, a label or a legend when it is made: drawn outside this context,
    they take matplotlib's default sizes instead.

    Examples:
        ```python
        with figure_style(7.0):
            fig, (ax,) = new_figure(7.0, 2.6)
            ax.set_title("titled in TITLE size")
        ```
    """
    return mpl.rc_context(figure_rc(width))


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
) -> tuple[Figure, list[Axes]]:
    """A ``width x height`` inches figure and its axes, both created under [`figure_rc`][].

    Draw on them inside [`figure_style`][]: text made outside it takes matplotlib's default
    sizes, and text given an explicit ``fontsize`` must not go below [`min_font_size`][].

    Args:
        width: in inches.
        height: in inches.
        rect: one axes at ``(left, bottom, width, height)`` in figure fractions; else
            ``ncols`` axes side by side.
        ncols: how many axes, in one row (without ``rect``).

    Returns:
        ``(figure, axes)``.
    """
    with figure_style(width):
        fig = Figure(figsize=(width, height))
        if rect is not None:
            return fig, [fig.add_axes(rect)]
        return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def tidy_axes(ax: Axes, *, grid: bool = True) -> None:
    """Drop the top and right spines, and draw a light major grid unless ``grid`` is false."""
    if grid:
        ax.grid(True, which="major", color=_LIGHT_GRID, linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)


def log_tick_labels(axis: Axis, base: int, *, powers: bool = True) -> None:
    """Label the ticks of a log ``axis`` in plain text, at the size of the other ticks.

    Matplotlib writes a log tick as ``base`` with the exponent in a superscript, 0.7 of the
    tick's size: smaller than [`min_font_size`][] allows. Call after ``set_xscale("log")``
    or ``set_yscale("log")``, which reset the labels.

    Args:
        axis: ``ax.xaxis`` or ``ax.yaxis``, on a log scale of ``base``.
        base: the scale's base.
        powers: label a tick ``2^-10``; else by its value (``1024``, fit for counts).
    """

    def label(x: float, _: object) -> str:
        return f"{base}^{round(math.log(x, base))}" if powers else f"{x:g}"

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())


def render_svg(fig: Figure, name: str, label: str) -> str:
    """Render ``fig`` as an inline SVG element with ids unique to ``name``.

    Args:
        fig: the figure.
        name: a prefix unique to the figure among those of a page (ids become ``name-...``).
        label: the ``aria-label``, a sentence that says what the figure shows.

    Returns:
        The ``<svg ...>...</svg>`` element, with no XML prolog.
    """
    buf = io.StringIO()
    # Ticks are made while the figure is drawn: under the same sizes as the rest of it.
    rc = figure_rc(float(fig.get_size_inches()[0]))
    with mpl.rc_context({**rc, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, facecolor=PAPER)
    return inline_svg(buf.getvalue(), name, label)


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
    attrs = (
        f'<svg class="ee-figure" role="img" aria-label="{html.escape(label, quote=True)}" '
        'style="max-width: 100%; height: auto;"'
    )
    return body.replace("<svg", attrs, 1)
