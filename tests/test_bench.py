"""The benchmark (``benchmarks/bench``): the model's formulas, the outputs of a tiny run, skips,
bad input.

The harness is not part of the installed package: it is imported from ``benchmarks/``, as
``python benchmarks/efficiency.py`` imports it.

No timing is asserted anywhere: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import importlib.util
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from embedding_equivalence._cli import main as cli
from embedding_equivalence.forms import registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the package bench, as the script imports it

import bench  # noqa: E402
from bench import console, memory, report  # noqa: E402
from bench.calibration import (  # noqa: E402
    GLIBC_MMAP_THRESHOLD_MAX,
    ROW_PRIMITIVES,
    calibrate,
    settle_allocator,
)
from bench.compare import IMPLEMENTATIONS, RAW_BASELINES  # noqa: E402
from bench.results import SCHEMA  # noqa: E402
from bench.sweep_forms import SWEEP_NAMES  # noqa: E402
from bench.timing import Timing  # noqa: E402

S = 4  # float32
B = 1e10  # copy bandwidth, bytes/s
Z = 5e9  # zero-fill bandwidth, bytes/s
Z2 = 2e9  # zero-fill bandwidth of a pair of buffers, bytes/s over both
F_FWD = 1e11  # GEMM FLOP/s
F_BWD = 5e10
# Seconds per row of each row primitive (distinct, so that a term in the wrong place shows).
GATHER, SCATTER, SPARSE, SPARSE_T = 2e-8, 7e-8, 5e-8, 3e-8

HAS_PROC = Path("/proc/self/status").exists()

N, V, D = 100, 1000, 10


def flat_calibration(**overhead: float) -> bench.Calibration:
    """Constant bandwidths, throughputs and row costs: one point each, so the model is plain
    arithmetic (the row costs are measured at the row size of the model's cases, D * S)."""
    per_row = {"gather": GATHER, "scatter_add": SCATTER, "sparse_rows": SPARSE}
    per_row["sparse_rows_t"] = SPARSE_T
    assert set(per_row) == set(ROW_PRIMITIVES)
    return bench.Calibration(
        copy=[(1 << 20, B)],
        zero_fill=[(1 << 20, Z)],
        zero_pair=[(1 << 20, Z2)],
        gemm={(64, 4096, 16, "fwd"): F_FWD, (64, 4096, 16, "bwd"): F_BWD},
        overhead={(k.replace("__", "+"), "fwd"): v for k, v in overhead.items()},
        rows={p: [(D * S, V * D * S, sec, sec)] for p, sec in per_row.items()},
    )


# --- the model ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "mode", "expected"),
    [
        ("lookup", "fwd", N * GATHER),
        ("lookup", "fwd+bwd", N * GATHER + V * D * S / Z + N * SCATTER),
        ("lookup_sparse_grad", "fwd+bwd", N * GATHER),
        ("sparse_mm", "fwd", N * SPARSE),
        ("sparse_mm", "fwd+bwd", N * SPARSE + 2 * V * D * S / Z2 + N * SPARSE_T),
        ("one_hot", "fwd", N * V * S / Z + 2 * N * V * D / F_FWD),
        ("one_hot", "fwd+bwd", N * V * S / Z + 2 * N * V * D / F_FWD + 2 * N * V * D / F_BWD),
        ("linear", "fwd+bwd", N * V * S / Z + 2 * N * V * D / F_FWD + 2 * N * V * D / F_BWD),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_model_time_is_the_formula(model: str, mode: Any, expected: float) -> None:
    t = bench.model_time(model, mode, N, V, D, S, flat_calibration())
    assert math.isclose(t.seconds, expected, rel_tol=1e-12)
    assert t.roofline == t.seconds
    assert t.overhead == 0
    assert math.isclose(sum(s for _, s in t.terms), expected, rel_tol=1e-12)


def test_the_issue_numbers_lookup_and_one_hot() -> None:
    # lookup: N rows at the gather's cost per row, scaled from the calibrated row size to
    # D * 4 bytes; one-hot: 2*N*V*D FLOPs at the GEMM throughput.
    cal = flat_calibration()
    lookup = bench.model_time("lookup", "fwd", 2048, 50257, 768, 4, cal)
    assert math.isclose(lookup.seconds, 2048 * GATHER * (768 * 4) / (D * S))
    assert "gather 2048 rows" in lookup.describe()
    one_hot = bench.model_time("one_hot", "fwd", 2048, 50257, 768, 4, cal)
    gemm = 2 * 2048 * 50257 * 768 / 1e11
    build = 2048 * 50257 * 4 / 5e9
    assert math.isclose(one_hot.seconds, gemm + build)
    assert "GEMM" in one_hot.describe()
    assert "build one-hot" in one_hot.describe()


def test_call_overhead_is_a_separate_term() -> None:
    cal = flat_calibration(lookup=2e-5)
    t = bench.model_time("lookup", "fwd", N, V, D, S, cal)
    assert t.overhead == 2e-5
    assert math.isclose(t.roofline, N * GATHER)
    assert math.isclose(t.seconds, 2e-5 + N * GATHER)
    assert t.terms[0] == ("call overhead", 2e-5)


def test_row_cost_follows_the_table_log_log_and_scales_with_the_row() -> None:
    small, large = 2**20, 2**24  # tables of 1 and 16 MiB, rows of 1 KiB
    cal = bench.Calibration(
        copy=[(1, 1.0)],
        zero_fill=[(1, 1.0)],
        rows={"gather": [(1024, small, 1e-8, 5e-8), (1024, large, 4e-8, 6e-8)], "scatter_add": []},
        row_counts=(25, 100, 400),
    )
    assert math.isclose(cal.row_seconds("gather", 1024, 2**22), 2e-8)  # halfway in log T
    assert cal.row_seconds("gather", 1024, 2**10) == 1e-8  # constant beyond the ends
    assert cal.row_seconds("gather", 1024, 2**30) == 4e-8
    assert math.isclose(cal.row_seconds("gather", 3072, small), 3e-8)  # nearest row size, x3
    assert cal.row_seconds("scatter_add", 1024, small) is None
    assert cal.row_seconds("sparse_rows", 1024, small) is None
    # Up to the base count (100) at the first cost, the rows beyond it at the second.
    assert math.isclose(cal.rows_seconds("gather", 80, 1024, small), 80 * 1e-8)
    assert math.isclose(cal.rows_seconds("gather", 300, 1024, small), 100 * 1e-8 + 200 * 5e-8)
    assert cal.rows_seconds("scatter_add", 300, 1024, small) is None


def test_a_row_primitive_not_calibrated_counts_as_a_copy_of_the_rows() -> None:
    # A calibration from before the row primitives (or a device without sparse products).
    cal = bench.Calibration(copy=[(1 << 20, B)], zero_fill=[(1 << 20, Z)])
    t = bench.model_time("sparse_mm", "fwd", N, V, D, S, cal)
    assert math.isclose(t.seconds, 2 * N * D * S / B)
    assert "(as a copy)" in t.describe()


def test_calibration_round_trips_and_reads_the_first_schema() -> None:
    cal = flat_calibration(lookup=1e-5)
    cal.row_counts, cal.allocator_warmup_bytes = (16, 64, 256), 12345
    data = cal.to_json()
    assert bench.Calibration.from_json(data).to_json() == data
    added = ("zero_pair", "rows", "row_counts", "allocator_warmup_bytes")
    old = bench.Calibration.from_json({k: v for k, v in data.items() if k not in added})
    assert old.zero_pair == []
    assert old.zero_pair_bandwidth(1 << 20) == Z  # a single buffer's bandwidth instead
    assert old.rows == {}
    assert old.row_counts == (0, 0, 0)
    assert old.allocator_warmup_bytes == 0


def test_settle_allocator_frees_one_block_under_glibcs_ceiling_on_the_cpu_only() -> None:
    nbytes = settle_allocator(torch.device("cpu"))
    assert GLIBC_MMAP_THRESHOLD_MAX - 2**16 < nbytes < GLIBC_MMAP_THRESHOLD_MAX
    assert settle_allocator(torch.device("meta")) == 0


def test_row_primitives_time_the_whole_table_unless_they_zero_it_on_the_cpu() -> None:
    # A table as large as glibc's mmap ceiling: the gather reads it all; the primitives that
    # zero a fresh table each call are timed on one of half the ceiling (their rows' cost is
    # the slope, which the page faults of a larger table would drown).
    dim = 256
    vocab = GLIBC_MMAP_THRESHOLD_MAX // (dim * S)
    cal = calibrate(
        copy_sizes=[],
        zero_sizes=[],
        gemm_shapes=[],
        row_shapes=[(vocab, dim)],
        rows=8,
        dtype=torch.float32,
        device=torch.device("cpu"),
        timing=Timing(threads=1, clock="cpu", min_run_time=0.001, rounds=1),
    )
    assert cal.row_counts == (2, 8, 32)
    tables = {p: {point[1] for point in points} for p, points in cal.rows.items()}
    assert tables == {
        "gather": {vocab * dim * S},
        "scatter_add": {GLIBC_MMAP_THRESHOLD_MAX // 2},
        "sparse_rows": {vocab * dim * S},
        "sparse_rows_t": {GLIBC_MMAP_THRESHOLD_MAX // 2},
    }


def test_bandwidth_interpolates_log_log_and_clamps() -> None:
    cal = bench.Calibration(copy=[(1000, 1e9), (4000, 4e9)], zero_fill=[(10, 3.0)])
    assert math.isclose(cal.copy_bandwidth(2000), 2e9)  # y = 1e6 * x between the points
    assert cal.copy_bandwidth(10) == 1e9
    assert cal.copy_bandwidth(1e9) == 4e9
    assert cal.zero_fill_bandwidth(12345) == 3.0


def test_gemm_throughput_falls_back_to_the_nearest_shape() -> None:
    cal = bench.Calibration(
        copy=[(1, 1.0)],
        zero_fill=[(1, 1.0)],
        gemm={(64, 4096, 16, "fwd"): 1.0, (1024, 4096, 256, "fwd"): 2.0},
    )
    assert cal.gemm_flops(64, 4096, 16, "fwd") == 1.0
    assert cal.gemm_flops(900, 8192, 300, "fwd") == 2.0
    with pytest.raises(ValueError, match="no GEMM throughput"):
        cal.gemm_flops(64, 4096, 16, "bwd")


@pytest.mark.parametrize(
    ("n", "v", "expected"),
    [(1024, 262144, 16384), (1024, 1024, 1024), (4096, 50257, 4096), (256, 50257, 50257)],
)
def test_gemm_k(n: int, v: int, expected: int) -> None:
    assert bench.gemm_k(n, v, 4) == expected


@pytest.mark.parametrize(
    ("model", "mode", "expected"),
    [
        ("lookup", "fwd", N * D * S),
        ("lookup", "fwd+bwd", N * D * S + V * D * S),
        ("lookup_sparse_grad", "fwd+bwd", N * D * S),
        ("one_hot", "fwd", N * D * S + N * V * S),
        ("linear", "fwd+bwd", N * D * S + N * V * S + V * D * S),
        ("sparse_mm", "fwd", N * D * S + N * (16 + S)),
        ("sparse_mm", "fwd+bwd", N * D * S + N * (16 + S) + V * D * S),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_analytic_memory(model: str, mode: Any, expected: int) -> None:
    assert bench.analytic_memory_bytes(model, mode, N, V, D, S) == expected


def test_unknown_model_or_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown model 'gather'"):
        bench.model_time("gather", "fwd", N, V, D, S, flat_calibration())
    with pytest.raises(ValueError, match="unknown mode 'bwd'"):
        bench.model_time("lookup", "bwd", N, V, D, S, flat_calibration())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown model"):
        bench.analytic_memory_bytes("gather", "fwd", N, V, D, S)


def test_sweep_points_merge_the_three_sweeps() -> None:
    points = bench.SweepSizes(8, 4, (16, 64), (4, 8), (8, 32), 64).points()
    assert points == [
        (8, 16, 4, "V"),
        (8, 64, 4, "V,D,N"),
        (8, 64, 8, "D"),
        (32, 64, 4, "N"),
    ]


# --- the forms: every public embedding form of the registry is benchmarked -----------------

PUBLIC_EMBEDDINGS = [f.name for f in registry.forms("embedding", public=True)]


def test_the_sweep_covers_every_public_embedding_form() -> None:
    # A new form in FORMS needs a label and a model in SWEEP_NAMES, or the sweep leaves it out.
    assert sorted(SWEEP_NAMES) == sorted(PUBLIC_EMBEDDINGS)
    swept = {f.impl.form for f in bench.SWEEP_FORMS}
    assert swept == set(PUBLIC_EMBEDDINGS)
    labels = [f.label for f in bench.SWEEP_FORMS]
    assert len(labels) == len(set(labels))
    for f in bench.SWEEP_FORMS:
        assert f.model in bench.MODEL_FORMULAS, f.model
        assert f.impl.dense_one_hot == (registry.form(f.impl.form).computes == "dense matmul")


def test_the_sweep_reads_its_forms_from_the_registry() -> None:
    assert [(f.label, f.impl.name, f.model, f.grad, f.modes) for f in bench.SWEEP_FORMS] == [
        ("lookup", "lookup_embedding", "lookup", "dense", ("fwd", "fwd+bwd")),
        ("lookup (sparse grad)", "lookup_embedding(sparse=True)", "lookup_sparse_grad", "sparse",
         ("fwd+bwd",)),
        ("one-hot matmul", "matmul_embedding", "one_hot", "dense", ("fwd", "fwd+bwd")),
        ("linear", "linear_embedding", "linear", "dense", ("fwd", "fwd+bwd")),
        ("sparse matmul", "sparse_matmul_embedding", "sparse_mm", "dense", ("fwd", "fwd+bwd")),
    ]  # fmt: skip
    ids, weight = torch.tensor([1, 0]), torch.randn(3, 2, requires_grad=True)
    sparse = bench.SWEEP_FORMS[1].impl.fn(ids, weight)
    sparse.sum().backward()
    assert weight.grad is not None
    assert weight.grad.is_sparse


def test_the_comparison_covers_every_public_embedding_form() -> None:
    assert sorted(RAW_BASELINES) == sorted(PUBLIC_EMBEDDINGS)
    assert [i.name for i in IMPLEMENTATIONS if i.is_form] == PUBLIC_EMBEDDINGS
    for impl in IMPLEMENTATIONS:
        if impl.is_form:
            assert impl.fn is registry.form(impl.name).fn
    raw = [i.name for i in IMPLEMENTATIONS if not i.is_form]
    assert raw == [label for f in PUBLIC_EMBEDDINGS for label, _ in RAW_BASELINES[f]]


@pytest.mark.parametrize("code", [memory._SERVER, memory._ONE_SHOT], ids=["server", "one-shot"])
def test_the_measuring_processes_import_what_exists(code: str) -> None:
    # The memory is measured in processes started with `python -c CODE`: their imports must
    # name the harness's modules as they are.
    found = re.findall(r"from ([\w.]+) import (\w+)", code)
    assert found
    for module, name in found:
        assert hasattr(importlib.import_module(module), name), (module, name)


# --- a tiny run -----------------------------------------------------------------------------

TINY = ["--n", "64", "--d", "8", "--vocab", "16,16384", "--dims", "8", "--ns", "8"]
TINY += ["--base-vocab", "16384", "--min-run-time", "0.003", "--quiet"]


HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
PLOTS = [] if HAS_MATPLOTLIB else ["--no-plots"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, str]:
    out = tmp_path_factory.mktemp("bench")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench.main([*TINY, *PLOTS, "--out", str(out), "--json", str(out / "copy.json")])
    return code, out, printed.getvalue()


@pytest.mark.slow  # the harness's tiny run (4 s); the fast tier runs the script once
def test_tiny_run_writes_json_with_the_machine(tiny_run: tuple[int, Path, str]) -> None:
    code, out, _ = tiny_run
    assert code == 0
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert data["schema"] == SCHEMA
    assert set(data) == {
        "schema",
        "machine",
        "config",
        "calibration",
        "model",
        "headline",
        "results",
        "notes",
    }
    machine = data["machine"]
    for key in ("cpu", "cores", "threads", "torch", "device", "device_name", "dtype", "date"):
        assert machine[key], key
    assert machine["torch"] == torch.__version__
    assert machine["threads"] == "1"
    assert machine["device"] == "cpu"
    assert data["config"]["vocabs"] == [16, 16384]
    assert data["calibration"]["copy"]
    assert data["calibration"]["gemm"]
    # Every row primitive, on each (V, D) of the sweep, at N/4, N and 4N rows (--n 64).
    assert data["calibration"]["row_counts"] == [16, 64, 256]
    rows = {(p["primitive"], p["row_bytes"]) for p in data["calibration"]["rows"]}
    assert rows == {(p, 8 * 4) for p in ROW_PRIMITIVES}
    assert all(p["seconds_per_row"] >= 0 for p in data["calibration"]["rows"])
    assert data["calibration"]["allocator_warmup_bytes"] > 0
    pairs = {p["bytes"] for p in data["calibration"]["zero_pair"]}
    assert pairs == {v * d * 4 for _, v, d in data["config"]["points"]}  # every V x D table
    assert data["model"]["formulas"] == bench.MODEL_FORMULAS
    # 3 points (V=16; V=16384 also the D sweep; N=8), 9 cases each
    assert len(data["results"]) == 27
    assert data["notes"] == []
    for r in data["results"]:
        assert set(r) == set(bench.CSV_COLUMNS)
        assert r["status"] == "ok"
        assert r["median_ms"] > 0
        assert r["model_ms"] > 0
        assert math.isclose(r["ratio"], r["median_ms"] / r["model_ms"])


@pytest.mark.slow
def test_tiny_run_headline_is_the_v_sweep(tiny_run: tuple[int, Path, str]) -> None:
    _, out, _ = tiny_run
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    headline = data["headline"]
    assert [(h["mode"], h["V"]) for h in headline] == [
        ("fwd", 16),
        ("fwd", 16384),
        ("fwd+bwd", 16),
        ("fwd+bwd", 16384),
    ]
    for h in headline:
        assert tuple(h) == bench.HEADLINE_COLUMNS
        assert h["one-hot status"] == "ok"
        assert math.isclose(h["one-hot/lookup measured"], h["one-hot ms"] / h["lookup ms"])


@pytest.mark.slow
def test_report_round_trips_through_json(tiny_run: tuple[int, Path, str], tmp_path: Path) -> None:
    _, out, _ = tiny_run
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    report = bench.SweepReport.from_json(data)
    again = report.to_json()
    assert again["results"] == data["results"]
    assert again["calibration"] == data["calibration"]
    assert again["headline"] == data["headline"]
    bench.write_outputs(report, tmp_path, plots=False)
    assert json.loads((tmp_path / "bench.json").read_text(encoding="utf-8")) == data


@pytest.mark.slow
def test_tiny_run_writes_csv(tiny_run: tuple[int, Path, str]) -> None:
    _, out, _ = tiny_run
    with (out / "bench.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    assert tuple(rows[0]) == bench.CSV_COLUMNS
    assert len(rows) == 27
    forms = {r["form"] for r in rows}
    assert forms == {f.label for f in bench.SWEEP_FORMS}
    assert {r["grad"] for r in rows} == {"-", "dense", "sparse"}


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
@pytest.mark.parametrize("name", ["time_vs_vocab.svg", "memory_vs_vocab.svg", "ratio_vs_model.svg"])
@pytest.mark.slow
def test_tiny_run_draws_the_plots(tiny_run: tuple[int, Path, str], name: str) -> None:
    _, out, _ = tiny_run
    text = (out / name).read_text(encoding="utf-8")
    assert text.startswith("<?xml")
    assert "<svg" in text
    assert "</svg>" in text


@pytest.mark.skipif(not HAS_PROC, reason="peak RSS is read from /proc (Linux)")
@pytest.mark.slow
def test_tiny_run_measures_the_one_hot_memory(tiny_run: tuple[int, Path, str]) -> None:
    _, out, _ = tiny_run
    results = json.loads((out / "bench.json").read_text(encoding="utf-8"))["results"]
    by = {(r["form"], r["mode"], r["num_ids"], r["vocab"], r["dim"]): r for r in results}
    one_hot = by[("one-hot matmul", "fwd", 64, 16384, 8)]
    lookup = by[("lookup", "fwd", 64, 16384, 8)]
    assert one_hot["analytic_bytes"] == 64 * 16384 * 4 + 64 * 8 * 4
    # The 4 MiB one-hot shows in the peak RSS; the lookup's 2 KiB output does not register.
    assert one_hot["peak_bytes"] >= 0.9 * 64 * 16384 * 4
    assert lookup["peak_bytes"] < 1 << 20
    assert "fresh process" in one_hot["memory_method"]


@pytest.mark.slow
def test_tiny_run_prints_the_tables(tiny_run: tuple[int, Path, str]) -> None:
    _, _, printed = tiny_run
    assert "cpu: " in printed
    assert "threads: 1" in printed
    assert "calibration" in printed
    assert "V sweep at N=64, D=8" in printed
    assert "one-hot/lookup" in printed
    assert "measured/model within 30%" in printed
    assert "\x1b[" not in printed  # not a terminal: plain text


@pytest.mark.slow
def test_json_path_writes_the_results_beside_the_report(tiny_run: tuple[int, Path, str]) -> None:
    _, out, printed = tiny_run
    copy = json.loads((out / "copy.json").read_text(encoding="utf-8"))
    assert copy == json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert str(out / "copy.json") in printed.splitlines()[-1]  # "wrote ..."


@pytest.mark.slow
def test_a_terminal_gets_rich_tables(
    tiny_run: tuple[int, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class FakeTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    pytest.importorskip("rich")
    monkeypatch.delenv("CI", raising=False)
    _, out, _ = tiny_run
    sweep = bench.SweepReport.from_json(json.loads((out / "bench.json").read_text("utf-8")))
    shown = FakeTerminal()
    console.print_table(shown, report.headline_table(sweep))
    assert "V sweep at N=64, D=8" in shown.getvalue()
    assert "┃" in shown.getvalue()  # rich's table
    assert "\x1b[" in shown.getvalue()


def test_a_sectioned_table_has_its_title_and_sections() -> None:
    table = console.SectionedTable(["name", "n"], right=[1], title="title")
    table.add_row("a", "1")
    table.add_section()
    table.add_row("long", "100")
    assert table.plain() == "title\nname    n\n----  ---\na       1\n\nlong  100"
    with pytest.raises(ValueError, match="1 cells for 2 columns"):
        table.add_row("x")


def test_a_sectioned_table_in_a_pipe_is_its_plain_text() -> None:
    table = console.SectionedTable(["name", "n"], right=[1], title="title")
    table.add_row("lookup_embedding", "3", style="bold red")
    table.add_section()
    table.add_row("matmul_embedding", "12")
    shown = io.StringIO()
    console.print_table(shown, table)
    assert shown.getvalue() == table.plain() + "\n"


def test_a_note_says_what_a_step_does_without_counting_one() -> None:
    stream = io.StringIO()
    with console.Progress("bench", 2, stream) as progress:
        progress.step("first")
        progress.note("starting")
        progress.step("second")
    lines = stream.getvalue().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["bench", "[1/2]"],
        ["bench", "[1/2]"],
        ["bench", "[2/2]"],
        ["bench", "[2/2]"],
    ]
    assert lines[1].endswith("starting")
    assert lines[3].endswith("done")


def test_one_hot_that_cannot_fit_is_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", "1000")
    # N=8: V=16 needs 512 bytes (fits), V=64 needs 2 KiB (does not).
    argv = ["--n", "8", "--d", "4", "--vocab", "16,64", "--dims", "4", "--ns", "8"]
    argv += ["--base-vocab", "16", "--min-run-time", "0.003", "--quiet", "--no-memory"]
    code = bench.main([*argv, *PLOTS, "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0
    data = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    status = {(r["form"], r["mode"], r["vocab"]): r for r in data["results"]}
    for form in ("one-hot matmul", "linear"):
        for mode in ("fwd", "fwd+bwd"):
            skipped = status[(form, mode, 64)]
            assert skipped["status"] == "skipped"
            assert "one-hot would take 2.0 KiB" in skipped["note"]
            assert "OneHotTooLargeError" in skipped["note"]
            assert skipped["median_ms"] is None
            assert status[(form, mode, 16)]["status"] == "ok"
    assert status[("lookup", "fwd", 64)]["status"] == "ok"
    assert status[("sparse matmul", "fwd+bwd", 64)]["status"] == "ok"
    assert len(data["notes"]) == 4
    assert "skipped" in printed
    if HAS_MATPLOTLIB:  # the plots say which cases are missing
        assert "skipped" in (tmp_path / "time_vs_vocab.svg").read_text(encoding="utf-8")


COMPARE = ["--compare", "--n", "4", "--d", "4", "--vocab", "16,32", "--min-run-time", "0.01"]
COMPARE += ["--rounds", "1"]


def test_compare_mode_still_prints_the_targets(capsys: pytest.CaptureFixture[str]) -> None:
    code = bench.main([*COMPARE, "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "form/raw" in printed
    assert "(a) lookup_embedding fwd+bwd within 10% of F.embedding" in printed
    assert "(c) sparse_matmul_embedding" in printed


def test_compare_bare_json_prints_only_json(capsys: pytest.CaptureFixture[str]) -> None:
    # Before, a bare --json was a usage error that asked for a PATH.
    assert bench.main([*COMPARE, "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert set(payload) == {"machine", "config", "load_after", "measurements", "targets"}
    assert payload["config"]["vocabs"] == [16, 32]
    assert re.search(r"^bench \[1/8\] +[\d.]+s  fwd lookup_embedding", captured.err, re.M)


def test_sweep_bare_json_prints_the_results_and_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--n", "8", "--d", "4", "--vocab", "16", "--dims", "4", "--ns", "8"]
    argv += ["--base-vocab", "16", "--min-run-time", "0.003", "--no-memory", "--no-plots"]
    assert bench.main([*argv, "--out", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload == json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert payload["schema"] == SCHEMA
    assert (tmp_path / "bench.csv").exists()
    assert "calibrated in" in captured.err  # the progress, on stderr
    assert captured.err.splitlines()[-1].startswith(f"wrote {tmp_path / 'bench.json'}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vocab", "x"], "argument --vocab: 'x' is not an integer"),
        (["--vocab", "0"], "'0' must be at least 1"),
        (["--dims", ""], "holds no size"),
        (["--dtype", "float8"], "invalid choice: 'float8'"),
        (["--min-run-time", "-1"], "must be a positive number"),
        (["--device", "tpu"], "not a device name"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
    ids=["vocab-x", "vocab-0", "dims-empty", "dtype", "min-run-time", "device", "unknown"],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = bench.main(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("python benchmarks/efficiency.py: error: ")
    assert message in lines[0]


def test_missing_matplotlib_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = bench.main(["--quick", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "pip install 'embedding-equivalence[bench]'" in err
    assert not (tmp_path / "bench.json").exists()


def test_the_script_runs_the_harness() -> None:
    # The command the Efficiency page shows, from the repository's root.
    done = subprocess.run(
        [sys.executable, "benchmarks/efficiency.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python benchmarks/efficiency.py")
    assert "--compare" in done.stdout


def test_the_console_script_does_not_carry_this_harness(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The sweep is run from the repository; the console script's bench times one candidate.
    assert cli.main(["bench", "--candidate", "x:y", "--compare", "a.json", "b.json"]) == 2
    assert "unrecognized arguments: --compare" in capsys.readouterr().err
