"""Only the options named reach the kernel: in the boundary phase, the random phase, bad input.

With ``options=()`` an embedding kernel is called with ``(input, weight)`` alone, and a bag
kernel with ``(input, weight[, offsets])`` and ``mode``; with options named, those keywords
(and ``norm_type`` beside ``max_norm``) and no other. A kernel that ignores every option
therefore passes with ``options=()`` under every seed: an unnamed ``padding_idx`` (a valid
one, or a bad one that the kernel must refuse) never reaches it.

The strategies are checked over many draws; the verifiers over seeds drawn by Hypothesis,
each run small.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import embedding_equivalence as ee
import embedding_equivalence.strategies as ees
from embedding_equivalence._draw.boundaries import bag_boundaries, embedding_boundaries

#: The option sets tried: none, and each option alone.
EMBEDDING_NAMED = [(), *((o,) for o in ees.EMBEDDING_OPTIONS)]
BAG_NAMED = [(), *((o,) for o in ees.BAG_OPTIONS)]
#: One small, fast run: the CPU (where bad input is drawn) and one dtype, since which keywords
#: a call passes does not depend on the dtype.
SMALL: dict[str, Any] = {"devices": ["cpu"], "dtypes": [torch.float32]}
SEEDS = st.integers(0, 2**32 - 1)
#: Settings of a test that draws the seeds of whole verifications: each example runs the
#: verifier's own Hypothesis search, which is the point (hence no nested-given health check).
OVER_SEEDS = settings(suppress_health_check=[HealthCheck.nested_given])


def allowed(named: tuple[str, ...], bag: bool = False) -> set[str]:
    """The keywords a call may pass when ``named`` are the options."""
    return {*named, *(["norm_type"] if "max_norm" in named else []), *(["mode"] if bag else [])}


class Recording:
    """A kernel that records the keywords of its calls and computes ``form`` with them."""

    def __init__(self, form: Callable[..., torch.Tensor]) -> None:
        self.form = form
        self.keywords: set[str] = set()
        self.calls = 0

    def __call__(self, input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """``form(input, weight, *args, **kwargs)``, its keywords noted."""
        self.keywords.update(kwargs)
        self.calls += 1
        return self.form(input, weight, *args, **kwargs)


def ignoring_options(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    """``F.embedding``'s signature; every option ignored (right only without options)."""
    return ee.lookup_embedding(input, weight)


