"""Start-up, throughput and failure reporting of ``verify_sharded_embedding`` on the CPU.

Measures, at world sizes 2 and 3 (gloo, one thread a rank):

- the start-up of a worker group (spawn, import, join the process group), median of 5;
- examples per second of a default verification (``vocab_parallel_embedding`` with every
  option, 100 examples, seed 0), counting the group's start-up and without it;
- how long a failing report takes when a rank raises (the group is restarted while
  shrinking), when a rank dies, and when a rank hangs (the default 20 s timeout).

Targets: start-up <= 15 s, >= 5 examples/s at world size 2, a crashed or hung rank reported
within 30 s. Prints a table and writes ``docs/bench/sharded.json``. Usage::

    python benchmarks/sharded_speed.py
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from embedding_equivalence.distributed import verify_sharded_embedding
from embedding_equivalence.distributed._group import WorkerGroup

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "bench" / "sharded.json"
# The kernels that raise, hang or die on rank 1 are the test suite's (the workers import them
# by name, with this process's sys.path).
sys.path.insert(0, str(ROOT / "tests"))
OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq")


def _startup(world: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        group = WorkerGroup(world)
        try:
            group.start()
            times.append(group.startup_seconds[-1])
        finally:
            group.close()
    return statistics.median(times)


def _throughput(world: int) -> dict[str, float]:
    report = verify_sharded_embedding(
        "embedding_equivalence.distributed:vocab_parallel_embedding",
        world_size=world, options=OPTIONS, max_examples=100, seed=0,
    )  # fmt: skip
    assert report.passed, str(report)
    assert report.sharded is not None
    startup = sum(report.sharded.startup_seconds)
    return {
        "examples": report.examples,
        "seconds": round(report.elapsed, 2),
        "examples_per_second": round(report.examples / report.elapsed, 1),
        "examples_per_second_after_startup": round(report.examples / (report.elapsed - startup), 1),
    }


def _failure(candidate: str) -> dict[str, float | int]:
    start = time.perf_counter()
    report = verify_sharded_embedding(f"sharded_candidates:{candidate}", seed=0)
    assert not report.passed
    return {
        "seconds_to_report": round(time.perf_counter() - start, 1),
        "group_starts": report.sharded.group_starts,
    }


def main() -> None:
    """Print the figures and write them to ``docs/bench/sharded.json``."""
    torch.set_num_threads(1)
    results: dict[str, object] = {
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "backend": "gloo",
        "startup_seconds": {},
        "throughput": {},
    }
    for world in (2, 3):
        results["startup_seconds"][str(world)] = round(_startup(world), 2)  # type: ignore[index]
        results["throughput"][str(world)] = _throughput(world)  # type: ignore[index]
    results["failures"] = {
        kind: _failure(f"{kind}_on_rank_1") for kind in ("raises", "dies", "hangs")
    }
    print(f"sharded verification on {results['machine']}, torch {results['torch']}, gloo")
    print(f"{'world':>5}  {'start-up s':>10}  {'examples/s':>10}  {'after start-up':>14}")
    for world in ("2", "3"):
        t = results["throughput"][world]  # type: ignore[index]
        s = results["startup_seconds"][world]  # type: ignore[index]
        print(
            f"{world:>5}  {s:>10.2f}  {t['examples_per_second']:>10.1f}  "
            f"{t['examples_per_second_after_startup']:>14.1f}"
        )
    print("\nfailing rank (world 2)   seconds to the report   group starts")
    for kind, f in results["failures"].items():  # type: ignore[union-attr]
        print(f"{kind:<24} {f['seconds_to_report']:>21.1f}   {f['group_starts']:>12}")
    OUT.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
