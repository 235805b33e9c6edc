"""The console script: exit codes, the JSON schema, a buggy candidate, the demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from embedding_equivalence.cli import main

FAST = ["--dtypes", "float32", "--devices", "cpu", "--max-examples", "8", "--seed", "0"]


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user module with a correct and a buggy kernel, importable from the working dir."""
    (tmp_path / "user_kernels.py").write_text(
        "import torch.nn.functional as F\n"
        "\n"
        "def good(input, weight, padding_idx=None):\n"
        "    if input.numel() and (input.min() < 0 or input.max() >= weight.shape[0]):\n"
        "        raise IndexError('id out of range')\n"
        "    return F.embedding(input, weight, padding_idx)\n"
        "\n"
        "def off_by_one(input, weight, padding_idx=None):\n"
        "    return F.embedding((input + 1) % weight.shape[0], weight, padding_idx)\n"
        "\n"
        "NOT_CALLABLE = 3\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "user_kernels", raising=False)
    return "user_kernels"


def test_good_candidate_exits_0(kernels: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--candidate", f"{kernels}:good", "--options", "padding_idx", *FAST])
    out = capsys.readouterr().out
    assert code == 0
    assert "cpu-float32" in out
    assert "pass 8" in out
    assert "1 passed, 0 failed" in out


def test_buggy_candidate_exits_1_with_a_repro(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", *FAST])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL" in out
    assert "Minimal counterexample" in out
    assert f"from {kernels} import off_by_one as candidate" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--candidate", "no_such_module:f"], "cannot import module"),
        (["verify", "--candidate", "user_kernels:missing"], "has no 'missing'"),
        (["verify", "--candidate", "user_kernels:NOT_CALLABLE"], "is not callable"),
        (["verify", "--candidate", "user_kernels"], "expected MODULE:FUNCTION"),
        (["verify", "--dtypes", "float8"], "unknown dtype 'float8'"),
        (["verify", "--max-examples", "0"], "must be at least 1"),
        (["verify", "--max-examples", "many"], "is not an integer"),
        (["verify", "--devices", "tpu"], "not a device name"),
        (["verify", "--options", "dropout"], "unknown dropout"),
        (["verify", "--sharding", "row"], "invalid choice: 'row'"),
        (["verify", "--sharding", "vocab", "--bag"], "sharded embedding bags are not supported"),
        (["verify", "--sharding", "dim", "--options", "sparse"], "sparse not taken by sharded"),
        (["verify", "--sharding", "dim", "--world-size", "0"], "must be at least 1"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
    ids=[
        "unknown-module",
        "unknown-function",
        "not-callable",
        "no-colon",
        "unknown-dtype",
        "zero-examples",
        "not-a-number",
        "bad-device",
        "unknown-option",
        "unknown-sharding",
        "sharded-bag",
        "sharded-sparse",
        "zero-ranks",
        "unknown-command",
        "no-command",
    ],
)
def test_usage_errors_exit_2_in_one_line(
    kernels: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("embedding-equivalence: error: ")
    assert message in lines[0]
    assert "Traceback" not in captured.err


def test_json_schema(kernels: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", "--json", str(path), *FAST])
    assert code == 1
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["schema"] == "embedding-equivalence/verify/1"
    assert payload["passed"] is False
    assert set(payload) == {"schema", "torch", "max_examples", "passed", "results"}
    (result,) = payload["results"]
    assert set(result) == {
        "implementation",
        "options",
        "device",
        "dtype",
        "passed",
        "examples",
        "worst_error",
        "seed",
        "seconds",
        "failure",
        "counterexample",
    }
    assert (result["device"], result["dtype"], result["seed"]) == ("cpu", "float32", 0)
    assert "candidate(" in result["counterexample"]


def test_json_to_stdout_is_pure_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--json", "-", "--forward-only", *FAST]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    names = {r["implementation"] for r in payload["results"]}
    assert {"lookup_embedding", "matmul_embedding", "sparse_matmul_embedding"} <= names
    assert all(r["passed"] for r in payload["results"])


def test_demo_prints_the_seed_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # The rows of ../shared/seeds/002: embedding(idx) for idx = [2, 3, 1].
    fixture = Path(__file__).parent / "data" / "seed_002_tables.txt"
    for row in ("0.6957, -1.8061, -1.1589,  0.3255, -0.6315", "-2.8400, -0.7849, -1.4096"):
        assert row in fixture.read_text(encoding="utf-8")
        assert row in out
    assert "identical bit for bit: True" in out


def test_python_dash_m_runs_the_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "embedding_equivalence", "verify", "--dtypes", "float99"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "embedding-equivalence: error: --dtypes: unknown dtype 'float99'; "
        "choose from float32, float64, float16, bfloat16"
    )


def test_sharded_verify_of_the_package_forms(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "verify",
        "--sharding",
        "dim",
        "--world-size",
        "3",
        "--max-examples",
        "5",
        "--seed",
        "0",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "pass  dim_parallel_embedding [-]  sharding=dim world_size=3  5 examples" in out
    assert "pass  dim_parallel_embedding [padding_idx,max_norm,scale_grad_by_freq]" in out
    assert "2 passed, 0 failed" in out


def test_sharded_verify_of_a_buggy_candidate_exits_1_with_a_torchrun_repro(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["verify", "--sharding", "vocab", "--candidate", "sharded_mutants:all_reduce_missing"]
    assert main([*argv, "--max-examples", "10", "--seed", "0"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  sharded_mutants:all_reduce_missing [-]  sharding=vocab world_size=2" in out
    assert "# Run with: torchrun --nproc-per-node 2 repro.py" in out
    assert "0 passed, 1 failed" in out
