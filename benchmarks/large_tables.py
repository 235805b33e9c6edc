"""Peak memory and seconds of a verification of a table just past 2**31 elements.

Each configuration runs in a fresh subprocess, so that its peak resident memory (``VmHWM`` of
``/proc/self/status``, else ``ru_maxrss``) is its own: ``verify_embedding(F.embedding)`` on
``large_table_sizes(dtype)`` (V = 2**21 + 8, D = 1024: 4 GiB in float16), and with
``--kinds`` also ``verify_embedding_bag(F.embedding_bag)`` on the same sizes and
``verify_quantized_embedding`` of the package's int8 lookup on a 2 GiB int8 table; each with
``max_examples=5`` (backward for the first two), the boundary phase off (it is measured by
``benchmarks/boundary_phase.py``). Printed beside each: the limits of issue 19, a peak of at
most 2.5x the table's bytes + 1 GiB and 120 s for the 5 examples, and the load average
(another process on the machine slows every figure). Usage::

    python benchmarks/large_tables.py [--kinds embedding,bag,quantized] [--dtype float16]
        [--examples 5] [--threads 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

TITLE = "Peak memory and seconds of a verification of a table just past 2**31 elements."
GIB = 1 << 30
#: The limits of issue 19: peak <= 2.5 x the table's bytes + 1 GiB; 5 examples in 120 s.
PEAK_FACTOR, PEAK_SLACK, SECONDS = 2.5, GIB, 120.0
KINDS = ("embedding", "bag", "quantized")


def _peak_bytes() -> int:
    """This process's peak resident memory, in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _resident_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _int8_lookup(input: Any, qweight: Any, scale: Any, zero_point: Any) -> Any:
    """The package's int8 lookup, as ``verify_quantized_embedding`` calls a candidate."""
    import embedding_equivalence as ee

    return ee.lookup_quantized_embedding(input, qweight, scale, zero_point, scheme="int8")


def child(kind: str, dtype_name: str, examples: int, threads: int, seed: int) -> dict[str, Any]:
    """Run one verification here and return its figures (run in a fresh process)."""
    import torch
    import torch.nn.functional as F

    import embedding_equivalence as ee
    from embedding_equivalence._draw.sizes import large_table_sizes

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    v, d = large_table_sizes(dtype, kind)
    knobs: dict[str, Any] = {"vocab_sizes": v, "dims": d, "max_examples": examples, "seed": seed}
    knobs["dtypes"] = [dtype]
    verify: Callable[..., Any]
    candidate: Callable[..., Any]
    if kind == "embedding":
        verify, candidate = ee.verify_embedding, F.embedding
        table = v * d * dtype.itemsize
    elif kind == "bag":
        verify, candidate = ee.verify_embedding_bag, F.embedding_bag
        table = v * d * dtype.itemsize
    else:
        verify, candidate = ee.verify_quantized_embedding, _int8_lookup
        knobs["scheme"] = "int8"
        table = v * d  # one byte an element
    if "boundaries" in inspect.signature(verify).parameters:
        knobs["boundaries"] = False  # the boundary phase is measured elsewhere
    before = _resident_bytes()
    start = time.perf_counter()
    report = verify(candidate, **knobs)
    seconds = time.perf_counter() - start
    return {
        "kind": kind,
        "V": v,
        "D": d,
        "dtype": dtype_name,
        "table_bytes": table,
        "peak_bytes": _peak_bytes(),
        "resident_before_bytes": before,
        "seconds": seconds,
        "examples": report.examples,
        "passed": report.passed,
        "report": str(report).splitlines()[0],
    }


def _run_child(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "--dtype", args.dtype]
    command += ["--examples", str(args.examples), "--threads", str(args.threads)]
    command += ["--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind}: the run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print the figures (or, with ``--child``, run one configuration and print its JSON)."""
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--kinds", default="embedding", help="comma-separated, from " + str(KINDS))
    parser.add_argument("--dtype", default="float16", help="the table's (the scales') dtype")
    parser.add_argument("--examples", type=int, default=5, help="max_examples of each run")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0, help="the verifiers' seed")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = child(args.child, args.dtype, args.examples, args.threads, args.seed)
        print(json.dumps(figures))
        return
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}; choose from {KINDS}")
    print(
        f"max_examples={args.examples}, seed {args.seed}, {args.dtype}, cpu, "
        f"{args.threads} threads, boundary phase off; a fresh process per run"
    )
    header = (
        f"{'kind':10} {'V':>9} {'D':>5} {'table':>9} {'peak':>9} {'limit':>9} "
        f"{'seconds':>8} {'limit':>6} {'examples':>8}  verdict"
    )
    print(header)
    print("-" * len(header))
    failed = False
    for kind in kinds:
        load = os.getloadavg()[0]
        f = _run_child(kind, args)
        limit = PEAK_FACTOR * f["table_bytes"] + PEAK_SLACK
        within = f["peak_bytes"] <= limit and f["seconds"] <= SECONDS and f["passed"]
        failed |= not within
        verdict = "ok" if within else "OVER" if f["passed"] else "FAILED"
        print(
            f"{kind:10} {f['V']:>9} {f['D']:>5} {f['table_bytes'] / GIB:>7.2f} G "
            f"{f['peak_bytes'] / GIB:>7.2f} G {limit / GIB:>7.2f} G {f['seconds']:>8.1f} "
            f"{SECONDS:>6.0f} {f['examples']:>8}  {verdict} (load {load:.2f} before; "
            f"{f['resident_before_bytes'] / GIB:.2f} G resident before the run)"
        )
        print(f"           {f['report']}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
