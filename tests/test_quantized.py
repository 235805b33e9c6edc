"""Quantized tables: the reference pair, the quantized lookup, its verifier and its mutants.

The mutants of ``tests/quantized_mutants.py`` must each fail ``verify_quantized_embedding``
with the default settings (100 examples, the default scale dtypes) and with the symptom of
their bug; the same hand-written kernel without a bug, the package's quantized lookup and
``F.embedding`` on the reference dequantization must pass for every scheme. Over seeds 0 to
4 every mutant is caught, all but two at the first example (``subtraction_in_int8`` needs a
zero point far from the stored value: 3 to 9 examples; ``ids_clamped`` needs a bad id, one
example in five: 2 to 33). ``SEED = 1`` is fixed so that a failure here means lost reach.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.forms.quantized import unpack_uint4
from embedding_equivalence.oracle.bounds import unit_roundoff
from embedding_equivalence.oracle.quantized import (
    QuantizedOracle,
    quantized_output_bound,
    rounds_to_inf,
)
from quantized_mutants import QUANTIZED_MUTANTS, QuantizedMutant, hand_written_quantized

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_scripts"))
# The quantizer's bound checks quantizers (torchao's, the reference pair's): not the package's.
from real_kernels.torchao_interop import quantization_error_bound

SEED = 1

#: Every scheme and, for int8, both kinds of table (with and without zero points).
TABLE_KINDS = [("int8", False), ("int8", True), ("uint4", False)] + [
    (s, False) for s in ee.SCHEMES if s.startswith("float8")
]
_KIND_IDS = [f"{s}{'-symmetric' if sym else ''}" for s, sym in TABLE_KINDS]

_WRONG_VALUE = r"^out\[[\d, ]*\] = .*, but the exact value is .*\[{name}\(input="
#: What the minimal failure must say for each mutant: the symptom of the planted bug.
SYMPTOMS: dict[str, str] = {
    m.name: _WRONG_VALUE.format(name=m.name) for m in QUANTIZED_MUTANTS if m.name != "ids_clamped"
} | {"ids_clamped": r"returned a result, but the call is invalid \((id \d+ >= V|negative id)"}


# --------------------------------------------------------------------------------------------
# The mutants and the controls
# --------------------------------------------------------------------------------------------


def test_catalogue_is_well_formed() -> None:
    names = [m.name for m in QUANTIZED_MUTANTS]
    assert len(names) >= 6
    assert len(set(names)) == len(names)
    assert set(SYMPTOMS) == set(names)
    for m in QUANTIZED_MUTANTS:
        assert m.scheme in ee.SCHEMES, m.name
        assert m.fn.__name__ == m.name
        assert m.fn.__doc__ == m.doc


@pytest.mark.parametrize("mutant", QUANTIZED_MUTANTS, ids=[m.name for m in QUANTIZED_MUTANTS])
def test_verifier_catches_quantized_mutant(mutant: QuantizedMutant) -> None:
    report = ee.verify_quantized_embedding(mutant.fn, scheme=mutant.scheme, seed=SEED)
    assert not report.passed, f"{mutant.name} was not caught:\n{report}"
    assert report.failure is not None
    assert re.search(SYMPTOMS[mutant.name], report.failure, re.DOTALL), report.failure
    snippet = report.counterexample
    assert snippet is not None
    assert f"from quantized_mutants import {mutant.name} as candidate" in snippet
    namespace: dict[str, Any] = {}
    if mutant.name == "ids_clamped":  # the clamped call returns, where it must raise
        with pytest.raises(AssertionError, match="the call must raise"):
            exec(compile(snippet, mutant.name, "exec"), namespace)
        return
    # The snippet's exact check fails while the bug is there...
    with pytest.raises(ee.EquivalenceError):
        exec(compile(snippet, mutant.name, "exec"), namespace)
    # ... on the very tensors of the failure: the mutant's output differs there.
    table = ee.QuantizedTable(
        namespace["qweight"], namespace["scale"], namespace["zero_point"], mutant.scheme
    )
    oracle = QuantizedOracle(
        namespace["input"], table.qweight, table.scale, table.zero_point, table.scheme
    )
    expected, bound = oracle.output()
    assert bound is not None
    out = mutant.fn(namespace["input"], *table[:3])
    diff = (out.double() - expected).abs()
    assert bool((diff > bound).any())


def _hand_written(scheme: str) -> Callable[..., torch.Tensor]:
    return functools.partial(hand_written_quantized, scheme=scheme)


def _package_lookup(scheme: str) -> Callable[..., torch.Tensor]:
    return functools.partial(ee.lookup_quantized_embedding, scheme=scheme)


def _embedding_of_the_reference(scheme: str) -> Callable[..., torch.Tensor]:
    def fn(input: torch.Tensor, qweight: torch.Tensor, scale: Any, zero_point: Any) -> Any:
        return F.embedding(input, ee.dequantize_rowwise(qweight, scale, zero_point, scheme))

    return fn


#: The correct kernels, named; the fast tier runs the hand-written one on an int8 and a uint4
#: table (two packings), the slow tier every kernel on every kind of table.
_CORRECT = {
    "hand-written": _hand_written,
    "lookup_quantized_embedding": _package_lookup,
    "F.embedding-of-dequantize_rowwise": _embedding_of_the_reference,
}
_FAST_CONTROLS = {("hand-written", "int8"), ("hand-written", "uint4")}


@pytest.mark.parametrize(
    ("make", "scheme", "symmetric"),
    [
        pytest.param(
            make, scheme, symmetric, id=f"{name}-{kind}",
            marks=[] if (name, kind) in _FAST_CONTROLS else [pytest.mark.slow],
        )
        for name, make in _CORRECT.items()
        for (scheme, symmetric), kind in zip(TABLE_KINDS, _KIND_IDS, strict=True)
    ],
)  # fmt: skip
def test_correct_kernels_pass(
    make: Callable[[str], Callable[..., torch.Tensor]], scheme: str, symmetric: bool
) -> None:
    report = ee.verify_quantized_embedding(
        make(scheme), scheme=scheme, symmetric=symmetric, max_examples=40, seed=SEED
    )
    assert report.passed, str(report)
    assert 0 <= report.worst_error <= 1
    assert report.quantized is not None
    assert report.quantized.scheme == scheme


@pytest.mark.slow  # two whole runs; test_correct_kernels_pass is the fast tier's control
def test_float64_arithmetic_passes_and_the_bound_is_not_slack() -> None:
    # Exact arithmetic rounded once passes; float32 arithmetic uses most of the bound (the
    # bound is derived, not padded): its worst error reaches at least half of it.
    def exact_then_round(input: torch.Tensor, qweight: Any, scale: Any, zp: Any) -> Any:
        exact = ee.dequantize_rowwise(qweight, scale, zp, "int8", dtype=torch.float64)
        return F.embedding(input, exact).to(scale.dtype)

    # 20 random examples after the boundary phase: float32 uses 99.8% of the bound there.
    exact = ee.verify_quantized_embedding(
        exact_then_round, scheme="int8", max_examples=20, seed=SEED
    )
    assert exact.passed, str(exact)
    float32 = ee.verify_quantized_embedding(
        _package_lookup("int8"), scheme="int8", max_examples=20, seed=SEED
    )
    assert float32.passed, str(float32)
    assert float32.worst_error > 0.5, str(float32)


# --------------------------------------------------------------------------------------------
# The bound
# --------------------------------------------------------------------------------------------


@given(
    exponent=st.integers(-160, 140),
    mantissa=st.floats(1.0, 2.0, exclude_max=True),
    dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
)
def test_float32_arithmetic_then_rounding_is_within_the_bound(
    exponent: int, mantissa: float, dtype: torch.dtype
) -> None:
    # The two roundings the bound admits, applied to a drawn exact value.
    exact = torch.tensor([math.ldexp(mantissa, exponent)], dtype=torch.float64)
    rounded = exact.to(torch.float32).to(dtype).double()
    expected, bound = quantized_output_bound(exact, dtype)
    # Overflow is judged as float32 arithmetic gives it, and as torch's own cast does.
    assert bool(expected.isinf()) == bool(rounded.isinf()) == bool(exact.to(dtype).isinf())
    if bool(expected.isinf()):
        assert float(bound) == 0
        assert torch.equal(expected, rounded)
        return
    assert float((rounded - exact).abs()) <= float(bound)


def test_rounds_to_inf_is_torchs_own_rounding() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        top = float(torch.finfo(dtype).max)
        ulp = 2.0 ** math.floor(math.log2(top)) * torch.finfo(dtype).eps
        # Below the threshold by more than float32's rounding: torch's cast goes through
        # float32 (two roundings), which a value closer to the threshold would show.
        edge = torch.tensor([top + ulp / 2, top + ulp / 2 * (1 - 2**-8)], dtype=torch.float64)
        assert rounds_to_inf(edge, dtype).tolist() == [True, False]
        assert edge.to(dtype).isinf().tolist() == [True, False]


def test_float64_scales_are_judged() -> None:
    # float64's largest value is 2**1024 (1 - 2**-53): log2 of it rounds to 1024.0, and
    # 2.0**1024 overflowed (an OverflowError from every float64 run). Its threshold is inf.
    top = float(torch.finfo(torch.float64).max)
    edge = torch.tensor([math.inf, -math.inf, top, -top, 1e300], dtype=torch.float64)
    assert rounds_to_inf(edge, torch.float64).tolist() == [True, True, False, False, False]
    # A float64 run now judges its examples: it finds the float16 arithmetic.
    (mutant,) = [m for m in QUANTIZED_MUTANTS if m.name == "computes_in_float16"]
    report = ee.verify_quantized_embedding(
        mutant.fn, scheme="int8", dtypes=[torch.float64], max_examples=5, seed=SEED
    )
    assert not report.passed
    assert report.failure is not None
    assert re.search(SYMPTOMS[mutant.name], report.failure, re.DOTALL), report.failure


def test_float16_arithmetic_exceeds_the_bound_of_a_float32_output() -> None:
    exact = torch.tensor([1.0 + 2.0**-11 + 2.0**-20], dtype=torch.float64)
    _, bound = quantized_output_bound(exact, torch.float32)
    assert float((exact.to(torch.float16).double() - exact).abs()) > float(bound)
    assert float(bound) < 2 * unit_roundoff(torch.float32) * 1.1


# --------------------------------------------------------------------------------------------
# The reference pair
# --------------------------------------------------------------------------------------------


@st.composite
def _tables(draw: st.DrawFn) -> torch.Tensor:
    """A float table with rows of very different magnitudes, constant rows and zero rows."""
    v = draw(st.integers(1, 6))
    d = 2 * draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
    info = torch.finfo(dtype)
    lo = math.ceil(math.log2(float(info.smallest_normal)))
    exps = draw(st.lists(st.integers(lo, 10), min_size=v, max_size=v))
    g = torch.Generator().manual_seed(seed)
    w = (
        torch.randn(v, d, generator=g, dtype=torch.float64)
        * torch.tensor([2.0**e for e in exps], dtype=torch.float64)[:, None]
    )
    for row in draw(st.lists(st.integers(0, v - 1), max_size=2)):
        w[row] = draw(st.sampled_from([0.0, 1.5, -3.0]))
    return w.to(dtype)


@given(weight=_tables(), kind=st.sampled_from(TABLE_KINDS))
@settings(max_examples=150)
def test_quantization_error_is_within_the_schemes_bound(
    weight: torch.Tensor, kind: tuple[str, bool]
) -> None:
    scheme, symmetric = kind
    table = ee.quantize_rowwise(weight, scheme, symmetric=symmetric)
    assert table.scale.dtype == weight.dtype
    assert (table.zero_point is None) == (symmetric or scheme.startswith("float8"))
    back = ee.dequantize_rowwise(*table, dtype=torch.float64)
    error = (back - weight.double()).abs()
    bound = quantization_error_bound(weight, table.scale, scheme)
    assert bool((error <= bound).all()), (error - bound).max()
    if not scheme.startswith("float8"):
        # The reference computes w / scale in float64: half a step, nothing clamped.
        half_step = table.scale.double()[:, None] * 0.5 * (1 + 2**-50)
        assert bool((error <= half_step).all()), (error - half_step).max()


def test_uint4_packs_even_columns_in_the_low_nibble() -> None:
    weight = torch.tensor([[0.0, 1.0, 2.0, 15.0]])
    table = ee.quantize_rowwise(weight, "uint4")
    assert table.qweight.shape == (1, 2)
    assert table.qweight.dtype == torch.uint8
    stored = unpack_uint4(table.qweight)
    assert stored.tolist() == [[0, 1, 2, 15]]  # scale 1, zero point 0: q = w
    assert table.qweight.tolist() == [[0 | 1 << 4, 2 | 15 << 4]]


# --------------------------------------------------------------------------------------------
# Bad input: the same error from every implementation
# --------------------------------------------------------------------------------------------

_Q = torch.zeros(3, 4, dtype=torch.int8)
_S = torch.ones(3)
_Z = torch.zeros(3, dtype=torch.int32)
BAD_TABLES = [
    ("int8", _Q.to(torch.uint8), _S, _Z, TypeError, r"stores qweight as torch\.int8"),
    ("int8", _Q, _S[:, None], _Z, ValueError, r"scale must have shape \(V,\) = \(3,\).*"
     r"got \(3, 1\); pass scale\.reshape\(-1\)"),
    ("int8", _Q, _S, _Z[:2], ValueError, r"zero_point must have shape \(V,\) = \(3,\)"),
    ("int8", _Q, _S, _Z.long(), TypeError, r"zero_point must be an int32.*zero_point\.to"),
    ("int8", _Q, _S.long(), _Z, TypeError, r"scale must be a floating tensor"),
    ("uint4", torch.zeros(3, 2, dtype=torch.uint8), _S, None, TypeError,
     r"needs a zero point per row"),
    ("float8_e4m3fn", _Q.to(torch.float8_e4m3fn), _S, _Z, TypeError, r"has no zero point.*"
     r"zero_point=None"),
    ("float8_e4m3fn", _Q.to(torch.float8_e5m2), _S, None, TypeError,
     r"stores qweight as torch\.float8_e4m3fn"),
    ("int4", _Q, _S, _Z, ValueError, r"scheme='int4' is not a quantization scheme; choose"),
]  # fmt: skip


def _implementations() -> list[Callable[..., Any]]:
    ids = torch.tensor([0, 2])
    return [
        lambda q, s, z, scheme: ee.dequantize_rowwise(q, s, z, scheme),
        lambda q, s, z, scheme: ee.lookup_quantized_embedding(ids, q, s, z, scheme=scheme),
        lambda q, s, z, scheme: QuantizedOracle(ids, q, s, z, scheme),
    ]


@pytest.mark.parametrize(("scheme", "q", "s", "z", "error", "message"), BAD_TABLES)
def test_bad_tables_get_one_clear_error_everywhere(
    scheme: str, q: torch.Tensor, s: torch.Tensor, z: Any, error: type, message: str
) -> None:
    for implementation in _implementations():
        with pytest.raises(error, match=message):
            implementation(q, s, z, scheme)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ee.quantize_rowwise(torch.zeros(2, 3), "uint4"), ValueError,
         r"D must be even, got D=3; pad the table"),
        (lambda: ee.quantize_rowwise(torch.zeros(2, 4), "uint4", symmetric=True), ValueError,
         r"symmetric=True applies to scheme='int8' only"),
        (lambda: ee.quantize_rowwise(torch.tensor([[0.0, math.inf]]), "int8"), ValueError,
         r"weight\[0, 1\] = inf is not finite"),
        (lambda: ee.quantize_rowwise(torch.zeros(2, 4, dtype=torch.int8), "int8"), TypeError,
         r"weight must be a floating"),
        (lambda: ee.lookup_quantized_embedding(torch.tensor([3]), _Q, _S, _Z, scheme="int8"),
         IndexError, r"input\[0\] = 3 is out of range for a weight with 3 rows"),
        (lambda: ee.verify_quantized_embedding(ee.lookup_embedding, scheme="int4"),
         InvalidArgument, r"scheme='int4' is not a quantization scheme"),
        (lambda: ees.quantized_embedding_cases("uint4", symmetric=True), InvalidArgument,
         r"symmetric=True applies to scheme='int8' only"),
        (lambda: ees.quantized_embedding_cases("uint4", embedding_dim=3), InvalidArgument,
         r"embedding_dim=3 is odd"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused(call: Callable[[], Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


# --------------------------------------------------------------------------------------------
# The strategy reaches what the issue names: wide magnitudes, constant rows
# --------------------------------------------------------------------------------------------


def _exact_output(case: ees.QuantizedEmbeddingCase) -> torch.Tensor:
    call = case.call()
    scale, zero_point = call.extra_args
    assert isinstance(scale, torch.Tensor)
    table = ee.QuantizedTable(call.weight, scale, zero_point, case.scheme)
    return ee.dequantize_rowwise(*table, dtype=torch.float64)


def _reaches(predicate: Callable[[ees.QuantizedEmbeddingCase], bool], scheme: str) -> bool:
    found = []

    cases = ees.quantized_embedding_cases(
        scheme, dtype=torch.float32, vocab_size=st.integers(1, 64)
    )

    @given(cases)
    @settings(max_examples=300, database=None)
    def search(case: ees.QuantizedEmbeddingCase) -> None:
        if not found and predicate(case):
            found.append(case)

    search()
    return bool(found)


@pytest.mark.parametrize("scheme", ["int8", pytest.param("float8_e5m2", marks=pytest.mark.slow)])
def test_tables_reach_float16_overflow_and_values_near_zero(scheme: str) -> None:
    assert _reaches(lambda c: bool((_exact_output(c).abs() > 65504).any()), scheme)
    tiny = float(torch.finfo(torch.float16).smallest_normal)
    assert _reaches(
        lambda c: bool(((_exact_output(c).abs() < tiny) & (_exact_output(c) != 0)).any()), scheme
    )


def test_tables_hold_constant_rows_and_rows_of_zeros() -> None:
    def constant_and_zero(case: ees.QuantizedEmbeddingCase) -> bool:
        exact = _exact_output(case)
        if exact.shape[1] < 2:
            return False
        constant = (exact == exact[:, :1]) & (exact[:, :1] != 0)
        return bool(constant.all(dim=1).any()) and bool((exact == 0).all(dim=1).any())

    assert _reaches(constant_and_zero, "int8")


@given(ees.quantized_embedding_cases("uint4"))
@settings(max_examples=30)
def test_a_cases_snippet_rebuilds_its_tensors(case: ees.QuantizedEmbeddingCase) -> None:
    # A right kernel: the snippet's exact check passes, and the snippet runs through.
    namespace: dict[str, Any] = {"candidate": _package_lookup("uint4")}
    exec(case.source(), namespace)
    call = case.call()
    assert torch.equal(namespace["input"], call.input)
    assert torch.equal(namespace["qweight"], call.weight)
    scale, zero_point = call.extra_args
    assert scale is not None
    assert torch.equal(namespace["scale"], scale)
    assert zero_point is not None
    assert torch.equal(namespace["zero_point"], zero_point)
    assert call.weight.shape[1] * 2 == case.table.embedding_dim
