"""Two torchrun launchers on this machine, standing in for two nodes (2 ranks each, world 4).

The slow tier only: each test (or the launch that two tests share) starts two launchers
(``--node-rank`` with a master address, or for the command line the c10d rendezvous, where
node ranks follow the order of arrival) that run ``tests/torchrun_verify.py`` or
``embedding-equivalence verify --sharding vocab``. The verifier runs on the group they form;
a lost node (one launcher killed with its process group) and one rank killed alone must come
back on every surviving rank as a failing report that names the lost ranks within 30 s, and
every process must exit by itself.

Start-up is slow on a loaded machine (each launcher starts Python and torch, the rendezvous
waits for both, then four ranks import torch), so it has its own generous timeout, apart from
the 30 s allowed for the report. Every launcher runs in a session of its own and each of its
workers in another (torchrun's way): on the way out, whatever happened, the harness kills
each of those process groups, and a fixture checks that no process of the test is left.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchrun_verify import (
    kill_rank,
    logs,
    rank_lines,
    rank_times,
    two_nodes,
    wait_gone,
    wait_running,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc (Linux)"),
]

TESTS = Path(__file__).resolve().parent
SCRIPT = str(TESTS / "torchrun_verify.py")
FORM = "embedding_equivalence.distributed:vocab_parallel_embedding"
#: Seconds for two launchers to start four ranks and for them to form the group.
STARTUP = 240.0
#: Seconds a passing run of a few examples may take once started.
RUN = 240.0
#: The issue's bound: every surviving rank reports within this many seconds of the kill.
REPORT = 30.0
#: Seconds for every process to exit after the survivors reported.
EXIT = 30.0


def _ours(tmp_path: Path) -> list[int]:
    """Pids of processes whose command line names this test's folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(tmp_path).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return [p for p in found if p != os.getpid()]


@pytest.fixture(autouse=True)
def _nothing_left(tmp_path: Path) -> Iterator[None]:
    yield
    deadline = time.monotonic() + 10
    while _ours(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ours(tmp_path), "a launcher or rank outlived its test"


@pytest.fixture(scope="module")
def static_launch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pair of launchers (``--node-rank``, static rendezvous) whose ranks verify the package's
    form and then a sharded mutant on one group: ``OUT/0`` and ``OUT/1`` hold their lines.

    Starting two launchers and four ranks costs more than the two verifications, so the two
    tests below share the launch; each process is gone when it returns.
    """
    out = tmp_path_factory.mktemp("static")
    candidates = f"{FORM},sharded_mutants:all_reduce_missing"
    with two_nodes([SCRIPT, candidates, "vocab,vocab", "10", str(out), "20"], out) as nodes:
        assert not wait_gone(nodes, STARTUP + RUN), logs(out)
        assert [n.process.returncode for n in nodes] == [0, 0], logs(out)
    deadline = time.monotonic() + 10
    while _ours(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ours(out), "a launcher or rank outlived its launch"
    return out


def _assert_every_rank_passed(out: Path) -> None:
    lines = rank_lines(out)
    assert sorted(lines) == [0, 1, 2, 3], lines
    for rank, line in lines.items():
        assert line.startswith(f"rank {rank} of 4: passed=True examples="), line
        assert "world=4" in line


def test_the_verifier_runs_on_two_launchers(static_launch: Path) -> None:
    _assert_every_rank_passed(static_launch / "0")


def test_a_sharded_bug_is_caught_on_every_rank_of_both_launchers(static_launch: Path) -> None:
    lines = rank_lines(static_launch / "1")
    assert sorted(lines) == [0, 1, 2, 3], lines
    assert all("passed=False" in line and "failure=out[" in line for line in lines.values())
    assert len({line.split(":", 1)[1] for line in lines.values()}) == 1  # the same report


def test_the_cli_runs_on_two_launchers_with_the_c10d_rendezvous(tmp_path: Path) -> None:
    """The command line, on launchers that meet by the c10d rendezvous (the fixture's use
    ``--node-rank``): node ranks follow the order in which the launchers arrive."""
    args = [
        "-m", "embedding_equivalence", "verify", "--sharding", "vocab", "--max-examples", "5",
        "--seed", "0", "--no-boundaries",
    ]  # fmt: skip
    with two_nodes(args, tmp_path, rdzv="c10d") as nodes:
        assert not wait_gone(nodes, STARTUP + RUN), logs(tmp_path)
        assert [n.process.returncode for n in nodes] == [0, 0], logs(tmp_path)
    # Rank 0 prints the table, on whichever launcher arrived first: a row a form, each passed
    # at world size 4; the other launcher's ranks print none of it.
    texts = [(tmp_path / f"node{k}.log").read_text() for k in (0, 1)]
    tables = [t for t in texts if "vocab_parallel_embedding" in t]
    assert len(tables) == 1, logs(tmp_path)
    assert re.search(r"^pass +vocab_parallel_embedding +- +vocab +4 +5 ", tables[0], re.M)
    assert "4 passed, 0 failed" in tables[0]


@pytest.mark.parametrize("lost", [1, 0], ids=["node-1", "node-0-with-rank-0-and-the-store"])
def test_a_lost_node_is_reported_by_every_surviving_rank(lost: int, tmp_path: Path) -> None:
    args = [SCRIPT, "torchrun_verify:slow_vocab_parallel", "vocab", "1000", str(tmp_path), "5"]
    with two_nodes(args, tmp_path) as nodes:
        wait_running(nodes, tmp_path, 4, STARTUP)
        time.sleep(1.0)  # well inside the run
        killed = time.time()
        os.killpg(nodes[lost].process.pid, 9)  # the launcher's process group, as a user would
        left = wait_gone(nodes, REPORT + EXIT)
        assert not left, f"still running {EXIT + REPORT:g} s after the kill: {left}"
    survivors = [2, 3] if lost == 0 else [0, 1]
    gone = [0, 1] if lost == 0 else [2, 3]
    lines, times = rank_lines(tmp_path), rank_times(tmp_path)
    assert sorted(lines) == survivors, logs(tmp_path)
    for rank in survivors:
        assert "passed=False" in lines[rank]
        assert f"lost ranks {gone[0]}, {gone[1]} (node {lost}, all of its ranks)" in lines[rank]
        assert times[rank]["returned"] - killed < REPORT, lines[rank]
    assert nodes[1 - lost].process.returncode != 0  # torchrun saw its ranks fail


def test_one_rank_killed_alone_is_reported(tmp_path: Path) -> None:
    args = [SCRIPT, "torchrun_verify:slow_vocab_parallel", "vocab", "1000", str(tmp_path), "5"]
    with two_nodes(args, tmp_path) as nodes:
        wait_running(nodes, tmp_path, 4, STARTUP)
        time.sleep(1.0)
        killed = time.time()
        kill_rank(tmp_path, 3)  # its launcher then stops rank 2, the rest of node 1
        assert not wait_gone(nodes, REPORT + EXIT), logs(tmp_path)
    lines, times = rank_lines(tmp_path), rank_times(tmp_path)
    assert sorted(lines) == [0, 1], logs(tmp_path)
    for rank in (0, 1):
        assert re.search(r"passed=False .*lost ranks? (2, )?3 \(node 1", lines[rank]), lines[rank]
        assert times[rank]["returned"] - killed < REPORT, lines[rank]
