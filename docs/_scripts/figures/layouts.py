"""Figures of the weights' layouts: ``nn.Embedding`` vs ``nn.Linear`` vs Keras, and strides."""

from __future__ import annotations

from typing import Any

import torch

from ._canvas import (
    CELL_H,
    CELL_W,
    SQUARE,
    Canvas,
    check_drawable,
    desktop_and_phone,
    drawable_table,
    values,
)
from ._style import FAINT_TEXT, id_colour, screens_of, tint

__all__ = ["keras_layout_figure", "layout_figure", "storage_figure"]


def _row_fills(row: int, dim: int, colour: str, *, transposed: bool) -> dict[Any, Any]:
    """Fills that mark table row ``row`` (of ``dim`` cells), or its column when transposed."""
    fill = tint(colour, 0.45)
    return {((j, row) if transposed else (row, j)): fill for j in range(dim)}


def layout_figure(weight: torch.Tensor | None = None) -> str:
    """``nn.Embedding``'s ``(V, D)`` weight beside ``nn.Linear``'s ``(D, V)`` weight (its ``.T``).

    Row ``v`` of the embedding table is column ``v`` of the linear weight. On a phone the two
    stand one above the other.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, i = drawable_table("layout_figure", weight, None)
    v = w.shape[0]
    sel = int(i[0]) if weight is None else min(2, v - 1)
    label = f"row {sel} of the embedding weight is column {sel} of the linear weight"
    return desktop_and_phone(_draw_layout, "layout", label, w=w, sel=sel)


def _draw_layout(w: torch.Tensor, sel: int, *, phone: bool) -> Canvas:
    v, d = w.shape
    colour = id_colour(sel)
    top, left = 0.8, 0.45
    if phone:
        places = [(left, top), (left, top + v * CELL_H + 0.3 + top)]
        width = left + max(v, d) * CELL_W + 0.2
        height = places[1][1] + d * CELL_H + 0.2
    else:
        places = [(left, top), (left + d * CELL_W + 1.0, top)]
        width = places[1][0] + v * CELL_W + 0.2
        height = top + max(v, d) * CELL_H + 0.2
    c = Canvas(width, height, screens_of(phone))
    for (x, y), cells, transposed, title in (
        (places[0], w, False, f"nn.Embedding({v}, {d}).weight\n(num_embeddings, embedding_dim)"),
        (places[1], w.t(), True, f"nn.Linear({v}, {d}).weight = W.T\n(out_features, in_features)"),
    ):
        rows, cols = cells.shape
        c.matrix(
            x,
            y,
            values(cells),
            fills=_row_fills(sel, d, colour, transposed=transposed),
            row_labels=[str(r) for r in range(rows)],
            col_labels=[str(j) for j in range(cols)],
            title=f"{title} = ({rows}, {cols})",
        )
    return c


def _index_grid(x: torch.Tensor) -> list[list[int]]:
    """The storage index each element of the 2-D tensor ``x`` reads."""
    s0, s1 = x.stride()
    off = x.storage_offset()
    rows, cols = int(x.shape[0]), int(x.shape[1])
    return [[int(off + a * s0 + b * s1) for b in range(cols)] for a in range(rows)]


def storage_figure(weight: torch.Tensor | None = None) -> str:
    """One storage, two views: ``weight`` (stride ``(D, 1)``) and ``weight.T`` (stride ``(1, D)``).

    Each cell shows the storage index it reads, computed from the real tensors' strides and
    storage offsets; colour marks the table row the element belongs to. On a phone the views
    stand one above the other, and the storage wraps every ten elements.

    Args:
        weight: the ``(V, D)`` table whose storage is drawn (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, _ = drawable_table("storage_figure", weight, None)
    label = "the table and its transpose read the same storage"
    return desktop_and_phone(_draw_storage, "storage", label, w=w)


# The side of a cell of the storage figure, and the most storage cells in one line on a phone.
_STORAGE_CELL = 0.34
_STORAGE_WRAP = 10


def _draw_storage(w: torch.Tensor, *, phone: bool) -> Canvas:
    v, d = w.shape
    t = w.t()
    grid_w = _index_grid(w)
    base = min(min(r) for r in grid_w)
    size = v * d
    cell = _STORAGE_CELL
    top = 0.75  # room for two lines of title
    views = ((w, "embedding.weight"), (t, "nn.Parameter(embedding.weight.T)"))
    strip_title = (
        "the one storage both read (element index = offset + i * stride[0] + j * stride[1])"
    )
    if phone:
        width = max(min(size, _STORAGE_WRAP) * cell, 2.6) + 0.7
        lines = [
            list(range(a, min(a + _STORAGE_WRAP, size))) for a in range(0, size, _STORAGE_WRAP)
        ]
        y_t = top + v * SQUARE + 0.2 + top
        corners = [(width / 2 - d * cell / 2, top), (width / 2 - v * cell / 2, y_t)]
        strip_y = y_t + d * SQUARE + 1.15
        strip_title = strip_title.replace(" (", "\n(").replace(" + i", "\n+ i")
        ends = [
            (width / 2 - d * cell / 2 - 0.1, top + v * SQUARE / 2),
            (width / 2 - v * cell / 2 - 0.1, y_t + d * SQUARE / 2),
        ]
    else:
        width = max(size * cell, 2 * (d + v) * cell + 0.6) + 0.4
        lines = [list(range(size))]
        ends = []  # the arrows run from the views' bottoms instead
        corners = [(width / 4 - d * cell / 2, top), (3 * width / 4 - v * cell / 2, top)]
        strip_y = top + max(v, d) * SQUARE + 0.8
    c = Canvas(width, strip_y + len(lines) * SQUARE + 0.12, screens_of(phone))
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

    for (x, y), (view, name) in zip(corners, views, strict=True):
        draw(
            x,
            y,
            [[k - base for k in row] for row in _index_grid(view)],
            row_labels=[str(r) for r in range(view.shape[0])],
            title=f"{name}\nshape {tuple(view.shape)}, stride {view.stride()}",
        )
    x_strip = (width - len(lines[0]) * cell) / 2
    for k, line in enumerate(lines):
        draw(
            x_strip,
            strip_y + k * SQUARE,
            [line],
            title=None if k else strip_title,
        )
    if phone:  # each view's arrow runs down its left side to the storage
        for x, y in ends:
            c.arrow((x, y), (x_strip - 0.1, strip_y + SQUARE / 2), FAINT_TEXT, rad=0.25)
    else:
        c.arrow((width / 4, top + v * SQUARE + 0.05), (width / 2 - 0.3, strip_y - 0.3), FAINT_TEXT)
        c.arrow(
            (3 * width / 4, top + d * SQUARE + 0.05), (width / 2 + 0.3, strip_y - 0.3), FAINT_TEXT
        )
    return c


def keras_layout_figure(weights: torch.Tensor | None = None) -> str:
    """Keras ``Embedding`` and ``Dense`` hold one ``(V, D)`` array; torch ``Linear`` its ``.T``.

    On a desktop the three stand side by side; on a phone, one above the other.

    Args:
        weights: ``(V, D)`` table (default: seed 004's ``fake_weights``, rows 0.00 to 0.33).

    Returns:
        An SVG document.
    """
    if weights is None:
        w = torch.tensor([[0.11 * r] * 5 for r in range(4)], dtype=torch.float32)
    else:
        w = weights.detach().cpu()
    check_drawable("keras_layout_figure", *w.shape)
    label = "Keras Embedding and Dense share the (V, D) layout; torch Linear is (D, V)"
    return desktop_and_phone(_draw_keras, "keras", label, w=w)


def _draw_keras(w: torch.Tensor, *, phone: bool) -> Canvas:
    v, d = w.shape
    cw = 0.46
    top = 0.85
    x1 = 0.35
    if phone:  # one above the other, the operator between each two
        gap = 0.25 + top  # the operator, then the next matrix's title
        places = [(x1, top), (x1, top + v * CELL_H + gap)]
        places.append((x1, places[1][1] + v * CELL_H + gap))
        c = Canvas(x1 + max(v, d) * cw + 0.6, places[2][1] + d * CELL_H + 0.2, screens_of(True))
    else:
        x2 = x1 + d * cw + 0.7
        places = [(x1, top), (x2, top), (x2 + d * cw + 0.9, top)]
        c = Canvas(places[2][0] + v * cw + 0.2, top + max(v, d) * CELL_H + 0.2, screens_of(False))
    sel = min(2, v - 1)
    colour = id_colour(sel)
    for k, ((x, y), transposed, title) in enumerate(
        zip(
            places,
            (False, False, True),
            (
                f"keras Embedding\n(input_dim, output_dim) = ({v}, {d})",
                f"keras Dense kernel\n(in, out) = ({v}, {d})",
                f"torch nn.Linear weight\n(out, in) = ({d}, {v})",
            ),
            strict=True,
        )
    ):
        c.matrix(
            x,
            y,
            values(w.t() if transposed else w, lambda e: f"{e:.2f}"),
            cell_w=cw,
            fills=_row_fills(sel, d, colour, transposed=transposed),
            row_labels=None if k and not phone else [str(r) for r in range(d if transposed else v)],
            title=title,
        )
    if phone:  # the operator left of the next matrix's title
        for (_, y), symbol in zip(places[1:], ("=", ".T"), strict=True):
            c.text(0.2, y - 0.55, symbol, fontsize=14.0 if symbol == "=" else 12.0)
    else:
        mid = top + v * CELL_H / 2
        c.between(places[0][0] + d * cw, places[1][0], mid, "=")
        c.between(places[1][0] + d * cw, places[2][0], mid, ".T", size=12)
    return c
