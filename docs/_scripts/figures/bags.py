"""The figure of "EmbeddingBag is a multi-hot matmul": bag counts times the table."""

from __future__ import annotations

import torch

from embedding_equivalence import lookup_embedding_bag, matmul_embedding_bag

from ._canvas import (
    CELL_H,
    CELL_W,
    HEAD,
    SQUARE,
    Canvas,
    Product,
    check_drawable,
    desktop_and_phone,
    drawable_table,
    product_layout,
    values,
)
from ._style import FAINT_TEXT, fmt_short, id_colour, screens_of, tint

__all__ = ["bag_figure"]


def bag_figure(
    input: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> str:
    """The ``(B, V)`` bag-count (multi-hot) matrix, the table, and their product (``mode="sum"``).

    The counts are ``matmul_embedding_bag(input, eye(V), offsets, mode="sum")`` (the bag-count
    matrix times the identity is the bag-count matrix), and the product is
    [`lookup_embedding_bag`][embedding_equivalence.lookup_embedding_bag]'s output.

    Args:
        input: 1-D ids (default ``[2, 3, 1, 2, 2]``).
        offsets: start of each bag (default ``[0, 2]``: bags ``[2, 3]`` and ``[1, 2, 2]``).
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, _ = drawable_table("bag_figure", weight, None)
    ids = torch.tensor([2, 3, 1, 2, 2]) if input is None else input.detach().cpu()
    offs = torch.tensor([0, 2]) if offsets is None else offsets.detach().cpu()
    check_drawable("bag_figure", offs.numel())
    v = w.shape[0]
    counts = matmul_embedding_bag(ids, torch.eye(v, dtype=w.dtype), offs, mode="sum")
    out = lookup_embedding_bag(ids, w, offs, mode="sum")
    b = counts.shape[0]
    starts = [int(x) for x in offs.tolist()] + [ids.numel()]
    bags = [[int(x) for x in ids[starts[k] : starts[k + 1]].tolist()] for k in range(b)]
    return desktop_and_phone(
        _draw_bags,
        "bag",
        f"bags {bags} as a multi-hot matrix times the table",
        w=w,
        counts=counts,
        out=out,
        bags=bags,
    )


def _draw_bags(
    w: torch.Tensor, counts: torch.Tensor, out: torch.Tensor, bags: list[list[int]], *, phone: bool
) -> Canvas:
    """Falk's scheme on a desktop; on a phone ``M``, ``@ weight`` and ``= bag sums`` stacked."""
    v, d = w.shape
    b = len(bags)
    x_m = 1.45  # right of the bags' labels
    if phone:
        y_w = HEAD + b * CELL_H + 0.35 + HEAD
        y_out = y_w + v * CELL_H + 0.45
        x_w = 0.55
        place = Product(
            x_m=x_m,
            x_weight=x_w,
            y_weight=y_w,
            y_out=y_out,
            right=x_w + d * CELL_W,
            bottom=y_out + b * CELL_H,
        )
        y_m = HEAD
        c = Canvas(max(place.right, x_m + v * SQUARE) + 0.15, place.bottom + 0.15, screens_of(True))
    else:
        place = product_layout(x_m, v * SQUARE, v, d, b)
        y_m = place.y_out
        c = Canvas(place.right + 0.1, place.bottom + 0.45, screens_of(False))
    c.matrix(
        x_m,
        y_m,
        values(counts, fmt_short),
        cell_w=SQUARE,
        fills={
            (k, r): tint(id_colour(r), min(1.0, 0.35 * counts[k, r].item()))
            for k in range(b)
            for r in range(v)
            if counts[k, r] != 0
        },
        text_colours={(k, r): FAINT_TEXT for k in range(b) for r in range(v) if counts[k, r] == 0},
        row_labels=[f"bag {k} {bags[k]}" for k in range(b)],
        col_labels=[str(r) for r in range(v)],
        title=f"bag counts M  ({b}, {v})" if phone else None,
    )
    if not phone:
        c.title_below(x_m, v * SQUARE, place.bottom, f"bag counts M  ({b}, {v})")
    title = f"M @ weight = bag sums  ({b}, {d})"
    c.times_weight(
        place,
        w,
        out,
        f"= {title}" if phone else title,
        weight_style={"title": f"@ weight  ({v}, {d})"} if phone else None,
        out_style={"row_labels": [f"bag {k}" for k in range(b)]} if phone else None,
    )
    return c
