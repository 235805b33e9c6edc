"""The boundary examples of sharded tables, beside the verifier that runs them.

The data and the helpers of [`embedding_equivalence._draw.boundaries`][] applied to tables sharded
over ``world_size`` ranks: ``V`` (``sharding="vocab"``) or ``D`` (``"dim"``) around the world
size and its multiples, with empty trailing shards, and ids at every shard edge.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .._draw.boundaries import embedding_value_boundaries
from .._draw.boundary_data import (
    Boundary,
    _bad_lookups,
    _embedding,
    _largest_set,
    _lookup_kwargs,
    _size_axis,
    _Turns,
    option_sets,
)
from .._draw.cases import EmbeddingCase
from .._draw.recipes import IdsRun
from ..forms.dtypes import dtype_name

#: The largest ``V`` and ``D`` of the sharded phase. Each example crosses a process group and
#: every rank builds the whole table, so the axes stop at a few thousand rows and 2**10
#: columns; the sizes past them are ``verify_embedding``'s.
SHARDED_LIMITS: dict[str, int] = {"V": 2**12, "D": 2**10}


def around_world_multiples(world_size: int, limit: int, factor: int = 2) -> tuple[int, ...]:
    """The sizes where torch's chunking over ``world_size`` ranks changes, up to ``limit``.

    ``1 .. world_size - 1`` (the trailing ranks hold nothing), then ``world * k - 1``,
    ``world * k`` and ``world * k + 1`` for ``k = 1, 2, 3``, ``k = 4, 4 * factor,
    4 * factor**2, ...`` and the largest power of two ``k`` in reach: the size a multiple of
    the world and one off either way, each rank's share at a power of two (every one with
    ``factor=2``).
    """
    ks = {1, 2, 3}
    k = 4
    while world_size * k - 1 <= limit:
        ks.add(k)
        k *= factor
    top = 4
    while world_size * top * 2 - 1 <= limit:
        top *= 2
    ks.add(top)
    values = set(range(1, world_size))
    values.update(world_size * k + e for k in ks for e in (-1, 0, 1))
    return tuple(sorted(x for x in values if 1 <= x <= limit))


def _shards(size: int, world_size: int) -> tuple[int, int]:
    """The chunking of ``Shard``: ``(rows a rank, ranks that hold any)`` for ``size`` rows."""
    chunk = -(-size // world_size)
    return chunk, -(-size // chunk)


def _shard_edges(size: int, world_size: int) -> tuple[IdsRun, ...]:
    """Ids at every shard edge: each holding rank's first row, then each one's last row.

    The last rank's last row, ``size - 1``, comes three times: a row of a trailing rank repeats.
    """
    chunk, holding = _shards(size, world_size)
    runs = (
        IdsRun(0, holding, chunk),
        IdsRun(chunk - 1, holding - 1, chunk),
        IdsRun(size - 1, 3, 0),
    )
    return tuple(run for run in runs if run.count)


def _trailing_row(size: int, world_size: int) -> int:
    """The first row of the last rank that holds rows (the padding row of the phase)."""
    chunk, holding = _shards(size, world_size)
    return (holding - 1) * chunk


def sharded_boundaries(
    sharding: str,
    world_size: int,
    options: Sequence[str],
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
) -> Iterator[Boundary]:
    """The boundary examples of a sharded embedding, in the order they run.

    Tables are split by torch's chunking (``ceil(size / world)`` rows or columns a rank, so
    trailing ranks may hold fewer or none); the ids sit at every shard edge (each rank's first
    and last row, ``0`` and ``V - 1``) and ``padding_idx`` names a row at a shard edge that a
    trailing rank owns. In order:

    - **the sharded axis** (``V`` for ``"vocab"``, ``D`` for ``"dim"``) at the sizes of
      [`around_world_multiples`][] up to [`SHARDED_LIMITS`][], every option on: first, so
      that a chunking bug is named by the size it starts at (``fails from V = 3; passes at
      2``);
    - **edges** on a table of ``world + 1`` rows and columns: a 0-d id (the padding row) and
      empty ids in every dtype; ``(0, 3)`` ids, 2-D ids and transposed ids, the dtypes taking
      turns;
    - **options**: each combination of them on a 0-d id of the last rank's only row and on
      the shard edges with repeats and ``padding_idx=-1``, the dtypes taking turns;
    - **values** at the limits of each dtype, those of [`embedding_boundaries`][] on a
      ``(3, 2)`` table whose rows (or columns) the ranks split;
    - **bad input** at its edges (CPU only): the list of [`embedding_boundaries`][];
    - **the other axis**, likewise but sparser (``k`` a power of 4), for it splits nothing.

    The cases are built on the CPU, as the sharded strategy's are: each rank moves them to
    its device.

    Args:
        sharding: ``"vocab"`` (rows split) or ``"dim"`` (columns split).
        world_size: the number of ranks.
        options: the requested options (``padding_idx``, ``max_norm``, ``scale_grad_by_freq``).
        dtypes: the table dtypes requested.
        devices: the ranks' devices (bad input only on the CPU).

    Yields:
        [`Boundary`][] examples.
    """
    world = world_size
    turns = _Turns(tuple(dtypes), ("cpu",))
    all_options = _largest_set(options)
    small = world + 1  # uneven shards; the last one empty from 3 ranks on
    edge_ids = _shard_edges(small, world)
    padding = _trailing_row(small, world)
    edge_kwargs = _lookup_kwargs(all_options, padding)

    def vocab(v: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        kwargs = _lookup_kwargs(all_options, _trailing_row(v, world))
        return _embedding(_shard_edges(v, world), v, small, kwargs, dtype, index, device)

    def width(d: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        return _embedding(edge_ids, small, d, edge_kwargs, dtype, index, device)

    def axis(name: str, factor: int) -> Iterator[Boundary]:
        values = around_world_multiples(world, SHARDED_LIMITS[name], factor)
        yield from _size_axis(name, turns.at, vocab if name == "V" else width, values)

    sharded, other = ("V", "D") if sharding == "vocab" else ("D", "V")
    yield from axis(sharded, 2)
    edges: list[tuple[str, tuple[IdsRun, ...], tuple[int, ...] | None, str]] = [
        (f"0-d id {padding}", (IdsRun(padding, 1),), (), "contiguous"),
        ("empty ids", (), (0,), "contiguous"),
        ("empty 2-d ids", (), (0, 3), "contiguous"),
        ("2-d ids", (IdsRun(0, 2 * small, 1, small),), (2, small), "contiguous"),
        ("transposed ids", (IdsRun(0, 2 * small, 1, small),), (2, small), "transposed"),
    ]
    shape = f"V = {small}, D = {small} over {world} ranks"
    k = 0
    for i, (what, runs, ids_shape, layout) in enumerate(edges):
        for dtype in turns.dtypes if i < 2 else (turns.at(k)[0],):
            _, index, device = turns.at(k)
            k += 1
            case = _embedding(runs, small, small, edge_kwargs, dtype, index, device,
                              shape=ids_shape, ids_layout=layout)  # fmt: skip
            yield Boundary("edge", None, f"{what} ({shape}, {dtype_name(dtype)})", case)
    # Each combination of the options: the last rank's only row as a 0-d padding id, and the
    # shard edges with repeats, padding_idx=-1 (the last row).
    last = 2 * world - 1  # every rank 2 rows, the last one 1
    for combo in option_sets(options):
        for v, runs, ids_shape, pad in (
            (last, (IdsRun(last - 1, 1),), (), last - 1),
            (small, edge_ids, None, -1),
        ):
            dtype, index, device = turns.at(k)
            k += 1
            case = _embedding(runs, v, small, _lookup_kwargs(combo, pad), dtype, index, device,
                              shape=ids_shape)  # fmt: skip
            ids = "a 0-d id" if ids_shape == () else "ids at the shard edges"
            text = f"{', '.join(combo)} on {ids} (V = {v} over {world} ranks, {dtype_name(dtype)})"
            yield Boundary("options", None, text, case)
    # The unsharded phase's value examples, its (3, 2) table's rows or columns split over the
    # ranks.
    yield from embedding_value_boundaries(turns, all_options, f"V = 3, D = 2 over {world} ranks, ")
    if "cpu" in devices:

        def bad(
            runs: tuple[IdsRun, ...], v: int, kwargs: dict[str, Any], index: torch.dtype, why: str
        ) -> EmbeddingCase:
            return _embedding(runs, v, small, kwargs, torch.float32, index, "cpu", invalid=why)

        yield from _bad_lookups(options, turns, bad, v=world)
    yield from axis(other, 4)


def sizes_at_the_top(lo: int, hi: int, world_size: int) -> tuple[int, ...]:
    """The largest size ``hi`` and the world's multiples next to it, within ``[lo, hi]``.

    ``hi`` itself, and ``world * k - 1``, ``world * k``, ``world * k + 1`` for the largest
    multiple ``world * k`` at most ``hi``: the size a multiple of the world and one off
    either way, at the size the user asked for.
    """
    top = hi // world_size * world_size
    values = {hi, *(top + e for e in (-1, 0, 1))} if top else {hi}
    return tuple(sorted(x for x in values if lo <= x <= hi))


def sharded_boundaries_at_size(
    sharding: str,
    world_size: int,
    options: Sequence[str],
    dtypes: Sequence[torch.dtype],
    vocab: tuple[int, int],
    dim: tuple[int, int],
) -> Iterator[Boundary]:
    """The boundary examples at the sizes the user asked for: ids at every shard edge.

    Run after [`sharded_boundaries`][] when the size knobs reach a table that is built shard
    by shard (see [`embedding_equivalence.distributed._large`][]): the sharded axis (``V``
    for ``"vocab"``, ``D`` for ``"dim"``) at its largest requested size and at the world's
    multiples next to it ([`sizes_at_the_top`][]), the other axis at its largest; the ids at
    every shard edge (each holding rank's first and last row, ``V - 1`` repeated), every
    requested option on, ``padding_idx`` on the first row of the last rank that holds rows;
    the dtypes taking turns.

    Args:
        sharding: ``"vocab"`` or ``"dim"``.
        world_size: the number of ranks.
        options: the requested options.
        dtypes: the table dtypes requested.
        vocab: the ``(min, max)`` of ``V`` requested.
        dim: the ``(min, max)`` of ``D`` requested.

    Yields:
        [`Boundary`][] examples (on the CPU; each rank moves its shard to its device).
    """
    world = world_size
    turns = _Turns(tuple(dtypes), ("cpu",))
    all_options = _largest_set(options)
    axis, (lo, hi) = ("V", vocab) if sharding == "vocab" else ("D", dim)
    for i, value in enumerate(sizes_at_the_top(lo, hi, world)):
        dtype, index, device = turns.at(i)
        v, d = (value, dim[1]) if axis == "V" else (vocab[1], value)
        kwargs = _lookup_kwargs(all_options, _trailing_row(v, world))
        case = _embedding(_shard_edges(v, world), v, d, kwargs, dtype, index, device)
        what = (
            f"ids at every shard edge of V = {v:,}, D = {d:,} over {world} ranks "
            f"({dtype_name(dtype)})"
        )
        yield Boundary("at size", None, what, case)
