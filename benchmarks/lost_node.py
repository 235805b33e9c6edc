"""Two torchrun launchers on one machine, standing in for two nodes: start-up and a lost node.

Each launcher runs ``torchrun --nnodes=2 --nproc-per-node=2`` (world 4, gloo) with
``tests/torchrun_verify.py``, whose ranks call ``verify_sharded_embedding`` on the group. It
measures:

- **start-up**, under the static rendezvous (``--node-rank``, ``--master-addr``) and under
  c10d (``--rdzv-endpoint``): seconds from starting the launchers until every rank has joined
  the process group, the seconds the verifier then takes to build its own groups on it, and
  a whole verification of ``vocab_parallel_embedding`` (20 examples and the boundary phase);
- **a lost node**: in the middle of a run (a slow correct kernel, 0.2 s a call), one launcher
  killed with its process group (node 1; node 0, which holds rank 0 and the store), or one
  rank killed alone (rank 3; rank 0): seconds from the kill until the last surviving rank
  has its failing report, and until every process of both nodes has exited.

Each rank's line (what ``torchrun_verify.py`` prints) is kept for the Sharded page. Prints a
table and writes ``docs/bench/lost_node.json``. Usage::

    python benchmarks/lost_node.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "bench" / "lost_node.json"
# The script, its slow kernel and the two-launcher harness are the test suite's.
sys.path.insert(0, str(ROOT / "tests"))

from torchrun_verify import (  # noqa: E402 - after the path above
    kill_rank,
    logs,
    rank_lines,
    rank_times,
    two_nodes,
    wait_gone,
    wait_running,
)

SCRIPT = str(ROOT / "tests" / "torchrun_verify.py")
FORM = "embedding_equivalence.distributed:vocab_parallel_embedding"
SLOW = "torchrun_verify:slow_vocab_parallel"
#: Seconds allowed for the launchers to start and for a passing run (a loaded machine).
LIMIT = 600.0
#: What is killed, by name: a launcher's process group (``node``) or one rank's process.
KILLS = {
    "node 1: its launcher's process group": ("node", 1),
    "node 0 (rank 0, the store): its launcher's process group": ("node", 0),
    "rank 3 alone": ("rank", 3),
    "rank 0 alone": ("rank", 0),
}


def _startup(rdzv: str) -> dict[str, Any]:
    """A passing run on two launchers: start-up, the verifier's groups, the whole run."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        launched = time.time()
        with two_nodes([SCRIPT, FORM, "vocab", "20", str(out), "20"], out, rdzv=rdzv) as nodes:
            left = wait_gone(nodes, LIMIT)
            assert not left, logs(out)
            assert all(n.process.returncode == 0 for n in nodes), logs(out)
            ended = time.time()
        times, lines = rank_times(out), rank_lines(out)
    assert sorted(lines) == [0, 1, 2, 3], lines
    assert all("passed=True" in x for x in lines.values()), lines
    return {
        "launch_to_group_seconds": round(max(t["joined"] for t in times.values()) - launched, 2),
        "verifier_groups_seconds": round(max(t["startup_seconds"][0] for t in times.values()), 2),
        "run_seconds": round(ended - launched, 1),
        "lines": {str(r): line for r, line in lines.items()},
    }


def _lost(what: str, which: int) -> dict[str, Any]:
    """Kill a node or a rank in the middle of a run; time the survivors' reports and exits."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        with two_nodes([SCRIPT, SLOW, "vocab", "1000", str(out), "5"], out) as nodes:
            wait_running(nodes, out, 4, LIMIT)
            time.sleep(1.0)
            killed = time.time()
            if what == "node":
                os.killpg(nodes[which].process.pid, signal.SIGKILL)
            else:
                kill_rank(out, which)
            left = wait_gone(nodes, 120.0)
            gone = time.time() - killed
            assert not left, f"still running: {left}\n{logs(out)}"
        times, lines = rank_times(out), rank_lines(out)
    assert lines, logs(out)
    assert all("passed=False" in x and "lost" in x for x in lines.values()), lines
    return {
        "survivors": sorted(lines),
        "report_seconds": round(max(t["returned"] for t in times.values()) - killed, 2),
        "all_exited_seconds": round(gone, 1),
        "lines": {str(r): line for r, line in lines.items()},
    }


def main() -> None:
    """Print the figures and write them to ``docs/bench/lost_node.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of each kill (median)")
    repeats = parser.parse_args().repeats
    results: dict[str, Any] = {
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "backend": "gloo",
        "command": "python benchmarks/lost_node.py",
        "world": "2 launchers x 2 ranks",
        "load_average_before": round(os.getloadavg()[0], 2),
        "startup": {rdzv: _startup(rdzv) for rdzv in ("static", "c10d")},
        "lost": {},
    }
    for name, (what, which) in KILLS.items():
        runs = [_lost(what, which) for _ in range(repeats)]
        middle = sorted(runs, key=lambda r: r["report_seconds"])[len(runs) // 2]
        middle["report_seconds_all"] = [r["report_seconds"] for r in runs]
        middle["report_seconds"] = statistics.median(middle["report_seconds_all"])
        results["lost"][name] = middle
    results["load_average_after"] = round(os.getloadavg()[0], 2)
    print(f"two launchers x 2 ranks on {results['machine']}, torch {results['torch']}, gloo")
    print(f"{'rendezvous':<11} {'launch to group s':>17} {'verifier groups s':>17} {'run s':>7}")
    for rdzv, s in results["startup"].items():
        print(
            f"{rdzv:<11} {s['launch_to_group_seconds']:>17.1f} "
            f"{s['verifier_groups_seconds']:>17.2f} {s['run_seconds']:>7.1f}"
        )
    print(f"\n{'killed':<58} {'survivors':>9} {'report s':>8} {'all exited s':>12}")
    for name, lost in results["lost"].items():
        survivors = ",".join(map(str, lost["survivors"]))
        print(
            f"{name:<58} {survivors:>9} {lost['report_seconds']:>8.1f} "
            f"{lost['all_exited_seconds']:>12.1f}"
        )
    OUT.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
