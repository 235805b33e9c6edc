"""A catalogue of kernels that return the right values and still break what the caller relies on.

Each returns what ``F.embedding`` (or ``F.embedding_bag``, or a quantized lookup) returns, and
its gradient is right; its bug is in what it does to the caller's memory and state, as the
purity contract of the verifiers states it (inputs read-only, an owned result, no state kept
between calls, no unwritten memory, and with ``deterministic=True`` runs that agree bit for
bit). These are the kernels that passed other benchmarks' value checks: written as a kernel
author writes them, for speed (reused scratch space, a static output buffer as in a captured
graph, answers cached by input address, ids sorted for locality, an output allocated with
``torch.empty``).

Every kernel refuses the bad input its reference refuses, so that it is caught for its own bug.
The kernels keep state in module globals on purpose (that is the bug); nothing here uses a
global RNG.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from mutants import _positive_padding, _refuse_bad_input

__all__ = ["PURITY_MUTANTS", "PurityMutant"]


@dataclass(frozen=True)
class PurityMutant:
    """A kernel with a side effect, the verifier that checks it, and the symptom it must report.

    Attributes:
        name: short id (the pytest id).
        fn: the kernel.
        verifier: ``"embedding"``, ``"bag"`` or ``"quantized"``: which verifier it is for.
        options: the options that make the bug reachable.
        symptom: a regex the failure message must match.
        deterministic: caught only when ``deterministic=True`` asks for bit-identical runs.
    """

    name: str
    fn: Callable[..., torch.Tensor]
    verifier: str
    options: tuple[str, ...]
    symptom: str
    deterministic: bool = False


def table_row_zeroed_after_lookup(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Gathers the rows, then uses the table's last row as scratch space and clears it: the
    output is right and the caller's weights are silently corrupted."""
    _refuse_bad_input(input, weight, padding_idx)
    out = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    with torch.no_grad():
        weight[-1].zero_()
    return out