def ignoring_bag_options(
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
    """``F.embedding_bag``'s signature; every option but ``mode`` ignored."""
    return ee.lookup_embedding_bag(input, weight, offsets, mode=mode)


# --- the strategies: valid and bad calls ------------------------------------------------------


def _first_fast(named: list[tuple[str, ...]]) -> list[Any]:
    """The option sets, all but the first in the slow tier (each draws 200 cases)."""
    ids = [",".join(n) or "none" for n in named]
    return [
        pytest.param(n, id=i, marks=() if k == 0 else pytest.mark.slow)
        for k, (n, i) in enumerate(zip(named, ids, strict=True))
    ]


@pytest.mark.parametrize("named", _first_fast(EMBEDDING_NAMED))
@settings(max_examples=200)
@given(data=st.data())
def test_embedding_cases_pass_only_the_named_options(
    named: tuple[str, ...], data: st.DataObject
) -> None:
    case = data.draw(ees.embedding_cases(options=named, invalid=data.draw(st.booleans())))
    assert set(case.kwargs) <= allowed(named), (named, case.invalid, dict(case.kwargs))


@pytest.mark.parametrize("named", _first_fast(BAG_NAMED))
@settings(max_examples=200)
@given(data=st.data())
def test_bag_cases_pass_only_the_named_options(named: tuple[str, ...], data: st.DataObject) -> None:
    case = data.draw(ees.embedding_bag_cases(options=named, invalid=data.draw(st.booleans())))
    _, kwargs = case.arguments()
    assert set(kwargs) <= allowed(named, bag=True), (named, case.invalid, set(kwargs))


# --- the verifiers: the random phase under drawn seeds, the boundary phase ---------------------


@settings(OVER_SEEDS, max_examples=3)
@given(seed=SEEDS, named=st.sampled_from(EMBEDDING_NAMED))
def test_verify_embedding_passes_only_the_named_options(seed: int, named: tuple[str, ...]) -> None:
    kernel = Recording(ee.lookup_embedding)
    report = ee.verify_embedding(
        kernel, options=named, max_examples=40, seed=seed, boundaries=False, **SMALL
    )
    assert kernel.calls > report.examples // 2  # the examples reached the kernel
    assert kernel.keywords <= allowed(named), (seed, kernel.keywords)


@settings(OVER_SEEDS, max_examples=4)
@given(seed=SEEDS, named=st.sampled_from(BAG_NAMED))
def test_verify_embedding_bag_passes_only_the_named_options(
    seed: int, named: tuple[str, ...]
) -> None:
    kernel = Recording(ee.lookup_embedding_bag)
    report = ee.verify_embedding_bag(
        kernel, options=named, max_examples=30, seed=seed, boundaries=False, **SMALL
    )
    assert kernel.calls > report.examples // 2
    assert kernel.keywords <= allowed(named, bag=True), (seed, kernel.keywords)


@pytest.mark.parametrize("named", EMBEDDING_NAMED, ids=lambda n: ",".join(n) or "none")
def test_embedding_boundaries_pass_only_the_named_options(named: tuple[str, ...]) -> None:
    phase = list(embedding_boundaries(named, [torch.float32], ["cpu"]))
    assert any(b.case.invalid for b in phase)  # bad input is in the phase
    for b in phase:
        assert set(b.case.kwargs) <= allowed(named), (b.label, dict(b.case.kwargs))


@pytest.mark.parametrize("named", BAG_NAMED, ids=lambda n: ",".join(n) or "none")
def test_bag_boundaries_pass_only_the_named_options(named: tuple[str, ...]) -> None:
    phase = list(bag_boundaries(named, ees.BAG_MODES, [torch.float32], ["cpu"]))
    assert any(b.case.invalid for b in phase)
    for b in phase:
        weighted = ["per_sample_weights"] if b.case.per_sample_weights_seed is not None else []
        keywords = {*b.case.kwargs, "mode", *weighted}
        assert keywords <= allowed(named, bag=True), (b.label, keywords)


@pytest.mark.slow  # a quantized verification's boundary phase
def test_a_quantized_kernel_gets_no_keyword() -> None:
    kernel = Recording(functools.partial(ee.lookup_quantized_embedding, scheme="int8"))
    report = ee.verify_quantized_embedding(
        kernel, scheme="int8", max_examples=5, seed=0, devices=["cpu"], dtypes=[torch.float32]
    )
    assert report.passed, report.failure
    assert kernel.calls > 5
    assert kernel.keywords == set()


# --- a kernel that ignores every option is right without options, under every seed ------------


@settings(OVER_SEEDS, max_examples=3)
@given(seed=SEEDS)
def test_an_option_ignoring_kernel_passes_without_options(seed: int) -> None:
    report = ee.verify_embedding(
        ignoring_options, max_examples=50, seed=seed, boundaries=False, **SMALL
    )
    assert report.passed, report.failure


@pytest.mark.slow  # a verification over drawn seeds; its embedding twin is fast
@settings(OVER_SEEDS, max_examples=3)
@given(seed=SEEDS)
def test_an_option_ignoring_bag_kernel_passes_without_options(seed: int) -> None:
    report = ee.verify_embedding_bag(
        ignoring_bag_options, max_examples=45, seed=seed, boundaries=False, **SMALL
    )
    assert report.passed, report.failure


@pytest.mark.slow  # the whole boundary phase (its examples' keywords are checked above, fast)
@pytest.mark.parametrize(
    ("verify", "kernel"),
    [
        pytest.param(ee.verify_embedding, ignoring_options, id="embedding"),
        pytest.param(ee.verify_embedding_bag, ignoring_bag_options, id="bag"),
    ],
)
def test_an_option_ignoring_kernel_passes_the_boundary_phase_without_options(
    verify: Callable[..., ee.VerificationReport], kernel: Callable[..., torch.Tensor]
) -> None:
    report = verify(kernel, max_examples=1, seed=0, **SMALL)
    assert report.passed, report.failure
    assert report.boundary_examples > 20


def test_an_option_ignoring_kernel_fails_where_the_option_is_named() -> None:
    """The control: ignoring ``padding_idx`` is a bug that the verifier finds once named."""
    report = ee.verify_embedding(
        ignoring_options, options=("padding_idx",), max_examples=1, seed=0, **SMALL
    )
    assert not report.passed
