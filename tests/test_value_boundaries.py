"""The value boundaries: values at the limits of each dtype, in every verifier's boundary phase.

Each kernel of ``value_mutants.py`` is right at every size and on every drawn value, and wrong
at a dtype's limits: a run of one random example (which cannot reach them) must catch it in
the boundary phase, under any seed, and name the value boundary it crossed. The right kernels
pass the same examples: the oracle and its bounds accept every one, and every exact value
stays finite in its dtype.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import embedding_equivalence as ee
from bag_mutants import hand_written_bag
from embedding_equivalence import strategies as ees
from embedding_equivalence import testing as eet
from embedding_equivalence._draw.boundaries import (
    bag_boundaries,
    embedding_boundaries,
    quantized_boundaries,
)
from embedding_equivalence._draw.boundary_data import Boundary
from embedding_equivalence._engine.boundary_phase import run_boundaries
from embedding_equivalence._engine.check import check_case
from embedding_equivalence.forms.dtypes import dtype_name
from embedding_equivalence.forms.quantized import check_scheme
from embedding_equivalence.oracle.bag import BagOracle
from embedding_equivalence.oracle.bounds import subnormal_loss
from embedding_equivalence.oracle.embedding import EmbeddingOracle
from embedding_equivalence.oracle.quantized import QuantizedOracle
from mutants import blocked_embedding
from quantized_mutants import hand_written_quantized
from registry import form_params
from value_mutants import VALUE_BAG_MUTANTS, VALUE_MUTANTS, VALUE_QUANTIZED_MUTANTS

SEEDS = st.integers(0, 2**32 - 1)
#: Two drawn seeds (or draws) per test keep the fast tier cheap. deadline=None: torch's first
#: calls pay for lazy initialisation; no nested-given check: each example runs a verifier's
#: own Hypothesis search, which is the point.
FEW = settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.nested_given])
FLOAT_DTYPES = ees.supported_float_dtypes("cpu")


def values(boundaries: Iterable[Boundary]) -> list[Boundary]:
    """The value examples among ``boundaries``."""
    return [b for b in boundaries if b.axis == "value"]


def value_labels(boundaries: Iterable[Boundary]) -> set[str]:
    """What a report's ``boundary`` says when one of the value examples fails first."""
    return {f"fails at {b.label}" for b in values(boundaries)}


# --------------------------------------------------------------------------------------------
# Each planted kernel fails at a value boundary, under any seed, and its repro fails too.
# --------------------------------------------------------------------------------------------


def run_embedding(mutant: Any, seed: int) -> tuple[Any, list[Boundary]]:
    report = ee.verify_embedding(mutant.fn, options=mutant.options, max_examples=1, seed=seed)
    return report, list(embedding_boundaries(mutant.options, report.dtypes, report.devices))


def run_bag(mutant: Any, seed: int) -> tuple[Any, list[Boundary]]:
    report = ee.verify_embedding_bag(mutant.fn, options=mutant.options, max_examples=3, seed=seed)
    assert report.bag is not None
    modes = report.bag.modes
    return report, list(bag_boundaries(mutant.options, modes, report.dtypes, report.devices))


def run_quantized(mutant: Any, seed: int) -> tuple[Any, list[Boundary]]:
    report = ee.verify_quantized_embedding(
        mutant.fn, scheme=mutant.scheme, max_examples=1, seed=seed
    )
    return report, list(quantized_boundaries(mutant.scheme, False, report.dtypes, report.devices))


#: Each mutant and the verifier that runs it.
MUTANT_RUNS = [
    *[(run_embedding, m) for m in VALUE_MUTANTS],
    *[(run_bag, m) for m in VALUE_BAG_MUTANTS],
    *[(run_quantized, m) for m in VALUE_QUANTIZED_MUTANTS],
]
#: The dtype a bug lives in, where it lives in one: the bfloat16 kernels' in bfloat16, the
#: divided sum's in float16 (the one dtype whose twice largest value a float32 accumulator
#: holds). The fast-math flushes lose the subnormals of every dtype.
BUG_DTYPES = {
    "bfloat16_gradients_summed_in_float16": torch.bfloat16,
    "bfloat16_table_read_through_float16": torch.bfloat16,
    "freq_scale_divides_the_sum": torch.float16,
    "bfloat16_bags_held_in_float16": torch.bfloat16,
    "bfloat16_scales_stored_in_float16": torch.bfloat16,
}


