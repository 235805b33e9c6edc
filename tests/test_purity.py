"""Meta-tests of the purity contract: what a kernel must not do to the caller's memory and state.

Each kernel of ``tests/purity_mutants.py`` returns the right values and gradient and breaks
one clause of the contract; its verifier must fail it with the symptom of that clause, under
its default settings (only the options the bug needs), and its repro must fail while the bug
is there. The right kernels pass the same checks: ``F.embedding``, ``F.embedding_bag`` and the
package's forms, also under ``deterministic=True``. The seed is fixed (the verifiers are
Hypothesis runs); ``benchmarks/catch_rates.py --families purity`` measures the catch over 30.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import embedding_equivalence as ee
from embedding_equivalence._engine.purity import first_difference, poisoned_memory
from forked import run_python
from purity_mutants import PURITY_MUTANTS, PurityMutant

SEED = 0
TESTS = Path(__file__).parent


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: small tensors, and a busy 2-core machine (see test_mutants.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def verify(mutant: PurityMutant, **kwargs: object) -> ee.VerificationReport:
    """The mutant's verifier with its defaults (and ``deterministic`` where it needs it)."""
    if mutant.deterministic:
        kwargs["deterministic"] = True
    if mutant.verifier == "bag":
        return ee.verify_embedding_bag(mutant.fn, options=mutant.options, seed=SEED, **kwargs)  # type: ignore[arg-type]
    if mutant.verifier == "quantized":
        return ee.verify_quantized_embedding(mutant.fn, scheme="int8", seed=SEED, **kwargs)  # type: ignore[arg-type]
    return ee.verify_embedding(mutant.fn, options=mutant.options, seed=SEED, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("mutant", PURITY_MUTANTS, ids=[m.name for m in PURITY_MUTANTS])
def test_each_side_effect_is_caught_and_named(mutant: PurityMutant) -> None:
    report = verify(mutant)
    assert not report.passed, f"{mutant.name} was not caught:\n{report}"
    assert report.failure is not None
    assert re.search(mutant.symptom, report.failure, re.DOTALL), report.failure


@pytest.mark.slow  # each repro runs in a fresh interpreter
@pytest.mark.parametrize("mutant", PURITY_MUTANTS, ids=[m.name for m in PURITY_MUTANTS])
def test_each_repro_fails_while_the_side_effect_is_there(
    mutant: PurityMutant, tmp_path: Path
) -> None:
    report = verify(mutant)
    assert report.counterexample is not None
    script = tmp_path / "repro.py"
    script.write_text(report.counterexample)
    run = run_python(
        [str(script)], capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(TESTS), "PATH": ""},
    )  # fmt: skip
    assert run.returncode != 0, f"the repro of {mutant.name} passed:\n{report.counterexample}"
    assert "EquivalenceError" in run.stderr, run.stderr[-2000:]


def test_determinism_is_asked_for_not_assumed() -> None:
    """A bound-respecting sum in a varying order is correct unless runs must agree."""
    racy = next(m for m in PURITY_MUTANTS if m.deterministic)
    report = ee.verify_embedding(
        racy.fn, options=racy.options, seed=SEED, max_examples=30, boundaries=False
    )
    assert report.passed, report.failure


@pytest.mark.parametrize(
    "fn", [F.embedding, ee.lookup_embedding, ee.matmul_embedding], ids=lambda f: f.__name__
)
def test_right_kernels_pass_deterministic_runs(fn: object) -> None:
    report = ee.verify_embedding(  # the random examples: the phase's sizes cost more than this
        fn,
        seed=SEED,
        max_examples=30,
        deterministic=True,
        boundaries=False,  # type: ignore[arg-type]
    )
    assert report.passed, report.failure


def test_right_bag_kernels_pass_deterministic_runs() -> None:
    report = ee.verify_embedding_bag(
        ee.lookup_embedding_bag, seed=SEED, max_examples=30, deterministic=True, boundaries=False
    )
    assert report.passed, report.failure


def test_poisoned_memory_fills_new_memory_and_restores_the_settings() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    with poisoned_memory():
        assert bool(torch.empty(8).isnan().all())
    assert torch.are_deterministic_algorithms_enabled() == before


#: A fresh interpreter verifies an eager kernel with inductor unloaded, then with it loaded and
#: the deterministic flags on; prints what it found.
_NO_COMPILER = """
import sys
import torch, torch.nn.functional as F
import embedding_equivalence as ee
assert ee.verify_embedding(F.embedding, max_examples=3, seed=0).passed
print("inductor loaded:", "torch._inductor.config" in sys.modules)
print("deterministic:", torch.are_deterministic_algorithms_enabled())
import torch._inductor.config as inductor
torch.use_deterministic_algorithms(True, warn_only=True)
assert ee.verify_embedding(F.embedding, max_examples=3, seed=0, boundaries=False).passed
warn = torch.is_deterministic_algorithms_warn_only_enabled()
print("restored:", torch.are_deterministic_algorithms_enabled(), warn, inductor.deterministic)
"""


@pytest.mark.slow  # a fresh interpreter
def test_an_eager_verification_loads_no_compiler_and_restores_the_flags() -> None:
    """``torch.use_deterministic_algorithms`` imports inductor (some 900 modules, seconds in a
    fresh process): the second call sets torch's own flag alone while inductor is not loaded;
    once it is, the flags there are restored as well."""
    run = run_python(["-c", _NO_COMPILER], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [
        "inductor loaded: False",
        "deterministic: False",
        "restored: True True True",
    ], run.stdout


def test_first_difference_is_bitwise() -> None:
    kept = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    assert first_difference("w", kept, kept.clone()) is None
    signed = kept.clone()
    signed[0, 0] = -0.0
    assert first_difference("w", kept, signed) == "w[0, 0] in place: 0.0 -> -0.0"
    nan = torch.tensor([float("nan")])
    assert first_difference("w", nan, nan.clone()) is None


@pytest.mark.slow  # starts a process group
@pytest.mark.parametrize(
    ("name", "symptom", "sizes"),
    [
        (
            "sharded_static_output",
            r"a second call on new values changed the first call's out",
            {},
        ),
        (
            "sharded_shard_zeroed",
            r"the call changed weight\.to_local\(\)\[\d+, \d+\] in place",
            {},
        ),
        (  # a shard past STAGE_MAX_BYTES (1 MiB): compared once, after the second call
            "sharded_large_shard_zeroed",
            r"the call, its backward pass or a second call changed weight\.to_local\(\)\[",
            {"vocab_sizes": 70_000, "embedding_dims": 8, "dtypes": [torch.float32]},
        ),
    ],
    ids=lambda x: x if isinstance(x, str) and x.startswith("sharded") else "",
)
def test_each_rank_checks_what_the_kernel_must_not_do(
    name: str, symptom: str, sizes: dict[str, Any]
) -> None:
    from embedding_equivalence.distributed import verify_sharded_embedding

    report = verify_sharded_embedding(
        f"purity_mutants:{name}", world_size=2, seed=SEED, max_examples=20, backward=False,
        **sizes,
    )  # fmt: skip
    assert not report.passed
    assert re.search(symptom, report.failure or ""), report.failure
