"""A catalogue of buggy sharded embedding kernels that ``verify_sharded_embedding`` must reject.

Every mutant is one of two hand-written, Megatron-style kernels with exactly one realistic bug
planted through its ``bug`` argument: :func:`hand_written_vocab_parallel` (a masked local
lookup of the rows a rank owns, then an all-reduce) and :func:`hand_written_dim_parallel` (a
lookup of the rank's columns, then an all-gather). Apart from that bug the kernels are
correct: they refuse bad input with the package's own checks, honour every option, and pass
``verify_sharded_embedding`` with every option (``tests/test_distributed.py`` checks that
control). So each mutant is caught by the check aimed at its bug.

The workers import the mutants by name, so each is a function at the top level of this
module (a ``functools.partial`` could not be imported). Nothing here uses a global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from embedding_equivalence.distributed.forms import (
    AllGatherForwardSplitBackward,
    AllReduceForwardIdentityBackward,
    partial_norms,
    shard_range,
)
from embedding_equivalence.forms.renorm import (
    grad_row_scale,
    position_counts,
    renorm_rows_,
    scale_rows_,
    stop_padding_grad,
)
from embedding_equivalence.forms.validation import check_embedding_args, check_ids_in_range

__all__ = [
    "SHARDED_LARGE_MUTANTS",
    "SHARDED_MUTANTS",
    "ShardedMutant",
    "hand_written_dim_parallel",
    "hand_written_vocab_parallel",
]


@dataclass(frozen=True)
class ShardedMutant:
    """A buggy sharded kernel and what ``verify_sharded_embedding`` must exercise to catch it.

    Attributes:
        name: short id, used as the pytest id.
        fn: the kernel (a top-level function of this module).
        sharding: ``"vocab"`` or ``"dim"``.
        options: the options that make the bug reachable.
        symptom: a regex that the minimal failure must match.
    """

    name: str
    fn: Callable[..., torch.Tensor]
    sharding: str
    options: tuple[str, ...]
    symptom: str


def _checked(
    input: torch.Tensor, weight: DTensor, padding_idx: int | None, max_norm: float | None,
    norm_type: float, fn: str,
) -> tuple[int | None, torch.Tensor, dist.ProcessGroup, int, int]:  # fmt: skip
    stand_in = torch.empty((1, 1), dtype=weight.dtype).expand(weight.shape)
    padding = check_embedding_args(input, stand_in, padding_idx, max_norm, norm_type, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    group = weight.device_mesh.get_group()
    return (
        padding,
        input.reshape(-1).long(),
        group,
        dist.get_world_size(group),
        dist.get_rank(group),
    )


def _scaled_by_freq(
    rows: torch.Tensor, flat: torch.Tensor, vocab: int, scale_grad_by_freq: bool
) -> torch.Tensor:
    """Each position's gradient divided by its id's count before a row's terms are summed."""
    if not scale_grad_by_freq:
        return rows
    return stop_padding_grad(rows, flat, None, position_counts(flat, vocab))


