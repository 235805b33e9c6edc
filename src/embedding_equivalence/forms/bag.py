"""EmbeddingBag both ways: ``F.embedding_bag``, and a bag-count (multi-hot) matrix times the table.

A bag is a run of ids whose rows are reduced to one vector. For ``mode="sum"`` that vector is
``sum_i W[ids[i]]``, which is row ``b`` of ``M @ W`` where ``M[b, v]`` counts how often ``v``
occurs in bag ``b`` (or sums the ``per_sample_weights`` of those occurrences): the bag is
a multi-hot row, the sum of the one-hot rows of its ids. ``mode="mean"`` divides that row by
the number of ids in the bag. ``mode="max"`` takes an element-wise maximum, which is not linear
and so has no matrix form; [`matmul_embedding_bag`][] computes it as a gather followed by a
per-bag reduction.

Shared semantics of both functions (those of ``F.embedding_bag``, checked by experiment on
torch 2.13):

- Bag ``b`` holds ``input[offsets[b]:offsets[b + 1]]`` (the last bag runs to the end of
  ``input``; with ``include_last_offset=True`` to ``offsets[-1]``, and the ids after it belong
  to no bag). A 2-D input ``(B, L)`` is ``B`` bags of ``L`` ids.
- An empty bag, or one that holds only ``padding_idx``, gives a row of zeros in every mode,
  and passes no gradient: a non-finite upstream gradient of it reaches no row.
- ``padding_idx`` entries are left out of the reduction, of ``mean``'s count, of ``max``'s
  candidates and of ``per_sample_weights``; the padding row gets no gradient.
- ``max_norm`` renormalises, in place, every row referenced anywhere in ``input`` (padding ids
  and ids after the last offset included), as ``F.embedding_bag`` does.
- ``scale_grad_by_freq`` divides the gradient of row ``v`` by the number of occurrences of
  ``v`` in the bags (not allowed with ``mode="max"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .memory import check_dense_fits
from .renorm import grad_row_scale, renorm_rows_, stop_grad_where
from .validation import (
    check_bag_sparse,
    check_embedding_args,
    check_embedding_bag_args,
    check_ids_in_range,
)


def bag_bounds(
    shape: Sequence[int], offsets: Sequence[int] | None, include_last_offset: bool
) -> list[tuple[int, int]]:
    """Each bag's positions ``[start, end)`` in the flat input, as ``F.embedding_bag`` reads them.

    The one statement of the rule, for calls held as Python ints (drawn cases, the table of
    torch's defects); the forms apply the same rule to tensors. A 2-D input ``(B, L)`` is ``B``
    bags of ``L`` ids. A 1-D input's bag ``b`` runs from ``offsets[b]`` to the next offset,
    the last one to the end of the input; with ``include_last_offset`` the offsets end with
    the end of the last bag, and the ids after it lie in no bag. No offsets: no bags.

    Args:
        shape: the input's shape, 1-D or 2-D.
        offsets: the offsets of a 1-D input (``None`` for a 2-D one).
        include_last_offset: ``F.embedding_bag``'s option.

    Returns:
        ``[(start, end), ...]``, one pair a bag, in order.
    """
    if len(shape) == 2:
        count, length = shape
        return [(b * length, (b + 1) * length) for b in range(count)]
    if not offsets:
        return []
    starts = list(offsets[:-1] if include_last_offset else offsets)
    if not starts:  # include_last_offset with one offset: no bags
        return []
    end = offsets[-1] if include_last_offset else shape[0]
    return list(zip(starts, [*starts[1:], end], strict=True))


class _Bags(NamedTuple):
    """The bags of a validated call, in the flat form ``F.embedding_bag`` uses internally."""

    every: torch.Tensor  # (N,) every id of input, input's dtype (max_norm renorms all)
    ids: torch.Tensor  # (end,) the ids that lie in a bag
    starts: torch.Tensor  # (B,) int64, the first position of each bag
    end: int  # positions [0, end) lie in a bag; later ones (include_last_offset) in none
    weights: torch.Tensor | None  # (end,) their per_sample_weights, or None


def bag_starts(
    input: torch.Tensor, offsets: torch.Tensor | None, include_last_offset: bool
) -> tuple[torch.Tensor, int]:
    """``(starts, end)``: where each bag starts in the flat ids, and where the last one ends.

    [`bag_bounds`][]'s rule for tensors: ``starts`` is ``(B,)`` int64 on the ids' device;
    the positions from ``end`` on (ids after the last offset) lie in no bag.
    """
    if input.dim() == 2 or offsets is None:
        num_bags, length = input.shape
        # torch.arange(0, B * L, L), as F.embedding_bag builds it, but also right for L == 0
        # (where F.embedding_bag fails with "step must be nonzero").
        return torch.arange(num_bags, device=input.device) * length, input.numel()
    starts = offsets.detach().reshape(-1).long()
    if include_last_offset:
        return starts[:-1], int(starts[-1].item())
    return starts, input.shape[0]


def _bags(
    input: torch.Tensor,
    offsets: torch.Tensor | None,
    per_sample_weights: torch.Tensor | None,
    include_last_offset: bool,
) -> _Bags:
    flat = input.reshape(-1)
    starts, end = bag_starts(input, offsets, include_last_offset)
    weights = None if per_sample_weights is None else per_sample_weights.reshape(-1)[:end]
    return _Bags(flat, flat[:end], starts, end, weights)


def _bag_index(starts: torch.Tensor, end: int) -> torch.Tensor:
    """``(end,)`` int64: the bag of each position in ``[0, end)``."""
    sizes = torch.diff(starts, append=starts.new_tensor([end]))
    bags = torch.arange(starts.shape[0], device=starts.device)
    return torch.repeat_interleave(bags, sizes, output_size=end)


def bag_count_matrix(
    bag_index: torch.Tensor,
    ids: torch.Tensor,
    num_bags: int,
    num_embeddings: int,
    dtype: torch.dtype,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Build the ``(B, V)`` bag-count (multi-hot) matrix directly in ``dtype``.

    ``M[b, v]`` is the number of positions ``k`` with ``bag_index[k] == b`` and
    ``ids[k] == v``, or, with ``weights``, the sum of ``weights[k]`` over those positions. It is
    the sum of the one-hot rows of the bag's ids, so ``M @ W`` is the sum of each bag's rows.
    The matrix is built by an accumulating ``index_put`` into zeros (differentiable in
    ``weights``). The inputs are not checked here.

    In float16 (bfloat16) a count is exact up to 2048 (256) repetitions of one id in one bag;
    beyond that it is rounded, like any other value of that dtype.

    Args:
        bag_index: ``(K,)`` int64 bag of each entry, in ``[0, B)``.
        ids: ``(K,)`` int64 ids, in ``[0, V)``.
        num_bags: ``B``.
        num_embeddings: ``V``.
        dtype: floating dtype of the result.
        weights: ``None`` (counts) or ``(K,)`` weights of ``dtype``.

    Returns:
        ``(B, V)`` tensor on ``ids.device``.

    Examples:
        >>> import torch
        >>> bag_count_matrix(torch.tensor([0, 0, 1]), torch.tensor([2, 2, 0]), 2, 3, torch.float32)
        tensor([[0., 0., 2.],
                [1., 0., 0.]])
    """
    if weights is None:
        weights = torch.ones(ids.shape[0], dtype=dtype, device=ids.device)
    out = torch.zeros((num_bags, num_embeddings), dtype=dtype, device=ids.device)
    return out.index_put((bag_index, ids), weights, accumulate=True)


def _bag_max(rows: torch.Tensor, bag_index: torch.Tensor, num_bags: int) -> torch.Tensor:
    """Per-bag, per-dimension maximum of ``rows`` (K, D); empty bags give zeros.

    Only the first position that attains a bag's maximum in a dimension receives that
    dimension's gradient (as ``F.embedding_bag``, which keeps the first maximum it meets). A NaN
    propagates: it is the maximum of its bag and dimension, and the first NaN gets the gradient.
    """
    k, d = rows.shape
    values = rows.detach()
    index = bag_index[:, None].expand(k, d)
    zeros = torch.zeros((num_bags, d), dtype=rows.dtype, device=rows.device)
    maxima = zeros.scatter_reduce(0, index, values, "amax", include_self=False)
    of_entry = maxima.gather(0, index)
    attains = (values == of_entry) | (values.isnan() & of_entry.isnan())
    position = torch.arange(k, device=rows.device)[:, None].expand(k, d)
    candidate = torch.where(attains, position, k)
    first = torch.full((num_bags, d), k, dtype=torch.int64, device=rows.device)
    first = first.scatter_reduce(0, index, candidate, "amin", include_self=True)
    # Row k, appended, is the zero row that empty bags (first == k) pick up.
    return torch.cat([rows, rows.new_zeros((1, d))]).gather(0, first)


def check_bag_call(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    max_norm: float | None,
    norm_type: float,
    scale_grad_by_freq: bool,
    mode: str,
    per_sample_weights: torch.Tensor | None,
    include_last_offset: bool,
    padding_idx: int | None,
    fn: str,
) -> int | None:
    """The embedding checks, then the bag checks; returns ``padding_idx`` mapped into [0, V).

    Every bag form and the bag oracle refuse bad input through it, with the same messages.
    """
    padding = check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    check_embedding_bag_args(
        input, weight, offsets, mode, per_sample_weights, include_last_offset,
        scale_grad_by_freq, fn,
    )  # fmt: skip
    return padding


def lookup_embedding_bag(
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
    """Reduce bags of rows of ``weight`` with ``F.embedding_bag``, after the shared checks.

    The arguments, their order and their meaning are those of
    `torch.nn.functional.embedding_bag`, so this is a drop-in replacement that refuses bad
    input with the same errors as [`matmul_embedding_bag`][]. These defects of
    ``F.embedding_bag`` are worked around, so that the documented semantics hold:

    - with ``include_last_offset=True`` and ``offsets[-1] < len(input)``, torch's CPU backward
      reads uninitialised memory (``sum``) and ``mean`` divides the last bag by the wrong count:
      the ids after the last offset are dropped before the call;
    - the CPU backward of ``scale_grad_by_freq`` divides some rows by another row's frequency
      (pytorch/pytorch#190063): the scaling is applied by this package instead;
    - a 2-D input ``(B, 0)`` fails in torch ("step must be nonzero"); here it gives ``B``
      empty bags;
    - on CUDA (torch 2.11), ``max_norm`` does nothing with ``norm_type=inf``, takes the norm of
      the wrong elements of a strided table, and fails on empty bags: off the CPU, the
      referenced rows are renormalized by the matmul forms' ``renorm_rows_`` instead.

    The first three were seen in torch 2.13 on the CPU.

    Args:
        input: int64 or int32 ids, each in ``[0, V)``: ``(N,)`` with ``offsets``, or
            ``(B, L)``, ``B`` bags of ``L`` ids, without.
        weight: ``(V, D)`` floating table, on the ids' device.
        offsets: ``(B,)`` int64/int32 start of each bag in a 1-D ``input`` (``(B + 1,)`` with
            ``include_last_offset``): ``offsets[0] == 0``, non-decreasing, at most ``N``.
        max_norm: if given, every row referenced by ``input`` whose ``norm_type``-norm exceeds
            it is rescaled **in place** to norm ``max_norm`` before the reduction.
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide the gradient of each row by how often its id occurs in the
            bags (not with ``mode="max"``).
        mode: ``"sum"``, ``"mean"`` or ``"max"`` (element-wise maximum over the bag).
        sparse: give ``weight`` a sparse COO gradient (not with ``mode="max"`` or
            ``scale_grad_by_freq``).
        per_sample_weights: weights of ``input``'s shape and ``weight``'s dtype; each row is
            multiplied by its weight before the sum (``mode="sum"`` only).
        include_last_offset: ``offsets`` ends with the end of the last bag (CSR layout); ids
            after it belong to no bag. Ignored for a 2-D input.
        padding_idx: row left out of every bag and of ``mean``'s count; it gets no gradient.
            Negative values count from the end.

    Returns:
        ``(B, D)`` tensor of ``weight``'s dtype; empty bags give zeros.

    Raises:
        TypeError: ids, offsets or weights of the wrong type or dtype (see
            [`lookup_embedding`][embedding_equivalence.lookup_embedding]).
        ValueError: wrong ranks, devices, mode, offsets, ``padding_idx``, ``max_norm``, or an
            unsupported combination of options; the message shows a correct call.
        IndexError: an id outside ``[0, V)``.

    Examples:
        >>> import torch
        >>> from embedding_equivalence import lookup_embedding_bag
        >>> weight = torch.arange(8.0).reshape(4, 2)
        >>> lookup_embedding_bag(torch.tensor([2, 0, 3]), weight, torch.tensor([0, 2]), mode="sum")
        tensor([[4., 6.],
                [6., 7.]])
    """
    fn = "lookup_embedding_bag"
    padding = check_bag_call(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
        per_sample_weights, include_last_offset, padding_idx, fn,
    )  # fmt: skip
    check_bag_sparse(sparse, mode, scale_grad_by_freq, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    bags = _bags(input, offsets, per_sample_weights, include_last_offset)
    if max_norm is not None and weight.device.type != "cpu":
        # torch 2.11 on CUDA: embedding_renorm_ leaves rows unchanged with norm_type=inf,
        # misreads a strided table and fails on empty ids ("invalid argument"); see
        # lookup_embedding. The matmul forms' renorm has none of these defects.
        renorm_rows_(weight, bags.every.long(), max_norm, norm_type)
    elif max_norm is not None:
        with torch.no_grad():  # what F.embedding_bag does, over the whole input
            torch.embedding_renorm_(weight.detach(), bags.every, max_norm, norm_type)
    w = grad_row_scale(weight, bags.ids.long(), None, scale_grad_by_freq)
    starts = bags.starts.to(bags.ids.dtype)
    return F.embedding_bag(
        bags.ids, w, starts, None, norm_type, False, mode, sparse, bags.weights, False, padding
    )


def matmul_embedding_bag(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> torch.Tensor:
    """Reduce bags of rows of ``weight`` by a matrix product with the bag-count matrix.

    ``sum``: ``M @ weight``, where ``M`` is the ``(B, V)`` bag-count (multi-hot) matrix of
    `bag_count_matrix`: ``M[b, v]`` counts the occurrences of ``v`` in bag ``b``, or sums
    their ``per_sample_weights``. ``mean``: the same product divided by the number of
    non-padding ids in each bag (an empty bag gives zeros). ``M`` is built in ``weight``'s
    dtype, and its size, ``B * V * itemsize`` bytes, is checked against the memory available
    before anything is allocated. No embedding kernel is called.

    ``max`` has no matrix form: a matrix product is linear in ``weight``, and a maximum is not
    (``max(-x) = -min(x)``, not ``-max(x)``), so no ``M`` gives ``M @ W`` equal to the
    element-wise maximum of the bag's rows for every ``W``. It is computed as a gather of the
    bag's rows, ``weight[ids]``, followed by a per-bag maximum (``scatter_reduce``); the
    gradient of each bag and dimension goes to the first id that attains the maximum, as in
    ``F.embedding_bag``.

    Every autograd mode works, beyond ``F.embedding_bag`` (which has no forward mode and no
    double backward): reverse and forward mode (the tangent of ``sum``/``mean`` is
    ``M @ tangent``; of ``max``, the tangent at each bag's first maximum), double backward, and
    ``torch.func.grad``, ``jvp``, ``jacrev``, ``jacfwd`` and ``vmap`` over a batch of tables,
    all without a loop fallback. ``max_norm``'s renorm is outside autograd (the tangent is not
    rescaled), as in ``F.embedding``.

    Same semantics, options and errors as [`lookup_embedding_bag`][] (without ``sparse``).
    With finite weights, ``sum`` and ``mean`` equal ``F.embedding_bag`` bit for bit whenever
    the sums are exact (e.g. integer-valued weights); in general the two add the same terms in
    a different order, so they differ by rounding (the product adds ``count * W[v]`` over
    ``v``, the lookup adds ``W[ids[i]]`` over positions ``i``). ``max`` equals it bit for bit,
    except with NaN (propagated here; torch's CPU kernel keeps a NaN only when it comes first
    in its bag). A non-finite value anywhere in ``weight`` makes ``sum``/``mean`` outputs NaN
    (``0 * inf``), as for [`matmul_embedding`][embedding_equivalence.matmul_embedding].

    Args:
        input: as for [`lookup_embedding_bag`][].
        weight: as for [`lookup_embedding_bag`][].
        offsets: as for [`lookup_embedding_bag`][].
        max_norm: as for [`lookup_embedding_bag`][]: the renorm is made before the product.
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: as for [`lookup_embedding_bag`][] (not with ``mode="max"``).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        per_sample_weights: weights of ``input``'s shape and ``weight``'s dtype, the entries
            of ``M`` (``mode="sum"`` only); they receive a gradient too.
        include_last_offset: as for [`lookup_embedding_bag`][].
        padding_idx: as for [`lookup_embedding_bag`][].

    Returns:
        ``(B, D)`` tensor of ``weight``'s dtype; empty bags give zeros.

    Raises:
        OneHotTooLargeError: the dense ``(B, V)`` bag-count matrix would not fit in memory
            (``sum`` and ``mean``).
        TypeError: see [`lookup_embedding_bag`][]; both raise the same errors.
        ValueError: see [`lookup_embedding_bag`][].
        IndexError: see [`lookup_embedding_bag`][].

    Examples:
        >>> import torch
        >>> from embedding_equivalence import matmul_embedding_bag
        >>> weight = torch.arange(8.0).reshape(4, 2)
        >>> matmul_embedding_bag(torch.tensor([2, 0, 3]), weight, torch.tensor([0, 2]), mode="sum")
        tensor([[4., 6.],
                [6., 7.]])
        >>> matmul_embedding_bag(torch.tensor([[2, 0], [3, 3]]), weight, mode="max")
        tensor([[4., 5.],
                [6., 7.]])
    """
    fn = "matmul_embedding_bag"
    padding = check_bag_call(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
        per_sample_weights, include_last_offset, padding_idx, fn,
    )  # fmt: skip
    num_embeddings = weight.shape[0]
    bags = _bags(input, offsets, per_sample_weights, include_last_offset)
    num_bags = bags.starts.shape[0]
    if mode != "max":
        check_dense_fits(num_bags, "bags", num_embeddings, weight.dtype, weight.device, fn)
    check_ids_in_range(input, num_embeddings, fn)
    if max_norm is not None:
        renorm_rows_(weight, bags.every.long(), max_norm, norm_type)
    ids, weights = bags.ids.long(), bags.weights
    w = grad_row_scale(weight, ids, padding, scale_grad_by_freq)
    bag_index = _bag_index(bags.starts, bags.end)
    if padding is not None:
        keep = ids != padding
        ids, bag_index = ids[keep], bag_index[keep]
        weights = None if weights is None else weights[keep]
    if mode == "max":
        return _bag_max(w[ids], bag_index, num_bags)
    counts = bag_count_matrix(bag_index, ids, num_bags, num_embeddings, weight.dtype, weights)
    # The number of counted ids of each bag (an index_add, not bincount: it runs on meta too).
    sizes = bag_index.new_zeros(num_bags).index_add_(0, bag_index, torch.ones_like(bag_index))
    out = counts @ w
    if mode == "mean":
        # Divide in float32 (float64 for float64), as torch does, and round once.
        opmath = torch.float64 if weight.dtype == torch.float64 else torch.float32
        out = (out.to(opmath) / sizes.clamp(min=1).to(opmath)[:, None]).to(weight.dtype)
    # F.embedding_bag gives an empty bag, or one of padding ids only, no gradient at all. The
    # product's table gradient M^T @ G would let a non-finite G[b] of such a bag reach every
    # row (0 * nan = nan); masking it first keeps it out, as in torch.
    return stop_grad_where(out, sizes > 0)
