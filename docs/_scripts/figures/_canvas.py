"""The cell-by-cell drawing canvas, and the worked example every figure defaults to.

A [`Canvas`][] is a figure whose data units are inches (origin at the top left, y pointing
down) with helpers for text, arrows, boxes and matrices of text cells; the tensor figures
(lookup, one-hot, matmul, layouts, gradients, bags, sharded) and the architecture figure draw
on one. No text on a canvas is smaller than its width allows
([`min_font_size`][figures._style.min_font_size]).

A product ``M @ weight = out`` is laid out as in Falk's scheme ([`Product`][]): ``weight``
above ``out`` and ``M`` left of ``out``, so that ``out[n, d]`` sits in row ``n`` of ``M`` and
column ``d`` of ``weight``. Three matrices side by side would not fit the page's column with
legible text; this takes the width of two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from ._style import (
    BODY,
    DESKTOP,
    EVERY_SCREEN,
    FAINT_TEXT,
    GRID,
    PAPER,
    PHONE,
    SMALL,
    SYMBOL,
    TEXT,
    TITLE,
    Screen,
    fmt,
    min_font_size,
    new_figure,
    render_svg,
)

__all__ = [
    "CELL_H",
    "CELL_W",
    "HEAD",
    "MAX_SIDE",
    "SQUARE",
    "Canvas",
    "Product",
    "check_drawable",
    "defaults",
    "desktop_and_phone",
    "drawable_table",
    "product_layout",
    "values",
    "worked_example",
]

#: The largest side a cell-by-cell figure draws (every cell carries its value).
MAX_SIDE = 16

# Cell sizes in inches (the drawing canvases use inches as data units). A cell holds torch's
# seven characters ("-1.8061") of monospace at BODY size (0.602 em each), with a margin.
CELL_W = 0.62
CELL_H = 0.28
SQUARE = 0.28
#: The room above a matrix for its title and its column labels, in inches.
HEAD = 0.55
# Room between the weight and the product below it (the product's title), and between the
# left matrix and the product, in inches.
_PRODUCT_GAP_Y = 0.42
_PRODUCT_GAP_X = 0.45


def worked_example() -> tuple[torch.Tensor, torch.Tensor]:
    """The seed notebook's table and ids: ``torch.manual_seed(123)``, ``nn.Embedding(4, 5)``.

    The global RNG is forked, so calling this leaves it as it was.

    Returns:
        ``(weight, ids)``: the ``(4, 5)`` float32 table (detached) and ``tensor([2, 3, 1])``.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        embedding = torch.nn.Embedding(4, 5)
    return embedding.weight.detach().clone(), torch.tensor([2, 3, 1])


def defaults(
    weight: torch.Tensor | None, ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weight, ids)`` on the CPU, the worked example's for those not given; ids made 1-D."""
    w0, i0 = worked_example()
    w = (w0 if weight is None else weight).detach().cpu()
    i = (i0 if ids is None else ids).detach().cpu().reshape(-1)
    return w, i


def check_drawable(name: str, *sides: int) -> None:
    """Refuse a figure with a side over [`MAX_SIDE`][] cells.

    Raises:
        ValueError: a side is too long.
    """
    if any(s > MAX_SIDE for s in sides):
        raise ValueError(
            f"{name}: every cell is drawn with its value, so each side must be at most "
            f"{MAX_SIDE}; got sides {sides}. Draw a slice, e.g. weight[:8, :8]."
        )


