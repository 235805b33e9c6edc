"""The cell-by-cell drawing canvas, and the worked example every figure defaults to.

A [`Canvas`][] is a figure whose data units are inches (origin at the top left, y pointing
down) with helpers for text, arrows, boxes and matrices of text cells; the tensor figures
(lookup, one-hot, matmul, layouts, gradients, bags) and the architecture figure draw on one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from ._style import FAINT_TEXT, GRID, PAPER, TEXT, fmt, new_figure, render_svg

__all__ = [
    "CELL_H",
    "CELL_W",
    "MAX_SIDE",
    "SQUARE",
    "Canvas",
    "check_drawable",
    "defaults",
    "drawable_table",
    "product_columns",
    "values",
    "worked_example",
]

#: The largest side a cell-by-cell figure draws (every cell carries its value).
MAX_SIDE = 16

# Cell sizes in inches (the drawing canvases use inches as data units).
CELL_W = 0.62
CELL_H = 0.28
SQUARE = 0.28


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


def product_columns(left_end: float, dim: int) -> tuple[float, float, float]:
    """Where ``weight`` and the product go in ``M @ weight = out``, and the canvas's width.

    Args:
        left_end: where the matrix ``M`` ends, in inches.
        dim: ``D``, the columns of ``weight``.

    Returns:
        ``(x_weight, x_out, width)``: the left edges of ``weight`` and ``out``, and the width
        of a canvas that ends just right of ``out``.
    """
    x_weight = left_end + 0.75
    x_out = x_weight + dim * CELL_W + 0.75
    return x_weight, x_out, x_out + dim * CELL_W + 0.2


def values(t: torch.Tensor, to_text: Callable[[float], str] = fmt) -> list[list[str]]:
    """The entries of a 2-D tensor as formatted strings, row by row."""
    return [[to_text(float(x)) for x in row] for row in t.detach().cpu().double().tolist()]


class Canvas:
    """A figure whose data units are inches, origin at the top left, y pointing down.

    Args:
        width: in inches.
        height: in inches.
    """

    def __init__(self, width: float, height: float) -> None:
        self.width = width
        self.height = height
        self.fig, (self.ax,) = new_figure(width, height, rect=(0.0, 0.0, 1.0, 1.0))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(height, 0)
        self.ax.set_axis_off()

    def text(self, x: float, y: float, s: str, **kwargs: Any) -> None:
        """Write ``s`` centred on ``(x, y)``; keyword arguments as for ``Axes.text``."""
        kwargs.setdefault("ha", "center")
        kwargs.setdefault("va", "center")
        kwargs.setdefault("fontsize", 8.5)
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

    def between(self, left: float, right: float, y: float, symbol: str, size: float = 14) -> None:
        """Write an operator (``@``, ``=``) midway between two matrices."""
        self.text((left + right) / 2, y, symbol, fontsize=size)

    def times_weight(
        self,
        left_end: float,
        top: float,
        left_rows: int,
        weight: torch.Tensor,
        out: torch.Tensor,
        out_title: str,
        *,
        weight_style: dict[str, Any] | None = None,
        out_style: dict[str, Any] | None = None,
    ) -> None:
        """Draw ``@ weight = out`` right of a matrix ``M`` of ``left_rows`` rows.

        Args:
            left_end: where ``M`` ends, in inches.
            top: the top edge of the three matrices.
            left_rows: the rows of ``M``.
            weight: the ``(V, D)`` table.
            out: the product.
            out_title: the product's title.
            weight_style: more keyword arguments of [`matrix`][] for the table.
            out_style: more keyword arguments of [`matrix`][] for the product.
        """
        v, d = weight.shape
        x_weight, x_out, _ = product_columns(left_end, d)
        columns = [str(j) for j in range(d)]
        self.matrix(
            x_weight,
            top,
            values(weight),
            row_labels=[str(r) for r in range(v)],
            col_labels=columns,
            title=f"weight  ({v}, {d})",
            **(weight_style or {}),
        )
        self.matrix(
            x_out, top, values(out), col_labels=columns, title=out_title, **(out_style or {})
        )
        mid = top + min(left_rows, v) * CELL_H / 2
        self.between(left_end, x_weight, mid, "@")
        self.between(x_weight + d * CELL_W, x_out, mid, "=")

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
                    fontsize=8.0,
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
                self.text(x - 0.06, y + (i + 0.5) * cell_h, lab, ha="right", fontsize=7.5)
        if col_labels is not None:
            for j, lab in enumerate(col_labels):
                self.text(x + (j + 0.5) * cell_w, y - 0.09, lab, fontsize=7, color=FAINT_TEXT)
        if title is not None:
            top = y - (0.26 if col_labels is not None else 0.12)
            self.text(x + cols * cell_w / 2, top, title, va="bottom", fontsize=8.5)

    def svg(self, name: str, label: str) -> str:
        """The canvas as an inline SVG element (see ``render_svg``)."""
        return render_svg(self.fig, name, label)
