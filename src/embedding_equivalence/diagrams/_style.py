"""The shared look of the figures: colours, fonts, number formats, and the SVG they become.

Every figure module draws with these colours and this ``rc`` context, and hands its
matplotlib ``Figure`` to [`render_svg`][], so all figures share one style and every SVG is
fit for inlining into a page (no XML prolog, ids unique to the figure, responsive, labelled).
"""

from __future__ import annotations

import html
import io
import math
import re
from typing import Any

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

__all__ = [
    "FAINT_TEXT",
    "GRID",
    "ID_COLOURS",
    "MUTED",
    "PAPER",
    "RED",
    "RC",
    "TEXT",
    "ZERO_FILL",
    "fmt",
    "fmt_short",
    "id_colour",
    "inline_svg",
    "new_figure",
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

#: The matplotlib settings every figure is drawn and saved under.
RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays text: searchable, selectable, small
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "text.color": TEXT,
    "axes.edgecolor": TEXT,
    "axes.labelcolor": TEXT,
    "xtick.color": TEXT,
    "ytick.color": TEXT,
}


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
    """A ``width x height`` inches figure and its axes, both created under [`RC`][].

    Args:
        width: in inches.
        height: in inches.
        rect: one axes at ``(left, bottom, width, height)`` in figure fractions; else
            ``ncols`` axes side by side.
        ncols: how many axes, in one row (without ``rect``).

    Returns:
        ``(figure, axes)``.
    """
    with mpl.rc_context(RC):
        fig = Figure(figsize=(width, height))
        if rect is not None:
            return fig, [fig.add_axes(rect)]
        return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def tidy_axes(ax: Axes, *, grid: bool = True) -> None:
    """Drop the top and right spines, and draw a light major grid unless ``grid`` is false."""
    if grid:
        ax.grid(True, which="major", color=_LIGHT_GRID, linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)


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
    with mpl.rc_context({**RC, "svg.hashsalt": name}):
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
