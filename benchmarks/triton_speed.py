"""The default verification of a Triton embedding under Triton's interpreter: seconds, programs.

Runs ``verify_embedding(kernel, options=("padding_idx",))`` with its defaults (every dtype,
100 random examples, the boundary phase) on the CPU under ``TRITON_INTERPRET=1``, in a fresh
process with one thread, and the same with ``boundaries=False``; prints the seconds of each,
the boundary phase's share (the difference), how many Triton programs the interpreter ran and
the seconds it spent in them (the rest is drawing, the oracle and judging), and the load
average before and after. The kernel is the worked one of the
docs page "Verify a Triton kernel without a GPU" unless ``--kernel MODULE:FUNCTION`` names
another (imported with ``docs/_scripts`` on the path). The target: the default run within
120 s on a 2-core machine; the exit status is 1 past it. Usage::

    python benchmarks/triton_speed.py
    python benchmarks/triton_speed.py --kernel triton_kernels:one_block_embedding
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Seconds the default verification of a Triton embedding may take on a 2-core machine.
TARGET = 120.0

_CHILD = r"""
import json, os, sys, time
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
import torch
torch.set_num_threads(1)
import embedding_equivalence as ee
from embedding_equivalence._engine.names import import_reference
from triton.runtime import interpreter

sys.path.insert(0, sys.argv[1])
kernel = import_reference(sys.argv[2])
options = tuple(o for o in sys.argv[3].split(",") if o)
boundaries, seed = sys.argv[4] == "1", int(sys.argv[5])

programs, launched = 0, 0.0
builder = interpreter.interpreter_builder
set_grid_idx = builder.set_grid_idx
launch = interpreter.GridExecutor.__call__


def counting(*args):  # the interpreter calls it once before each program it runs
    global programs
    programs += 1
    return set_grid_idx(*args)


def timed(self, *args, **kwargs):  # one launch: every program of its grid
    global launched
    begin = time.perf_counter()
    try:
        return launch(self, *args, **kwargs)
    finally:
        launched += time.perf_counter() - begin


builder.set_grid_idx = counting
interpreter.GridExecutor.__call__ = timed
start = time.perf_counter()
report = ee.verify_embedding(kernel, options=options, seed=seed, boundaries=boundaries)
seconds = time.perf_counter() - start
print(json.dumps({"passed": report.passed, "examples": report.examples,
                  "boundary_examples": report.boundary_examples, "seconds": seconds,
                  "programs": programs, "launched": launched}))
"""


def _run(kernel: str, options: str, boundaries: bool, seed: int) -> dict[str, object]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    scripts = str(ROOT / "docs" / "_scripts")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, scripts, kernel, options, "1" if boundaries else "0",
         str(seed)],
        capture_output=True, text=True, check=True, env=env, cwd=ROOT,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Print the figures; exit 1 when the default run takes more than TARGET seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="triton_kernels:triton_embedding")
    parser.add_argument("--options", default="padding_idx", help="comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    load_before = os.getloadavg()
    full = _run(args.kernel, args.options, True, args.seed)
    random_only = _run(args.kernel, args.options, False, args.seed)
    load_after = os.getloadavg()
    print(f"verify_embedding({args.kernel}, options=({args.options},)) under TRITON_INTERPRET=1, "
          f"{os.cpu_count()} CPUs, one torch thread")  # fmt: skip
    print(f"load average before: {', '.join(f'{x:.2f}' for x in load_before)}")
    rows = [("default run", full), ("random examples only", random_only)]
    for name, r in rows:
        per = 1e3 * float(r["launched"]) / max(int(r["programs"]), 1)  # type: ignore[arg-type]
        print(f"  {name:22s} {r['seconds']:6.1f} s  {r['examples']:4d} examples "
              f"({r['boundary_examples']} at boundaries), passed={r['passed']}: "
              f"{r['programs']} programs in {r['launched']:.1f} s ({per:.2f} ms each)")  # fmt: skip
    phase = float(full["seconds"]) - float(random_only["seconds"])  # type: ignore[arg-type]
    phase_programs = int(full["programs"]) - int(random_only["programs"])  # type: ignore[arg-type]
    print(f"  {'boundary phase':22s} {phase:7.1f} s  {phase_programs:6d} programs (the difference)")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in load_after)}")
    print(f"target: the default run within {TARGET:.0f} s")
    return 0 if float(full["seconds"]) <= TARGET else 1  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
