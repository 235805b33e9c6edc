"""Figures of "Sharded embeddings are block matrix products": the row and the column split.

The shards follow torch's chunking ([`shard_range`][embedding_equivalence.distributed.shard_range]),
so uneven and empty shards are drawn as ``Shard(0)`` and ``Shard(1)`` lay them out. The
vocab-parallel figure computes each rank's partial product ``one_hot_r @ W_r`` and their sum
(what the all-reduce returns); the dim-parallel figure computes each rank's column block
``one_hot @ W[:, cols_r]`` and their concatenation (what the all-gather returns).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from embedding_equivalence import matmul_embedding

from ._canvas import (
    CELL_H,
    CELL_W,
    HEAD,
    SQUARE,
    Canvas,
    desktop_and_phone,
    drawable_table,
    product_layout,
    values,
)
from ._style import BODY, FAINT_TEXT, SMALL, TEXT, id_colour, screens_of, tint

__all__ = ["MAX_RANKS", "dim_parallel_figure", "vocab_parallel_figure"]

#: The most ranks a sharding figure draws (one band or column block per rank).
MAX_RANKS = 4

# The horizontal gap between the column blocks of different ranks, and the vertical gap
# between the bands of different ranks, in inches.
_RANK_GAP = 0.3
_BAND_GAP = 0.35


def _shards(name: str, size: int, world_size: int) -> list[tuple[int, int]]:
    """Each rank's ``[start, stop)`` of a dimension of ``size``, by torch's chunking.

    Raises:
        ValueError: ``world_size`` is not in ``[1, MAX_RANKS]``.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise ValueError(f"{name}: world_size must be an int, got {world_size!r}")
    if not 1 <= world_size <= MAX_RANKS:
        raise ValueError(
            f"{name}: world_size={world_size} must lie in [1, {MAX_RANKS}] (one band per rank)"
        )
    # Imported here, not at the top: the figures of the other pages do not need
    # torch.distributed, which some builds of torch leave out.
    from embedding_equivalence.distributed import shard_range

    return [shard_range(size, world_size, r) for r in range(world_size)]


def _rows(start: int, stop: int) -> str:
    """``"rows 2-3"``, ``"row 4"`` or ``"no rows"`` for ``[start, stop)``."""
    if stop == start:
        return "no rows"
    return f"row {start}" if stop - start == 1 else f"rows {start}-{stop - 1}"


def vocab_parallel_figure(
    weight: torch.Tensor | None = None, ids: torch.Tensor | None = None, world_size: int = 3
) -> str:
    """Vocab-parallel: each rank's block product ``one_hot_r @ W_r``, summed by an all-reduce.

    Rank ``r`` holds rows ``[start_r, stop_r)`` of the table (``Shard(0)``, torch's chunking)
    and the matching columns of the one-hot; its partial product has the looked-up row where
    it owns the id and zeros elsewhere. The partial products are computed from the tensors
    given, and the output drawn is their sum, in rank order, as the all-reduce adds them.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: 1-D ids (default ``[2, 3, 1]``).
        world_size: the number of ranks, 1 to [`MAX_RANKS`][].

    Returns:
        An SVG document.

    Raises:
        ValueError: a side is too long to draw, or ``world_size`` is out of range.
    """
    name = "vocab_parallel_figure"
    w, i = drawable_table(name, weight, ids)
    v = w.shape[0]
    shards = _shards(name, v, world_size)
    one_hot = F.one_hot(i, v).to(w.dtype)
    partials = [one_hot[:, start:stop] @ w[start:stop] for start, stop in shards]
    out = partials[0]
    for p in partials[1:]:
        out = out + p  # the all-reduce's sum, rank by rank
    sizes = [stop - start for start, stop in shards]
    return desktop_and_phone(
        _draw_vocab_parallel,
        "vocab-parallel",
        f"vocab-parallel embedding: a table of {v} rows split over {len(shards)} ranks as "
        f"{sizes} rows; each rank's one-hot block times its rows, summed by an all-reduce",
        w=w,
        ids=[int(x) for x in i.tolist()],
        shards=shards,
        partials=partials,
        out=out,
    )


