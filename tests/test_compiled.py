"""Compiled candidates: verified compiled on every example, fallbacks counted, replayed compiled.

The candidates are compiled with ``backend="aot_eager"``: dynamo traces and guards exactly as
with inductor (so recompiles and fallbacks are the same), without paying for C++ code
generation on every graph. ``benchmarks/compiled_speed.py`` times the default backend.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import embedding_equivalence as ee

# torch._dynamo is imported by the tests that need it: every pytest-xdist worker collects this
# module, and the import costs seconds.

SEED = 0


def wrong_when_compiled(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    """``F.embedding`` eagerly; twice the rows inside a compiled graph."""
    out = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return out * 2 if torch.compiler.is_compiling() else out


def test_a_kernel_wrong_only_when_compiled_is_caught() -> None:
    eager = ee.verify_embedding(wrong_when_compiled, max_examples=20, seed=SEED, boundaries=False)
    assert eager.passed, str(eager)  # the control: eagerly it is the embedding
    compiled = torch.compile(wrong_when_compiled, backend="aot_eager")
    report = ee.verify_embedding(compiled, seed=SEED)
    assert not report.passed
    assert report.candidate == "torch.compile(test_compiled.wrong_when_compiled)"
    assert report.failure is not None
    assert report.failure.startswith("out[")
    assert report.compiled is not None
    assert report.compiled.examples >= 1


def test_the_repro_rebuilds_the_compiled_candidate() -> None:
    compiled = torch.compile(wrong_when_compiled, backend="aot_eager")
    report = ee.verify_embedding(compiled, seed=SEED)
    assert report.counterexample is not None
    assert "from test_compiled import wrong_when_compiled as original" in report.counterexample
    assert "candidate = torch.compile(original)" in report.counterexample
    assert "import wrong_when_compiled as candidate" not in report.counterexample
    namespace: dict[str, object] = {}
    with pytest.raises(AssertionError):  # the script's exact check fails, as it must
        exec(report.counterexample, namespace)  # replays compiled: the doubled rows come back
    candidate, weight = namespace["candidate"], namespace["weight"]
    assert isinstance(weight, torch.Tensor)
    out = candidate(namespace["input"], weight.detach())  # type: ignore[operator]
    assert torch.equal(out, 2 * F.embedding(namespace["input"], weight.detach()))  # type: ignore[arg-type]


@pytest.mark.slow  # a graph for each of the boundary examples' shapes and options
def test_every_example_runs_compiled_past_dynamos_recompile_limit() -> None:
    import torch._dynamo
    from torch._dynamo.utils import counters

    limit = torch._dynamo.config.recompile_limit
    graphs = counters["stats"]["unique_graphs"]
    compiled = torch.compile(F.embedding, backend="aot_eager")
    report = ee.verify_embedding(compiled, seed=SEED)
    assert report.passed, str(report)
    assert report.compiled is not None
    assert report.compiled.examples + report.compiled.eager_fallbacks == report.examples
    assert report.examples == 100 + report.boundary_examples  # every boundary example compiled
    # More graphs than dynamo's limit would allow: the verifier raised it for the run...
    assert counters["stats"]["unique_graphs"] - graphs == report.compiled.graphs > limit
    # ... yet a graph per new guard set, not per example: sizes turn dynamic, and the purity
    # checks' second call reaches the first call's graph (a poisoned, deterministic-mode call
    # would compile every graph twice, more graphs than examples).
    assert report.compiled.graphs < report.examples / 2
    # ... and restored it afterwards.
    assert torch._dynamo.config.recompile_limit == limit
    # The only fallbacks are bad input that dynamo could not trace (the eager call raises).
    assert set(report.compiled.fallback_reasons) <= {"RuntimeError when making fake tensor call"}
    assert f"{report.compiled.graphs} graphs compiled" in str(report)


def test_the_repro_of_a_compiled_torch_function_imports_the_function_it_wraps() -> None:
    compiled = torch.compile(F.embedding, backend="aot_eager")
    from embedding_equivalence._engine.repro import candidate_source

    source = candidate_source(compiled)
    assert "from torch.nn.functional import embedding as original" in source
    assert "candidate = torch.compile(original)" in source
    assert "import embedding as candidate" not in source


def test_a_compiled_local_function_is_said_to_be_not_rebuildable() -> None:
    def doubled(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.embedding(input, weight) * 2

    from embedding_equivalence._engine.repro import candidate_source

    source = candidate_source(torch.compile(doubled, backend="aot_eager"))
    assert "cannot be imported by its qualified name either" in source
    assert "candidate = torch.compile(...)" in source


@pytest.mark.parametrize(
    "boundaries", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["random", "phase"]
)
def test_a_compiled_module_is_counted_and_named_after_its_module(boundaries: bool) -> None:
    class Lookup(torch.nn.Module):
        def forward(self, input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            return F.embedding(input, weight)

    compiled = torch.compile(Lookup(), backend="aot_eager")
    report = ee.verify_embedding(compiled, max_examples=8, seed=SEED, boundaries=boundaries)
    assert report.passed, str(report)
    assert report.compiled is not None
    compiled_or_not = report.compiled.examples + report.compiled.eager_fallbacks
    assert compiled_or_not == report.examples == 8 + report.boundary_examples
    assert report.counterexample is None


@pytest.mark.parametrize("examples", [3, pytest.param(30, marks=pytest.mark.slow)])
def test_compiled_bag_counts_are_summed_over_the_modes(examples: int) -> None:
    compiled = torch.compile(F.embedding_bag, backend="aot_eager")
    # Without the boundary phase: it finds F.embedding_bag's own (B, 0) defect at once (see
    # test_boundaries); the counts of the random examples of each mode are what this checks.
    report = ee.verify_embedding_bag(compiled, max_examples=examples, seed=SEED, boundaries=False)
    assert report.passed, str(report)
    assert report.bag is not None
    assert report.bag.modes == ("sum", "mean", "max")
    assert report.compiled is not None
    assert report.compiled.examples + report.compiled.eager_fallbacks == examples


@pytest.mark.parametrize("torch_fails_too", [True, False])
def test_a_failure_that_torchs_compiled_function_shares_names_torch(
    monkeypatch: pytest.MonkeyPatch, torch_fails_too: bool
) -> None:
    """A compiled candidate's failure is torch's when ``torch.compile`` of torch's own
    ``F.embedding`` fails the same minimal case (inductor on a machine where it miscompiles;
    here a stand-in for it, so that the diagnosis is tested without an inductor build)."""
    candidate = torch.compile(wrong_when_compiled, backend="aot_eager")
    stand_in = candidate if torch_fails_too else torch.compile(F.embedding, backend="aot_eager")
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: stand_in)
    report = ee.verify_embedding(candidate, seed=SEED, max_examples=5)
    assert not report.passed
    if torch_fails_too:
        assert report.torch_defect == "embedding-compiled", str(report)
        assert "torch.compile(F.embedding) fails this case too" in str(report)
    else:
        assert report.torch_defect is None, str(report)
