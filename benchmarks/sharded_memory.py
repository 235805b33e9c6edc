"""Peak resident memory of each rank of a sharded verification, against V, at world 2 and 4.

``verify_sharded_embedding(vocab_parallel_embedding, sharding="vocab", vocab_sizes=V,
embedding_dims=D, dtypes=[dtype], max_examples=5)`` with the boundary phase on (the sharded
phase, then the examples at the requested size with ids at every shard edge), backward on.
A table of at least 2**22 elements is never built whole: each rank draws its own shard from the
recipe and sends back only the output and the referenced rows of the gradient, so a rank's
peak should follow its shard (``ceil(V / world) * D`` elements) and fall with the world size.

Each configuration runs in a fresh subprocess (its own driver, its own ranks). While it runs, a
thread reads ``VmHWM`` (the peak resident set) of every rank from ``/proc/<pid>/status``; the
driver's own peak is its ``VmHWM`` at the end. Printed beside each: the limit of issue 23, a
rank's peak of at most 1.5x its shard + 512 MiB, and 180 s for the 5 examples; the load
average (other processes on the machine slow every figure). Usage::

    python benchmarks/sharded_memory.py [--vocab 1048576,4194304,16777216] [--dim 64]
        [--worlds 2,4] [--dtype float32] [--examples 5] [--json docs/bench/sharded-memory.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from typing import Any

TITLE = "Peak resident memory of each rank of a sharded verification, against V."
MIB = 1 << 20
#: The limits of issue 23: a rank's peak <= 1.5 x its shard + 512 MiB; 5 examples in 180 s.
PEAK_FACTOR, PEAK_SLACK, SECONDS = 1.5, 512 * MIB, 180.0
#: The command that writes the figures the Sharded page shows.
COMMAND = "python benchmarks/sharded_memory.py --json docs/bench/sharded-memory.json"


def _status(pid: int, key: str) -> int | None:
    """``key`` (``VmHWM``, ``VmRSS``) of ``/proc/<pid>/status`` in bytes, or ``None``."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


class _Watcher(threading.Thread):
    """Reads the peak resident set of every child process until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.done.wait(0.1):
            for pid in _children(me):
                peak = _status(pid, "VmHWM")
                if peak is not None:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), peak)


def measure_one(
    vocab: int, dim: int, world: int, dtype_name: str, examples: int, seed: int, backward: bool
) -> dict[str, Any]:
    """One verification in this process; its figures (run in a fresh subprocess)."""
    import torch

    from embedding_equivalence.distributed import verify_sharded_embedding, vocab_parallel_embedding

    dtype = getattr(torch, dtype_name)
    size = torch.empty((), dtype=dtype).element_size()
    watcher = _Watcher()
    watcher.start()
    start = time.perf_counter()
    report = verify_sharded_embedding(
        vocab_parallel_embedding, sharding="vocab", world_size=world, vocab_sizes=vocab,
        embedding_dims=dim, dtypes=[dtype], max_examples=examples, seed=seed, timeout=300.0,
        backward=backward,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    watcher.done.set()
    watcher.join()
    shard = -(-vocab // world) * dim * size
    ranks = sorted(watcher.peaks.values(), reverse=True)[:world]
    return {
        "vocab": vocab,
        "dim": dim,
        "world": world,
        "dtype": dtype_name,
        "backward": backward,
        "table_bytes": vocab * dim * size,
        "shard_bytes": shard,
        "rank_peak_bytes": ranks,
        "limit_bytes": int(PEAK_FACTOR * shard + PEAK_SLACK),
        "driver_peak_bytes": _status(os.getpid(), "VmHWM"),
        "seconds": round(seconds, 1),
        "examples": report.examples,
        "boundary_examples": report.boundary_examples,
        "passed": report.passed,
        "failure": None if report.passed else (report.failure or "")[:500],
    }


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def main(argv: list[str] | None = None) -> int:
    """Run every configuration in its own subprocess, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--vocab", default=f"{2**20},{2**22},{2**24}")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--modes", default="backward,forward", help="backward (the target) and/or forward only"
    )
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    vocabs = [int(v) for v in args.vocab.split(",")]
    worlds = [int(w) for w in args.worlds.split(",")]
    if args.one:
        backward = args.modes == "backward"
        result = measure_one(
            vocabs[0], args.dim, worlds[0], args.dtype, args.examples, args.seed, backward
        )
        print(json.dumps(result))
        return 0
    import torch

    print(TITLE)
    print(f"D = {args.dim}, {args.dtype}, {args.examples} examples, boundary phase on")
    print(f"limit: a rank's peak <= {PEAK_FACTOR:g} x its shard + 512 MiB; {SECONDS:g} s")
    load_before = os.getloadavg()[0]
    rows = []
    configs = [
        (mode, vocab, world)
        for mode in args.modes.split(",")
        for vocab in vocabs
        for world in worlds
    ]
    for mode, vocab, world in configs:
        command = [
            sys.executable, __file__, "--one", "--vocab", str(vocab), "--worlds", str(world),
            "--dim", str(args.dim), "--dtype", args.dtype, "--examples", str(args.examples),
            "--seed", str(args.seed), "--modes", mode,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
            return 1
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        peak = max(row["rank_peak_bytes"], default=0)
        ok = peak <= row["limit_bytes"] and row["seconds"] <= SECONDS and row["passed"]
        print(
            f"{mode:<8}  V = {vocab:>10,}  world {world}  shard {_gib(row['shard_bytes'])}  "
            f"rank peak {_gib(peak)} (limit {_gib(row['limit_bytes'])})  "
            f"driver {_gib(row['driver_peak_bytes'] or 0)}  {row['seconds']:.0f} s  "
            f"{'passed' if row['passed'] else 'FAILED'}  {'within' if ok else 'OVER'}",
            flush=True,
        )
    result = {
        "command": COMMAND,
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "backend": "gloo",
        "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "limits": {"peak_factor": PEAK_FACTOR, "peak_slack_bytes": PEAK_SLACK, "seconds": SECONDS},
        "runs": rows,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