def _draw_vocab_parallel(
    w: torch.Tensor,
    ids: list[int],
    shards: list[tuple[int, int]],
    partials: list[torch.Tensor],
    out: torch.Tensor,
    *,
    phone: bool,
) -> Canvas:
    """Each rank a band: ``W_r`` above ``P_r``, and on a desktop ``one_hot_r`` left of ``P_r``.

    A phone leaves the one-hot blocks out (``P_r``'s rows say which ids the rank owns), and
    writes the sum one term a line.
    """
    v, d = w.shape
    n = len(ids)
    one_hot = F.one_hot(torch.tensor(ids), v).to(w.dtype)
    owner = [next(r for r, (a, b) in enumerate(shards) if a <= k < b) for k in ids]
    id_labels = [f"ids[{k}]={t}" for k, t in enumerate(ids)]

    # Each rank is a band in Falk's scheme (see `product_layout`): W_r above P_r, one_hot_r
    # left of P_r; the bands are stacked, and the all-reduce joins them below.
    # Every band is as wide as the widest one-hot block, so that all W_r and P_r line up.
    widest = 0.0 if phone else max(max(stop - start for start, stop in shards), 1) * SQUARE
    x_oh = 0.75
    gap = -0.45 if phone else 0.0  # a phone's P_r starts where its one-hot would have
    places = []
    top = 0.25
    for start, stop in shards:
        rows = stop - start
        # Without rows there is no W_r: only the zeros of P_r, under its title.
        place = product_layout(x_oh + gap, widest, rows, d, n, top + HEAD if rows else top)
        places.append(place)
        top = place.bottom + _BAND_GAP
    x_w, right = places[0].x_weight, places[0].right
    x_lane = right + (0.2 if phone else 0.3)  # where the partial products meet, right of them
    terms = [f"one_hot_{r} @ W_{r}" for r in range(len(shards))]
    if phone:
        formula = [
            "one_hot @ weight =",
            *(("\u00a0\u00a0" if r == 0 else "+ ") + t for r, t in enumerate(terms)),
        ]
    else:
        formula = ["one_hot @ weight =", " + ".join(terms)]
    # The formula's lines are monospace: 0.602 em a character.
    width = max(x_lane + 0.25, 0.24 + max(map(len, formula)) * 0.602 * BODY / 72)
    box_w, box_h = 1.7, 0.36
    box_top = places[-1].bottom + 0.3
    out_top = box_top + box_h + 0.7
    c = Canvas(width, out_top + n * CELL_H + 0.3 + 0.24 * len(formula), screens_of(phone))
    columns = [str(j) for j in range(d)]
    middles = []
    for r, ((start, stop), place) in enumerate(zip(shards, places, strict=True)):
        rows = stop - start
        middles.append(place.y_out + n * CELL_H / 2)
        label_y = place.y_weight + rows * CELL_H / 2 if rows else place.y_out - 0.3
        if phone and rows:  # above the band: left of W_r are its row labels
            label_x, label_y, rows_y = 0.12, place.y_weight - HEAD + 0.08, None
        else:
            label_x, rows_y = 0.12, label_y + 0.12
        c.text(label_x, label_y - 0.1, f"rank {r}", ha="left", fontweight="bold")
        if rows_y is not None:
            c.text(label_x, rows_y, _rows(start, stop), ha="left", fontsize=SMALL, color=FAINT_TEXT)
        own = {k for k in range(n) if owner[k] == r}
        if rows:
            if not phone:
                block = one_hot[:, start:stop]
                c.matrix(
                    x_oh,
                    place.y_out,
                    [[str(int(e)) for e in row] for row in block.tolist()],
                    cell_w=SQUARE,
                    fills={
                        (k, t - start): tint(id_colour(t), 0.55)
                        for k, t in enumerate(ids)
                        if start <= t < stop
                    },
                    text_colours={
                        (k, j): (TEXT if block[k, j] else FAINT_TEXT)
                        for k in range(n)
                        for j in range(rows)
                    },
                    row_labels=id_labels,
                    col_labels=[str(j) for j in range(start, stop)],
                )
                c.title_below(x_oh, rows * SQUARE, place.bottom, f"one_hot_{r}", 0.08, SMALL)
            used = {t - start for t in ids if start <= t < stop}
            c.matrix(
                x_w,
                place.y_weight,
                values(w[start:stop]),
                fills={(t, j): tint(id_colour(start + t), 0.35) for t in used for j in range(d)},
                text_colours={
                    (t, j): FAINT_TEXT for t in range(rows) if t not in used for j in range(d)
                },
                row_labels=[str(t) for t in range(start, stop)],
                col_labels=columns,
                title=f"W_{r} = weight[{start}:{stop}]",
            )
            title = f"P_{r} = one_hot_{r} @ W_{r}"
        else:
            title = f"P_{r}: no rows, a product with 0 columns"
        c.matrix(
            x_w,
            place.y_out,
            values(partials[r]),
            fills={(k, j): tint(id_colour(ids[k]), 0.35) for k in own for j in range(d)},
            text_colours={(k, j): FAINT_TEXT for k in range(n) if k not in own for j in range(d)},
            row_labels=id_labels if phone else None,
            title=title,
        )

    # The all-reduce: every rank's partial product runs into one sum, below them.
    box_x = x_w + d * CELL_W / 2 - box_w / 2
    box_mid = box_top + box_h / 2
    for y in middles:
        c.ax.plot([right + 0.05, x_lane], [y, y], color=TEXT, lw=1.2)
    c.ax.plot([x_lane, x_lane], [middles[0], box_mid], color=TEXT, lw=1.2)
    c.arrow((x_lane, box_mid), (box_x + box_w + 0.02, box_mid), TEXT)
    c.box(box_x, box_top, box_w, box_h, tint(TEXT, 0.06), TEXT)
    c.text(box_x + box_w / 2, box_mid, "all-reduce (sum)")
    c.arrow((box_x + box_w / 2, box_top + box_h + 0.02), (box_x + box_w / 2, out_top - 0.45), TEXT)
    c.matrix(
        x_w,
        out_top,
        values(out),
        fills={(k, j): tint(id_colour(ids[k]), 0.35) for k in range(n) for j in range(d)},
        row_labels=id_labels,
        col_labels=columns,
        title=" + ".join(f"P_{r}" for r in range(len(shards))) + ", on every rank",
    )
    for k, line in enumerate(formula):
        c.text(
            0.12,
            out_top + n * CELL_H + 0.3 + 0.24 * k,
            line,
            ha="left",
            va="top",
            family="monospace",
        )
    return c