@pytest.mark.parametrize(("run", "mutant"), MUTANT_RUNS, ids=[m.name for _, m in MUTANT_RUNS])
@FEW
@given(seed=SEEDS)
def test_each_value_mutant_fails_at_a_value_boundary(
    run: Callable[[Any, int], tuple[Any, list[Boundary]]], mutant: Any, seed: int
) -> None:
    report, boundaries = run(mutant, seed)
    assert not report.passed, f"{mutant.name} passed under seed {seed}"
    assert report.boundary in value_labels(boundaries), report.boundary
    assert report.torch_defect is None  # the example as it failed: torch's own kernel passes it
    if mutant.name in BUG_DTYPES:
        assert report.boundary.endswith(f"{dtype_name(BUG_DTYPES[mutant.name])})")
    snippet = report.counterexample
    assert snippet is not None
    assert f"import {mutant.name} as candidate" in snippet
    with pytest.raises(AssertionError):  # the repro asserts while the bug is there
        exec(compile(snippet, f"<counterexample of {mutant.name}>", "exec"), {})


def test_the_catalogue_is_well_formed() -> None:
    names = [m.name for _, m in MUTANT_RUNS]
    assert len(set(names)) == len(names)
    assert set(BUG_DTYPES) <= set(names)
    for _, m in MUTANT_RUNS:
        assert m.fn.__name__ == m.name
        assert m.fn.__doc__, f"{m.name} must say which bug it plants"


# --------------------------------------------------------------------------------------------
# The right kernels pass every value example: the oracle and its bounds accept them.
# --------------------------------------------------------------------------------------------


#: Torch's lookup, the suite's blocked kernel and the package's forms, with every option. The
#: forms run in the slow tier (the fast tier tests them on every other property).
RIGHT_LOOKUPS = [
    pytest.param(F.embedding, ees.EMBEDDING_OPTIONS, id="F.embedding"),
    pytest.param(blocked_embedding, ees.EMBEDDING_OPTIONS, id="blocked_embedding"),
    *form_params("embedding", with_options=True, marks=pytest.mark.slow),
]
RIGHT_BAGS = [
    pytest.param(F.embedding_bag, ees.BAG_OPTIONS, id="F.embedding_bag"),
    pytest.param(hand_written_bag, ees.BAG_OPTIONS, id="hand_written_bag"),
    *form_params("bag", with_options=True, marks=pytest.mark.slow),
]
RIGHT_QUANTIZED = [
    pytest.param(fn, scheme, symmetric, id=f"{name}-{scheme}{'-symmetric' * symmetric}")
    for name, fn in (
        ("lookup_quantized_embedding", ee.lookup_quantized_embedding),
        ("hand_written_quantized", hand_written_quantized),
    )
    for scheme, symmetric in (*((s, False) for s in ee.SCHEMES), ("int8", True))
]


def assert_every_example_passes(
    kernel: Callable[..., Any], examples: list[Boundary], oracle: Any, backward: bool = True
) -> None:
    """Run the value examples through the engine's own check, as the boundary phase does."""
    __tracebackhide__ = True
    assert examples

    def check(case: Any) -> None:
        check_case(kernel, case, oracle, backward=backward)

    found = run_boundaries(examples, check)
    assert found is None, f"{found.crossed}: {found.error}"


