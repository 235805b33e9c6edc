"""``bench_embedding`` and ``embedding-equivalence bench``: verified first, then timed.

A failing kernel is refused before anything is timed. The fast tier stands a passing report
in for the verification where a test is about the timing's shape (the verification is the
verifiers' own tests' business); the slow tier runs the whole thing. No test asserts a speed:
the figures are printed by the command, never checked by a timed test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence._cli.main import BENCH_SCHEMA, main
from embedding_equivalence._engine import bench

TINY = {"vocab_sizes": [7, 30], "embedding_dims": [3], "num_ids": [5], "min_run_time": 0.001}


def clamps(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Wrong: an id out of range reads the last row instead of raising."""
    return F.embedding(input.clamp(0, weight.shape[0] - 1), weight)


@pytest.fixture
def verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """A passing verification in place of the real one (which the verifiers' tests test)."""
    passed = ee.verify_embedding(F.embedding, max_examples=1, boundaries=False, seed=0)
    monkeypatch.setattr(bench, "verify_embedding", lambda *args, **kwargs: passed)


@pytest.fixture
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything is timed."""

    def timer(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a kernel that failed verification was timed")

    monkeypatch.setattr(bench.benchmark, "Timer", timer)


def test_a_failing_kernel_is_refused_and_not_timed(no_timer: None) -> None:
    with pytest.raises(ee.EquivalenceError) as info:
        ee.bench_embedding(clamps, **TINY)
    assert "clamps" in info.value.message
    assert info.value.repro  # the runnable counterexample comes with the refusal


def test_every_size_and_stage_is_timed(verified: None) -> None:
    report = ee.bench_embedding(ee.lookup_embedding, **TINY)
    assert [(t.vocab_size, t.embedding_dim, t.num_ids, t.stage) for t in report.timings] == [
        (7, 3, 5, "forward"),
        (7, 3, 5, "forward+backward"),
        (30, 3, 5, "forward"),
        (30, 3, 5, "forward+backward"),
    ]
    for t in report.timings:
        assert t.candidate > 0
        assert t.reference > 0
        assert t.ratio == t.candidate / t.reference
        assert t.low <= t.ratio <= t.high  # quartiles around the medians
    text = str(report)
    assert text.splitlines()[0].startswith("embedding_equivalence.forms.lookup.lookup_embedding")
    assert "forward+backward" in text


def test_forward_only_times_the_forward_alone(verified: None) -> None:
    report = ee.bench_embedding(ee.lookup_embedding, backward=False, **TINY)
    assert {t.stage for t in report.timings} == {"forward"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vocab_sizes": [0]}, "vocab_sizes=[0] must be positive ints"),
        ({"embedding_dims": []}, "embedding_dims=[] must be positive ints"),
        ({"num_ids": [2.5]}, "num_ids=[2.5] must be positive ints"),
    ],
    ids=["zero", "empty", "float"],
)
def test_bad_sizes_are_refused_before_anything_runs(
    no_timer: None, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[").replace("]", r"\]")):
        ee.bench_embedding(F.embedding, **kwargs)


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user module with a wrong kernel, importable from the working directory."""
    (tmp_path / "bench_kernels.py").write_text(
        "import torch.nn.functional as F\n\n"
        "def clamps(input, weight):\n"
        "    return F.embedding(input.clamp(0, weight.shape[0] - 1), weight)\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "bench_kernels", raising=False)
    return "bench_kernels"


def test_the_command_refuses_a_failing_kernel_with_exit_1(
    kernels: str, no_timer: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--candidate", f"{kernels}:clamps"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {kernels}:clamps: ")
    assert "Repro:\n" in out
    assert out.rstrip().endswith("Not timed: a kernel that fails verification has no speed.")


def test_the_command_writes_its_json(
    verified: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench.json"
    argv = ["bench", "--candidate", "embedding_equivalence:lookup_embedding"]
    argv += ["--vocab-sizes", "7,30", "--embedding-dims", "3", "--num-ids", "5"]
    argv += ["--min-run-time", "0.001", "--forward-only", "--json", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ratio = candidate / F.embedding" in out  # the table, beside the file
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == BENCH_SCHEMA
    assert data["verification"]["passed"] is True
    assert [(t["vocab_size"], t["stage"]) for t in data["timings"]] == [
        (7, "forward"),
        (30, "forward"),
    ]
    assert set(data["timings"][0]) == {
        "vocab_size", "embedding_dim", "num_ids", "stage", "candidate", "reference", "ratio",
        "low", "high",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: --candidate"),
        (["--candidate", "x:y", "--dtype", "int8"], "--dtype: unknown dtype 'int8'"),
        (["--candidate", "x:y", "--num-ids", "0"], "'0' must be at least 1"),
        (["--candidate", "x:y", "--device", "cuda:7"], "--device: 'cuda:7' "),
    ],
    ids=["no-candidate", "dtype", "size", "device"],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    if "cuda:7" in argv and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embedding-equivalence: error: ")
    assert message in err


@pytest.mark.slow  # a whole default verification, then the timing
def test_f_embedding_against_itself() -> None:
    report = ee.bench_embedding(
        F.embedding, vocab_sizes=[1000], embedding_dims=[16], num_ids=[64], min_run_time=0.01
    )
    assert report.verification.passed
    assert report.verification.boundary_examples > 0  # the default verification, phase included
    assert len(report.timings) == 2