def dim_parallel_figure(
    weight: torch.Tensor | None = None, ids: torch.Tensor | None = None, world_size: int = 3
) -> str:
    """Dim-parallel: each rank's columns ``one_hot @ W[:, cols_r]``, joined by an all-gather.

    Rank ``r`` holds columns ``[start_r, stop_r)`` of every row (``Shard(1)``, torch's
    chunking; trailing ranks may hold none). Each rank's block of the output is computed by
    [`matmul_embedding`][embedding_equivalence.matmul_embedding] on its columns, and the output
    drawn is their concatenation along ``D``, as the all-gather returns it.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: 1-D ids (default ``[2, 3, 1]``).
        world_size: the number of ranks, 1 to [`MAX_RANKS`][].

    Returns:
        An SVG document.

    Raises:
        ValueError: a side is too long to draw, or ``world_size`` is out of range.
    """
    name = "dim_parallel_figure"
    w, i = drawable_table(name, weight, ids)
    d = w.shape[1]
    shards = _shards(name, d, world_size)
    blocks = [matmul_embedding(i, w[:, start:stop]) for start, stop in shards]
    out = torch.cat(blocks, dim=-1)  # the all-gather's concatenation along D
    sizes = [stop - start for start, stop in shards]
    return desktop_and_phone(
        _draw_dim_parallel,
        "dim-parallel",
        f"dim-parallel embedding: a table of {d} columns split over {len(shards)} ranks as "
        f"{sizes} columns; each rank multiplies the one-hot by its columns, and an all-gather "
        "joins the column blocks",
        w=w,
        ids=[int(x) for x in i.tolist()],
        shards=shards,
        blocks=blocks,
        out=out,
    )


