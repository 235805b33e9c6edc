"""Quantized tables as replayable recipes, the quantized case, and how both are drawn.

A [`QuantizedTableRecipe`][] writes the Python that makes its tensors (a seeded generator,
then plain torch calls), and [`QuantizedTableRecipe.build`][] runs that very source, so the
snippet of a counterexample makes the same tensors, bit for bit, by construction.

The tables are drawn with wide magnitudes: each row's scale is ``m * 2**e`` with ``m`` in
``[1, 2)`` and the exponents ``e`` drawn from a range that Hypothesis picks anywhere in the
scale dtype's range (so products overflow float16, or fall into the subnormals, or both in
one table), plus rows that are constant and rows that dequantize to zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import note
from hypothesis import strategies as st

from ..forms.quantized import check_scheme
from ..oracle.call import Call
from .boundary_data import value_limits
from .cases import snippet
from .embeddings import draw_call_ids, draw_spoilt_ids
from .recipes import IdsRecipe, dtype_source, float_source, run_source
from .tensors import SEEDS, Looks, Ranges, draw_basics

#: Kinds of bad input a quantized lookup must refuse (``F.embedding``'s, less ``padding_idx``).
QUANTIZED_INVALID_KINDS: tuple[str, ...] = ("id too large", "negative id", "floating ids")


@dataclass(frozen=True)
class QuantizedTableRecipe:
    """A quantized ``(V, D)`` table made from drawn values.

    Attributes:
        scheme: the scheme's name.
        num_embeddings: ``V``.
        embedding_dim: ``D`` (even for ``"uint4"``).
        dtype: the scales' dtype, which is the output's.
        device: device string.
        seed: seed of the generator that draws the stored values, scales and zero points.
        exponents: ``(lo, hi)``: each row's scale is ``m * 2**e`` with ``e`` in ``[lo, hi]``.
        symmetric: ``"int8"`` without a zero point.
        finite: float8 only: stored codes that are inf or nan are replaced by zero.
        constant_rows: ``(row, code)``: every stored value of ``row`` is ``code`` (for
            ``"uint4"`` a 4-bit value, for float8 a byte).
        zero_rows: rows whose stored values all equal their zero point (or are zero):
            they dequantize to zeros.
        limits: ``(row, scale, zero point)``: the scale (and, where there is one, the zero
            point) of ``row``, set after the draw: values at their limits.
    """

    scheme: str
    num_embeddings: int
    embedding_dim: int
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    seed: int = 0
    exponents: tuple[int, int] = (0, 0)
    symmetric: bool = False
    finite: bool = True
    constant_rows: tuple[tuple[int, int], ...] = ()
    zero_rows: tuple[int, ...] = ()
    limits: tuple[tuple[int, float, int], ...] = ()

    def source(self) -> str:
        """Python that makes ``qweight``, ``scale`` and ``zero_point`` (after ``import torch``)."""
        s = check_scheme(self.scheme, "QuantizedTableRecipe")
        v, d, (lo, hi) = self.num_embeddings, self.embedding_dim, self.exponents
        lines = [f"g = torch.Generator().manual_seed({self.seed})"]
        # Stored bytes: uint8 bits of float8 values, two uint4 columns a byte, or int8 values.
        low, cols = (-128, d) if s.storage == torch.int8 else (0, d // 2 if s.packed else d)
        lines.append(
            f"{'bits' if s.is_float8 else 'qweight'} = torch.randint({low}, {low + 256}, ({v}, "
            f"{cols}), generator=g, dtype=torch.{'int8' if low else 'uint8'})"
        )
        affine = not s.is_float8 and not self.symmetric  # a zero point per row
        if s.is_float8:
            lines += [f"bits[{row}] = {code}  # a constant row" for row, code in self.constant_rows]
            lines += [f"bits[{row}] = 0  # a row of zeros" for row in self.zero_rows]
            if self.finite:  # replace the codes of nan (and inf) by zeros
                mask = "0x7F" if s.storage == torch.float8_e4m3fn else "0x7C"
                lines.append(f"bits[(bits & {mask}) == {mask}] = 0  # finite codes only")
            lines.append(f"qweight = bits.view({dtype_source(s.storage)})")
        lines.append(
            f"scale = torch.ldexp(1 + torch.rand({v}, generator=g, dtype=torch.float64), "
            f"torch.randint({lo}, {hi + 1}, ({v},), generator=g)).to({dtype_source(self.dtype)})"
        )
        randint = f"torch.randint({s.qmin}, {s.qmax + 1}, ({v},), generator=g, dtype=torch.int32)"
        lines.append(f"zero_point = {randint if affine else None}")
        for row, scale, zero_point in self.limits:
            lines.append(f"scale[{row}] = {float_source(scale)}")
            if affine:
                lines.append(f"zero_point[{row}] = {zero_point}")
        if not s.is_float8:
            for row, code in self.constant_rows:
                byte = code | code << 4 if s.packed else code
                lines.append(f"qweight[{row}] = {byte}  # a constant row")
            for row in self.zero_rows:
                if self.symmetric:
                    lines.append(f"qweight[{row}] = 0  # a row of zeros")
                elif s.packed:
                    lines.append(
                        f"qweight[{row}] = int(zero_point[{row}]) * 17  # every nibble = zero point"
                    )
                else:
                    lines.append(f"qweight[{row}] = int(zero_point[{row}])  # q = zero point")
        if self.device != "cpu":
            lines.append(f"qweight, scale = qweight.to({self.device!r}), scale.to({self.device!r})")
            if affine:
                lines.append(f"zero_point = zero_point.to({self.device!r})")
        return "\n".join(lines)

    def build(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Fresh ``(qweight, scale, zero_point)``, made by running [`source`][]."""
        made = run_source(self.source())  # the snippet's own code: the same tensors by design
        return made["qweight"], made["scale"], made["zero_point"]