@pytest.mark.parametrize(("kernel", "options"), RIGHT_LOOKUPS)
def test_right_lookups_pass_the_value_examples(
    kernel: Callable[..., Any], options: tuple[str, ...], embedding_device: str
) -> None:
    every = ees.supported_float_dtypes(embedding_device)

    @FEW
    @given(named=st.lists(st.sampled_from(options), unique=True), dtypes=st.permutations(every))
    @example(named=list(options), dtypes=every)  # every option: the most examples
    def check(named: list[str], dtypes: list[torch.dtype]) -> None:
        examples = values(embedding_boundaries(named, dtypes, [embedding_device]))
        assert_every_example_passes(kernel, examples, EmbeddingOracle.for_call)

    check()


@pytest.mark.parametrize(("kernel", "options"), RIGHT_BAGS)
def test_right_bags_pass_the_value_examples(
    kernel: Callable[..., Any], options: tuple[str, ...], embedding_device: str
) -> None:
    every = ees.supported_float_dtypes(embedding_device)

    @FEW
    @given(
        named=st.lists(st.sampled_from(options), unique=True),
        modes=st.lists(st.sampled_from(ees.BAG_MODES), min_size=1, unique=True),
        dtypes=st.permutations(every),
    )
    @example(named=list(options), modes=list(ees.BAG_MODES), dtypes=every)
    def check(named: list[str], modes: list[str], dtypes: list[torch.dtype]) -> None:
        examples = values(bag_boundaries(named, modes, dtypes, [embedding_device]))
        assert_every_example_passes(kernel, examples, BagOracle.for_call)

    check()


@pytest.mark.parametrize(("kernel", "scheme", "symmetric"), RIGHT_QUANTIZED)
def test_right_quantized_lookups_pass_the_value_examples(
    kernel: Callable[..., Any], scheme: str, symmetric: bool, embedding_device: str
) -> None:
    def fn(input: Any, qweight: Any, scale: Any, zero_point: Any) -> Any:
        return kernel(input, qweight, scale, zero_point, scheme=scheme)

    @FEW
    @given(dtypes=st.permutations(ees.QUANTIZED_SCALE_DTYPES))
    def check(dtypes: list[torch.dtype]) -> None:
        examples = values(quantized_boundaries(scheme, symmetric, dtypes, [embedding_device]))
        assert_every_example_passes(fn, examples, QuantizedOracle.factory(scheme), False)

    check()


@pytest.mark.slow  # three whole runs: every boundary example of each verifier, sizes included
@pytest.mark.parametrize(
    "run",
    [
        lambda seed: ee.verify_embedding(
            F.embedding,
            options=("padding_idx", "max_norm", "scale_grad_by_freq"),
            seed=seed,
            max_examples=10,
        ),
        lambda seed: ee.verify_embedding_bag(
            ee.lookup_embedding_bag, options=ees.BAG_OPTIONS, seed=seed, max_examples=10
        ),
        lambda seed: ee.verify_quantized_embedding(
            functools.partial(ee.lookup_quantized_embedding, scheme="int8"),
            scheme="int8",
            seed=seed,
            max_examples=10,
        ),
    ],
    ids=["F.embedding", "lookup_embedding_bag", "lookup_quantized_embedding"],
)
@settings(FEW, max_examples=1)
@given(seed=SEEDS)
def test_right_kernels_pass_a_whole_run_under_a_drawn_seed(
    run: Callable[[int], Any], seed: int
) -> None:
    report = run(seed)
    assert report.passed, str(report)
    assert report.boundary_examples > 0


def division_example(dtypes: list[torch.dtype]) -> list[Boundary]:
    """The value examples that only ``scale_grad_by_freq`` adds."""
    plain = {b.label for b in values(embedding_boundaries((), dtypes, ["cpu"]))}
    scaled = values(embedding_boundaries(("scale_grad_by_freq",), dtypes, ["cpu"]))
    return [b for b in scaled if b.label not in plain]


@pytest.mark.parametrize(
    "form", [p.values[0] for p in form_params("embedding")], ids=lambda f: f.__name__
)
def test_the_forms_scale_each_occurrence_before_the_sum(form: Callable[..., Any]) -> None:
    """As torch: a float16 row sum past 65,504 would be inf before a division by the count."""
    (example,) = division_example([torch.float16])
    check_case(form, example.case, EmbeddingOracle.for_call)