def ids_sorted_in_place(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Sorts the ids in place for locality, gathers, and puts the rows back in the ids' original
    order: the output is right, and the caller's ids are left sorted."""
    _refuse_bad_input(input, weight, padding_idx)
    flat = input.view(-1)
    order = flat.argsort(stable=True)
    flat.copy_(flat[order])
    rows = F.embedding(flat, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return rows[order.argsort()].reshape(*input.shape, weight.shape[1])


_BUFFERS: dict[tuple[Any, ...], torch.Tensor] = {}


class _IntoStaticBuffer(torch.autograd.Function):
    """The rows, written into one buffer per shape, dtype and device and returned as it is."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(flat)
        ctx.rows = weight.shape[0]
        key = (flat.numel(), weight.shape[1], weight.dtype, weight.device)
        buffer = _BUFFERS.setdefault(key, weight.new_empty(flat.numel(), weight.shape[1]))
        return buffer.copy_(weight[flat])

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        (flat,) = ctx.saved_tensors
        grad = grads[0].new_zeros(ctx.rows, grads[0].shape[1])
        return grad.index_add_(0, flat, grads[0]), None


def static_output_buffer(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Writes every result into one buffer per shape, dtype and device (a static output, as in
    a captured graph) and returns that buffer: the next call overwrites the caller's last
    result."""
    _refuse_bad_input(input, weight, padding_idx)
    if padding_idx is not None or max_norm is not None or scale_grad_by_freq or sparse:
        return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                           sparse)  # fmt: skip
    rows = _IntoStaticBuffer.apply(weight, input.reshape(-1))
    return rows.view(*input.shape, weight.shape[1])


_CACHE: dict[tuple[Any, ...], torch.Tensor] = {}


def cached_by_address(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Caches its answers by the address, shape and dtype of its inputs: a later call with new
    values at a reused address (a table updated in place by an optimizer) gets the old answer."""
    _refuse_bad_input(input, weight, padding_idx)
    key = (input.data_ptr(), weight.data_ptr(), tuple(input.shape), tuple(weight.shape),
           weight.dtype, padding_idx)  # fmt: skip
    rows = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    if key not in _CACHE:
        _CACHE[key] = rows.detach().clone()
    return rows + (_CACHE[key] - rows).detach()


def returns_a_view_of_the_table(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Returns ``weight[i]`` for a single id, a view of the table rather than a new tensor: the
    caller's output changes with the next optimizer step."""
    _refuse_bad_input(input, weight, padding_idx)
    if input.dim() == 0 and max_norm is None:
        return weight[input]
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


class _PaddingZeroedUpstream(torch.autograd.Function):
    """The rows, whose backward zeroes the padding positions of the upstream gradient in place."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(mask)
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        (mask,) = ctx.saved_tensors
        return grads[0].masked_fill_(mask[..., None], 0.0), None


def upstream_gradient_zeroed_in_place(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Zeroes the padding positions of the upstream gradient in place in its backward: the
    table's gradient is right, and every other consumer of that gradient (a tied LM head, a
    residual branch) sees zeros."""
    _refuse_bad_input(input, weight, padding_idx)
    rows = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    if padding_idx is None:
        return rows
    padding = padding_idx % weight.shape[0]
    return _PaddingZeroedUpstream.apply(rows, input == padding)


def empty_bags_left_unwritten(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """Allocates the output with ``torch.empty`` and writes only the bags that hold ids: an
    empty bag's row is whatever the allocator hands out, which is often zeros."""
    out = F.embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
                          sparse, per_sample_weights, include_last_offset, padding_idx)  # fmt: skip
    result = torch.empty_like(out)
    if input.dim() == 2:
        filled = torch.full((out.shape[0],), input.shape[1] > 0, device=out.device)
    else:
        starts = offsets[:-1] if include_last_offset else offsets
        ends = torch.cat([starts[1:], starts.new_tensor([input.numel()])])
        if include_last_offset:
            ends[-1] = offsets[-1]
        filled = ends > starts
    return torch.where(filled[:, None], out, result)


_ORDER = [0]


class _OrderDependentSum(torch.autograd.Function):
    """A lookup whose backward sums the duplicates of an id in an order that alternates from
    one call to the next, as atomics scheduled by the hardware vary."""

    @staticmethod
    def forward(
        ctx: Any, weight: torch.Tensor, flat: torch.Tensor, padding: int | None, scale: bool
    ) -> torch.Tensor:
        ctx.save_for_backward(flat)
        ctx.rows, ctx.padding, ctx.scale = weight.shape[0], padding, scale
        return weight[flat]

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (flat,) = ctx.saved_tensors
        _ORDER[0] += 1
        order = torch.arange(flat.numel(), device=flat.device)
        if _ORDER[0] % 2:  # every other run sums from the last occurrence to the first
            order = order.flip(0)
        upstream = grads[0]
        if ctx.scale:  # each occurrence divided by its id's count, before the sum (as torch)
            counts = torch.bincount(flat, minlength=ctx.rows)[flat]
            upstream = upstream / counts[:, None].to(upstream.dtype)
        grad = torch.zeros(ctx.rows, upstream.shape[-1], dtype=upstream.dtype,
                           device=upstream.device)  # fmt: skip
        for i in order.tolist():
            if flat[i] != ctx.padding:  # the padding row gets no gradient
                grad[flat[i]] += upstream[i]
        return grad, None, None, None


def order_dependent_gradient_sum(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """Sums each id's upstream gradients in an order that differs between runs (atomics): within
    the bound, so right as a value, but two runs of one call disagree in the last bits."""
    _refuse_bad_input(input, weight, padding_idx)
    if max_norm is not None or sparse:
        raise NotImplementedError("order_dependent_gradient_sum: no max_norm, no sparse")
    padding = _positive_padding(padding_idx, weight.shape[0])
    flat = input.reshape(-1)
    rows = _OrderDependentSum.apply(weight, flat, padding, scale_grad_by_freq)
    return rows.reshape(*input.shape, weight.shape[1])


def zero_point_subtracted_in_place(
    input: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor | None
) -> torch.Tensor:
    """Dequantizes the rows it reads, then subtracts the zero point from the caller's stored
    values in place (a prepacking step meant for a private copy): this output is right, and the
    caller's table is corrupted."""
    if input.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"ids must be int64 or int32, got {input.dtype}")
    if bool((input < 0).any()) or bool((input >= qweight.shape[0]).any()):
        raise IndexError("id out of range")
    flat = input.reshape(-1)
    q = qweight[flat].to(torch.float64)
    if zero_point is not None:
        q = q - zero_point[flat, None].to(torch.float64)
    out = (q * scale[flat, None].to(torch.float64)).to(scale.dtype)
    if zero_point is not None:
        rows = flat.unique()
        qweight[rows] = (qweight[rows].to(torch.int32) - zero_point[rows, None]).to(qweight.dtype)
    return out.reshape(*input.shape, qweight.shape[1])


PURITY_MUTANTS: tuple[PurityMutant, ...] = (
    PurityMutant(
        "table_row_zeroed_after_lookup", table_row_zeroed_after_lookup, "embedding", (),
        r"the call changed weight\[\d+, \d+\] in place: .* -> 0\.0; F\.embedding leaves its "
        r"table unchanged",
    ),
    PurityMutant(
        "ids_sorted_in_place", ids_sorted_in_place, "embedding", (),
        r"the call changed input\[[\d, ]+\] in place: \d+ -> \d+; F\.embedding leaves its ids",
    ),
    PurityMutant(
        "static_output_buffer", static_output_buffer, "embedding", (),
        r"a second call on new values changed the first call's out\[.*\] in place",
    ),
    PurityMutant(
        "cached_by_address", cached_by_address, "embedding", (),
        r"called again on the same tensors after the table was negated in place.*the first "
        r"call's output, returned again for new values",
    ),
    PurityMutant(
        "returns_a_view_of_the_table", returns_a_view_of_the_table, "embedding", (),
        r"the output shares memory with weight",
    ),
    PurityMutant(
        "upstream_gradient_zeroed_in_place", upstream_gradient_zeroed_in_place, "embedding",
        ("padding_idx",), r"backward changed grad_output\[.*\] in place: .* -> 0\.0",
    ),
    PurityMutant(
        "empty_bags_left_unwritten", empty_bags_left_unwritten, "bag", (),
        r"NaN where the value is finite.*returns memory it allocated and did not write|^out\["
        r"[\d, ]*\] = .*, but the exact value is 0 ",
    ),
    PurityMutant(
        "order_dependent_gradient_sum", order_dependent_gradient_sum, "embedding", (),
        r"two runs of the same call differ: weight\.grad", deterministic=True,
    ),
    PurityMutant(
        "zero_point_subtracted_in_place", zero_point_subtracted_in_place, "quantized", (),
        r"the call changed qweight\[\d+, \d+\] in place",
    ),
)  # fmt: skip


# The sharded ones: ``candidate(input, weight)`` with ``weight`` a DTensor (imported by name on
# every rank, as ``"purity_mutants:<name>"``).

_SHARDED_BUFFERS: dict[tuple[Any, ...], torch.Tensor] = {}


def sharded_static_output(input: torch.Tensor, weight: Any, **options: Any) -> torch.Tensor:
    """Gathers the full table's rows into one buffer per shape and dtype, reused by every call
    (forward only: the verifier runs it with ``backward=False``)."""
    rows = weight.full_tensor().detach()[input.reshape(-1)]
    key = (tuple(rows.shape), rows.dtype)
    buffer = _SHARDED_BUFFERS.setdefault(key, torch.empty_like(rows))
    return buffer.copy_(rows).view(*input.shape, rows.shape[1])


def sharded_large_shard_zeroed(input: torch.Tensor, weight: Any, **options: Any) -> torch.Tensor:
    """As ``sharded_shard_zeroed``, but only a shard past 1 MiB: one compared once, at the end."""
    _refuse_bad_input(input, weight, None)
    rows = weight.full_tensor()[input.reshape(-1)].reshape(*input.shape, weight.shape[1])
    local = weight.to_local()
    if local.numel() * local.element_size() > 1 << 20:
        with torch.no_grad():
            local.zero_()
    return rows


def sharded_shard_zeroed(input: torch.Tensor, weight: Any, **options: Any) -> torch.Tensor:
    """Gathers the rows, then clears this rank's shard of the table (scratch space reused)."""
    rows = weight.full_tensor()[input.reshape(-1)].reshape(*input.shape, weight.shape[1])
    with torch.no_grad():
        weight.to_local().zero_()
    return rows
