"""Figures of the weights' layouts: ``nn.Embedding`` vs ``nn.Linear`` vs Keras, and strides."""

from __future__ import annotations

from typing import Any

import torch

from ._canvas import CELL_H, CELL_W, SQUARE, Canvas, check_drawable, drawable_table, values
from ._style import FAINT_TEXT, id_colour, tint

__all__ = ["keras_layout_figure", "layout_figure", "storage_figure"]


def _row_fills(row: int, dim: int, colour: str, *, transposed: bool) -> dict[Any, Any]:
    """Fills that mark table row ``row`` (of ``dim`` cells), or its column when transposed."""
    fill = tint(colour, 0.45)
    return {((j, row) if transposed else (row, j)): fill for j in range(dim)}


def layout_figure(weight: torch.Tensor | None = None) -> str:
    """``nn.Embedding``'s ``(V, D)`` weight beside ``nn.Linear``'s ``(D, V)`` weight (its ``.T``).

    Row ``v`` of the embedding table is column ``v`` of the linear weight.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, i = drawable_table("layout_figure", weight, None)
    v, d = w.shape
    sel = int(i[0]) if weight is None else min(2, v - 1)
    colour = id_colour(sel)
    top, left = 0.8, 0.45
    x_t = left + d * CELL_W + 1.0
    c = Canvas(x_t + v * CELL_W + 0.2, top + max(v, d) * CELL_H + 0.2)
    for x, cells, transposed, title in (
        (left, w, False, f"nn.Embedding({v}, {d}).weight\n(num_embeddings, embedding_dim)"),
        (x_t, w.t(), True, f"nn.Linear({v}, {d}).weight = W.T\n(out_features, in_features)"),
    ):
        rows, cols = cells.shape
        c.matrix(
            x,
            top,
            values(cells),
            fills=_row_fills(sel, d, colour, transposed=transposed),
            row_labels=[str(r) for r in range(rows)],
            col_labels=[str(j) for j in range(cols)],
            title=f"{title} = ({rows}, {cols})",
        )
    return c.svg(
        "layout", f"row {sel} of the embedding weight is column {sel} of the linear weight"
    )


def _index_grid(x: torch.Tensor) -> list[list[int]]:
    """The storage index each element of the 2-D tensor ``x`` reads."""
    s0, s1 = x.stride()
    off = x.storage_offset()
    rows, cols = int(x.shape[0]), int(x.shape[1])
    return [[int(off + a * s0 + b * s1) for b in range(cols)] for a in range(rows)]


def storage_figure(weight: torch.Tensor | None = None) -> str:
    """One storage, two views: ``weight`` (stride ``(D, 1)``) and ``weight.T`` (stride ``(1, D)``).

    Each cell shows the storage index it reads, computed from the real tensors' strides and
    storage offsets; colour marks the table row the element belongs to.

    Args:
        weight: the ``(V, D)`` table whose storage is drawn (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, _ = drawable_table("storage_figure", weight, None)
    v, d = w.shape
    t = w.t()
    grid_w = _index_grid(w)
    base = min(min(r) for r in grid_w)
    size = v * d
    cell = 0.34
    top = 0.75  # room for two lines of title
    strip_y = top + max(v, d) * SQUARE + 0.8
    width = max(size * cell, 2 * (d + v) * cell + 0.6) + 0.4
    c = Canvas(width, strip_y + SQUARE + 0.12)
    row_of = {k - base: r for r, row in enumerate(grid_w) for k in row}

    def draw(x: float, y: float, grid: list[list[int]], **kwargs: Any) -> None:
        c.matrix(
            x,
            y,
            [[str(k) for k in row] for row in grid],
            cell_w=cell,
            cell_h=SQUARE,
            fills={
                (a, b): tint(id_colour(row_of[k]), 0.4)
                for a, row in enumerate(grid)
                for b, k in enumerate(row)
            },
            **kwargs,
        )

    for x, view, name in (
        (width / 4 - d * cell / 2, w, "embedding.weight"),
        (3 * width / 4 - v * cell / 2, t, "nn.Parameter(embedding.weight.T)"),
    ):
        draw(
            x,
            top,
            [[k - base for k in row] for row in _index_grid(view)],
            row_labels=[str(r) for r in range(view.shape[0])],
            title=f"{name}\nshape {tuple(view.shape)}, stride {view.stride()}",
        )
    draw(
        (width - size * cell) / 2,
        strip_y,
        [list(range(size))],
        title="the one storage both read (element index = offset + i * stride[0] + j * stride[1])",
    )
    c.arrow((width / 4, top + v * SQUARE + 0.05), (width / 2 - 0.3, strip_y - 0.3), FAINT_TEXT)
    c.arrow((3 * width / 4, top + d * SQUARE + 0.05), (width / 2 + 0.3, strip_y - 0.3), FAINT_TEXT)
    return c.svg("storage", "the table and its transpose read the same storage")


def keras_layout_figure(weights: torch.Tensor | None = None) -> str:
    """Keras ``Embedding`` and ``Dense`` hold one ``(V, D)`` array; torch ``Linear`` its ``.T``.

    Args:
        weights: ``(V, D)`` table (default: seed 004's ``fake_weights``, rows 0.00 to 0.33).

    Returns:
        An SVG document.
    """
    if weights is None:
        w = torch.tensor([[0.11 * r] * 5 for r in range(4)], dtype=torch.float32)
    else:
        w = weights.detach().cpu()
    v, d = w.shape
    check_drawable("keras_layout_figure", v, d)
    cw = 0.46
    top = 0.85
    x1 = 0.35
    x2 = x1 + d * cw + 0.7
    x3 = x2 + d * cw + 0.9
    c = Canvas(x3 + v * cw + 0.2, top + max(v, d) * CELL_H + 0.2)
    sel = min(2, v - 1)
    colour = id_colour(sel)
    for k, (x, transposed, title) in enumerate(
        (
            (x1, False, f"keras Embedding\n(input_dim, output_dim) = ({v}, {d})"),
            (x2, False, f"keras Dense kernel\n(in, out) = ({v}, {d})"),
            (x3, True, f"torch nn.Linear weight\n(out, in) = ({d}, {v})"),
        )
    ):
        c.matrix(
            x,
            top,
            values(w.t() if transposed else w, lambda e: f"{e:.2f}"),
            cell_w=cw,
            fills=_row_fills(sel, d, colour, transposed=transposed),
            row_labels=None if k else [str(r) for r in range(v)],
            title=title,
        )
    mid = top + v * CELL_H / 2
    c.between(x1 + d * cw, x2, mid, "=")
    c.between(x2 + d * cw, x3, mid, ".T", size=12)
    return c.svg(
        "keras", "Keras Embedding and Dense share the (V, D) layout; torch Linear is (D, V)"
    )