def test_torch_scales_each_occurrence_where_the_sum_overflows() -> None:
    (example,) = division_example(FLOAT_DTYPES)
    check_case(F.embedding, example.case, EmbeddingOracle.for_call)
    call = example.case.call()
    F.embedding(call.input, call.weight).backward(call.grad_output)  # unscaled: the sum
    assert call.weight.grad is not None
    assert bool(call.weight.grad.isinf().any())


# --------------------------------------------------------------------------------------------
# The examples themselves: values at the limits, exact values within range, replayable.
# --------------------------------------------------------------------------------------------


def placed(case: Any) -> list[float]:
    """The values a value example places in its table and its upstream gradient."""
    return [x for *_, x in (*case.weight.specials, *case.grad_values)]


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The next value after zero, as torch's ``nextafter`` finds it."""
    zero = torch.zeros((), dtype=dtype)
    return float(torch.nextafter(zero, torch.ones((), dtype=dtype)))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (a ``-0.0`` is not a ``0.0``)."""
    return a.dtype == b.dtype and torch.equal(a.contiguous().view(torch.uint8),
                                              b.contiguous().view(torch.uint8))  # fmt: skip


#: A draw of the options that the lookups' value examples read, and of a dtype.
NAMED = st.lists(st.sampled_from(ees.EMBEDDING_OPTIONS), unique=True)
DTYPES = st.sampled_from(FLOAT_DTYPES)


@pytest.mark.slow  # every dtype's examples, built whole
@settings(max_examples=10, deadline=None)
@given(dtype=DTYPES, named=NAMED)
def test_the_values_reach_the_limits_of_the_dtype(dtype: torch.dtype, named: list[str]) -> None:
    examples = values(embedding_boundaries(named, [dtype], ["cpu"]))
    magnitudes = {abs(x) for b in examples for x in placed(b.case)}
    info = torch.finfo(dtype)
    assert {float(info.max), float(info.smallest_normal), smallest_subnormal(dtype)} <= magnitudes
    grads = [x for b in examples for *_, x in b.case.grad_values]
    assert any(x == 0 and math.copysign(1, x) < 0 for x in grads)  # a -0.0
    for b in examples:  # only named options, none that values at the limits leave out
        assert set(b.case.kwargs) <= set(named) - {"max_norm"}, b.label


@pytest.mark.slow  # every dtype's examples, built whole
@settings(max_examples=10, deadline=None)
@given(dtype=DTYPES, named=NAMED, mode=st.sampled_from(ees.BAG_MODES))
def test_every_exact_value_stays_within_the_dtype(
    dtype: torch.dtype, named: list[str], mode: str
) -> None:
    """The oracle holds a result to its exact value: none may round to an infinity."""
    top = float(torch.finfo(dtype).max)
    bag_named = [o for o in ees.BAG_OPTIONS if o in named or o == "include_last_offset"]
    examples = [
        (b, EmbeddingOracle.for_call) for b in values(embedding_boundaries(named, [dtype], ["cpu"]))
    ] + [
        (b, BagOracle.for_call)
        for b in values(bag_boundaries(bag_named, [mode], [dtype], ["cpu"]))
    ]  # fmt: skip
    for b, oracle_for in examples:
        call = b.case.call()
        oracle = oracle_for(call)
        assert call.grad_output is not None
        for exact in (oracle.output()[0], oracle.weight_grad(call.grad_output).values):
            assert bool((exact.abs() <= top).all()), b.label


def test_sums_pass_a_narrower_dtype_term_by_term() -> None:
    """bfloat16 gradients within float16's range whose sum passes 65,504; and float16 sums
    that pass it before ``scale_grad_by_freq``'s division, whose quotient does not."""
    half = float(torch.finfo(torch.float16).max)
    crossed = []
    for b in values(embedding_boundaries((), [torch.bfloat16], ["cpu"])):
        call = b.case.call()
        assert call.grad_output is not None
        grad = EmbeddingOracle.for_call(call).weight_grad(call.grad_output).values
        terms = call.grad_output.double().abs()
        if bool((grad.abs() > half).any()) and bool((terms <= half).all()):
            crossed.append(b.label)
    assert crossed
    (example,) = division_example([torch.float16])
    call = example.case.call()
    assert call.grad_output is not None
    plain = EmbeddingOracle(call.input, call.weight).weight_grad(call.grad_output).values
    scaled = EmbeddingOracle.for_call(call).weight_grad(call.grad_output).values
    assert bool((plain.abs() > half).any())
    assert bool((scaled.abs() <= half).all())