def _draw_dim_parallel(
    w: torch.Tensor,
    ids: list[int],
    shards: list[tuple[int, int]],
    blocks: list[torch.Tensor],
    out: torch.Tensor,
    *,
    phone: bool,
) -> Canvas:
    """The column blocks side by side on a desktop; on a phone each rank's block in its row."""
    v, d = w.shape
    n = len(ids)
    one_hot = F.one_hot(torch.tensor(ids), v)
    held = [(r, a, b) for r, (a, b) in enumerate(shards) if b > a]
    empty = [r for r, (a, b) in enumerate(shards) if b == a]
    referenced = set(ids)
    id_labels = [f"ids[{k}]={t}" for k, t in enumerate(ids)]
    x_oh = 0.9
    if phone:
        return _draw_dim_parallel_phone(w, ids, held, empty, blocks, out, one_hot)
    x_w = x_oh + v * SQUARE + 0.75
    lefts = {r: x_w + a * CELL_W + k * _RANK_GAP for k, (r, a, _) in enumerate(held)}
    right = x_w + d * CELL_W + (len(held) - 1) * _RANK_GAP
    width = right + (1.9 if empty else 0.3)
    y_w = HEAD + 0.2
    y_blocks = y_w + v * CELL_H + 0.95
    y_out = y_blocks + n * CELL_H + 1.0
    c = Canvas(width, y_out + n * CELL_H + 0.75, screens_of(False))
    _dim_one_hot(c, x_oh, y_w, one_hot, ids)
    c.between(x_oh + v * SQUARE, x_w, y_w + min(n, v) * CELL_H / 2, "@")
    for r, start, stop in held:
        x = lefts[r]
        cols = stop - start
        names = [str(j) for j in range(start, stop)]
        c.text(x + cols * CELL_W / 2, HEAD - 0.42, f"rank {r}", fontweight="bold")
        c.matrix(
            x,
            y_w,
            values(w[:, start:stop]),
            fills={(t, j): tint(id_colour(t), 0.35) for t in referenced for j in range(cols)},
            text_colours={
                (t, j): FAINT_TEXT for t in range(v) if t not in referenced for j in range(cols)
            },
            row_labels=[str(t) for t in range(v)] if r == held[0][0] else None,
            col_labels=names,
            title=f"W[:, {start}:{stop}]",
        )
        c.arrow(
            (x + cols * CELL_W / 2, y_w + v * CELL_H + 0.05),
            (x + cols * CELL_W / 2, y_blocks - 0.3),
            TEXT,
        )
        c.matrix(
            x,
            y_blocks,
            values(blocks[r]),
            fills={
                (k, j): tint(id_colour(t), 0.35) for k, t in enumerate(ids) for j in range(cols)
            },
            col_labels=names,
        )
        c.arrow(
            (x + cols * CELL_W / 2, y_blocks + n * CELL_H + 0.05),
            (x_w + (start + stop) * CELL_W / 2, y_out - 0.28),
            TEXT,
        )
    for k, r in enumerate(empty):
        c.text(right + 0.25, HEAD - 0.42 + 0.22 * k, f"rank {r}: no columns", ha="left")
    c.text(
        x_w - 0.25,
        y_blocks - 0.55,
        "on each rank:  one_hot @ W[:, cols]",
        ha="right",
        va="bottom",
    )
    c.text(x_w - 0.25, y_out - 0.55, "all-gather along D:", ha="right", va="bottom")
    _dim_out(c, x_w, y_out, out, ids, id_labels)
    c.text(
        x_w + d * CELL_W / 2,
        y_out + n * CELL_H + 0.25,
        "one_hot @ weight, on every rank",
        color=FAINT_TEXT,
    )
    return c


