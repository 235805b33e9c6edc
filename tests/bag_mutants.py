"""A catalogue of buggy EmbeddingBag kernels that :func:`verify_embedding_bag` must reject.

Every mutant has ``F.embedding_bag``'s signature and is the same hand-written kernel,
:func:`hand_written_bag`, with exactly one realistic bug planted through its ``bug`` argument:
the kind a segment-reduction kernel, a Triton port or a "vectorised" rewrite of an input
pipeline really ships with. Apart from that bug the kernel is correct: it refuses bad input
with the package's own checks, honours every option, and passes ``verify_embedding_bag`` with
every option (``tests/test_bag_mutants.py`` checks that control). So each mutant is caught by
the check aimed at its bug, not by an unrelated defect of the kernel.

:data:`BAG_MUTANTS` lists them with the options that must be exercised for the bug to be
reachable. Nothing here uses a global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from embedding_equivalence.forms.renorm import GradRowScale, grad_row_scale
from embedding_equivalence.forms.validation import (
    check_bag_sparse,
    check_embedding_args,
    check_embedding_bag_args,
    check_ids_in_range,
)

__all__ = ["BAG_MUTANTS", "BagMutant", "hand_written_bag"]


@dataclass(frozen=True)
class BagMutant:
    """A buggy bag kernel and what ``verify_embedding_bag`` must exercise to catch it.

    Attributes:
        name: short id, used as the pytest id; also the ``bug`` of :func:`hand_written_bag`.
        fn: the kernel, with ``F.embedding_bag``'s signature.
        options: the ``verify_embedding_bag`` options that make the bug reachable.
        doc: the bug, in one sentence.
    """

    name: str
    fn: Callable[..., torch.Tensor]
    options: tuple[str, ...]
    doc: str


class _MaxToEveryTie(torch.autograd.Function):
    """Per-bag column maxima of ``rows`` whose backward sends the gradient to *every* entry
    equal to its bag's maximum (a mask ``rows == max``), instead of to one of them."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, bag: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(rows, bag, top)
        return top.clone()

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        rows, bag, top = ctx.saved_tensors
        (grad,) = grads
        return (rows == top[bag]).to(grad.dtype) * grad[bag], None, None


#: Ids a program reduces at a time in :func:`hand_written_bag` (one block of a long bag).
_IDS_PER_BLOCK = 128
#: Bags per program of :func:`hand_written_bag`'s launch grid.
_BAGS_PER_PROGRAM = 64