def hand_written_vocab_parallel(
    input: torch.Tensor,
    weight: DTensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    *,
    bug: str | None = None,
) -> torch.Tensor:
    """Vocab-parallel lookup as Megatron-LM writes it, with the bug named by ``bug``."""
    padding, flat, group, world, rank = _checked(
        input, weight, padding_idx, max_norm, norm_type, "hand_written_vocab_parallel"
    )
    vocab = weight.shape[0]
    chunk = vocab // world if bug == "floor_chunking" else math.ceil(vocab / world)
    start = min(rank * chunk, vocab)
    stop = vocab if bug == "floor_chunking" and rank == world - 1 else min(start + chunk, vocab)
    if bug == "large_shard_ends_one_row_early" and stop - start > BLOCK_ROWS and stop < vocab:
        stop -= 1  # the blocked path's inclusive end taken for an exclusive one (not at V)
    if bug == "offset_from_own_shard_size":  # every share taken to be as large as this one
        rows = weight.to_local().shape[0]
        start, stop = rank * rows, rank * rows + rows
    if bug == "mask_includes_next_shards_first_row":
        owned = (flat >= start) & (flat <= stop)
    else:
        owned = (flat >= start) & (flat < stop)
    with torch.no_grad():
        shard = weight.to_local()
    rows_here = shard.shape[0]
    offset = 0 if bug == "offset_forgotten" else start
    # A defensive clamp, as many kernels have: a wrong mask or offset reads a wrong row
    # instead of failing.
    local_ids = torch.where(owned, flat - offset, 0).clamp(0, max(rows_here - 1, 0))
    if max_norm is not None:
        renorm_rows_(shard, local_ids[owned], max_norm, norm_type)
    local = weight.to_local()
    if bug == "padding_idx_as_local_row":
        own_padding = padding if padding is not None and padding < rows_here else None
    else:
        own_padding = padding - start if padding is not None and start <= padding < stop else None
    n, d = flat.shape[0], local.shape[1]
    if rows_here == 0 and bug != "empty_shard_not_handled":
        partial = local.new_zeros((n, 0)) @ local
    elif bug == "frequency_counts_masked_ids":
        rows = F.embedding(local_ids, local, own_padding, scale_grad_by_freq=scale_grad_by_freq)
        partial = torch.where(owned[:, None], rows, torch.zeros_like(rows))
    else:
        w = grad_row_scale(local, local_ids[owned], own_padding, False)
        rows = F.embedding(local_ids, w)
        partial = torch.where(owned[:, None], rows, torch.zeros_like(rows))
        partial = _scaled_by_freq(partial, flat, vocab, scale_grad_by_freq)
    if bug == "subnormals_flushed":  # a reduction that flushes subnormals to zero (FTZ)
        partial = torch.where(partial.abs() < torch.finfo(partial.dtype).tiny, 0.0, partial)
    if bug == "all_reduce_missing":
        out = partial
    elif bug == "all_reduce_differentiated":
        out = dist_fn.all_reduce(partial, group=group)  # its backward all-reduces the gradient
    else:
        out = AllReduceForwardIdentityBackward.apply(partial, group)
    return out.reshape(*input.shape, d)


def _widths(size: int, world: int) -> list[int]:
    return [stop - start for start, stop in (shard_range(size, world, r) for r in range(world))]


def hand_written_dim_parallel(
    input: torch.Tensor,
    weight: DTensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    *,
    bug: str | None = None,
) -> torch.Tensor:
    """Dim-parallel lookup of the rank's columns and an all-gather, with the bug ``bug``."""
    padding, flat, group, world, _ = _checked(
        input, weight, padding_idx, max_norm, norm_type, "hand_written_dim_parallel"
    )
    dim = weight.shape[1]
    with torch.no_grad():
        shard = weight.to_local()
    if max_norm is not None and flat.numel():
        unique = torch.unique(flat)
        part = partial_norms(shard[unique], norm_type)
        if bug == "max_norm_of_local_columns":
            norms = part
        elif math.isinf(norm_type):
            dist.all_reduce(part, op=dist.ReduceOp.MAX, group=group)
            norms = part
        else:
            powered = part.pow(norm_type)
            dist.all_reduce(powered, group=group)
            norms = powered.pow(1.0 / norm_type)
        scale_rows_(shard, unique, norms, max_norm)
    local = weight.to_local()
    w = grad_row_scale(local, flat, padding, False)
    rows = _scaled_by_freq(w[flat], flat, weight.shape[0], scale_grad_by_freq)
    if bug == "all_gather_backward_sums_ranks":
        if local.shape[1] != math.ceil(dim / world) or dim % world:
            # torch.distributed.nn's all_gather needs equal blocks: pad as the kernel would.
            width = math.ceil(dim / world)
            rows = torch.cat([rows, rows.new_zeros(rows.shape[0], width - rows.shape[1])], 1)
        blocks = dist_fn.all_gather(rows, group=group)  # backward: all-to-all, then a sum
        out = torch.cat([b[:, :k] for b, k in zip(blocks, _widths(dim, world), strict=True)], 1)
    elif bug == "all_gather_in_reverse_rank_order":
        gathered = AllGatherForwardSplitBackward.apply(rows, group, dim)
        out = torch.cat(list(reversed(torch.split(gathered, _widths(dim, world), dim=1))), 1)
    else:
        out = AllGatherForwardSplitBackward.apply(rows, group, dim)
    return out.reshape(*input.shape, dim)


