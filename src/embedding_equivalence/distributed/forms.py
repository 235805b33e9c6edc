"""Sharded embeddings: the table split over the ranks of a process group, as a DTensor.

With ``W`` split into row blocks ``W_r`` (rank ``r`` holds rows ``[start_r, start_r + n_r)``)
and the one-hot split into the matching column blocks,

``one_hot(ids) @ W = sum_r one_hot_r(ids) @ W_r``

so a vocab-parallel embedding is a local lookup of the rows a rank owns (zeros for the ids it
does not own) followed by an all-reduce. With ``W`` split into column blocks
``W[:, cols_r]``, the output's columns are ``one_hot(ids) @ W[:, cols_r]``: a dim-parallel
embedding is a local lookup followed by an all-gather along ``D``.

The collectives are autograd functions named, as in Megatron-LM, by what they do forward and
backward. The input ids and the upstream gradient are the same on every rank, so:

- the all-reduce's backward is the identity: ``out = sum_r y_r`` gives ``dL/dy_r = dL/dout``,
  the full upstream gradient on every rank (differentiating *through* an all-reduce would sum
  the ranks' equal gradients and multiply the result by the world size);
- the all-gather's backward keeps the rank's own columns of the upstream gradient.

Every option keeps its global meaning: ``padding_idx`` names a global row (a gradient rule on
the rank that owns it), ``scale_grad_by_freq`` counts over the whole input (every occurrence of
an id lies on the rank that owns it), and ``max_norm`` under dim sharding measures the whole
row's norm, reduced over the ranks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Shard

from ..forms.renorm import (
    grad_row_scale,
    position_counts,
    renorm_rows_,
    scale_rows_,
    stop_padding_grad,
)
from ..forms.validation import check_embedding_args, check_ids_in_range


def shard_range(size: int, world_size: int, rank: int) -> tuple[int, int]:
    """The ``[start, stop)`` of a dimension of ``size`` that ``rank`` holds under torch's chunking.

    ``Shard(dim)`` follows `torch.chunk`: every rank but the last ones holds
    ``ceil(size / world_size)`` entries, and trailing ranks may hold fewer or none (``V = 4``
    over 3 ranks is 2, 2, 0).

    Args:
        size: the dimension's global size.
        world_size: the number of ranks.
        rank: the rank.

    Returns:
        ``(start, stop)`` with ``stop - start`` the rank's share (possibly 0).
    """
    chunk = math.ceil(size / world_size) if size else 0
    start = min(rank * chunk, size)
    return start, min(start + chunk, size)


class AllReduceForwardIdentityBackward(torch.autograd.Function):
    """All-reduce (sum) over the group in the forward pass; the identity in the backward pass.

    The backward is the identity because the upstream gradient is the same on every rank: each
    rank's partial result contributes to the sum with coefficient 1.
    """

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Sum ``partial`` over the ranks of ``group``."""
        total = partial.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        return total

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Pass the upstream gradient through unchanged."""
        return grad_outputs[0], None


class AllGatherForwardSplitBackward(torch.autograd.Function):
    """All-gather along the last dimension forward; keep the rank's own columns backward.

    Ranks may hold different numbers of columns (torch's chunking): each rank's block is padded
    to the largest before the gather and trimmed after it.
    """

    @staticmethod
    def forward(ctx: Any, local: torch.Tensor, group: dist.ProcessGroup, size: int) -> torch.Tensor:
        """Concatenate every rank's ``(..., D_r)`` block into ``(..., size)``."""
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        ranges = [shard_range(size, world, r) for r in range(world)]
        width = max(stop - start for start, stop in ranges)
        padded = F.pad(local, (0, width - local.shape[-1]))  # zeros on the right
        blocks = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(blocks, padded.contiguous(), group=group)
        ctx.columns = ranges[rank]
        pieces = [b[..., : stop - start] for b, (start, stop) in zip(blocks, ranges, strict=True)]
        return torch.cat(pieces, dim=-1)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """The rank's own columns of the upstream gradient."""
        start, stop = ctx.columns
        return grad_outputs[0][..., start:stop].contiguous(), None, None


def _check_call(
    input: torch.Tensor,
    weight: Any,
    options: tuple[int | None, float | None, float],
    dim: int,
    fn: str,
) -> tuple[int | None, torch.Tensor, torch.Tensor, dist.ProcessGroup, int, int]:
    """The checks of every sharded form, in the order of the unsharded ones.

    First that ``weight`` is a DTensor sharded on ``dim`` over a 1-D mesh, then the checks of
    the unsharded forms.

    Returns:
        ``(padding row, flat ids, shard, group, world_size, rank)``: ``shard`` is the rank's
        block outside autograd (for the in-place renorm); ``weight.to_local()`` is its
        differentiable view.
    """
    padding_idx, max_norm, norm_type = options
    want = f"distribute_tensor(weight, mesh, [Shard({dim})])"
    if not isinstance(weight, DTensor):
        raise TypeError(
            f"{fn}: weight must be a DTensor sharded with Shard({dim}) over a 1-D device mesh, "
            f"got {type(weight).__name__}; build it with {want}"
        )
    mesh = weight.device_mesh
    if mesh.ndim != 1:
        raise ValueError(f"{fn}: weight's device mesh must be 1-D, got {mesh.ndim}-D; use {want}")
    if tuple(weight.placements) != (Shard(dim),):
        raise ValueError(
            f"{fn}: weight must be sharded with Shard({dim}), got placements "
            f"{tuple(weight.placements)}; call {fn} with {want}"
        )
    group = mesh.get_group()
    with torch.no_grad():  # the shard itself, for max_norm's in-place renorm
        local = weight.to_local()
    # A stand-in with the global table's shape, dtype and device but no values (a stride-0
    # view of one element), so that the checks and messages are those of the unsharded forms.
    table = local.new_empty((1, 1)).expand(weight.shape)
    padding = check_embedding_args(input, table, padding_idx, max_norm, norm_type, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    flat = input.reshape(-1).long()
    return padding, flat, local, group, dist.get_world_size(group), dist.get_rank(group)


def _scaled_by_freq(
    rows: torch.Tensor, flat: torch.Tensor, vocab: int, scale_grad_by_freq: bool
) -> torch.Tensor:
    """``rows`` whose gradient is divided by each position's id count, with the option on.

    Dividing each term before a row's terms are summed, as ``F.embedding`` does: the row's
    sum may overflow where the divided terms do not (two float16 gradients of 49,152).
    """
    if not scale_grad_by_freq:
        return rows
    return stop_padding_grad(rows, flat, None, position_counts(flat, vocab))


def _vocab_parallel(
    input: torch.Tensor,
    weight: DTensor,
    options: tuple[int | None, float | None, float, bool],
    fn: str,
    *,
    matmul: bool,
) -> torch.Tensor:
    """Masked local lookup (or block one-hot product) of the owned rows, then an all-reduce."""
    _, max_norm, norm_type, scale_grad_by_freq = options
    padding, flat, local, group, world, rank = _check_call(input, weight, options[:3], 0, fn)
    start, stop = shard_range(weight.shape[0], world, rank)
    owned = (flat >= start) & (flat < stop)
    local_ids = flat[owned] - start
    if max_norm is not None:
        renorm_rows_(local, local_ids, max_norm, norm_type)  # whole rows live on one rank
    local = weight.to_local()  # differentiable: its gradient is weight.grad's shard
    own_padding = padding - start if padding is not None and start <= padding < stop else None
    w = grad_row_scale(local, local_ids, own_padding, False)
    if matmul or stop == start:  # a rank without rows contributes zeros, still connected
        # The block one-hot, (N, rows of the shard): only the matmul form pays for it.
        one_hot = torch.zeros((flat.shape[0], stop - start), dtype=local.dtype, device=local.device)
        one_hot[owned.nonzero().reshape(-1), local_ids] = 1
        partial = one_hot @ w
    else:
        rows = F.embedding(torch.where(owned, flat - start, 0), w)
        # where, not a product: an unowned position is an exact zero even if row 0 is inf.
        partial = torch.where(owned[:, None], rows, torch.zeros_like(rows))
    # scale_grad_by_freq divides each position's gradient by its id's count in the whole
    # input (the same on every rank) before the rows sum them, as F.embedding does.
    partial = _scaled_by_freq(partial, flat, weight.shape[0], scale_grad_by_freq)
    out = AllReduceForwardIdentityBackward.apply(partial, group)
    return out.reshape(*input.shape, weight.shape[1])


def vocab_parallel_embedding(
    input: torch.Tensor,
    weight: DTensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Vocab-parallel embedding: a masked local lookup on each rank, then an all-reduce.

    Rank ``r`` holds rows ``[start_r, stop_r)`` of the table (torch's chunking,
    [`shard_range`][]). It looks up the ids it owns, puts exact zeros where it does not, and
    the all-reduce sums the ranks' partial results (forward); the backward is the identity, so
    each rank's rows receive exactly the gradient of the unsharded lookup.

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, each in ``[0, V)``, the same on
            every rank (a plain tensor).
        weight: the ``(V, D)`` table as a DTensor with ``Shard(0)`` over a 1-D device mesh.
        padding_idx: a **global** row that receives no gradient; negative counts from the end.
        max_norm: if given, every referenced row whose ``norm_type``-norm exceeds it is
            rescaled in place, on the rank that owns it.
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide each row's gradient by its id's frequency in the whole
            input.

    Returns:
        ``(*batch, D)`` plain tensor, the same on every rank.

    Raises:
        TypeError: ``weight`` is not a DTensor, or as
            [`lookup_embedding`][embedding_equivalence.lookup_embedding].
        ValueError: ``weight`` is not ``Shard(0)`` over a 1-D mesh, or as the unsharded forms.
        IndexError: an id outside ``[0, V)``.
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    return _vocab_parallel(input, weight, options, "vocab_parallel_embedding", matmul=False)


def vocab_parallel_matmul_embedding(
    input: torch.Tensor,
    weight: DTensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Vocab-parallel matmul embedding: ``sum_r one_hot_r(input) @ W_r`` by an all-reduce.

    Each rank multiplies the columns of the one-hot that match its rows by its block of the
    table; the all-reduce sums the blocks (forward) and passes the gradient through unchanged
    (backward). Same arguments, options and errors as [`vocab_parallel_embedding`][]; like
    [`matmul_embedding`][embedding_equivalence.matmul_embedding], a non-finite entry of a rank's
    block poisons that rank's other outputs (``0 * inf = nan``).

    Args:
        input: ids, the same on every rank.
        weight: ``(V, D)`` DTensor with ``Shard(0)``.
        padding_idx: a global row that receives no gradient.
        max_norm: renorm threshold for the referenced rows.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: divide each row's gradient by its global frequency.

    Returns:
        ``(*batch, D)`` plain tensor, the same on every rank.
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    return _vocab_parallel(input, weight, options, "vocab_parallel_matmul_embedding", matmul=True)


def partial_norms(rows: torch.Tensor, norm_type: float) -> torch.Tensor:
    """Each row's ``norm_type``-norm over this rank's columns, in float64; 0 without columns.

    ``vector_norm`` refuses the inf-norm of an empty dimension (no identity for ``max``), but
    a rank that holds no columns (``D`` smaller than the world size) contributes nothing.
    """
    if rows.shape[1] == 0:
        return rows.new_zeros(rows.shape[0], dtype=torch.float64)
    return torch.linalg.vector_norm(rows.double(), norm_type, dim=1)


def _renorm_whole_rows_(
    local: torch.Tensor,
    flat: torch.Tensor,
    max_norm: float,
    norm_type: float,
    group: dist.ProcessGroup,
) -> None:
    """``max_norm`` on a column block: each referenced row's norm is reduced over the ranks."""
    unique = torch.unique(flat)
    with torch.no_grad():
        part = partial_norms(local[unique], norm_type)
        inf = math.isinf(norm_type)
        norms = part if inf else part.pow(norm_type)
        dist.all_reduce(norms, op=dist.ReduceOp.MAX if inf else dist.ReduceOp.SUM, group=group)
        if not inf:
            norms = norms.pow(1.0 / norm_type)
    scale_rows_(local, unique, norms, max_norm)


def dim_parallel_embedding(
    input: torch.Tensor,
    weight: DTensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Dim-parallel embedding: a lookup of each rank's columns, then an all-gather along ``D``.

    Rank ``r`` holds columns ``[start_r, stop_r)`` of every row (possibly none when ``D`` is
    smaller than the world size). The all-gather concatenates the ranks' columns (forward);
    its backward keeps each rank's own columns of the upstream gradient. ``max_norm`` needs
    the norm of the whole row: each rank's partial ``sum |w|^p`` (or max, for ``p = inf``) is
    all-reduced before the referenced rows are rescaled in place.

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, the same on every rank.
        weight: the ``(V, D)`` table as a DTensor with ``Shard(1)`` over a 1-D device mesh.
        padding_idx: row that receives no gradient; negative counts from the end.
        max_norm: renorm threshold, measured on the whole row.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: divide each row's gradient by its id's frequency.

    Returns:
        ``(*batch, D)`` plain tensor, the same on every rank.

    Raises:
        TypeError: ``weight`` is not a DTensor, or as
            [`lookup_embedding`][embedding_equivalence.lookup_embedding].
        ValueError: ``weight`` is not ``Shard(1)`` over a 1-D mesh, or as the unsharded forms.
        IndexError: an id outside ``[0, V)``.
    """
    padding, flat, local, group, _, _ = _check_call(
        input, weight, (padding_idx, max_norm, norm_type), 1, "dim_parallel_embedding"
    )
    if max_norm is not None and flat.numel():
        _renorm_whole_rows_(local, flat, max_norm, norm_type, group)
    local = weight.to_local()  # differentiable: its gradient is weight.grad's shard
    w = grad_row_scale(local, flat, padding, False)
    rows = w[flat] if local.shape[1] == 0 else F.embedding(flat, w)
    rows = _scaled_by_freq(rows, flat, weight.shape[0], scale_grad_by_freq)
    out = AllGatherForwardSplitBackward.apply(rows, group, weight.shape[1])
    return out.reshape(*input.shape, weight.shape[1])


#: The package's sharded forms and the sharding each takes: what the CLI, the tests and the
#: docs list.
SHARDED_FORMS: tuple[tuple[str, Callable[..., torch.Tensor], str], ...] = (
    ("vocab_parallel_embedding", vocab_parallel_embedding, "vocab"),
    ("vocab_parallel_matmul_embedding", vocab_parallel_matmul_embedding, "vocab"),
    ("dim_parallel_embedding", dim_parallel_embedding, "dim"),
)