def _bounds(
    input: torch.Tensor,
    offsets: torch.Tensor | None,
    include_last_offset: bool,
    bug: str | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Start and end (exclusive) of each bag in the flat ids, as int64 tensors."""
    device = input.device
    if input.dim() == 2:
        count, length = input.shape
        starts = torch.arange(count, device=device) * length
        return starts, starts + length
    assert offsets is not None
    offs = offsets.long()
    end = torch.tensor([input.shape[0]], device=device)
    if include_last_offset and bug != "include_last_offset_ignored":
        offs, end = offs[:-1], offs[-1:]
        if bug == "ids_after_the_end_join_the_last_bag":
            end = torch.tensor([input.shape[0]], device=device)
    if offs.numel() == 0:
        return offs, offs
    ends = torch.cat([offs[1:], end])
    if bug == "offsets_read_as_inclusive_ends":
        # bag b = input[offsets[b] : offsets[b + 1] - 1]: the CSR end taken as inclusive.
        ends[:-1] = torch.maximum(offs[:-1], ends[:-1] - 1)
    return offs, ends


def hand_written_bag(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
    *,
    bug: str | None = None,
) -> torch.Tensor:
    """``F.embedding_bag`` as a segment-reduction kernel: one gather, then per-bag reductions.

    Every id is assigned to its bag (a search in the bag starts); the programs of the launch
    grid each reduce a block of bags, a long bag a block of ids at a time. With ``bug=None``
    it is correct (it passes ``verify_embedding_bag`` with every option); each mutant of
    :data:`BAG_MUTANTS` names the one bug it plants.
    """
    fn = "hand_written_bag"
    padding = check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    check_embedding_bag_args(
        input, weight, offsets, mode, per_sample_weights, include_last_offset,
        scale_grad_by_freq, fn,
    )  # fmt: skip
    check_bag_sparse(sparse, mode, scale_grad_by_freq, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    flat = input.reshape(-1).long()
    n, dim = flat.shape[0], weight.shape[1]
    psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    if bug == "per_sample_weights_detached" and psw is not None:
        psw = psw.detach()
    starts, ends = _bounds(input, offsets, include_last_offset, bug)
    num_bags = starts.shape[0]
    if max_norm is not None:
        with torch.no_grad():
            torch.embedding_renorm_(weight, flat.contiguous(), max_norm, norm_type)
    # The bag of every position (the last bag starting at or before it) and whether the
    # position lies inside it (ids after the end of the last bag belong to no bag).
    positions = torch.arange(n, device=flat.device)
    bag = (torch.searchsorted(starts, positions, right=True) - 1).clamp(min=0)
    member = (
        (positions >= starts[bag]) & (positions < ends[bag])
        if num_bags
        else torch.zeros_like(positions, dtype=torch.bool)
    )
    in_bags = flat[member]
    w = weight
    if scale_grad_by_freq and bug != "scale_grad_by_freq_per_bag":
        w = grad_row_scale(weight, in_bags, None, True)
    # One gather for every id (a single sparse gradient), then the reductions.
    gathered = F.embedding(flat, w, sparse=sparse)
    if scale_grad_by_freq and bug == "scale_grad_by_freq_per_bag":
        # Each position's gradient divided by how often its id occurs in its own bag.
        key = bag * weight.shape[0] + flat
        _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
        gathered = GradRowScale.apply(gathered, counts[inverse].double(), None)
    keep = member
    if padding is not None and not (bug == "padding_kept_in_max" and mode == "max"):
        keep = keep & (flat != padding)
    # The ids that the reduction counts (mean's divisor), then those it reads.
    counted = member if bug == "mean_counts_padding" else keep
    counter = torch.uint8 if bug == "bag_length_in_uint8" else torch.int64
    count = torch.zeros(num_bags, dtype=counter, device=flat.device)
    count.index_add_(0, bag[counted], torch.ones_like(bag[counted], dtype=counter))
    lengths = ends - starts
    if bug == "bag_tail_block_dropped":
        # A bag longer than one block is reduced in full blocks of ids only.
        full = torch.where(lengths > _IDS_PER_BLOCK, lengths - lengths % _IDS_PER_BLOCK, lengths)
        keep = keep & (positions - starts[bag] < full[bag])
    programs = math.ceil(num_bags / _BAGS_PER_PROGRAM)
    if bug == "bag_grid_drops_partial_block" and num_bags > _BAGS_PER_PROGRAM:
        programs = num_bags // _BAGS_PER_PROGRAM  # one program per *full* block of bags
    keep = keep & (bag < programs * _BAGS_PER_PROGRAM)
    rows, into = gathered[keep], bag[keep]
    if psw is not None and bug != "per_sample_weights_ignored":
        rows = rows * psw[keep][:, None]
    if mode == "max":
        return _bag_max(rows, into, num_bags, dim, bug)
    # Sums accumulate in float32 for half dtypes, as the kernel's accumulators do.
    wide = torch.float32 if rows.dtype in (torch.float16, torch.bfloat16) else rows.dtype
    out = rows.new_zeros((num_bags, dim), dtype=wide).index_add(0, into, rows.to(wide))
    if mode == "mean" and bug != "sum_instead_of_mean":
        divisor = count.long() if bug == "empty_bag_is_nan" else count.long().clamp(min=1)
        out = out / divisor[:, None].to(torch.float64 if wide == torch.float64 else wide)
    return out.to(rows.dtype)


def _bag_max(
    rows: torch.Tensor, into: torch.Tensor, num_bags: int, dim: int, bug: str | None
) -> torch.Tensor:
    """Column-wise maximum of each bag's ``rows`` (zeros for an empty bag); the gradient goes
    to the first maximum of each bag and column."""
    index = into[:, None].expand(-1, dim)
    with torch.no_grad():
        lowest = torch.full((num_bags, dim), -math.inf, dtype=rows.dtype, device=rows.device)
        top = lowest.scatter_reduce(0, index, rows, "amax", include_self=True)
        empty = top == -math.inf
        top = top.masked_fill(empty, 0)
    if bug == "max_gradient_to_every_tie":
        out = _MaxToEveryTie.apply(rows, into, top)
        assert isinstance(out, torch.Tensor)
        return out
    k = rows.shape[0]
    with torch.no_grad():
        position = torch.arange(k, device=rows.device)[:, None].expand(-1, dim)
        candidate = torch.where(rows == top[into], position, k)
        first = torch.full((num_bags, dim), k, dtype=torch.long, device=rows.device)
        first = first.scatter_reduce(0, index, candidate, "amin", include_self=True)
    padded = torch.cat([rows, rows.new_zeros((1, dim))])  # row k: an empty bag's zeros
    return padded.gather(0, first)


def _mutant(name: str, doc: str) -> Callable[..., torch.Tensor]:
    def kernel(
        input: torch.Tensor,
        weight: torch.Tensor,
        offsets: torch.Tensor | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        per_sample_weights: torch.Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> torch.Tensor:
        return hand_written_bag(
            input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
            per_sample_weights, include_last_offset, padding_idx, bug=name,
        )  # fmt: skip

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = doc
    globals()[name] = kernel  # importable by name, so that repro snippets run
    return kernel


_CATALOGUE: list[tuple[str, tuple[str, ...], str]] = [
    (
        "mean_counts_padding",
        ("padding_idx",),
        "mean divides by the bag's length, padding ids included, instead of by its "
        "non-padding ids (the padding mask is applied to the sum but not to the count).",
    ),
    (
        "empty_bag_is_nan",
        (),
        "mean divides by the bag's size without guarding zero, so an empty bag (a user with "
        "no history, a sentence of padding) gives 0 / 0 = NaN instead of zeros.",
    ),
    (
        "offsets_read_as_inclusive_ends",
        (),
        "reads bag b as input[offsets[b] : offsets[b + 1] - 1], taking the next offset as an "
        "inclusive end: every bag but the last loses its last id.",
    ),
    (
        "include_last_offset_ignored",
        ("include_last_offset",),
        "ignores include_last_offset, so the CSR end offset opens one more (empty or "
        "trailing) bag: B + 1 rows instead of B.",
    ),
    (
        "ids_after_the_end_join_the_last_bag",
        ("include_last_offset",),
        "with include_last_offset, lets the last bag run to the end of input instead of to "
        "offsets[-1] (what torch's CPU mean does, pytorch/pytorch#52851).",
    ),
    (
        "per_sample_weights_ignored",
        ("per_sample_weights",),
        "accepts per_sample_weights and never multiplies by them (a fused kernel written for "
        "the unweighted case).",
    ),
    (
        "per_sample_weights_detached",
        ("per_sample_weights",),
        "uses per_sample_weights.detach(): the values are right, but the weights (attention "
        "scores, learned importances) never get a gradient.",
    ),
    (
        "max_gradient_to_every_tie",
        (),
        "max's backward masks rows == max and sends the gradient to every entry that attains "
        "it, so an id repeated in a bag (or two tied rows) gets it twice.",
    ),
    (
        "sum_instead_of_mean",
        (),
        "computes mode='mean' as a sum (the divide was moved to a caller that was never written).",
    ),
    (
        "padding_kept_in_max",
        ("padding_idx",),
        "leaves padding ids in max's candidates, so the padding row wins whenever it holds "
        "the largest value.",
    ),
    (
        "scale_grad_by_freq_per_bag",
        ("scale_grad_by_freq",),
        "scale_grad_by_freq divides by how often the id occurs in its own bag instead of in "
        "the whole batch.",
    ),
    (
        "bag_length_in_uint8",
        (),
        "counts mean's ids per bag in a uint8 (bags are 'short'): a bag of 256 ids is divided "
        "by 1 and one of 257 by 1 too, so mean is wrong from a bag length of 256 on.",
    ),
    (
        "bag_tail_block_dropped",
        (),
        "reduces a bag longer than 128 ids in full blocks of 128 only: the last length % 128 "
        "ids of a long bag are left out of its sum, mean and max, from a bag length of 129 on.",
    ),
    (
        "bag_grid_drops_partial_block",
        (),
        "launches count // 64 programs of 64 bags once there are more than 64 bags (cdiv "
        "meant): the bags of the last partial block come back as zeros, from 65 bags on.",
    ),
]

BAG_MUTANTS: list[BagMutant] = [
    BagMutant(name, _mutant(name, doc), options, doc) for name, options, doc in _CATALOGUE
]