def _mutant(
    kernel: Callable[..., torch.Tensor], bug: str | None, name: str, doc: str
) -> Callable[..., torch.Tensor]:
    """``kernel`` with ``bug`` planted, named so that the workers can import it as ``name``."""

    def mutant(input: torch.Tensor, weight: DTensor, **options: Any) -> torch.Tensor:
        return kernel(input, weight, bug=bug, **options)

    mutant.__name__ = mutant.__qualname__ = name
    mutant.__doc__ = doc
    return mutant


correct_vocab_parallel = _mutant(
    hand_written_vocab_parallel, None, "correct_vocab_parallel", "The control: no bug."
)
correct_dim_parallel = _mutant(
    hand_written_dim_parallel, None, "correct_dim_parallel", "The control: no bug."
)
floor_chunking = _mutant(
    hand_written_vocab_parallel,
    "floor_chunking",
    "floor_chunking",
    "Rows split by ``V // world`` (the last rank taking the rest), not torch's ceil.",
)
mask_includes_next_shards_first_row = _mutant(
    hand_written_vocab_parallel,
    "mask_includes_next_shards_first_row",
    "mask_includes_next_shards_first_row",
    "``id <= stop`` instead of ``id < stop``: the next shard's first id is read here too.",
)
offset_forgotten = _mutant(
    hand_written_vocab_parallel,
    "offset_forgotten",
    "offset_forgotten",
    "Global ids index the local shard: ranks other than 0 read the wrong rows.",
)
offset_from_own_shard_size = _mutant(
    hand_written_vocab_parallel,
    "offset_from_own_shard_size",
    "offset_from_own_shard_size",
    "The first row of a rank taken as ``rank * rows_here``: wrong on a last rank with fewer rows "
    "(``V`` not a multiple of the world), right on full and empty shards.",
)
empty_shard_not_handled = _mutant(
    hand_written_vocab_parallel,
    "empty_shard_not_handled",
    "empty_shard_not_handled",
    "A rank whose shard is empty (torch's ceil chunking leaves the trailing ranks none when "
    "V is small) still clamps and looks up its ids in its empty table, and raises.",
)
all_reduce_missing = _mutant(
    hand_written_vocab_parallel,
    "all_reduce_missing",
    "all_reduce_missing",
    "Each rank returns its partial result: zeros for the ids that other ranks own.",
)
all_reduce_differentiated = _mutant(
    hand_written_vocab_parallel,
    "all_reduce_differentiated",
    "all_reduce_differentiated",
    "The differentiable all-reduce of ``torch.distributed.nn``: the gradient times the world.",
)
padding_idx_as_local_row = _mutant(
    hand_written_vocab_parallel,
    "padding_idx_as_local_row",
    "padding_idx_as_local_row",
    "``padding_idx`` passed to every rank's local lookup: each rank zeroes its own row p.",
)
frequency_counts_masked_ids = _mutant(
    hand_written_vocab_parallel,
    "frequency_counts_masked_ids",
    "frequency_counts_masked_ids",
    "``F.embedding(scale_grad_by_freq=True)`` on masked ids counts each unowned id as row 0.",
)
subnormals_flushed = _mutant(
    hand_written_vocab_parallel,
    "subnormals_flushed",
    "subnormals_flushed",
    "Each rank's partial result flushed to zero below the dtype's smallest normal number before "
    "the all-reduce (a reduction compiled with flush-to-zero): right on every drawn value, "
    "wrong on a subnormal table entry.",
)
max_norm_of_local_columns = _mutant(
    hand_written_dim_parallel,
    "max_norm_of_local_columns",
    "max_norm_of_local_columns",
    "``max_norm`` measured on the rank's columns instead of the whole row.",
)
all_gather_backward_sums_ranks = _mutant(
    hand_written_dim_parallel,
    "all_gather_backward_sums_ranks",
    "all_gather_backward_sums_ranks",
    "``torch.distributed.nn``'s all-gather: its backward sums the ranks' equal gradients.",
)
all_gather_in_reverse_rank_order = _mutant(
    hand_written_dim_parallel, "all_gather_in_reverse_rank_order",
    "all_gather_in_reverse_rank_order", "The gathered column blocks concatenated last rank first.",
)  # fmt: skip