def test_the_value_examples_replay_bit_for_bit() -> None:
    """The snippet's lines make the very tensors of the example, signed zeros included."""
    cases = [b.case for b in values(embedding_boundaries(("scale_grad_by_freq",), FLOAT_DTYPES,
                                                         ["cpu"]))]  # fmt: skip
    cases += [b.case for b in values(bag_boundaries((), ("mean",), FLOAT_DTYPES, ["cpu"]))]
    for case in cases:
        namespace: dict[str, Any] = {"torch": torch}
        exec(case.weight.source("weight") + "\n" + case.grad_output_source(), namespace)
        assert same_bits(namespace["weight"].detach(), case.weight.build())
        assert same_bits(namespace["grad_output"], case.grad_output())
    for b in values(quantized_boundaries("int8", False, ees.QUANTIZED_SCALE_DTYPES, ["cpu"])):
        namespace = {"torch": torch}
        exec(b.case.table.source(), namespace)
        for name, built in zip(
            ("qweight", "scale", "zero_point"), b.case.table.build(), strict=True
        ):
            assert same_bits(namespace[name], built), name


@pytest.mark.parametrize(
    ("scheme", "symmetric"), [("int8", False), ("int8", True), ("uint4", False)]
)
def test_quantized_scales_and_zero_points_reach_their_limits(scheme: str, symmetric: bool) -> None:
    s = check_scheme(scheme, "test")
    for dtype in ees.QUANTIZED_SCALE_DTYPES:
        tables = [b.case.table.build() for b in values(
            quantized_boundaries(scheme, symmetric, [dtype], ["cpu"]))]  # fmt: skip
        scales = {float(x) for _, scale, _ in tables for x in scale}
        info = torch.finfo(dtype)
        assert {float(info.max), float(info.smallest_normal), smallest_subnormal(dtype)} <= scales
        if not symmetric:
            points = {int(x) for *_, zp in tables for x in zp}
            assert {s.qmin, s.qmax} <= points


# --------------------------------------------------------------------------------------------
# float64's subnormals: half the smallest one is not a float64, the bound still holds a step.
# --------------------------------------------------------------------------------------------


def test_float64_halves_of_the_smallest_subnormal_are_within_the_bound() -> None:
    """torch scales each occurrence: ``s / 2`` twice rounds to 0 where the exact value is ``s``.

    Before ``subnormal_loss(float64)`` was the smallest subnormal, it was ``2**-1075``, a
    zero in float64: every subnormal rounding was judged as exact and torch's own kernel
    failed here.
    """
    s = smallest_subnormal(torch.float64)
    assert subnormal_loss(torch.float64) == s > 0
    ids = torch.tensor([0, 0, 1])
    weight = torch.zeros(2, 1, dtype=torch.float64)
    grad_output = torch.tensor([[s], [s], [3 * s]], dtype=torch.float64)
    eet.assert_backward_equivalent(F.embedding, ids, weight, grad_output, scale_grad_by_freq=True)
    # A bag's mean halves an odd multiple of s: torch rounds it, within the same bound.
    bags = torch.tensor([[0, 1]])
    table = torch.tensor([[s], [2 * s]], dtype=torch.float64)
    eet.assert_bag_forward_equivalent(F.embedding_bag, bags, table, None, mode="mean")
