"""Triton kernels verified on the CPU under Triton's interpreter (the ``triton`` extra).

- The worked kernel of the docs (docs/_scripts/triton_kernels.py: a blocked gather forward,
  an atomic-add backward, padding_idx) runs interpreted and passes; planted bugs of its own
  (tests/triton_mutants.py: a grid that drops the tail, a scatter that stores instead of
  adding, a padding row that learns, a row wider than one block) are caught.
- A failure that only the interpreter causes (bfloat16 atomics, inline assembly) is named in
  the report with the triton version: not a pass, not the kernel's bug. It is decided by
  behaviour: the same words raised by a kernel's own host code, or a kernel that is wrong in
  float32 as well, are the kernel's.
- Repro snippets switch the interpreter on before they import the kernel, and fail as they
  should in a fresh interpreter.
- The command line's ``--triton-interpret`` switches it on before the candidate is imported,
  and refuses when triton was imported without it.

The kernels are imported once, with ``TRITON_INTERPRET=1`` set (``@triton.jit`` decides when it
decorates a kernel); each test runs with the variable set, as a user's run would, and the
environment is restored after it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from forked import run_python

triton = pytest.importorskip(
    "triton", reason="triton is not installed (the 'triton' extra: pip install -e '.[triton]')"
)
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy (the 'triton' extra)")

import embedding_equivalence as ee  # noqa: E402
from embedding_equivalence._cli.main import main  # noqa: E402
from embedding_equivalence._engine import triton as _triton  # noqa: E402
from embedding_equivalence._engine import triton_limits as _triton_limits  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "docs" / "_scripts"
TESTS = ROOT / "tests"
for _path in (SCRIPTS, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def _import_interpreted(name: str) -> ModuleType:
    """``name`` imported (again, if it was compiled) with the interpreter switched on."""
    from triton.runtime.interpreter import InterpretedFunction

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        module = importlib.import_module(name)
        if not isinstance(getattr(module, "gather_rows", None), InterpretedFunction):
            module = importlib.reload(module)
    return module


@pytest.fixture(scope="module")
def kernels() -> ModuleType:
    return _import_interpreted("triton_kernels")


@pytest.fixture(scope="module")
def mutants(kernels: ModuleType) -> ModuleType:
    return _import_interpreted("triton_mutants")


@pytest.fixture(autouse=True)
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs with TRITON_INTERPRET=1, as a run under the interpreter does."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_the_worked_kernels_are_interpreted(kernels: ModuleType) -> None:
    from triton.runtime.interpreter import InterpretedFunction

    assert isinstance(kernels.gather_rows, InterpretedFunction)
    assert isinstance(kernels.scatter_add_rows, InterpretedFunction)


# --------------------------------------------------------------------------------------------
# The worked kernel passes; its mutants are caught
# --------------------------------------------------------------------------------------------


def test_the_worked_kernel_passes_random_examples(kernels: ModuleType) -> None:
    report = ee.verify_embedding(
        kernels.triton_embedding, options=("padding_idx",), max_examples=40, seed=0,
        boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)
    assert report.interpreter_limit is None


def test_bfloat16_subnormals_are_the_interpreters_limit(kernels: ModuleType) -> None:
    report = ee.verify_embedding(
        kernels.triton_embedding, options=("padding_idx",), dtypes=[torch.bfloat16],
        max_examples=5, seed=0,
    )  # fmt: skip
    assert not report.passed  # not a pass
    assert report.interpreter_limit == "bfloat16-subnormal-cast", str(report)
    assert "The same call in float32 passes" in str(report)


@pytest.mark.parametrize(
    ("mutant", "options"),
    [
        ("tail_dropping_embedding", ()),
        ("storing_embedding", ()),
        ("padding_learning_embedding", ("padding_idx",)),
    ],
)
def test_mutants_are_caught_by_random_examples(
    mutants: ModuleType, mutant: str, options: tuple[str, ...]
) -> None:
    report = ee.verify_embedding(
        getattr(mutants, mutant), options=options, dtypes=[torch.float32], max_examples=50,
        seed=0, boundaries=False,
    )  # fmt: skip
    assert not report.passed, f"{mutant} passed: {report}"
    assert report.interpreter_limit is None, str(report)


@pytest.mark.slow
def test_a_row_wider_than_one_block_is_caught_at_its_boundary(kernels: ModuleType) -> None:
    report = ee.verify_embedding(
        kernels.one_block_embedding, options=("padding_idx",), max_examples=1, seed=0,
        dtypes=[torch.float32, torch.float64, torch.float16],
    )  # fmt: skip
    assert not report.passed
    assert report.boundary == "fails from D = 1,025; passes at 1,024", str(report)


# --------------------------------------------------------------------------------------------
# The interpreter's limits: named, with the triton version; decided by behaviour
# --------------------------------------------------------------------------------------------


def test_bfloat16_atomics_are_the_interpreters_limit(kernels: ModuleType) -> None:
    report = ee.verify_embedding(
        kernels.same_dtype_embedding, dtypes=[torch.bfloat16], max_examples=10, seed=0,
        boundaries=False,
    )  # fmt: skip
    assert not report.passed  # not a pass
    assert report.interpreter_limit == "atomic-dtype"
    text = str(report)
    assert f"triton {triton.__version__}" in text
    assert "not a bug of your kernel" in text
    assert "The same call in float32 passes" in text


def test_the_same_kernel_passes_where_the_interpreter_runs_it(kernels: ModuleType) -> None:
    report = ee.verify_embedding(
        kernels.same_dtype_embedding, dtypes=[torch.float32, torch.float16], max_examples=20,
        seed=0, boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)


def test_a_kernel_wrong_in_float32_too_is_not_excused(mutants: ModuleType) -> None:
    # Its bfloat16 atomics raise the interpreter's error, but its gradient is wrong anyway.
    report = ee.verify_embedding(
        mutants.doubling_same_dtype_embedding, dtypes=[torch.bfloat16], max_examples=10,
        seed=0, boundaries=False,
    )  # fmt: skip
    assert not report.passed
    assert "Unsupported data type" in (report.failure or "")
    assert report.interpreter_limit is None, str(report)


def test_the_interpreters_words_from_host_code_are_the_kernels(mutants: ModuleType) -> None:
    report = ee.verify_embedding(
        mutants.host_unsupported_embedding, dtypes=[torch.bfloat16], max_examples=10, seed=0,
        boundaries=False,
    )  # fmt: skip
    assert not report.passed
    assert report.interpreter_limit is None, str(report)


def test_a_gpu_only_path_is_the_interpreters_limit(mutants: ModuleType) -> None:
    report = ee.verify_embedding(
        mutants.inline_asm_embedding, dtypes=[torch.float32], max_examples=10, seed=0,
        boundaries=False,
    )  # fmt: skip
    assert report.interpreter_limit == "gpu-only-operation", str(report)
    assert "Verify this kernel on a GPU" in str(report)


def test_without_the_interpreter_no_limit_is_named(
    kernels: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernels stay interpreted (decorated so), but the run says it is not interpreting.
    monkeypatch.delenv("TRITON_INTERPRET")
    report = ee.verify_embedding(
        kernels.same_dtype_embedding, dtypes=[torch.bfloat16], max_examples=10, seed=0,
        boundaries=False,
    )  # fmt: skip
    assert not report.passed
    assert report.interpreter_limit is None


@given(value=st.sampled_from(["1", "true", "ON", "yes", "y", " 1 "]))
@settings(max_examples=6)
def test_triton_s_values_switch_the_interpreter_on(value: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", value)
        assert _triton.interpreter_on()


@given(value=st.sampled_from(["", "0", "false", "off", "no", "2"]))
@settings(max_examples=6)
def test_other_values_leave_it_off(value: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", value)
        assert not _triton.interpreter_on()


def test_every_limit_has_an_id_a_summary_and_a_reference() -> None:
    ids = [limit.id for limit in _triton_limits.INTERPRETER_LIMITS]
    assert len(ids) == len(set(ids))
    for limit in _triton_limits.INTERPRETER_LIMITS:
        assert limit.summary
        assert limit.reference


# --------------------------------------------------------------------------------------------
# Repro snippets
# --------------------------------------------------------------------------------------------


@pytest.mark.slow  # a fresh interpreter imports torch and triton
def test_the_repro_switches_the_interpreter_on_and_fails_in_a_fresh_process(
    mutants: ModuleType,
) -> None:
    report = ee.verify_embedding(
        mutants.storing_embedding, dtypes=[torch.float32], max_examples=50, seed=0,
        boundaries=False,
    )  # fmt: skip
    snippet = report.counterexample or ""
    switch = snippet.index('os.environ.setdefault("TRITON_INTERPRET", "1")')
    assert switch < snippet.index("from triton_mutants import storing_embedding")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(SCRIPTS), str(TESTS)])
    done = run_python(["-c", snippet], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "EquivalenceError" in done.stderr, done.stderr[-2000:]


def test_without_the_interpreter_the_repro_has_no_switch(
    kernels: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    assert _triton.interpreter_preamble() == ""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert "TRITON_INTERPRET" in _triton.interpreter_preamble()


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def test_the_cli_refuses_the_switch_after_triton_was_imported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")  # triton is imported in this process, without it
    status = main(
        ["verify", "--triton-interpret", "--candidate", "triton_kernels:triton_embedding"]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert "--triton-interpret" in err
    assert "TRITON_INTERPRET=1" in err


def test_the_cli_switch_goes_with_a_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--triton-interpret", "--max-examples", "1"]) == 2
    assert "--candidate" in capsys.readouterr().err


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script in a fresh process, from docs/_scripts, without TRITON_INTERPRET."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(TESTS)
    command = ["-m", "embedding_equivalence", "verify", *args]
    return run_python(command, capture_output=True, text=True, env=env, cwd=SCRIPTS, timeout=600)


@pytest.mark.slow  # the console script in a fresh process
def test_the_cli_runs_a_triton_candidate_under_the_interpreter() -> None:
    done = _cli(
        "--triton-interpret", "--candidate", "triton_kernels:triton_embedding", "--options",
        "padding_idx", "--dtypes", "float32", "--max-examples", "5", "--no-boundaries",
        "--seed", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow  # the console script in a fresh process
def test_without_the_switch_a_cpu_launch_is_a_usage_error() -> None:
    # What the flag is for: compiled kernels find no GPU on this machine; the command says
    # how to run it before any example.
    done = _cli(
        "--candidate", "triton_kernels:triton_embedding", "--dtypes", "float32",
        "--max-examples", "1", "--no-boundaries", "--seed", "0",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--triton-interpret" in done.stderr


@pytest.mark.slow  # the console script in a fresh process
def test_a_failing_cell_replays_with_the_switch() -> None:
    done = _cli(
        "--triton-interpret", "--candidate", "triton_mutants:storing_embedding", "--dtypes",
        "float32", "--max-examples", "25", "--no-boundaries", "--seed", "0",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--triton-interpret" in (done.stdout + done.stderr).split("verify --seed", 1)[1]
