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

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from embedding_equivalence.forms.renorm import grad_row_scale
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
    """Column-wise maximum of ``rows`` whose backward sends the gradient to *every* entry equal
    to the maximum (a mask ``rows == max``), instead of to one of them."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor) -> torch.Tensor:
        top = rows.max(dim=0).values
        ctx.save_for_backward(rows, top)
        return top

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> torch.Tensor:
        rows, top = ctx.saved_tensors
        (grad,) = grads
        return (rows == top).to(grad.dtype) * grad


def _bounds(
    input: torch.Tensor,
    offsets: torch.Tensor | None,
    include_last_offset: bool,
    bug: str | None,
) -> tuple[list[int], list[int]]:
    """Start and end (exclusive) of each bag in the flat ids."""
    if input.dim() == 2:
        count, length = input.shape
        starts = [b * length for b in range(count)]
        return starts, [s + length for s in starts]
    assert offsets is not None
    offs = [int(o) for o in offsets.tolist()]
    end = input.shape[0]
    if include_last_offset and bug != "include_last_offset_ignored":
        offs, end = offs[:-1], offs[-1]
        if bug == "ids_after_the_end_join_the_last_bag":
            end = input.shape[0]
    if not offs:
        return [], []
    ends = [*offs[1:], end]
    if bug == "offsets_read_as_inclusive_ends":
        # bag b = input[offsets[b] : offsets[b + 1] - 1]: the CSR end taken as inclusive.
        ends = [max(s, e - 1) for s, e in itertools.pairwise(offs)] + [end]
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
    """A plain bag-by-bag ``F.embedding_bag``: a gather and a reduction per bag.

    With ``bug=None`` it is correct (it passes ``verify_embedding_bag`` with every option);
    each mutant of :data:`BAG_MUTANTS` names the one bug it plants.
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
    psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    if bug == "per_sample_weights_detached" and psw is not None:
        psw = psw.detach()
    starts, ends = _bounds(input, offsets, include_last_offset, bug)
    if max_norm is not None:
        with torch.no_grad():
            torch.embedding_renorm_(weight, flat.contiguous(), max_norm, norm_type)
    in_bags = flat[: ends[-1]] if ends else flat[:0]
    w = weight
    if scale_grad_by_freq and bug != "scale_grad_by_freq_per_bag":
        w = grad_row_scale(weight, in_bags, None, True)
    dim = weight.shape[1]
    # One gather for every id (a single sparse gradient), then a reduction per bag.
    gathered = F.embedding(flat, w, sparse=sparse)
    outs = []
    for start, end in zip(starts, ends, strict=True):
        ids = flat[start:end]
        rows = gathered[start:end]
        coef = None if psw is None else psw[start:end]
        if scale_grad_by_freq and bug == "scale_grad_by_freq_per_bag":
            rows = F.embedding(ids, grad_row_scale(weight, ids, None, True))  # this bag only
        if padding is not None and not (bug == "padding_kept_in_max" and mode == "max"):
            keep = ids != padding
            count = int(keep.sum()) if bug != "mean_counts_padding" else ids.shape[0]
            rows = rows[keep]
            coef = None if coef is None else coef[keep]
        else:
            count = ids.shape[0]
        if coef is not None and bug != "per_sample_weights_ignored":
            rows = rows * coef[:, None]
        if mode == "sum" or (mode == "mean" and bug == "sum_instead_of_mean"):
            out = rows.sum(dim=0)
        elif mode == "mean":
            divisor = count if bug == "empty_bag_is_nan" else max(count, 1)
            out = rows.sum(dim=0) / divisor
        elif rows.shape[0] == 0:
            out = rows.sum(dim=0)  # zeros, still connected to the weight
        elif bug == "max_gradient_to_every_tie":
            out = _MaxToEveryTie.apply(rows)
        else:
            out = rows.max(dim=0).values
        outs.append(out)
    if not outs:
        return gathered[:0].reshape(0, dim)
    return torch.stack(outs)


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
]

BAG_MUTANTS: list[BagMutant] = [
    BagMutant(name, _mutant(name, doc), options, doc) for name, options, doc in _CATALOGUE
]
