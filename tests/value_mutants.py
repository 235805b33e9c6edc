"""A catalogue of kernels that are right at every size and wrong at the limits of a dtype.

Each one plants one realistic value-range bug, the kind that passes every random example (drawn
values are ``N(0, 1)``, far from a dtype's limits) and every size boundary: a half-precision
accumulator or copy reached by bfloat16 (whose range is float32's, not float16's 65,504), a
fast-math flush of subnormals to zero, a ``scale_grad_by_freq`` that divides after an
overflowing sum, a saturating cast. The value examples of the boundary phase
(``embedding_equivalence._draw.boundary_data.value_sets`` and the quantized ones) must catch
each under every seed, with only the options its bug needs.

The kernels are built from the other catalogues' correct pieces, imported, not copied:
``mutants._custom_lookup`` (a lookup with a hand-written backward), ``bag_mutants.hand_written_bag``
and ``quantized_mutants.hand_written_quantized``. Nothing here uses a global RNG.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bag_mutants import BagMutant, hand_written_bag
from mutants import Mutant, _accumulate, _counts, _custom_lookup, _refuse_bad_input, _renorm_
from quantized_mutants import QuantizedMutant, hand_written_quantized

__all__ = ["VALUE_BAG_MUTANTS", "VALUE_MUTANTS", "VALUE_QUANTIZED_MUTANTS"]


def _flush_subnormals(x: torch.Tensor) -> torch.Tensor:
    """``x`` with its subnormal entries set to zero: what a flush-to-zero mode does."""
    return x.masked_fill(x.abs() < torch.finfo(x.dtype).smallest_normal, 0)


def _doc(fn: object) -> str:
    """A kernel's docstring on one line: the catalogue's ``doc``."""
    return " ".join((getattr(fn, "__doc__", None) or "").split())


# --------------------------------------------------------------------------------------------
# F.embedding
# --------------------------------------------------------------------------------------------


def bfloat16_gradients_summed_in_float16(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Sums bfloat16 gradients in a float16 buffer (half-precision atomics, taken for every
    16-bit dtype): a row's gradient past 65,504 overflows to inf, and gradients below
    float16's range flush to zero, where bfloat16 holds both."""

    def rule(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        buffer = torch.float16 if grad.dtype == torch.bfloat16 else None
        return _accumulate(ids, grad, rows, buffer)

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, rule)


def bfloat16_table_read_through_float16(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Looks a bfloat16 table up through a float16 copy (a kernel with a float16 gather only):
    the rows round-trip exactly within float16's range, but entries past 65,504 come back inf
    and those below its subnormals come back zero."""
    _refuse_bad_input(input, weight, padding_idx)
    if weight.dtype != torch.bfloat16:
        return F.embedding(
            input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
        )
    _renorm_(weight, input, max_norm, norm_type)
    half = weight.half()
    out = F.embedding(input, half, padding_idx, None, norm_type, scale_grad_by_freq, sparse)
    return out.to(weight.dtype)


def freq_scale_divides_the_sum(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """``scale_grad_by_freq`` sums a row's gradients in the table's dtype and then divides the
    sum by the count: in float16 the sum overflows past 65,504 where the scaled gradient (and
    torch's sum of per-occurrence scaled terms) does not."""

    def rule(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        grad_weight = _accumulate(ids, grad, rows)
        if scale_grad_by_freq:
            grad_weight = grad_weight / _counts(ids, rows).to(grad.dtype)[:, None]
        return grad_weight

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, rule)


def subnormal_gradients_flushed(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Flushes subnormal entries of the upstream gradient to zero before accumulating them (a
    kernel built with fast math, or run with the flush-to-zero mode on): the rows they reach
    lose them."""

    def rule(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        return _accumulate(ids, _flush_subnormals(grad), rows)

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, rule)


def subnormal_rows_flushed(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Flushes subnormal table entries to zero as it copies the rows out (a fast-math gather):
    the lookup of a row that holds one is no longer the row."""
    out = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return _flush_subnormals(out)


VALUE_MUTANTS: list[Mutant] = [
    Mutant("bfloat16_gradients_summed_in_float16", bfloat16_gradients_summed_in_float16, ()),
    Mutant("bfloat16_table_read_through_float16", bfloat16_table_read_through_float16, ()),
    Mutant("freq_scale_divides_the_sum", freq_scale_divides_the_sum, ("scale_grad_by_freq",)),
    Mutant("subnormal_gradients_flushed", subnormal_gradients_flushed, ()),
    Mutant("subnormal_rows_flushed", subnormal_rows_flushed, ()),
]


# --------------------------------------------------------------------------------------------
# F.embedding_bag
# --------------------------------------------------------------------------------------------


def bfloat16_bags_held_in_float16(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """Reduces the bags of a bfloat16 table into the kernel's float16 accumulator (its
    half-precision buffer, taken for every 16-bit table): bag sums and means past 65,504
    overflow to inf (and the gradients, back through the same buffer), where bfloat16 holds
    them."""
    out = hand_written_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return out.half().to(weight.dtype) if weight.dtype == torch.bfloat16 else out


VALUE_BAG_MUTANTS: list[BagMutant] = [
    BagMutant(fn.__name__, fn, (), _doc(fn)) for fn in (bfloat16_bags_held_in_float16,)
]


# --------------------------------------------------------------------------------------------
# Quantized lookups
# --------------------------------------------------------------------------------------------


def bfloat16_scales_stored_in_float16(input, qweight, scale, zero_point):
    """Keeps the scales of 16-bit dtypes in a float16 slot (as row-wise int8 formats such as
    FBGEMM's store them): a bfloat16 scale past 65,504 becomes inf, one below float16's
    subnormals zero, where bfloat16 holds both."""
    if scale.element_size() == 2:
        scale = scale.half().to(scale.dtype)
    return hand_written_quantized(input, qweight, scale, zero_point, scheme="int8")


def subnormal_values_flushed(input, qweight, scale, zero_point):
    """Flushes subnormal dequantized values to zero (fast math): rows with the smallest scales
    come back as zeros."""
    out = hand_written_quantized(input, qweight, scale, zero_point, scheme="float8_e4m3fn")
    return _flush_subnormals(out)


def overflow_saturated(input, qweight, scale, zero_point):
    """Saturates values past the output dtype's largest finite value to it (a float8-style
    clamping cast) instead of rounding them to inf."""
    out = hand_written_quantized(input, qweight, scale, zero_point, scheme="uint4")
    top = torch.finfo(out.dtype).max
    return out.clamp(-top, top)


VALUE_QUANTIZED_MUTANTS: list[QuantizedMutant] = [
    QuantizedMutant(fn.__name__, fn, scheme, _doc(fn))
    for fn, scheme in (
        (bfloat16_scales_stored_in_float16, "int8"),
        (subnormal_values_flushed, "float8_e4m3fn"),
        (overflow_saturated, "uint4"),
    )
]
