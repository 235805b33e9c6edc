"""Figures of "Lookup is a matmul": the looked-up rows, the one-hot matrix, and their product."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from embedding_equivalence import lookup_embedding, matmul_embedding

from ._canvas import (
    CELL_H,
    CELL_W,
    HEAD,
    SQUARE,
    Canvas,
    Product,
    check_drawable,
    defaults,
    desktop_and_phone,
    drawable_table,
    product_layout,
    values,
)
from ._style import BODY, FAINT_TEXT, TEXT, id_colour, screens_of, tint

__all__ = ["lookup_figure", "matmul_figure", "one_hot_figure"]

# The lane right of a phone layout's matrices, where its arrows run down, in inches.
_LANE = 0.5


def lookup_figure(weight: torch.Tensor | None = None, ids: torch.Tensor | None = None) -> str:
    """The table with the looked-up rows highlighted, and the rows they become.

    The output is computed by [`lookup_embedding`][embedding_equivalence.lookup_embedding].
    On a desktop the table and the output stand side by side; on a phone, one above the other.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: 1-D ids (default ``[2, 3, 1]``).

    Returns:
        An SVG document.
    """
    w, i = drawable_table("lookup_figure", weight, ids)
    out = lookup_embedding(i, w)
    ids_list = [int(x) for x in i.tolist()]
    label = f"lookup: rows {ids_list} of the table become the output rows"
    return desktop_and_phone(_draw_lookup, "lookup", label, w=w, out=out, ids=ids_list)


def _draw_lookup(w: torch.Tensor, out: torch.Tensor, ids: list[int], *, phone: bool) -> Canvas:
    v, d = w.shape
    n = len(ids)
    columns = [str(j) for j in range(d)]
    if phone:  # the output below the table, the arrows in a lane at the right
        left, top = 0.75, HEAD
        x_out, y_out = left, top + v * CELL_H + HEAD + 0.15
        width = left + d * CELL_W + _LANE
        height = y_out + n * CELL_H + 0.15
    else:
        left, top = 0.55, HEAD
        x_out, y_out = left + d * CELL_W + 1.15, top  # room for the arrows and the row labels
        width = x_out + d * CELL_W + 0.1
        height = top + max(v, n) * CELL_H + 0.2
    c = Canvas(width, height, screens_of(phone))
    c.matrix(
        left,
        top,
        values(w),
        fills={(r, j): tint(id_colour(r), 0.35) for r in set(ids) for j in range(d)},
        row_labels=[f"row {r}" for r in range(v)],
        col_labels=columns,
        title=f"weight  (V={v}, D={d})",
    )
    c.matrix(
        x_out,
        y_out,
        values(out),
        fills={(k, j): tint(id_colour(r), 0.35) for k, r in enumerate(ids) for j in range(d)},
        row_labels=[f"ids[{k}]={r}" for k, r in enumerate(ids)],
        col_labels=columns,
        title=f"weight[ids]  (N={n}, D={d})",
    )
    edge = left + d * CELL_W + 0.03
    for k, r in enumerate(ids):
        start = (edge, top + (r + 0.5) * CELL_H)
        if phone:
            c.lane_arrow(start, y_out + (k + 0.5) * CELL_H, id_colour(r))
        else:
            c.arrow(start, (x_out - 0.7, y_out + (k + 0.5) * CELL_H), id_colour(r))
    return c


def _one_hot_cells(
    c: Canvas, x: float, y: float, one_hot: torch.Tensor, ids: list[int], **kwargs: Any
) -> None:
    """Draw a one-hot matrix of ``ids`` (rows labelled by id, columns by table row)."""
    c.matrix(
        x,
        y,
        [[str(int(e)) for e in row] for row in one_hot.tolist()],
        cell_w=SQUARE,
        row_labels=[f"ids[{k}]={r}" for k, r in enumerate(ids)],
        col_labels=[str(j) for j in range(one_hot.shape[1])],
        **kwargs,
    )


def one_hot_figure(ids: torch.Tensor | None = None, num_embeddings: int | None = None) -> str:
    """The ``(N, V)`` one-hot matrix of the ids (``F.one_hot``), each 1 in its id's colour.

    Args:
        ids: 1-D ids (default ``[2, 3, 1]``).
        num_embeddings: ``V`` (default: ``max(ids) + 1``, as the seed notebook does).

    Returns:
        An SVG document.
    """
    _, i = defaults(None, ids)
    one_hot = F.one_hot(i, num_embeddings if num_embeddings is not None else -1)
    n, v = one_hot.shape
    check_drawable("one_hot_figure", n, v)
    ids_list = [int(x) for x in i.tolist()]
    left, top = 0.75, HEAD
    c = Canvas(max(left + v * SQUARE + 0.3, 2.2), top + n * SQUARE + 0.15)
    _one_hot_cells(
        c,
        left,
        top,
        one_hot,
        ids_list,
        cell_h=SQUARE,
        fills={(k, r): tint(id_colour(r), 0.55) for k, r in enumerate(ids_list)},
        text_colours={
            (k, j): (TEXT if one_hot[k, j] else FAINT_TEXT) for k in range(n) for j in range(v)
        },
        bold=list(enumerate(ids_list)),
        title=f"one_hot(ids, {v})",
    )
    return c.svg("onehot", f"one-hot matrix of ids {ids_list}, {n} rows and {v} columns")


def matmul_figure(
    ids: torch.Tensor | None = None, weight: torch.Tensor | None = None, row: int = 0
) -> str:
    """``one_hot(ids, V) @ weight``, with one output row traced back to the row it selects.

    The product is computed by [`matmul_embedding`][embedding_equivalence.matmul_embedding].
    On a desktop the three matrices are laid out in Falk's scheme; on a phone, one above the
    other (``one_hot``, ``@ weight``, ``= out``).

    Args:
        ids: 1-D ids (default ``[2, 3, 1]``).
        weight: ``(V, D)`` table (default: the worked example's).
        row: the output row to trace.

    Returns:
        An SVG document.

    Raises:
        ValueError: ``row`` is not a row of the output, or a side is too long to draw.
    """
    w, i = drawable_table("matmul_figure", weight, ids)
    v = w.shape[0]
    n = i.numel()
    if not 0 <= row < n:
        raise ValueError(f"matmul_figure: row={row} must lie in [0, {n})")
    one_hot = F.one_hot(i, v)
    out = matmul_embedding(i, w)
    sel = int(i[row])
    return desktop_and_phone(
        _draw_matmul,
        f"matmul{row}",
        f"one_hot @ weight: output row {row} is 1 times row {sel}, plus zeros",
        w=w,
        one_hot=one_hot,
        out=out,
        row=row,
    )


def _draw_matmul(
    w: torch.Tensor, one_hot: torch.Tensor, out: torch.Tensor, row: int, *, phone: bool
) -> Canvas:
    v, d = w.shape
    n = one_hot.shape[0]
    ids_list = [int(x) for x in one_hot.argmax(dim=1).tolist()]
    sel = ids_list[row]
    colour = id_colour(sel)
    x_oh = 0.75
    if phone:  # one_hot, then @ weight, then = out, one above the other
        y_w = HEAD + n * CELL_H + 0.35 + HEAD
        place = Product(
            x_m=x_oh,
            x_weight=x_oh,
            y_weight=y_w,
            y_out=y_w + v * CELL_H + 0.75,
            right=x_oh + d * CELL_W,
            bottom=y_w + v * CELL_H + 0.75 + n * CELL_H,
        )
        y_oh = HEAD
        c = Canvas(place.right + _LANE, place.bottom + 0.55, screens_of(True))
    else:
        place = product_layout(x_oh, v * SQUARE, v, d, n)
        y_oh = place.y_out
        # Right of the product: the arrow from the selected row of the table to the output row.
        c = Canvas(place.right + 0.45, place.bottom + 0.75, screens_of(False))
    oh_fills: dict[tuple[int, int], Any] = {(row, j): tint(colour, 0.15) for j in range(v)}
    oh_fills[(row, sel)] = tint(colour, 0.6)
    _one_hot_cells(
        c,
        x_oh,
        y_oh,
        one_hot,
        ids_list,
        fills=oh_fills,
        text_colours={
            (k, j): (TEXT if k == row else FAINT_TEXT) for k in range(n) for j in range(v)
        },
        bold=[(row, sel)],
        title=f"one_hot  ({n}, {v})" if phone else None,
    )
    if not phone:  # the title goes below: above the one-hot runs the arrow from its column
        c.title_below(x_oh, v * SQUARE, place.bottom, f"one_hot  ({n}, {v})")
    out_title = f"one_hot @ weight  ({n}, {d})"
    c.times_weight(
        place,
        w,
        out,
        f"= {out_title}" if phone else out_title,
        weight_style={
            "fills": {(sel, j): tint(colour, 0.45) for j in range(d)},
            "text_colours": {(r, j): FAINT_TEXT for r in range(v) if r != sel for j in range(d)},
            **({"title": f"@ weight  ({v}, {d})"} if phone else {}),
        },
        out_style={
            "fills": {(row, j): tint(colour, 0.45) for j in range(d)},
            "text_colours": {(k, j): FAINT_TEXT for k in range(n) if k != row for j in range(d)},
            **(
                {"row_labels": [f"out[{k}]" for k in range(n)], "col_labels": None} if phone else {}
            ),
        },
    )
    y_sel = place.y_weight + (sel + 0.5) * CELL_H
    if phone:  # the table's row `sel` becomes the output row
        c.lane_arrow((place.right + 0.04, y_sel), place.y_out + (row + 0.5) * CELL_H, colour)
    else:
        # Column `sel` of the one-hot, whose 1 is in the traced row, meets row `sel` of the
        # table ...
        c.arrow(
            (x_oh + (sel + 0.5) * SQUARE, place.y_out - 0.2),
            (place.x_weight - 0.2, y_sel),
            colour,
            rad=-0.3,
        )
        # ... which becomes the output row.
        c.arrow(
            (place.right + 0.04, y_sel),
            (place.right + 0.04, place.y_out + (row + 0.5) * CELL_H),
            colour,
            rad=-0.4,
        )
    terms = " + ".join(f"{int(one_hot[row, r])}·W[{r}]" for r in range(v))
    c.text(
        c.width / 2,
        place.bottom + (0.3 if phone else 0.55),
        f"out[{row}] = {terms} = W[{sel}]",
        fontsize=BODY,
        family="monospace",
        color=colour,
    )
    return c