@dataclass(frozen=True)
class QuantizedEmbeddingCase:
    """One drawn call ``fn(input, qweight, scale, zero_point)``, forward only.

    Attributes:
        ids: recipe of ``input``.
        table: recipe of ``qweight``, ``scale`` and ``zero_point``.
        invalid: ``None`` for a valid call, else why the reference refuses it.
    """

    ids: IdsRecipe
    table: QuantizedTableRecipe
    invalid: str | None = None

    @property
    def scheme(self) -> str:
        """The table's scheme."""
        return self.table.scheme

    def call(self, backward: bool = False) -> Call:
        """A fresh `Call` (``backward`` is ignored: a quantized lookup is forward only)."""
        qweight, scale, zero_point = self.table.build()
        extra = {"scale": scale, "zero_point": zero_point}
        return Call(
            self.ids.build(), qweight, extra=extra, output_dtype_of="scale", weight_name="qweight"
        )

    def source(self, fn: str = "candidate", backward: bool = False, preamble: str = "") -> str:
        """A runnable snippet that makes the tensors and calls ``fn`` on them.

        A valid case's snippet runs the exact check first, on the tensors as they were; an
        invalid case's fails unless the call raises (as the other cases' snippets do).
        """
        helper = "assert_quantized_equivalent"
        check = f"{helper}({fn}, input, qweight, scale, zero_point, scheme={self.scheme!r})"
        tensors = [self.ids.source("input"), self.table.source()]
        call = f"{fn}(input, qweight, scale, zero_point)"
        return snippet(preamble, helper, tensors, call, self.invalid, check)


def _exponent_range(draw: st.DrawFn, dtype: torch.dtype) -> tuple[int, int]:
    """``(lo, hi)`` for the scales' exponents: near 0 when shrunk, anywhere in ``dtype``.

    The whole range reaches the subnormal scales (down to the smallest subnormal, below which
    a scale is 0) and scales whose products overflow the dtype (the largest is kept finite).
    """
    # A float64 scale is drawn within float32's range: the bound admits float32 arithmetic.
    top, _, subnormal = value_limits(dtype if dtype.itemsize <= 4 else torch.float32)
    lowest, highest = math.floor(math.log2(subnormal)), math.floor(math.log2(top)) - 1
    if draw(st.integers(0, 3), label="wide scales") == 0:
        lo = draw(st.integers(-4, 0), label="scale exponent lo")
        return lo, lo + draw(st.integers(0, 4), label="scale exponent span")
    lo = draw(st.integers(lowest, highest), label="scale exponent lo")
    return lo, draw(st.integers(lo, highest), label="scale exponent hi")


@st.composite
def quantized_case(
    draw: st.DrawFn, scheme: str, symmetric: bool, ranges: Ranges, looks: Looks, invalid: bool
) -> QuantizedEmbeddingCase:
    """A [`QuantizedEmbeddingCase`][], valid or (``invalid``) one that the reference refuses."""
    s = check_scheme(scheme, "quantized_embedding_cases")
    b = draw_basics(draw, ranges)
    v, d = b.vocab_size, b.embedding_dim
    if s.packed and d % 2:
        d += 1  # two columns a byte
        b = b._replace(embedding_dim=d)
    ids = draw_call_ids(draw, ranges, looks, b, ranges.max_ids)
    codes = (0, 255) if s.is_float8 else (0, 15) if s.packed else (-128, 127)
    rows = st.integers(0, v - 1)
    constant = draw(
        st.lists(st.tuples(rows, st.integers(*codes)), max_size=2, unique_by=lambda r: r[0]),
        label="constant rows",
    )
    zero_rows = draw(st.lists(rows, max_size=2, unique=True), label="zero rows")
    table = QuantizedTableRecipe(
        scheme=s.name,
        num_embeddings=v,
        embedding_dim=d,
        dtype=b.dtype,
        device=b.device,
        seed=draw(SEEDS, label="table seed"),
        exponents=_exponent_range(draw, b.dtype),
        symmetric=symmetric,
        finite=not (s.is_float8 and looks.allow_nonfinite and draw(st.booleans(), label="nan")),
        constant_rows=tuple(constant),
        zero_rows=tuple(zero_rows),
    )
    reason = None
    if invalid:
        ids, _, reason = draw_spoilt_ids(draw, QUANTIZED_INVALID_KINDS, ids, v)
    note(
        f"case: scheme={s.name}, V={v}, D={d}, dtype={b.dtype}, device={b.device}, ids shape="
        f"{ids.shape}, exponents={table.exponents}"
    )
    return QuantizedEmbeddingCase(ids, table, reason)
