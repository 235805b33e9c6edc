"""A catalogue of buggy quantized-lookup kernels that ``verify_quantized_embedding`` must reject.

Every mutant is the same hand-written kernel, ``hand_written_quantized``, with exactly one
realistic bug planted through its ``bug`` argument: the kind a dequantize-on-the-fly kernel
really ships with (a zero point's sign, a nibble order, an integer type that wraps, a compute
dtype). Apart from that bug the kernel is correct: it refuses bad ids, and without a bug it
passes ``verify_quantized_embedding`` for every scheme (``tests/test_quantized.py`` checks
that control), so each mutant is caught by its own bug.

``QUANTIZED_MUTANTS`` lists each with the scheme whose tables make the bug reachable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from embedding_equivalence.forms.validation import check_ids_in_range

__all__ = ["QUANTIZED_MUTANTS", "QuantizedMutant", "hand_written_quantized"]


def _stored(q: torch.Tensor, scheme: str, bug: str | None) -> torch.Tensor:
    """The stored values of the gathered rows, as float32."""
    if scheme == "uint4":
        b = q.to(torch.int32)
        low, high = b & 0xF, b >> 4
        if bug == "nibbles_swapped":
            low, high = high, low
        values = torch.stack((low, high), dim=-1).flatten(-2)
        if bug == "uint4_read_as_signed":
            values = torch.where(values >= 8, values - 16, values)
        return values.to(torch.float32)
    if scheme.startswith("float8"):
        if bug == "float8_formats_swapped":
            other = torch.float8_e5m2 if q.dtype == torch.float8_e4m3fn else torch.float8_e4m3fn
            q = q.view(torch.uint8).view(other)
        return q.to(torch.float32)
    return q.to(torch.float32)


#: Ids per program of the kernel's launch grid.
_BLOCK = 128
#: Columns per vector of the kernel's dequantization loop.
_VECTOR = 64


def hand_written_quantized(
    input: torch.Tensor,
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
    *,
    scheme: str,
    bug: str | None = None,
) -> torch.Tensor:
    """A dequantize-on-the-fly lookup written by hand, with an optional planted ``bug``."""
    v = qweight.shape[0]
    if bug == "ids_clamped":
        input = input.clamp(0, v - 1)
    elif input.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be int64 or int32, got {input.dtype}")
    check_ids_in_range(input, v, "hand_written_quantized")
    flat = input.reshape(-1)
    q = qweight[flat]
    compute = torch.float16 if bug == "computes_in_float16" else torch.float32
    if zero_point is not None and bug == "subtraction_in_int8":
        # (q - zp) in the stored integer type wraps around when it leaves [-128, 127].
        values = (q - zero_point[flat].to(torch.int8)[:, None]).to(compute)
    else:
        values = _stored(q, scheme, bug).to(compute)
        if zero_point is not None and bug != "zero_point_ignored":
            zp = zero_point[flat].to(compute)[:, None]
            values = values + zp if bug == "zero_point_added" else values - zp
    s = scale.to(torch.bfloat16) if bug == "scale_rounded_to_bfloat16" else scale
    if bug == "scale_per_column":
        # The scales read as per-channel (one per column) instead of one per row.
        rows = s[torch.arange(values.shape[-1]) % v].to(compute)[None, :]
    else:
        rows = s[flat].to(compute)[:, None]
    out = (values * rows).to(scale.dtype)
    # The launch grid: programs of _BLOCK ids, each dequantizing vectors of _VECTOR columns
    # into the zero-filled output. What the grid covers is written; the rest stays zero.
    n, dim = out.shape
    programs = math.ceil(n / _BLOCK)
    if bug == "dequant_grid_drops_partial_block" and n > _BLOCK:
        programs = n // _BLOCK  # one program per *full* block of ids
    vectors = math.ceil(dim / _VECTOR)
    if bug == "dequant_width_tail_dropped" and dim > _VECTOR:
        vectors = dim // _VECTOR  # full vectors only, once a row is wider than one
    written = torch.zeros_like(out)
    rows_done, cols_done = programs * _BLOCK, vectors * _VECTOR
    written[:rows_done, :cols_done] = out[:rows_done, :cols_done]
    return written.reshape(*input.shape, dim)


@dataclass(frozen=True)
class QuantizedMutant:
    """A buggy kernel and the scheme whose tables reach its bug.

    Attributes:
        name: short id, used as the pytest id; also the ``bug`` planted.
        fn: the kernel, ``fn(input, qweight, scale, zero_point)``.
        scheme: the scheme it is verified with.
        doc: the bug, in one sentence.
    """

    name: str
    fn: Callable[..., torch.Tensor]
    scheme: str
    doc: str


def _mutant(name: str, scheme: str, doc: str) -> QuantizedMutant:
    def fn(
        input: torch.Tensor,
        qweight: torch.Tensor,
        scale: torch.Tensor,
        zero_point: torch.Tensor | None,
    ) -> torch.Tensor:
        return hand_written_quantized(input, qweight, scale, zero_point, scheme=scheme, bug=name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    globals()[name] = fn  # importable by name, so the counterexample's snippet imports it
    return QuantizedMutant(name, fn, scheme, doc)


QUANTIZED_MUTANTS: tuple[QuantizedMutant, ...] = (
    _mutant("zero_point_added", "int8", "Adds the zero point instead of subtracting it."),
    _mutant("zero_point_ignored", "int8", "Multiplies the stored value by the scale alone."),
    _mutant(
        "subtraction_in_int8",
        "int8",
        "Subtracts the zero point in int8, which wraps around outside [-128, 127].",
    ),
    _mutant(
        "scale_per_column", "int8", "Reads the scales as one per column instead of one per row."
    ),
    _mutant("computes_in_float16", "int8", "Dequantizes in float16 whatever the output dtype."),
    _mutant(
        "scale_rounded_to_bfloat16",
        "int8",
        "Rounds the scale to bfloat16 before multiplying (a bfloat16 kernel's habit).",
    ),
    _mutant("nibbles_swapped", "uint4", "Reads even columns from the high nibble."),
    _mutant("uint4_read_as_signed", "uint4", "Sign-extends the 4-bit values as if they were int4."),
    _mutant(
        "float8_formats_swapped",
        "float8_e4m3fn",
        "Reads e4m3fn bytes as e5m2 (one float8 format for the other).",
    ),
    _mutant("ids_clamped", "int8", "Clamps out-of-range ids into the table instead of refusing."),
    _mutant(
        "dequant_width_tail_dropped",
        "int8",
        "Dequantizes a row in vectors of 64 columns, D // 64 of them once D > 64: the last "
        "D % 64 columns stay zero (D = 65 first).",
    ),
    _mutant(
        "dequant_grid_drops_partial_block",
        "uint4",
        "Launches N // 128 programs of 128 ids once N > 128 (cdiv meant): the rows of the last "
        "partial block stay zero (N = 129 first).",
    ),
)
