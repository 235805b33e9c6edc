"""docs/real-kernels.json and the entries that produce it (docs/_scripts/real_kernels/).

- The JSON has every entry, with every field that docs/real-kernels.md reads, and no path of
  the machine that produced it; the page renders each entry from it without any library.
- The verdict kinds are read from the verifiers' own messages.
- Each entry whose library is installed replays its recorded calls in a child process and
  must get the recorded verdicts: the first failing call (the entry's headline finding), as
  recorded, boundary phase, budget and seed included, and of the passing calls the last of
  each probe (everything that passed, together, which covers the dtypes, modes and options of
  the passing calls before it) and the bad-input call, with a few random examples each
  (``generate.py`` makes every call again). Calls on more than two ranks are left out. The
  libraries are imported only in that child: they warn on import (which this suite turns into
  errors), register torch ops, and fbgemm warns inside its backward pass, which under
  ``filterwarnings = error`` would change the verdicts. The child has a timeout, and no
  process of it (nor of its ranks) may outlive the test.

Installing the libraries: scripts/install-real-kernels.sh.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import embedding_equivalence as ee

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))

from real_kernels import ENTRIES, Entry  # noqa: E402
from real_kernels.generate import MISSING, run_child  # noqa: E402
from real_kernels.page import (  # noqa: E402
    CATEGORIES,
    ENTRY_FIELDS,
    RUN_FIELDS,
    _text,
    findings,
    headline,
    load,
    recorded_elsewhere,
    render_entry,
    render_summary,
)

#: Examples of a passing call when it is replayed.
SMALL = 5
#: Seconds an entry's replay may take (2-core machine), by entry.
TIMEOUTS = {
    "compile_inductor": 600,
    "fbgemm_tbe": 180,
    "torchrec_ebc": 180,
    "dtensor_embedding": 420,
    "megatron_vocab_parallel": 420,
    "torchao_int8": 180,
    # Triton under the interpreter: a program at a time (the sparsify calls draw tables of up
    # to 1,024 rows, whose backward runs a program per 8 rows).
    "liger_embedding": 300,
    "sparsify_embedding_bag": 600,
    "flaggems_embedding": 120,
}
KINDS = {"passed", "refuses", "accepts bad input", "differs", "crashes", "interpreter limit"}


@pytest.fixture(scope="module")
def entries() -> dict[str, Any]:
    return load()


#: The build the recorded entries were made with: nothing on the page is marked.
SAME = {"torch": "2.13.0+cpu", "triton": "3.9.0", "machine": "x86_64, 2 CPUs, 2 torch threads"}


# --------------------------------------------------------------------------------------------
# The JSON and the page
# --------------------------------------------------------------------------------------------


def test_the_json_has_every_entry_with_what_the_page_reads(entries: dict[str, Any]) -> None:
    assert list(entries) == [e.id for e in ENTRIES]
    for e in ENTRIES:
        data = entries[e.id]
        if not e.runs_on_cpu and data.get("status") == "never run":
            # A library that does not start without a GPU: why, with what was tried.
            assert data["not_run"]["reason"], e.id
            assert set(e.distributions) <= set(data["not_run"]["versions"]), e.id
            continue
        assert data.get("status") in ("ran", "kept"), f"{e.id} has never run"
        missing = [f for f in ENTRY_FIELDS if f not in data]
        assert not missing, f"{e.id} lacks {missing}"
        assert data["title"] == e.title
        assert set(e.distributions) <= set(data["versions"]), e.id
        assert data["runs"], e.id
        for run in data["runs"]:
            missing = [f for f in RUN_FIELDS if f not in run]
            assert not missing, f"{e.id}, {run.get('label')!r} lacks {missing}"
            assert run["kind"] in KINDS
            assert run["passed"] == (run["kind"] == "passed")
            assert run["call"].startswith(run["spec"]["verifier"] + "(")
        assert data["passed"] == all(r["passed"] for r in data["runs"])


def test_the_json_holds_no_path_of_the_machine() -> None:
    # The page prints tracebacks and compiler messages: the generator replaces the machine's
    # paths (the checkout, the venv, temporary files) before they reach the JSON.
    text = (ROOT / "docs" / "real-kernels.json").read_text(encoding="utf-8")
    for path in {str(ROOT), os.path.expanduser("~"), sys.prefix}:
        assert path not in text
    assert not re.search(r"(?<![\w.<>~-])/(?:home|root|tmp|work|usr|opt)/", text)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_the_page_renders_each_entry_without_its_library(
    entry: Entry, entries: dict[str, Any]
) -> None:
    text = render_entry(entry.id, entries, SAME)
    data = entries[entry.id]
    if data.get("status") == "never run":
        assert _text(data["not_run"]["reason"]) in text
        assert entry.title in render_summary(entries, SAME)
        return
    for report in data.get("reports", []):
        assert _text(report["title"]) in text
    for run in data["runs"]:
        assert _text(run["label"]) in text
    assert f"**What the verifier found:** {headline(data)}" in text
    for finding in findings(data):
        assert _text(finding.text) in text
    assert entry.title in render_summary(entries, SAME)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_each_failing_call_is_one_finding_and_each_report_a_defect(
    entry: Entry, entries: dict[str, Any]
) -> None:
    data = entries[entry.id]
    if data.get("status") == "never run":
        return
    found = findings(data)
    numbers = sorted(n for f in found for n in f.runs)
    assert numbers == [n for n, r in enumerate(data["runs"], 1) if not r["passed"]]
    assert {f.category for f in found} <= set(CATEGORIES)
    defects = {label for f in found if f.category == "defect" for label in f.labels}
    assert {r["label"] for r in data.get("reports", [])} <= defects
    for f in found:
        runs = [data["runs"][n - 1] for n in f.runs]
        assert all(r["kind"] == runs[0]["kind"] for r in runs), f.text
        if f.category == "missing option":
            assert all("has no argument for" in r["found"] for r in runs), f.text
        if f.category == "interpreter limit":
            assert all(r["kind"] == "interpreter limit" for r in runs), f.text
        if f.category == "defect":
            assert f.call, f"{entry.id}: a defect without its minimal call: {f.text}"


def test_liger_headline_separates_defects_refusals_and_interpreter_limits(
    entries: dict[str, Any],
) -> None:
    data = entries["liger_embedding"]
    by = {c: [f for f in findings(data) if f.category == c] for c in CATEGORIES}
    # Ten calls that meet the reshape of empty ids are one finding, a confirmed defect.
    (empty,) = [f for f in by["defect"] if "cannot reshape tensor of 0 elements" in f.text]
    assert len(empty.runs) == 10
    assert empty.call == (
        "liger_embedding_function(input=tensor([], dtype=torch.int64), weight=tensor([[1.5410]]))"
    )
    assert len(by["defect"]) == len(data["reports"]) == 3
    assert {f.text for f in by["missing option"]} == {
        f"no argument for `{o}`"
        for o in ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")
    }
    assert [len(f.runs) for f in by["interpreter limit"]] == [4]
    assert not by["other"]
    line = headline(data)
    assert line.startswith(
        "**3** confirmed defects (13 calls) · **0** other findings · **4** options it does not "
        "have (7 calls) · **1** limit of Triton's interpreter (4 calls); 8 of 32 calls passed"
    )
    assert "no boundary phase" in line
    text = render_entry("liger_embedding", entries, SAME)
    assert "**x10** raises RuntimeError: cannot reshape tensor of 0 elements" in text
    assert "minimal call: `liger_embedding_function(input=tensor([], dtype=torch.int64)" in text


def test_the_summary_counts_findings_by_kind_not_failed_calls(entries: dict[str, Any]) -> None:
    table = render_summary(entries, SAME)
    header = table.splitlines()[0]
    assert "failed" not in header
    for column in ("confirmed defects", "other findings", "options it lacks", "interpreter limits"):
        assert column in header
    (liger,) = [row for row in table.splitlines() if "#liger-embedding" in row]
    assert "| 8 of 32 | 3 | 0 | 4 | 1 | 486 |" in liger
    assert "†" not in table


def test_a_record_from_other_versions_or_another_machine_is_marked(
    entries: dict[str, Any],
) -> None:
    versions = {"torch": "2.13.0+cpu", "triton": "3.9.0"}
    assert recorded_elsewhere(versions, SAME["machine"], SAME) is None
    one_thread = {**SAME, "machine": "x86_64, 2 CPUs, 1 torch thread"}  # CI's site build
    assert recorded_elsewhere(versions, SAME["machine"], one_thread) is None
    other = {**SAME, "torch": "2.14.0+cu130"}
    assert recorded_elsewhere(versions, SAME["machine"], other) == (
        "recorded on x86_64, 2 CPUs, 2 torch threads with torch 2.13.0+cpu, Triton 3.9.0; "
        "this site was built with torch 2.14.0+cu130, Triton 3.9.0"
    )
    elsewhere = {**SAME, "machine": "arm64, 8 CPUs, 8 torch threads"}
    assert recorded_elsewhere(versions, SAME["machine"], elsewhere).endswith(
        "on arm64, 8 CPUs, 8 torch threads"
    )
    assert "Recorded elsewhere" not in render_entry("fbgemm_tbe", entries, SAME)
    text = render_entry("fbgemm_tbe", entries, other)
    assert '!!! note "Recorded elsewhere"' in text
    assert "this site was built with torch 2.14.0+cu130" in text
    assert "fbgemm-gpu-cpu 1.8.0 †" in render_summary(entries, other)


def test_liger_shows_its_gpu_record_marked_with_its_machine_and_versions(
    entries: dict[str, Any],
) -> None:
    import json

    gpu = json.loads((ROOT / "docs" / "triton-cuda.json").read_text(encoding="utf-8"))
    text = render_entry("liger_embedding", entries, SAME)
    assert f"recorded on {gpu['device']} with torch {gpu['torch']}, Triton {gpu['triton']}" in text
    for check in gpu["results"]:
        if check["check"].startswith("Liger"):
            assert f"{check['check']}: liger: PASSED" in text
    assert "<locals>" not in text


def test_each_ready_to_file_report_names_a_failing_call_and_failed(
    entries: dict[str, Any],
) -> None:
    reported = 0
    for e in ENTRIES:
        data = entries[e.id]
        failing = {r["label"] for r in data.get("runs", []) if not r["passed"]}
        for report in data.get("reports", []):
            reported += 1
            assert report["label"] in failing, (e.id, report["label"])
            assert report["exit_status"] != 0, (e.id, report["label"])
            # Runnable outside this repository: the adapter is inlined, not imported.
            assert "from real_kernels" not in report["repro"]
            assert "candidate = " in report["repro"]
    assert reported, "no entry has a ready-to-file report"


def test_a_limit_of_the_interpreter_is_neither_a_pass_nor_a_finding(
    entries: dict[str, Any],
) -> None:
    # Liger's bfloat16 gradient adds up with tl.atomic_add in bfloat16, which the interpreter
    # cannot run: the run records the limit, with the triton version of the entry.
    runs = entries["liger_embedding"]["runs"]
    limited = [r for r in runs if r["kind"] == "interpreter limit"]
    assert limited
    for run in limited:
        assert not run["passed"]
        assert run["interpreter_limit"] == "atomic-dtype"
        assert "triton " + entries["liger_embedding"]["versions"]["triton"] in run["failure"]
    reported = {r["label"] for r in entries["liger_embedding"]["reports"]}
    assert not reported & {r["label"] for r in limited}


def test_an_entry_that_was_not_run_says_so(entries: dict[str, Any]) -> None:
    kept = {**entries["fbgemm_tbe"], "status": "kept"}
    kept["not_run"] = {"date": "2030-01-01", "reason": "fbgemm_gpu does not import"}
    text = render_entry("fbgemm_tbe", {"fbgemm_tbe": kept}, SAME)
    assert "Not run on 2030-01-01" in text
    assert "fbgemm_gpu does not import" in text
    assert "not run yet" in render_summary({}, SAME)


# --------------------------------------------------------------------------------------------
# The verdict kinds
# --------------------------------------------------------------------------------------------


def _refusing(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("no lookups today")


def _clamping(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(input.clamp(0, weight.shape[0] - 1), weight)


def test_the_verdict_kinds_follow_the_verifier_messages() -> None:
    from real_kernels._common import classify

    for candidate, kind, text in [
        (_refusing, "refuses", "raises NotImplementedError: no lookups today"),
        (_clamping, "accepts bad input", "returns a result for bad input"),
        (F.embedding, "passed", "passed"),
    ]:
        report = ee.verify_embedding(  # random examples only: about 6 of 30 are bad input
            candidate, dtypes=[torch.float32], max_examples=30, seed=0, backward=False,
            boundaries=False,
        )  # fmt: skip
        got = classify(report.passed, report.failure, report.torch_defect)
        assert got[0] == kind, report
        assert got[1].startswith(text), got


# --------------------------------------------------------------------------------------------
# Each entry, where its library is installed
# --------------------------------------------------------------------------------------------


def _processes_with(token: str) -> list[int]:
    """Processes whose environment holds ``token`` (Linux's /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if token.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_replay_reads_the_thread_count_its_entry_was_recorded_with(
    entries: dict[str, Any],
) -> None:
    from real_kernels._common import machine, recorded_threads

    assert recorded_threads(machine()) == torch.get_num_threads()
    assert recorded_threads("x86_64, 2 CPUs, 2 torch threads") == 2
    assert all(recorded_threads(e["machine"]) >= 1 for e in entries.values() if "machine" in e)
    with pytest.raises(ValueError, match="names no thread count"):
        recorded_threads("x86_64, 2 CPUs")


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_the_entry_replays_its_recorded_verdicts(entry: Entry, entries: dict[str, Any]) -> None:
    top = entry.requires.partition(".")[0]
    if importlib.util.find_spec(top) is None:
        pytest.skip(
            f"{entry.distributions[0]} is not installed (scripts/install-real-kernels.sh "
            f"installs it)"
        )
    token = f"RK_TEST_TOKEN={uuid.uuid4().hex}"
    name, _, value = token.partition("=")
    status, results = run_child(
        entry.id, small=SMALL, timeout=TIMEOUTS[entry.id], env={name: value}
    )
    if status == MISSING:
        pytest.skip(results["missing"])
    try:
        assert status == 0, f"the replay of {entry.id} exited with status {status}"
        assert results, "no call was replayed"
        wrong = [r for r in results if r["expected"] != r["got"]]
        assert not wrong, "\n".join(
            f"{r['label']}: recorded {r['expected']}, got {r['got']}: {r['found']}" for r in wrong
        )
    finally:
        if sys.platform.startswith("linux"):
            assert _processes_with(token) == [], "a process of the replay outlived it"
