"""The console script: exit codes, the JSON schema, a buggy candidate, the demo, the output.

Seeds: the cells of a run verify under seeds derived from the run's, and a failing cell's
printed command replays it. ``--no-boundaries`` reaches the verifier (most tests here turn the
boundary phase off, to stay fast: they test the command line, not the verifier).

Output: the JSON of a bare ``--json`` alone on stdout; plain lines without ANSI codes in a pipe
or under ``CI``; a rich table and progress bar on a terminal (a stream whose ``isatty()`` is
true stands in for one).
"""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import embedding_equivalence as ee
from embedding_equivalence._cli import console as _console
from embedding_equivalence._cli.console import cell_seed
from embedding_equivalence._cli.main import main
from embedding_equivalence._engine.report import JSON_SCHEMA
from forked import run_python

FAST = [
    "--dtypes", "float32", "--devices", "cpu", "--max-examples", "8", "--seed", "0",
    "--no-boundaries",
]  # fmt: skip
ANSI = "\x1b["


class FakeTerminal(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule reads ``CI``: unset it, as on a contributor's machine."""
    monkeypatch.delenv("CI", raising=False)


def result_line(out: str, *cells: str) -> str:
    """The one plain line whose cells, split on runs of spaces, begin with ``cells``."""
    __tracebackhide__ = True
    found = [line for line in out.splitlines() if tuple(line.split()[: len(cells)]) == cells]
    if len(found) != 1:
        pytest.fail(f"{len(found)} lines begin with {cells} in:\n{out}")
    return found[0]


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
        "def drops_past_1024(input, weight, padding_idx=None):\n"
        "    out = good(input, weight, padding_idx)\n"
        "    if input.numel() > 1024:  # a launch grid that drops the last partial block\n"
        "        out = out.clone()\n"
        "        out.view(-1, weight.shape[1])[-1] = 0\n"
        "    return out\n"
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
    line = result_line(out, "pass", f"{kernels}:good", "padding_idx", "cpu", "float32")
    assert line.split()[5:7] == ["random", "8"]  # phases (--no-boundaries), examples
    assert "1 passed, 0 failed" in out


def test_buggy_candidate_exits_1_with_a_repro(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", *FAST])
    out = capsys.readouterr().out
    assert code == 1
    result_line(out, "FAIL", f"{kernels}:off_by_one", "-", "cpu", "float32")
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
        (["verify", "--scheme", "int4"], "unknown 'int4'; choose from int8"),
        (["verify", "--scheme", "uint4", "--symmetric"], "--symmetric applies to --scheme int8"),
        (["verify", "--symmetric"], "--symmetric goes with --scheme int8"),
        (["verify", "--scheme", "int8", "--bag"], "takes no --bag"),
        (["verify", "--scheme", "int8", "--options", "max_norm"], "takes no --options"),
        (["verify", "--only", "lookup_embedding/-/cpu"], "expected IMPLEMENTATION/OPTIONS/"),
        (["verify", "--only", "lookup_embedding/-/cpu/float8"], "unknown dtype 'float8'"),
        (["verify", "--only", "nothing/-/cpu/float32"], "no implementation 'nothing'"),
        (["verify", "--only", "lookup_embedding/sparse,x/cpu/float32"], "takes no x"),
        (
            ["verify", "--only", "lookup_embedding/-/cpu/float32", "--dtypes", "float64"],
            "drop --dtypes",
        ),
        (
            ["verify", "--sharding", "vocab", "--only", "nothing/-/cpu/all"],
            "no implementation 'nothing' with --sharding vocab",
        ),
        (["verify", "--candidate", "user_kernels:good", "--bag"], "drop --bag"),
        (["verify", "--candidate", "user_kernels:good", "--scheme", "int8"], "drop --scheme"),
        (["verify", "--candidate", "user_kernels:good", "--options", "max_norm"], "'max_norm'"),
        (["verify", "--world-size", "2"], "--world-size goes with --sharding"),
        (["verify", "--json", "no_such_folder/out.json"], "does not exist"),
        (["verify", "--json", "."], "is a directory"),
        (["verify", "--vocab-sizes", "0"], "argument --vocab-sizes: '0' must satisfy"),
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
        "unknown-scheme",
        "symmetric-uint4",
        "symmetric-alone",
        "scheme-bag",
        "scheme-options",
        "only-three-parts",
        "only-unknown-dtype",
        "only-unknown-implementation",
        "only-unknown-option",
        "only-and-dtypes",
        "only-sharded-unknown-implementation",
        "embedding-kernel-with-bag",
        "embedding-kernel-with-scheme",
        "option-the-kernel-lacks",
        "world-size-without-sharding",
        "json-in-a-missing-folder",
        "json-a-directory",
        "zero-vocab-names-the-flag",
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


def test_one_full_repro_for_the_cells_of_one_kernel(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "--candidate", f"{kernels}:off_by_one", "--max-examples", "3", "--seed", "0"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    failed = out.count("\nFAILED ")
    assert failed >= 2  # the row of every dtype and the rows of one dtype each
    assert out.count("Minimal counterexample:") == 1
    assert out.count("is like the one above; replay this cell for it") == failed - 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.startswith(f"embedding-equivalence {ee.__version__} (torch ")


def test_json_schema(kernels: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", "--json", str(path), *FAST])
    assert code == 1
    out = capsys.readouterr().out  # --json PATH: the table is printed too
    result_line(out, "FAIL", f"{kernels}:off_by_one")
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["schema"] == JSON_SCHEMA == "embedding-equivalence/verify/2"
    assert payload["passed"] is False
    assert set(payload) == {
        "schema", "torch", "seed", "max_examples", "boundaries", "passed", "results",
    }  # fmt: skip
    assert (payload["seed"], payload["boundaries"]) == (0, False)
    (result,) = payload["results"]
    assert set(result) == {
        "implementation", "options", "device", "dtype", "passed", "examples",
        "boundary_examples", "worst_error", "seed", "cell", "replay", "seconds", "failure",
        "boundary", "counterexample", "torch_defect", "interpreter_limit",
        "compiled", "sharded", "quantized", "bag",
    }  # fmt: skip
    # The records of the kinds of run: none of them for an embedding kernel run eagerly.
    assert [result[k] for k in ("compiled", "sharded", "quantized", "bag")] == [None] * 4
    cell = f"{kernels}:off_by_one/-/cpu/float32"
    assert (result["device"], result["dtype"], result["cell"]) == ("cpu", "float32", cell)
    assert result["seed"] == cell_seed(0, cell)
    assert result["replay"].startswith(f"embedding-equivalence verify --seed 0 --only {cell} ")
    assert (result["boundary_examples"], result["boundary"]) == (0, None)
    assert "candidate(" in result["counterexample"]


def test_json_to_stdout_is_pure_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--json", "-", "--forward-only", *FAST]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    names = {r["implementation"] for r in payload["results"]}
    assert {"lookup_embedding", "matmul_embedding", "sparse_matmul_embedding"} <= names
    assert all(r["passed"] for r in payload["results"])


def test_bare_json_prints_only_json_on_stdout(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, a bare --json was a usage error that asked for a PATH.
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", *FAST, "--json"])
    captured = capsys.readouterr()
    assert code == 1
    payload = json.loads(captured.out)
    assert payload["schema"] == JSON_SCHEMA == "embedding-equivalence/verify/2"
    assert payload["passed"] is False
    assert "candidate(" in payload["results"][0]["counterexample"]
    assert "verify [1/1]    " in captured.err  # the progress, on stderr
    assert "0 passed, 1 failed" in captured.err.splitlines()[-1]


@pytest.mark.slow  # a fresh process; test_json_to_stdout_is_pure_json checks the same in process
def test_bare_json_from_the_shell_prints_only_json(tmp_path: Path) -> None:
    argv = ["verify", "--json", "--candidate", "torch.nn.functional:embedding", "--forward-only"]
    proc = run_python(
        ["-m", "embedding_equivalence", *argv, *FAST],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["passed"] is True
    assert [r["implementation"] for r in payload["results"]] == ["torch.nn.functional:embedding"]
    assert re.search(
        r"^verify \[1/1\] +[\d.]+s  torch\.nn\.functional:embedding", proc.stderr, re.M
    )
    assert ANSI not in proc.stderr


@pytest.mark.parametrize(
    ("stream", "ci"), [(io.StringIO, None), (FakeTerminal, "1")], ids=["pipe", "ci-on-a-terminal"]
)
def test_plain_output_is_one_line_a_step_without_ansi_codes(
    kernels: str, monkeypatch: pytest.MonkeyPatch, stream: type[io.StringIO], ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    out, err = stream(), stream()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    argv = ["verify", "--candidate", f"{kernels}:good", "--options", "padding_idx"]
    code = main([*argv, "--dtypes", "float32,float64", *FAST[2:]])
    assert code == 0
    printed, progress = out.getvalue(), err.getvalue()
    assert ANSI not in printed
    assert ANSI not in progress
    for dtype in ("float32", "float64"):
        result_line(printed, "pass", f"{kernels}:good", "padding_idx", "cpu", dtype)
    assert progress.splitlines() == [
        line for line in progress.splitlines() if re.match(r"verify \[\d/2\] +[\d.]+s  ", line)
    ]
    steps = [line.split("s  ", 1)[1] for line in progress.splitlines()]
    assert steps == [
        f"{kernels}:good [padding_idx] cpu-float32",
        f"{kernels}:good [padding_idx] cpu-float64",
        "done",
    ]


def test_a_terminal_gets_a_table_and_a_progress_bar(
    kernels: str, monkeypatch: pytest.MonkeyPatch, no_ci: None
) -> None:
    monkeypatch.setenv("COLUMNS", "150")  # rich's width where the stream has no size
    out, err = FakeTerminal(), FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = main(["verify", "--candidate", f"{kernels}:off_by_one", *FAST])
    assert code == 1
    printed = out.getvalue()
    assert ANSI in printed
    assert "┃" in printed  # rich's table: a heavy header rule between the columns
    plain = re.sub(r"\x1b\[[\d;]*m", "", printed)  # the text without its colours
    assert re.search(r"^│ FAIL +│ user_kernels:off_by_one +│ - +│ cpu +│ float32 +│", plain, re.M)
    assert "Minimal counterexample" in printed
    assert "━" in err.getvalue()  # the bar
    assert "verify [" not in err.getvalue()  # not the plain lines


def test_the_rule_is_a_tty_without_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert _console.is_terminal(FakeTerminal())
    assert not _console.is_terminal(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not _console.is_terminal(FakeTerminal())
    monkeypatch.setenv("CI", "")
    assert _console.is_terminal(FakeTerminal())


def test_a_plain_table_aligns_its_columns() -> None:
    table = _console.Table(["name", "n"], right=[1])
    table.add_row("a", "1")
    table.add_row("long", "100")
    assert table.plain() == "name    n\n----  ---\na       1\nlong  100"
    with pytest.raises(ValueError, match="1 cells for 2 columns"):
        table.add_row("x")


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


@pytest.mark.slow  # it starts process groups
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
        "--no-boundaries",
    ]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)  # a bare --json: only the JSON on stdout
    assert payload["schema"] == JSON_SCHEMA
    rows = [
        (r["implementation"], r["options"], r["sharded"]["world_size"]) for r in payload["results"]
    ]
    assert rows == [
        ("dim_parallel_embedding", [], 3),
        ("dim_parallel_embedding", ["padding_idx", "max_norm", "scale_grad_by_freq"], 3),
    ]
    assert all(r["passed"] and r["examples"] == 5 for r in payload["results"])
    assert all(r["boundary_examples"] == 0 for r in payload["results"])  # --no-boundaries
    assert payload["seed"] == 0
    cells = [r["cell"] for r in payload["results"]]
    assert cells[0] == "dim_parallel_embedding/-/cpu/all"
    assert [r["seed"] for r in payload["results"]] == [cell_seed(0, c) for c in cells]
    assert payload["results"][0]["seed"] != payload["results"][1]["seed"]
    assert payload["results"][0]["replay"] == (
        "embedding-equivalence verify --seed 0 --only dim_parallel_embedding/-/cpu/all "
        "--sharding dim --world-size 3 --max-examples 5 --no-boundaries"
    )
    assert "verify [1/2]" in captured.err
    assert re.search(r"2 passed, 0 failed \(\d+ examples in [\d.]+ s; run seed 0\)", captured.err)


@pytest.mark.slow  # it starts a process group
def test_sharded_verify_of_a_buggy_candidate_exits_1_with_a_torchrun_repro(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["verify", "--sharding", "vocab", "--candidate", "sharded_mutants:all_reduce_missing"]
    assert main([*argv, "--max-examples", "10", "--seed", "0"]) == 1
    out = capsys.readouterr().out
    line = result_line(out, "FAIL", "sharded_mutants:all_reduce_missing", "-", "vocab")
    assert line.split()[4] == "2"  # world size
    assert "# Run with: torchrun --nproc-per-node 2 repro.py" in out
    assert re.search(r"0 passed, 1 failed \(\d+ examples in [\d.]+ s; run seed 0\)", out)
    cell = "sharded_mutants:all_reduce_missing/-/cpu/all"
    replay = (
        f"embedding-equivalence verify --seed 0 --only {cell} --sharding vocab --world-size 2 "
        "--candidate sharded_mutants:all_reduce_missing --max-examples 10"
    )
    assert f"Replay this cell: {replay}\n" in out
    assert re.search(r"FAILED after \d+ examples \(\d+ at boundaries\)", out)  # the phase ran


def test_quantized_verify_of_the_package_and_of_a_buggy_kernel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["verify", "--scheme", "uint4", *FAST])
    out = capsys.readouterr().out
    assert code == 0, out
    result_line(out, "pass", "lookup_quantized_embedding[uint4]", "-", "cpu", "float32")
    assert "worst error (outputs and gradients)" in out
    # tests/ is on the path (pytest's rootdir conftest): the catalogue's mutants import.
    argv = ["verify", "--scheme", "int8", "--candidate", "quantized_mutants:zero_point_added"]
    code = main([*argv, *FAST])
    out = capsys.readouterr().out
    assert code == 1, out
    result_line(out, "FAIL", "quantized_mutants:zero_point_added", "-", "cpu", "float32")
    assert "from quantized_mutants import zero_point_added as candidate" in out


# --- seeds, replays and the boundary phase ---------------------------------------------------


def _json_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_cells_of_a_run_get_their_own_seeds_derived_from_the_run_seed(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "--candidate", f"{kernels}:good", "--options", "padding_idx"]
    argv += ["--dtypes", "float32,float64,bfloat16", "--max-examples", "2", "--no-boundaries"]
    code, payload = _json_run([*argv, "--seed", "7"], capsys)
    assert code == 0
    assert payload["seed"] == 7
    seeds = {r["cell"]: r["seed"] for r in payload["results"]}
    assert len(seeds) == 3
    assert len(set(seeds.values())) == 3  # the cells draw different examples
    assert seeds == {cell: cell_seed(7, cell) for cell in seeds}  # the documented derivation
    again = {r["cell"]: r["seed"] for r in _json_run([*argv, "--seed", "7"], capsys)[1]["results"]}
    assert again == seeds  # the same run seed, the same cell seeds
    other = {r["cell"]: r["seed"] for r in _json_run([*argv, "--seed", "8"], capsys)[1]["results"]}
    assert set(other.values()).isdisjoint(seeds.values())


def test_without_a_seed_the_run_seed_is_drawn_and_printed_once(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "--candidate", f"{kernels}:good", *FAST[:6], "--no-boundaries"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    (seed,) = re.findall(r"run seed (\d+)", out)
    assert re.search(
        rf"^1 passed, 0 failed \(8 examples in [\d.]+ s; run seed {seed}\)$", out, re.M
    )
    code, payload = _json_run(argv, capsys)
    assert code == 0
    assert 0 <= payload["seed"] < 2**32
    (row,) = payload["results"]
    assert row["seed"] == cell_seed(payload["seed"], row["cell"])


def test_a_failing_cell_prints_the_command_that_replays_it(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "--candidate", f"{kernels}:off_by_one", "--options", "padding_idx"]
    argv += ["--dtypes", "float32,float64", "--devices", "cpu", "--max-examples", "4"]
    assert main([*argv, "--seed", "11", "--no-boundaries", "--json", "run.json"]) == 1
    out = capsys.readouterr().out
    replays = re.findall(r"^Replay this cell: (.*)$", out, re.M)
    rows = json.loads(Path("run.json").read_text(encoding="utf-8"))["results"]
    assert replays == [r["replay"] for r in rows if not r["passed"]]
    assert len(replays) == 2
    cell = f"{kernels}:off_by_one/padding_idx/cpu/float64"
    assert f"FAILED {cell} (cell seed {cell_seed(11, cell)})" in out
    command = shlex.split(replays[1])
    assert command[:6] == ["embedding-equivalence", "verify", "--seed", "11", "--only", cell]
    assert "--no-boundaries" in command
    code, replayed = _json_run(command[1:], capsys)  # the printed command, as the shell runs it
    assert code == 1
    (row,) = replayed["results"]
    original = rows[1]
    for key in ("cell", "seed", "examples", "failure", "counterexample"):
        assert row[key] == original[key], key


def test_only_picks_one_cell_of_the_package_forms(capsys: pytest.CaptureFixture[str]) -> None:
    cell = "lookup_embedding_bag/per_sample_weights,padding_idx/cpu/float32"
    argv = ["verify", "--only", cell, "--max-examples", "2", "--no-boundaries", "--seed", "3"]
    code, payload = _json_run(argv, capsys)
    assert code == 0
    (row,) = payload["results"]
    assert (row["implementation"], row["options"]) == (
        "lookup_embedding_bag",
        ["per_sample_weights", "padding_idx"],
    )
    assert (row["cell"], row["seed"]) == (cell, cell_seed(3, cell))


def test_the_boundary_phase_runs_once_for_the_dtypes_unless_turned_off(
    kernels: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", "--candidate", f"{kernels}:drops_past_1024", "--dtypes", "float32,float64"]
    argv += ["--devices", "cpu", "--max-examples", "3", "--seed", "5"]
    code, payload = _json_run([*argv, "--no-boundaries"], capsys)  # the verifier gets it
    assert (code, payload["boundaries"]) == (0, False)  # small random examples miss the bug
    assert [(r["dtype"], r["boundary_examples"]) for r in payload["results"]] == [
        ("float32", 0),
        ("float64", 0),
    ]
    assert main(argv) == 1
    out = capsys.readouterr().out
    # Each row of the table says which phases covered it.
    name = f"{kernels}:drops_past_1024"
    both = result_line(out, "FAIL", name, "-", "cpu", "float32,float64")
    assert both.split()[5] == "boundary+random"
    for dtype in ("float32", "float64"):
        assert result_line(out, "pass", name, "-", "cpu", dtype).split()[5] == "random"
    code, payload = _json_run(argv, capsys)
    assert (code, payload["boundaries"]) == (1, True)
    once, *by_dtype = payload["results"]
    # The boundary examples run once for both dtypes, then each dtype's random examples.
    assert (once["dtype"], once["passed"]) == ("float32,float64", False)
    assert once["boundary_examples"] > 0
    assert once["boundary"].startswith("fails from N = 1,025")
    assert once["boundary"] in out
    command = shlex.split(once["replay"])
    assert command[4:] == [
        "--only", f"{kernels}:drops_past_1024/-/cpu/float32,float64",
        "--candidate", f"{kernels}:drops_past_1024", "--max-examples", "1",
    ]  # fmt: skip
    assert [(r["dtype"], r["passed"], r["boundary_examples"]) for r in by_dtype] == [
        ("float32", True, 0),
        ("float64", True, 0),
    ]
    assert all(r["replay"].endswith(" --max-examples 3 --no-boundaries") for r in by_dtype)
    code, replayed = _json_run(command[1:], capsys)
    assert code == 1
    assert replayed["results"][0]["boundary"] == once["boundary"]


def test_deterministic_asks_that_two_runs_agree(capsys: pytest.CaptureFixture[str]) -> None:
    # A sum whose order changes between runs: right within its bound, not deterministic.
    argv = ["verify", "--candidate", "purity_mutants:order_dependent_gradient_sum", *FAST]
    assert main(argv) == 0
    assert main([*argv, "--deterministic"]) == 1
    out = capsys.readouterr().out
    assert "two runs of the same call differ" in out
    assert "--deterministic" in out.split("verify --seed", 1)[1]  # the replay command keeps it
