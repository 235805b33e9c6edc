r"""The exact reference of a quantized lookup, and the bounds of quantized kernels.

**The lookup.** A row of a quantized table is ``x = (q - zp) * scale`` (``float(q) * scale``
for float8). The oracle computes ``x`` in float64, where it is exact (see
[`dequantize_rows_float64`][embedding_equivalence.forms.quantized.dequantize_rows_float64]).
A kernel computes it in a compute dtype ``c`` and rounds the result to the output dtype
``o`` (the scale's). ``q - zp`` is a small integer, exact in any float dtype a kernel
uses, so the kernel makes at most two roundings: the product in ``c`` and the cast to ``o``.
With the standard model of floating-point arithmetic, ``fl(y) = y (1 + d) + e`` with
``|d| <= u`` and ``|e| <= eta`` (half the smallest subnormal), the result ``r`` satisfies

$$
|r - x| \le (u_c + u_o + u_c u_o)\,|x| + (1 + u_o)\,\eta_c + \eta_o .
$$

The bound admits ``c = float32`` (and anything more precise) and nothing looser: a kernel
that computes in float16 makes errors of ``2^{-11} |x|``, far above ``2^{-23} |x|`` when
the output is float32. When the output is as precise as the compute dtype (float32, float64)
the cast is exact and ``u_o = eta_o = 0``. Where ``x`` rounds to infinity in the output dtype,
the output must be that infinity.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..forms.quantized import check_quantized_args, dequantize_rows_float64
from .bounds import U64, subnormal_loss, unit_roundoff
from .call import Call
from .expected import ExpectedRows, Oracle

#: The least precise compute dtype the bound admits.
COMPUTE_DTYPE = torch.float32


def rounds_to_inf(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where the float64 ``x`` rounds to an infinity in ``dtype`` (round to nearest).

    The threshold is ``max + ulp(max) / 2``; a tie rounds to the even neighbour, which is
    the infinity, because ``max`` has an odd significand. ``max = m 2**e`` with ``m`` in
    ``[1/2, 1)`` (``math.frexp``), so ``ulp(max) = eps 2**(e - 1)``: no power of two past
    float64's range is formed. For float64 the threshold itself is ``inf`` (``2**1024``):
    only an infinity rounds to an infinity.
    """
    info = torch.finfo(dtype)
    top = float(info.max)
    threshold = top + math.ldexp(info.eps / 2, math.frexp(top)[1] - 1)
    return x.abs() >= threshold


def quantized_output_bound(
    exact: torch.Tensor, dtype: torch.dtype, compute: torch.dtype = COMPUTE_DTYPE
) -> tuple[torch.Tensor, torch.Tensor]:
    """The value a kernel must match, and how closely, for exact float64 rows ``exact``.

    Args:
        exact: the exact values, float64.
        dtype: the output dtype.
        compute: the least precise compute dtype admitted (default float32).

    Returns:
        ``(expected, bound)``: ``expected`` is ``exact`` where it stays finite in ``dtype``
        after rounding to ``compute`` and the infinity it rounds to elsewhere (bound 0
        there); ``bound`` is the module's ``(u_c + u_o + u_c u_o) |x| + (1 + u_o) eta_c +
        eta_o``, plus the float64 oracle's own ``2**-53 |x|``.
    """
    u_c = unit_roundoff(compute)
    # The cast to the output rounds only when the output is less precise than the compute
    # dtype (float16, bfloat16); a float32 result cast to float32 or float64 is exact.
    narrower = unit_roundoff(dtype) > u_c
    u_o = unit_roundoff(dtype) if narrower else 0.0
    eta = (1 + u_o) * subnormal_loss(compute) + (subnormal_loss(dtype) if narrower else 0.0)
    bound = (u_c + u_o + u_c * u_o + U64) * exact.abs() + eta
    # Judged after the compute dtype's rounding, as a kernel gives it (and as torch's cast
    # from float64 does, through float32): within float32's rounding of the threshold, two
    # roundings may overflow where one would not.
    overflow = rounds_to_inf(exact.to(compute).to(torch.float64), dtype)
    expected = torch.where(overflow, exact.sign() * math.inf, exact)
    bound = torch.where(overflow | ~exact.isfinite(), 0.0, bound)
    return expected, bound


class QuantizedOracle(Oracle):
    """The exact reference of one quantized lookup (the ``Oracle`` seam), forward only.

    A quantized lookup has no ``max_norm``, no gradient and no per-sample weights:
    ``renormed``, ``weight_grad_explaining`` and ``per_sample_weights_grad`` are ``None``.

    Args:
        input: ids of any shape, all in ``[0, V)``.
        qweight: the stored values.
        scale: ``(V,)`` per-row scales; the output dtype is theirs.
        zero_point: ``(V,)`` int32 zero points, or ``None``.
        scheme: the scheme's name.
    """

    def __init__(
        self,
        input: torch.Tensor,
        qweight: torch.Tensor,
        scale: torch.Tensor,
        zero_point: torch.Tensor | None,
        scheme: str,
    ) -> None:
        check_quantized_args(qweight, scale, zero_point, scheme, "QuantizedOracle")
        flat = input.detach().reshape(-1).cpu().to(torch.int64)
        rows, index = torch.unique(flat, return_inverse=True)
        exact_rows = dequantize_rows_float64(qweight, scale, zero_point, scheme, rows)  # (R, D)
        exact = exact_rows[index].reshape(*input.shape, exact_rows.shape[1])
        self._expected, self._bound = quantized_output_bound(exact, scale.dtype)

    @classmethod
    def factory(cls, scheme: str) -> Any:
        """The engine's oracle factory for ``scheme``: ``Call -> QuantizedOracle``."""

        def for_call(call: Call) -> QuantizedOracle:
            scale, zero_point = call.extra_args
            assert isinstance(scale, torch.Tensor)
            assert zero_point is None or isinstance(zero_point, torch.Tensor)
            return cls(call.input, call.weight, scale, zero_point, scheme)

        return for_call

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact output and its bound (see [`quantized_output_bound`][])."""
        return self._expected, self._bound

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """Not defined: a quantized table is looked up forward only."""
        raise TypeError("a quantized table has no gradient: verify it with backward=False")
