"""verify_embedding: the report, replay, global state, and argument checks."""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee


def _negative_ids_wrap(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return weight[input].clone()  # Python-style wrap of -1 to the last row


def test_report_of_a_passing_candidate() -> None:
    # The report's fields, on the random examples (test_boundaries runs the phase).
    report = ee.verify_embedding(ee.lookup_embedding, max_examples=20, seed=3, boundaries=False)
    assert report.passed
    assert report.examples == 20 + report.boundary_examples
    assert report.counterexample is None
    assert report.failure is None
    assert 0.0 <= report.worst_error <= 1.0
    assert report.seed == 3
    assert report.examples_per_second > 0
    report.raise_for_failure()  # no-op
    assert f"PASSED after {report.examples} examples" in str(report)


# Seed 3 draws a negative id among its invalid examples (seeds 0 to 2, with 100 examples, do
# not: see tests/test_mutants.py).
WRAP_SEED = 3


def test_report_of_a_failing_candidate() -> None:
    report = ee.verify_embedding(_negative_ids_wrap, seed=WRAP_SEED)
    assert not report.passed
    assert report.failure is not None
    assert "negative id" in report.failure
    assert report.counterexample is not None
    assert "from test_verify import _negative_ids_wrap as candidate" in report.counterexample
    with pytest.raises(ee.EquivalenceError, match="Minimal counterexample"):
        report.raise_for_failure()


def test_the_counterexample_runs() -> None:
    report = ee.verify_embedding(_negative_ids_wrap, seed=WRAP_SEED)
    assert report.counterexample is not None
    namespace: dict[str, Any] = {}
    with pytest.raises(AssertionError, match=r"the call must raise \(negative id -1\)"):
        exec(report.counterexample, namespace)  # imports the candidate from this module
    assert namespace["out"].shape == (1, 1)  # the candidate accepted the boundary example [-1]


def test_the_seed_replays_the_run() -> None:
    first = ee.verify_embedding(_negative_ids_wrap, seed=11)
    second = ee.verify_embedding(_negative_ids_wrap, seed=first.seed)
    assert (first.examples, first.counterexample) == (second.examples, second.counterexample)


def test_a_random_run_records_its_seed() -> None:
    # The random phase alone: the boundary phase is the same under every seed.
    report = ee.verify_embedding(ee.lookup_embedding, max_examples=5, boundaries=False)
    replay = ee.verify_embedding(
        ee.lookup_embedding, max_examples=5, seed=report.seed, boundaries=False
    )
    assert replay.passed
    assert report.passed


def _vandal(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A candidate that changes every piece of global state it can reach."""
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(1234)
    random.seed(99)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("medium")
    out = ee.lookup_embedding(input, weight)
    torch.set_grad_enabled(False)
    return out


def test_global_state_is_restored() -> None:
    rng = torch.random.get_rng_state()
    py = random.getstate()
    before = (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    report = ee.verify_embedding(_vandal, max_examples=5, seed=0)
    after = (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    assert after == before
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert random.getstate() == py
    assert not report.passed  # grad mode switched off mid-run breaks its own backward


@pytest.mark.parametrize(
    "kwargs",
    [
        {"options": ("dropout",)},
        {"options": "padding_idx"},
        {"dtypes": [torch.int64]},
        {"max_examples": 0},
        {"devices": ["mps"] if not torch.backends.mps.is_available() else ["xla"]},
    ],
    ids=["unknown-option", "bare-string-options", "int-dtype", "zero-examples", "absent-device"],
)
def test_invalid_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        ee.verify_embedding(ee.lookup_embedding, **kwargs)


def test_forward_only() -> None:
    def detached(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return ee.lookup_embedding(input, weight.detach())

    assert ee.verify_embedding(detached, backward=False, max_examples=15, seed=0).passed
    assert not ee.verify_embedding(detached, max_examples=15, seed=0).passed


def test_restricted_dtypes_and_devices_are_reported() -> None:
    report = ee.verify_embedding(
        ee.matmul_embedding, dtypes=[torch.bfloat16], devices=["cpu"], max_examples=10, seed=0,
        boundaries=False,  # the one-hots of the phase's sizes: seconds, and beside the point
    )  # fmt: skip
    assert report.passed
    assert report.dtypes == (torch.bfloat16,)
    assert report.devices == ("cpu",)


def test_a_seed_replays_after_new_local_modules_are_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hypothesis mixes the literals of loaded local modules into its draws; the verifiers
    # draw without them, so that a report's seed replays in another program too.
    def recording() -> tuple[list[tuple[float, ...]], Any]:
        seen: list[tuple[float, ...]] = []

        def candidate(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            drawn = (*input.shape, *weight.shape, *input.reshape(-1).tolist())
            seen.append((*drawn, float(weight.double().sum())))  # the table's seed too
            return torch.nn.functional.embedding(input, weight)

        return seen, candidate

    def verify(candidate: Any) -> bool:  # the random phase: the boundary phase draws nothing
        report = ee.verify_embedding(
            candidate, max_examples=60, seed=3, backward=False, boundaries=False
        )
        return report.passed

    first, candidate = recording()
    assert verify(candidate)
    literals = ", ".join(str(7919 * k + 13) for k in range(300))
    (tmp_path / "many_literals.py").write_text(f"VALUES = [{literals}, 0.3, -2.5e-7]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("many_literals")
    second, candidate = recording()
    assert verify(candidate)
    assert first == second