_OUT = r"^out\[[\d, ]*\] = .*, but the exact value is"
_GRAD = r"^weight\.grad\[[\d, ]*\] = .*, but the exact value is"
_RENORM = r"^weight \(after max_norm\)\["

#: The catalogue, with the options each bug needs and the symptom its minimal failure shows.
SHARDED_MUTANTS: tuple[ShardedMutant, ...] = tuple(
    ShardedMutant(fn.__name__, fn, sharding, options, symptom)
    for fn, sharding, options, symptom in [
        (floor_chunking, "vocab", (), _OUT),
        (mask_includes_next_shards_first_row, "vocab", (), _OUT),
        (offset_forgotten, "vocab", (), _OUT),
        (empty_shard_not_handled, "vocab", (), r"on rank 1 raised (IndexError|RuntimeError)"),
        (offset_from_own_shard_size, "vocab", (), _OUT),
        (all_reduce_missing, "vocab", (), _OUT),
        (all_reduce_differentiated, "vocab", (), _GRAD),
        (padding_idx_as_local_row, "vocab", ("padding_idx",), _GRAD),
        (frequency_counts_masked_ids, "vocab", ("scale_grad_by_freq",), _GRAD),
        (subnormals_flushed, "vocab", (), _OUT),
        (max_norm_of_local_columns, "dim", ("max_norm",), _RENORM),
        (all_gather_backward_sums_ranks, "dim", (), _GRAD),
        (all_gather_in_reverse_rank_order, "dim", (), _OUT),
    ]
)


# --- a bug that lives only at size --------------------------------------------------------------

#: A table of 2**17 + 2 rows of 32 columns (2**22 + 64 elements: built shard by shard), whose
#: shards over 2 ranks hold 65,537 rows: past the blocked path's threshold below.
EDGE_V, EDGE_D = 2**17 + 2, 32
BLOCK_ROWS = 1 << 16


blocked_vocab_parallel = _mutant(
    hand_written_vocab_parallel,
    "large_shard_ends_one_row_early",
    "blocked_vocab_parallel",
    "A vocab-parallel lookup whose path for shards of more than 2**16 rows ends one row early: "
    "it takes the end of its last block, ``stop - 1`` (inclusive), for an exclusive bound, except "
    "on the last rank, where it is clamped to ``V``, so the last row of every other rank's large "
    "shard reads zeros. Small shards, and the last rank, are right.",
)


#: Mutants wrong only at sizes of their own: each is caught at ``vocab_sizes=EDGE_V,
#: embedding_dims=EDGE_D`` (the boundary phase puts ids at every shard edge), never at the
#: drawn sizes. ``benchmarks/catch_rates.py --large`` measures them.
SHARDED_LARGE_MUTANTS: tuple[ShardedMutant, ...] = (
    ShardedMutant("blocked_vocab_parallel", blocked_vocab_parallel, "vocab", (), _OUT),
)