def drawable_table(
    name: str, weight: torch.Tensor | None, ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """[`defaults`][], refused by [`check_drawable`][] when ``V``, ``D`` or ``N`` is too long.

    Args:
        name: the figure, for the error message.
        weight: ``(V, D)`` table, or ``None`` for the worked example's.
        ids: ids, or ``None`` for the worked example's.

    Returns:
        ``(weight, ids)`` on the CPU, the ids 1-D.

    Raises:
        ValueError: a side is too long to draw.
    """
    w, i = defaults(weight, ids)
    check_drawable(name, *w.shape, i.numel())
    return w, i


@dataclass(frozen=True)
class Product:
    """Where the matrices of ``M @ weight = out`` go, in inches (Falk's scheme).

    ``weight`` is drawn at ``(x_weight, y_weight)``, ``out`` below it at ``(x_weight, y_out)``,
    and ``M`` left of ``out``, at ``(x_m, y_out)``.

    Attributes:
        x_m: the left edge of ``M``.
        x_weight: the left edge of ``weight`` and of ``out``.
        y_weight: the top of ``weight``.
        y_out: the top of ``M`` and of ``out``.
        right: the right edge of ``weight`` and of ``out``.
        bottom: the bottom of ``M`` and of ``out``.
    """

    x_m: float
    x_weight: float
    y_weight: float
    y_out: float
    right: float
    bottom: float


def product_layout(
    x_m: float, m_width: float, num_embeddings: int, dim: int, rows: int, top: float = HEAD
) -> Product:
    """Place ``M @ weight = out`` with ``M`` at ``x_m``, ``m_width`` inches wide.

    Args:
        x_m: the left edge of ``M`` (its row labels go left of it).
        m_width: the width of ``M``.
        num_embeddings: ``V``, the rows of ``weight``.
        dim: ``D``, the columns of ``weight``.
        rows: the rows of ``M`` and of ``out``.
        top: the top of ``weight``; its title and column labels go above it.

    Returns:
        The places of the three matrices.
    """
    x_weight = x_m + m_width + _PRODUCT_GAP_X
    y_out = top + num_embeddings * CELL_H + _PRODUCT_GAP_Y
    return Product(
        x_m=x_m,
        x_weight=x_weight,
        y_weight=top,
        y_out=y_out,
        right=x_weight + dim * CELL_W,
        bottom=y_out + rows * CELL_H,
    )


def values(t: torch.Tensor, to_text: Callable[[float], str] = fmt) -> list[list[str]]:
    """The entries of a 2-D tensor as formatted strings, row by row."""
    return [[to_text(float(x)) for x in row] for row in t.detach().cpu().double().tolist()]


class Canvas:
    """A figure whose data units are inches, origin at the top left, y pointing down.

    Args:
        width: in inches.
        height: in inches.
        screens: where it is read: every screen (one layout), ``(DESKTOP,)`` or ``(PHONE,)``
            (one of a figure's two layouts, see [`desktop_and_phone`][]).
    """

    def __init__(
        self, width: float, height: float, screens: Sequence[Screen] = EVERY_SCREEN
    ) -> None:
        self.width = width
        self.height = height
        self.screens = tuple(screens)
        #: No text of this canvas is smaller, in points (a wide canvas is shown scaled down).
        self.min_fontsize = min_font_size(width, self.screens)
        self.fig, (self.ax,) = new_figure(
            width, height, rect=(0.0, 0.0, 1.0, 1.0), screens=self.screens
        )
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(height, 0)
        self.ax.set_axis_off()

    def title_below(
        self,
        x: float,
        width: float,
        bottom: float,
        s: str,
        gap: float = 0.1,
        fontsize: float = TITLE,
    ) -> None:
        """Write ``s`` under a matrix that starts at ``x``, ``width`` wide, ending at ``bottom``."""
        self.text(x + width / 2, bottom + gap, s, va="top", fontsize=fontsize)

    def text(self, x: float, y: float, s: str, **kwargs: Any) -> None:
        """Write ``s`` centred on ``(x, y)``; keyword arguments as for ``Axes.text``.

        The ``fontsize`` (default ``BODY``) is raised to the canvas's ``min_fontsize``.
        """
        kwargs.setdefault("ha", "center")
        kwargs.setdefault("va", "center")
        kwargs["fontsize"] = max(kwargs.get("fontsize", BODY), self.min_fontsize)
        kwargs.setdefault("color", TEXT)
        self.ax.text(x, y, s, **kwargs)

    def arrow(
        self,
        start: tuple[float, float],
        end: tuple[float, float],
        colour: str,
        rad: float = 0.0,
        width: float = 1.2,
    ) -> None:
        """An arrow from ``start`` to ``end``, bent by ``rad`` (0: straight)."""
        self.ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=9,
                color=colour,
                linewidth=width,
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=1,
                shrinkB=1,
            )
        )

    def lane_arrow(
        self, start: tuple[float, float], end_y: float, colour: str, bulge: float = 0.12
    ) -> None:
        """An arrow from ``start`` straight down (or up) to ``end_y``, bent out to the right.

        The arrows of a phone layout run in a lane right of its matrices; a longer arrow
        bends further out, ``bulge`` inches plus a tenth of its length, so that arrows that
        share the lane stay apart.
        """
        length = end_y - start[1]
        if abs(length) < 1e-9:
            return
        apex = bulge + 0.1 * abs(length)
        # arc3 puts the control point rad * length to the side; the curve reaches half of it.
        self.arrow(start, (start[0], end_y), colour, rad=-2 * apex / length)

    def box(self, x: float, y: float, width: float, height: float, face: Any, edge: str) -> None:
        """A rounded box with its top-left corner at ``(x, y)``."""
        self.ax.add_patch(
            FancyBboxPatch(
                (x, y),
                width,
                height,
                boxstyle="round,pad=0,rounding_size=0.08",
                facecolor=face,
                edgecolor=edge,
                linewidth=1.2,
            )
        )

    def between(
        self, left: float, right: float, y: float, symbol: str, size: float = SYMBOL
    ) -> None:
        """Write an operator (``@``, ``=``) midway between two matrices."""
        self.text((left + right) / 2, y, symbol, fontsize=size)

    def times_weight(
        self,
        place: Product,
        weight: torch.Tensor,
        out: torch.Tensor,
        out_title: str,
        *,
        weight_style: dict[str, Any] | None = None,
        out_style: dict[str, Any] | None = None,
    ) -> None:
        """Draw ``weight`` and the product ``out`` of ``M @ weight``, placed by ``place``.

        ``M`` is the caller's to draw, at ``(place.x_m, place.y_out)``; ``out`` shares the
        column labels of ``weight`` above it and the row labels of ``M`` left of it.

        Args:
            place: from [`product_layout`][].
            weight: the ``(V, D)`` table.
            out: the product.
            out_title: the product's title, written between ``weight`` and ``out``.
            weight_style: more keyword arguments of [`matrix`][] for the table (they may
                replace its title and labels).
            out_style: more keyword arguments of [`matrix`][] for the product (they may
                replace its title, or give it labels).
        """
        v, d = weight.shape
        table: dict[str, Any] = {
            "row_labels": [str(r) for r in range(v)],
            "col_labels": [str(j) for j in range(d)],
            "title": f"weight  ({v}, {d})",
        }
        self.matrix(
            place.x_weight, place.y_weight, values(weight), **{**table, **(weight_style or {})}
        )
        product: dict[str, Any] = {"title": out_title, **(out_style or {})}
        self.matrix(place.x_weight, place.y_out, values(out), **product)

    def matrix(
        self,
        x: float,
        y: float,
        cells: Sequence[Sequence[str]],
        *,
        cell_w: float = CELL_W,
        cell_h: float = CELL_H,
        fills: dict[tuple[int, int], Any] | None = None,
        text_colours: dict[tuple[int, int], str] | None = None,
        hatched: Sequence[int] = (),
        row_labels: Sequence[str] | None = None,
        col_labels: Sequence[str] | None = None,
        title: str | None = None,
        bold: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Draw a matrix of text cells with its top-left corner at ``(x, y)``.

        Args:
            x: left edge, in inches.
            y: top edge, in inches.
            cells: the text of each cell, row by row.
            cell_w: width of a cell.
            cell_h: height of a cell.
            fills: face colour by ``(row, column)`` (default white).
            text_colours: text colour by ``(row, column)``.
            hatched: rows drawn hatched.
            row_labels: written left of the rows.
            col_labels: written above the columns, in a faint colour.
            title: written above the matrix.
            bold: cells whose text is bold.
        """
        fills = fills or {}
        text_colours = text_colours or {}
        rows = len(cells)
        cols = len(cells[0]) if rows else 0
        for i in range(rows):
            for j in range(cols):
                face = fills.get((i, j), PAPER)
                self.ax.add_patch(
                    Rectangle(
                        (x + j * cell_w, y + i * cell_h),
                        cell_w,
                        cell_h,
                        facecolor=face,
                        edgecolor=GRID,
                        linewidth=0.5,
                        hatch="////" if i in hatched else None,
                    )
                )
                self.text(
                    x + (j + 0.5) * cell_w,
                    y + (i + 0.5) * cell_h,
                    cells[i][j],
                    fontsize=BODY,
                    family="monospace",
                    color=text_colours.get((i, j), TEXT),
                    fontweight="bold" if (i, j) in bold else "normal",
                )
        self.ax.add_patch(
            Rectangle(
                (x, y), cols * cell_w, rows * cell_h, fill=False, edgecolor=TEXT, linewidth=1.0
            )
        )
        if row_labels is not None:
            for i, lab in enumerate(row_labels):
                self.text(x - 0.06, y + (i + 0.5) * cell_h, lab, ha="right", fontsize=BODY)
        if col_labels is not None:
            for j, lab in enumerate(col_labels):
                self.text(x + (j + 0.5) * cell_w, y - 0.1, lab, fontsize=SMALL, color=FAINT_TEXT)
        if title is not None:
            top = y - (0.27 if col_labels is not None else 0.1)
            self.text(x + cols * cell_w / 2, top, title, va="bottom", fontsize=TITLE)

    def svg(self, name: str, label: str, phone: Canvas | None = None) -> str:
        """The canvas as an inline SVG element (see ``render_svg``), with its phone layout."""
        return render_svg(self.fig, name, label, phone=None if phone is None else phone.fig)


def desktop_and_phone(draw: Callable[..., Canvas], name: str, label: str, **kwargs: Any) -> str:
    """A figure drawn twice, by ``draw(phone=..., **kwargs)``: for a desktop and for a phone.

    ``draw`` lays the same tensors out side by side for a desktop (``phone=False``, a canvas
    read on [`DESKTOP`][figures._style.DESKTOP]) and stacked for a phone (``phone=True``,
    read on [`PHONE`][figures._style.PHONE]); both go into one ``<svg>``, and the page shows
    the one that fits its width.
    """
    desktop = draw(phone=False, **kwargs)
    phone = draw(phone=True, **kwargs)
    assert desktop.screens == (DESKTOP,), name
    assert phone.screens == (PHONE,), name
    return desktop.svg(name, label, phone)