def _dim_one_hot(c: Canvas, x: float, y: float, one_hot: torch.Tensor, ids: list[int]) -> None:
    """The one-hot every rank holds, its ones in their ids' colours."""
    n, v = one_hot.shape
    c.matrix(
        x,
        y,
        [[str(int(e)) for e in row] for row in one_hot.tolist()],
        cell_w=SQUARE,
        fills={(k, t): tint(id_colour(t), 0.55) for k, t in enumerate(ids)},
        text_colours={
            (k, j): (TEXT if one_hot[k, j] else FAINT_TEXT) for k in range(n) for j in range(v)
        },
        row_labels=[f"ids[{k}]={t}" for k, t in enumerate(ids)],
        col_labels=[str(j) for j in range(v)],
        title="one_hot (every rank)",
    )


def _dim_out(
    c: Canvas, x: float, y: float, out: torch.Tensor, ids: list[int], labels: list[str]
) -> None:
    """The all-gathered output: each row in its id's colour."""
    d = out.shape[1]
    c.matrix(
        x,
        y,
        values(out),
        fills={(k, j): tint(id_colour(t), 0.35) for k, t in enumerate(ids) for j in range(d)},
        row_labels=labels,
        col_labels=[str(j) for j in range(d)],
    )


def _draw_dim_parallel_phone(
    w: torch.Tensor,
    ids: list[int],
    held: list[tuple[int, int, int]],
    empty: list[int],
    blocks: list[torch.Tensor],
    out: torch.Tensor,
    one_hot: torch.Tensor,
) -> Canvas:
    """The one-hot, then a row per rank (``W[:, cols]`` and its block), then the gathered output.

    A rank's block stands right of its columns of the table when both fit the width, else
    below them.
    """
    v, d = w.shape
    n = len(ids)
    referenced = set(ids)
    id_labels = [f"ids[{k}]={t}" for k, t in enumerate(ids)]
    left = 0.75  # the row labels of the one-hot and of the output
    width = max(left + d * CELL_W + 0.15, 3.8)
    rows = []  # (rank, start, stop, y of the table's columns, (x, y) of the block)
    y = HEAD + n * SQUARE + 0.35
    for r, start, stop in held:
        cols = stop - start
        y_w = y + HEAD
        beside = 0.3 + 2 * cols * CELL_W + 0.55 <= width - 0.1
        if beside:
            corner = (0.3 + cols * CELL_W + 0.55, y_w + max(v - n, 0) * CELL_H / 2)
            y = y_w + max(v, n) * CELL_H + 0.2
        else:
            corner = (0.3, y_w + v * CELL_H + 0.45)
            y = corner[1] + n * CELL_H + 0.2
        rows.append((r, start, stop, y_w, corner))
    y_note = y + 0.1
    y_out = y_note + 0.22 * len(empty) + 0.25 + HEAD
    c = Canvas(width, y_out + n * CELL_H + 0.45, screens_of(True))
    _dim_one_hot(c, left, HEAD, one_hot, ids)
    for r, start, stop, y_w, (x_b, y_b) in rows:
        cols = stop - start
        names = [str(j) for j in range(start, stop)]
        c.text(0.12, y_w - HEAD + 0.08, f"rank {r}", ha="left", fontweight="bold")
        c.matrix(
            0.3,
            y_w,
            values(w[:, start:stop]),
            fills={(t, j): tint(id_colour(t), 0.35) for t in referenced for j in range(cols)},
            text_colours={
                (t, j): FAINT_TEXT for t in range(v) if t not in referenced for j in range(cols)
            },
            row_labels=[str(t) for t in range(v)],
            col_labels=names,
            title=f"@ W[:, {start}:{stop}]",
        )
        c.matrix(
            x_b,
            y_b,
            values(blocks[r]),
            fills={
                (k, j): tint(id_colour(t), 0.35) for k, t in enumerate(ids) for j in range(cols)
            },
            col_labels=names,
            title="=",
        )
    for k, r in enumerate(empty):
        c.text(0.12, y_note + 0.22 * k, f"rank {r}: no columns", ha="left")
    c.text(0.12, y_out - HEAD + 0.05, "all-gather along D, on every rank:", ha="left")
    _dim_out(c, left, y_out, out, ids, id_labels)
    return c
