"""Quantized tables: the storage schemes, the reference quantizer, and the quantized lookup.

An inference table is stored as integers or float8 with one scale per row (and, for the
affine schemes, one zero point per row); a kernel dequantizes the rows it looks up. Four
schemes are defined here, each by how a stored value ``q`` of row ``v`` becomes a weight:

| scheme | ``qweight`` | ``zero_point`` | weight |
|---|---|---|---|
| ``"int8"`` | int8 ``(V, D)`` | int32 ``(V,)`` or ``None`` | ``(q - zp[v]) * scale[v]`` |
| ``"uint4"`` | uint8 ``(V, D/2)`` | int32 ``(V,)`` | ``(q - zp[v]) * scale[v]`` |
| ``"float8_e4m3fn"`` | float8_e4m3fn ``(V, D)`` | ``None`` | ``float(q) * scale[v]`` |
| ``"float8_e5m2"`` | float8_e5m2 ``(V, D)`` | ``None`` | ``float(q) * scale[v]`` |

An int8 table without zero points is symmetric.

``uint4`` stores column ``d`` in byte ``d // 2``: the low nibble for even ``d``, the high
nibble for odd ``d``. ``scale`` is a floating ``(V,)`` tensor, and its dtype is the dtype of
the looked-up rows.

[`quantize_rowwise`][] and [`dequantize_rowwise`][] are the reference pair;
[`lookup_quantized_embedding`][] looks rows up the way an inference kernel does (gather the
stored rows, dequantize them in float32, round once to the scale's dtype) and is the kernel
that [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]'s own
tests verify. Every function here refuses bad input with the same messages
(``check_quantized_args``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from .validation import check_ids_in_range


@dataclass(frozen=True)
class Scheme:
    """How one storage scheme holds a table.

    Attributes:
        name: the scheme's name, e.g. ``"int8"``.
        storage: dtype of ``qweight``.
        zero_point: ``"required"``, ``"optional"`` (``None`` means symmetric) or ``"none"``.
        qmin: the smallest stored integer (integer schemes).
        qmax: the largest stored integer (integer schemes).
        packed: two 4-bit columns per byte.
    """

    name: str
    storage: torch.dtype
    zero_point: str
    qmin: int = 0
    qmax: int = 0
    packed: bool = False

    @property
    def is_float8(self) -> bool:
        """Whether the stored values are float8 (no zero point, no integer range)."""
        return self.storage.is_floating_point


_SCHEME_TABLE = {
    "int8": Scheme("int8", torch.int8, "optional", -128, 127),
    "uint4": Scheme("uint4", torch.uint8, "required", 0, 15, packed=True),
    "float8_e4m3fn": Scheme("float8_e4m3fn", torch.float8_e4m3fn, "none"),
    "float8_e5m2": Scheme("float8_e5m2", torch.float8_e5m2, "none"),
}

#: The schemes' names, in the order the docs list them.
SCHEMES: tuple[str, ...] = tuple(_SCHEME_TABLE)


class QuantizedTable(NamedTuple):
    """A quantized ``(V, D)`` table, as [`quantize_rowwise`][] returns it.

    Unpack it into a call: ``candidate(input, *table[:3])``.
    """

    #: The stored values (see the module's table for each scheme's dtype and shape).
    qweight: torch.Tensor
    #: ``(V,)``: one scale per row, in the dtype of the looked-up rows.
    scale: torch.Tensor
    #: ``(V,)`` int32 zero points, or ``None`` (symmetric int8, float8).
    zero_point: torch.Tensor | None
    #: The scheme's name.
    scheme: str


def check_scheme(scheme: object, fn: str) -> Scheme:
    """The [`Scheme`][] named ``scheme``.

    Raises:
        ValueError: an unknown name, with the names there are.
    """
    if not isinstance(scheme, str) or scheme not in _SCHEME_TABLE:
        raise ValueError(
            f"{fn}: scheme={scheme!r} is not a quantization scheme; choose one of "
            f"{', '.join(repr(s) for s in SCHEMES)}"
        )
    return _SCHEME_TABLE[scheme]


def check_quantized_args(
    qweight: object, scale: object, zero_point: object, scheme: object, fn: str
) -> Scheme:
    """Check a quantized table against its scheme: dtypes, shapes, devices.

    Args:
        qweight: the stored values.
        scale: the per-row scales.
        zero_point: the per-row zero points, or ``None``.
        scheme: the scheme's name.
        fn: the calling function's name, for the messages.

    Returns:
        The [`Scheme`][].

    Raises:
        ValueError: an unknown scheme, a ``qweight`` that is not 2-D, or a ``scale`` or
            ``zero_point`` whose shape is not ``(V,)``, or tensors on different devices.
        TypeError: a tensor of the wrong dtype for the scheme, a zero point where the scheme
            has none, or a missing zero point where it needs one.
    """
    s = check_scheme(scheme, fn)
    if not isinstance(qweight, torch.Tensor) or qweight.dtype != s.storage:
        layout = "two 4-bit columns a byte, " if s.packed else ""
        raise TypeError(
            f"{fn}: scheme={s.name!r} stores qweight as {s.storage} ({layout}shape (V, "
            f"{'D/2' if s.packed else 'D'})), got {_kind(qweight)}; make the table with "
            f"quantize_rowwise(weight, {s.name!r})"
        )
    if qweight.dim() != 2:
        raise ValueError(
            f"{fn}: qweight must be 2-D (one row per id), got shape {tuple(qweight.shape)}"
        )
    v = qweight.shape[0]
    if not isinstance(scale, torch.Tensor) or not scale.dtype.is_floating_point:
        raise TypeError(
            f"{fn}: scale must be a floating tensor of shape (V,) = ({v},), one scale per row, "
            f"got {_kind(scale)}"
        )
    _check_per_row("scale", scale, v, fn)
    if s.zero_point == "none" and zero_point is not None:
        raise TypeError(
            f"{fn}: scheme={s.name!r} has no zero point (w = float(q) * scale); pass "
            f"zero_point=None"
        )
    if s.zero_point == "required" and zero_point is None:
        raise TypeError(
            f"{fn}: scheme={s.name!r} needs a zero point per row (w = (q - zero_point) * "
            f"scale): pass an int32 tensor of shape ({v},)"
        )
    if zero_point is not None:
        if not isinstance(zero_point, torch.Tensor) or zero_point.dtype != torch.int32:
            raise TypeError(
                f"{fn}: zero_point must be an int32 tensor of shape ({v},), got "
                f"{_kind(zero_point)}; convert it with zero_point.to(torch.int32)"
            )
        _check_per_row("zero_point", zero_point, v, fn)
    for name, t in (("scale", scale), ("zero_point", zero_point)):
        if isinstance(t, torch.Tensor) and t.device != qweight.device:
            raise ValueError(
                f"{fn}: {name} is on {t.device} but qweight is on {qweight.device}; move "
                f"it: {name}.to({str(qweight.device)!r})"
            )
    return s


def _kind(value: object) -> object:
    """What a message says a bad argument was: a tensor's dtype, else its type's name."""
    return value.dtype if isinstance(value, torch.Tensor) else type(value).__name__


def _check_per_row(name: str, t: torch.Tensor, v: int, fn: str) -> None:
    if tuple(t.shape) != (v,):
        hint = f"; pass {name}.reshape(-1)" if t.numel() == v else ""
        raise ValueError(
            f"{fn}: {name} must have shape (V,) = ({v},), one per row of qweight, got "
            f"{tuple(t.shape)}{hint}"
        )


def unpack_uint4(packed: torch.Tensor) -> torch.Tensor:
    """The 4-bit columns of a packed ``(..., D/2)`` uint8 tensor, as int32 ``(..., D)``.

    Column ``d`` is the low nibble of byte ``d // 2`` for even ``d`` and the high nibble for
    odd ``d``.
    """
    b = packed.to(torch.int32)
    return torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)


def _pack_uint4(q: torch.Tensor) -> torch.Tensor:
    q = q.to(torch.uint8)
    return q[..., 0::2] | (q[..., 1::2] << 4)


def _stored_values(qrows: torch.Tensor, s: Scheme) -> torch.Tensor:
    """The stored values of some rows as float64 (exact: every stored value is)."""
    if s.packed:
        return unpack_uint4(qrows).to(torch.float64)
    if s.is_float8:
        return qrows.to(torch.float32).to(torch.float64)  # float8 -> float32 is exact
    return qrows.to(torch.float64)


def dequantize_rows_float64(
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
    scheme: str,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """The exact weights of ``rows`` (default: all), in float64 on the CPU.

    Exact whenever the scale has at most 24 significant bits (float32, float16, bfloat16):
    ``q - zp`` is an integer, exact in float64, and a stored value has at most 8 significant
    bits for a zero point within the stored range (4 for float8), so the product needs at most
    32 of float64's 53. Otherwise (a float64 scale, a zero point beyond ``2**29``) the product
    is rounded once, with a relative error of at most ``2**-53``.

    Args:
        qweight: the stored values.
        scale: the per-row scales.
        zero_point: the per-row zero points, or ``None``.
        scheme: the scheme's name.
        rows: int64 row indices, or ``None`` for every row.

    Returns:
        ``(len(rows), D)`` (or ``(V, D)``) float64.
    """
    s = check_quantized_args(qweight, scale, zero_point, scheme, "dequantize_rowwise")

    def pick(t: torch.Tensor) -> torch.Tensor:
        """The rows asked for, on the CPU."""
        return t.detach().cpu() if rows is None else t.detach().cpu()[rows.cpu()]

    values = _stored_values(pick(qweight), s)
    if zero_point is not None:
        values = values - pick(zero_point).to(torch.float64)[:, None]
    return values * pick(scale).to(torch.float64)[:, None]


def dequantize_rowwise(
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
    scheme: str,
    *,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The reference dequantization: exact in float64, then rounded to ``dtype``.

    Args:
        qweight: the stored values (see the module's table for each scheme).
        scale: ``(V,)`` per-row scales.
        zero_point: ``(V,)`` int32 zero points, or ``None`` (symmetric int8, float8).
        scheme: ``"int8"``, ``"uint4"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.
        dtype: the result's dtype (default: ``scale.dtype``).

    Returns:
        The ``(V, D)`` table on ``qweight``'s device. The cast from float64 to ``dtype`` is
        torch's (for float16 and bfloat16 it passes through float32), within the bound that
        [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]
        allows.

    Raises:
        ValueError: an unknown scheme, a ``qweight`` that is not 2-D, a ``scale`` or
            ``zero_point`` whose shape is not ``(V,)``, or tensors on different devices.
        TypeError: a tensor of the wrong dtype for the scheme, or a zero point where the
            scheme has none (or none where it needs one).

    Examples:
        >>> import torch
        >>> from embedding_equivalence import dequantize_rowwise, quantize_rowwise
        >>> weight = torch.tensor([[0.0, 1.0, -2.0, 0.5]])
        >>> table = quantize_rowwise(weight, "int8")
        >>> (dequantize_rowwise(*table) - weight).abs().max() <= table.scale / 2
        tensor([True])
    """
    exact = dequantize_rows_float64(qweight, scale, zero_point, scheme)
    return exact.to(dtype or scale.dtype).to(qweight.device)


