"""The figure of "EmbeddingBag is a multi-hot matmul": bag counts times the table."""

from __future__ import annotations

import torch

from embedding_equivalence import lookup_embedding_bag, matmul_embedding_bag

from ._canvas import SQUARE, Canvas, check_drawable, drawable_table, product_layout, values
from ._style import FAINT_TEXT, TITLE, fmt_short, id_colour, tint

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
    v, d = w.shape
    counts = matmul_embedding_bag(ids, torch.eye(v, dtype=w.dtype), offs, mode="sum")
    out = lookup_embedding_bag(ids, w, offs, mode="sum")
    b = counts.shape[0]
    starts = [int(x) for x in offs.tolist()] + [ids.numel()]
    bags = [[int(x) for x in ids[starts[k] : starts[k + 1]].tolist()] for k in range(b)]
    x_m = 1.45  # right of the bags' labels
    place = product_layout(x_m, v * SQUARE, v, d, b)
    c = Canvas(place.right + 0.1, place.bottom + 0.45)
    c.matrix(
        x_m,
        place.y_out,
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
    )
    c.text(
        x_m + v * SQUARE / 2,
        place.bottom + 0.1,
        f"bag counts M  ({b}, {v})",
        va="top",
        fontsize=TITLE,
    )
    c.times_weight(place, w, out, f"M @ weight = bag sums  ({b}, {d})")
    return c.svg("bag", f"bags {bags} as a multi-hot matrix times the table")