def _round_up(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``scale`` (float64) in ``dtype``, rounded up, and at least the smallest subnormal.

    Rounding the scale up keeps every quantized value within the stored range, so that no
    value is clamped and every element's error stays within half a step.
    """
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    out = scale.clamp_min(tiny).to(dtype)
    low = out.to(torch.float64) < scale
    return torch.where(low, torch.nextafter(out, torch.full_like(out, torch.inf)), out)


def quantize_rowwise(
    weight: torch.Tensor, scheme: str, *, symmetric: bool = False
) -> QuantizedTable:
    """The reference quantizer: one scale (and zero point) per row, round to nearest.

    Each row's range is computed in float64 and includes 0, so that zero is stored exactly:

    - ``"int8"``: ``scale = (max - min) / 255`` and ``zp = round(-128 - min / scale)``;
      with ``symmetric=True``, ``scale = max|w| / 127`` and no zero point;
    - ``"uint4"``: ``scale = (max - min) / 15`` and ``zp = round(-min / scale)``;
    - float8: ``scale = max|w| / fmax`` (448 for e4m3fn, 57344 for e5m2).

    The scale is rounded up to ``weight``'s dtype (never clamped values), and an all-zero row
    gets scale 1. The stored value is ``round(w / scale) + zp``, so each element's error is at
    most half a step, ``scale / 2``, for the integer schemes, and half a float8 unit in the
    last place of ``w / scale`` for float8.

    Args:
        weight: a finite floating ``(V, D)`` table (``D`` even for ``"uint4"``).
        scheme: ``"int8"``, ``"uint4"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.
        symmetric: ``"int8"`` only: no zero point, stored values in ``[-127, 127]``.

    Returns:
        A [`QuantizedTable`][]; its scale has ``weight``'s dtype.

    Raises:
        ValueError: an unknown scheme, a table that is not 2-D or holds a non-finite value,
            an odd ``D`` for ``"uint4"``, or ``symmetric=True`` with a scheme other than
            ``"int8"``.
        TypeError: a table that is not floating point.
    """
    fn = "quantize_rowwise"
    s = check_scheme(scheme, fn)
    if not isinstance(weight, torch.Tensor) or not weight.dtype.is_floating_point:
        raise TypeError(f"{fn}: weight must be a floating (V, D) tensor, got {_kind(weight)}")
    if weight.dim() != 2:
        raise ValueError(f"{fn}: weight must be 2-D (V, D), got shape {tuple(weight.shape)}")
    v, d = weight.shape
    if s.packed and d % 2:
        raise ValueError(
            f"{fn}: scheme='uint4' packs two columns in a byte, so D must be even, got D={d}; "
            f"pad the table with a zero column: torch.nn.functional.pad(weight, (0, 1))"
        )
    if symmetric and s.name != "int8":
        raise ValueError(
            f"{fn}: symmetric=True applies to scheme='int8' only (got scheme={s.name!r}); "
            f"call quantize_rowwise(weight, {s.name!r})"
        )
    w = weight.detach().to(torch.float64)
    if not bool(w.isfinite().all()):
        where = tuple((~w.isfinite()).nonzero()[0].tolist())
        raise ValueError(
            f"{fn}: weight[{where[0]}, {where[1]}] = {float(w[where])} is not finite; a "
            f"per-row scale cannot hold it"
        )
    dtype, zp = weight.dtype, None
    # A zero column (the range includes 0 anyway) gives an empty row (D = 0) a range.
    padded = torch.cat([w, torch.zeros(v, 1, dtype=torch.float64)], dim=1)
    if s.is_float8 or symmetric:  # [-top, top]: float8's largest value, or 127
        top = float(torch.finfo(s.storage).max) if s.is_float8 else 127
        amax = padded.abs().amax(dim=1)
        scale = _round_up(torch.where(amax > 0, amax / top, 1.0), dtype)
        ratio = w / scale.to(torch.float64)[:, None]
        q = (ratio if s.is_float8 else torch.round(ratio)).clamp(-top, top).to(s.storage)
    else:
        lo, hi = padded.amin(dim=1), padded.amax(dim=1)
        scale = _round_up(torch.where(hi > lo, (hi - lo) / (s.qmax - s.qmin), 1.0), dtype)
        sc = scale.to(torch.float64)
        zp64 = torch.round(s.qmin - lo / sc).clamp(s.qmin, s.qmax)
        q64 = (torch.round(w / sc[:, None]) + zp64[:, None]).clamp(s.qmin, s.qmax)
        q = _pack_uint4(q64) if s.packed else q64.to(s.storage)
        zp = zp64.to(torch.int32)
    return QuantizedTable(q.to(weight.device), scale.to(weight.device), zp, s.name)


def lookup_quantized_embedding(
    input: torch.Tensor,
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
    *,
    scheme: str,
) -> torch.Tensor:
    """Look rows of a quantized table up: gather, dequantize in float32, round to the output.

    The inference kernel: only the looked-up rows are read and dequantized, so it costs what
    a lookup of the stored table costs. ``(q - zp)`` is exact in float32, its product with
    the scale is rounded once in float32, and the result is rounded once more to
    ``scale.dtype``: the two roundings that
    [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]'s bound
    allows.

    Args:
        input: int64 or int32 ids of any shape, in ``[0, V)``.
        qweight: the stored values.
        scale: ``(V,)`` per-row scales; the output has their dtype.
        zero_point: ``(V,)`` int32 zero points, or ``None``.
        scheme: the scheme's name.

    Returns:
        ``(*input.shape, D)`` in ``scale.dtype``.

    Raises:
        ValueError: as for [`dequantize_rowwise`][].
        TypeError: as for [`dequantize_rowwise`][], or ids that are not int64/int32.
        IndexError: an id outside ``[0, V)``.
    """
    fn = "lookup_quantized_embedding"
    s = check_quantized_args(qweight, scale, zero_point, scheme, fn)
    if not isinstance(input, torch.Tensor) or input.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{fn}: input must hold integer ids of dtype torch.int64 or torch.int32, got "
            f"{_kind(input)}; convert them with {fn}(input.long(), qweight, scale, zero_point, "
            f"scheme=...)"
        )
    check_ids_in_range(input, qweight.shape[0], fn)
    flat = input.reshape(-1).to(qweight.device)
    q = qweight[flat]
    values = (unpack_uint4(q) if s.packed else q).to(torch.float32)
    if zero_point is not None:
        values = values - zero_point[flat].to(torch.float32)[:, None]
    out = (values * scale[flat].to(torch.float32)[:, None]).to(scale.dtype)
    return out.reshape(*input.shape, values.shape[-1])
