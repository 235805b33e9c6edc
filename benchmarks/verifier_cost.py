"""The verifier's cost for the three kinds of candidate a user waits on, in one run, beside targets.

Each is a default verification of a correct kernel (the boundary phase, every dtype, 100
random examples, every check of what a kernel must not do), in a fresh process with one
intra-op thread, as a user's first run would be:

- ``eager``: ``verify_embedding(F.embedding)``; target 4 s;
- ``compiled``: ``verify_embedding(torch.compile(F.embedding))`` with inductor and an empty
  compile cache; target 60 s;
- ``triton``: ``verify_embedding(triton_kernels.triton_embedding, options=("padding_idx",),
  dtypes=[float32, float64, float16])`` under ``TRITON_INTERPRET=1`` (the worked kernel of the
  Triton page, in the dtypes the interpreter casts right: in bfloat16 its cast of subnormals
  is wrong, a limit the report names); target 60 s.

Prints one row each (seconds, examples, boundary examples, verdict, target) and the load
average before and after; ``--json PATH`` writes them. The exit status is 1 when a run did
not pass (a correct kernel must), not when a target is missed: the targets are what the
figures are read against. Usage::

    python benchmarks/verifier_cost.py
    python benchmarks/verifier_cost.py --only eager,compiled
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Seconds each kind of run should take at most on a 2-core machine.
TARGETS = {"eager": 4.0, "compiled": 60.0, "triton": 60.0}

_CHILD = r"""
import json, sys, time
kind = sys.argv[1]
import torch
import torch.nn.functional as F
torch.set_num_threads(1)
import embedding_equivalence as ee
if kind == "eager":
    run = lambda: ee.verify_embedding(F.embedding, seed=0)
elif kind == "compiled":
    run = lambda: ee.verify_embedding(torch.compile(F.embedding), seed=0)
else:
    sys.path.insert(0, "docs/_scripts")
    from triton_kernels import triton_embedding
    dtypes = [torch.float32, torch.float64, torch.float16]  # bfloat16: the interpreter's limit
    run = lambda: ee.verify_embedding(
        triton_embedding, options=("padding_idx",), dtypes=dtypes, seed=0
    )
start = time.perf_counter()
report = run()
print(json.dumps({
    "seconds": round(time.perf_counter() - start, 2), "passed": report.passed,
    "examples": report.examples, "boundary_examples": report.boundary_examples,
    "failure": report.failure,
}))
"""


def _run(kind: str) -> dict[str, object]:
    """One kind's verification in a fresh process; its figures."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache  # a first run: every graph compiled afresh
        if kind == "triton":
            env["TRITON_INTERPRET"] = "1"
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, kind], cwd=ROOT, env=env, capture_output=True,
            text=True, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        return {"seconds": None, "passed": False, "failure": done.stderr.strip()[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Run the kinds asked for; print the table; exit 1 if a correct kernel did not pass."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default=",".join(TARGETS), help="comma-separated kinds")
    parser.add_argument("--json", type=Path, help="write the figures there")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = set(kinds) - set(TARGETS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(TARGETS)}")
    load_before = os.getloadavg()[0]
    rows = {}
    for kind in kinds:
        print(f"{kind}: verifying ...", file=sys.stderr, flush=True)
        rows[kind] = {**_run(kind), "target_seconds": TARGETS[kind]}
    load_after = os.getloadavg()[0]
    print(f"{'kind':9s} {'seconds':>8s} {'target':>7s} {'examples':>9s} {'phase':>6s}  verdict")
    for kind, r in rows.items():
        seconds = "-" if r["seconds"] is None else f"{r['seconds']:.1f}"
        met = r["seconds"] is not None and r["seconds"] <= r["target_seconds"]
        verdict = ("passed" if r["passed"] else "FAILED") + ("" if met else ", over the target")
        print(
            f"{kind:9s} {seconds:>8s} {r['target_seconds']:>7.0f} {r.get('examples', '-')!s:>9s} "
            f"{r.get('boundary_examples', '-')!s:>6s}  {verdict}"
        )
        if not r["passed"]:
            print(f"  {r.get('failure')}")
    print(f"one thread a process; load average {load_before:.2f} before, {load_after:.2f} after")
    if args.json is not None:
        payload = {"load_average": [load_before, load_after], "runs": rows}
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0 if all(r["passed"] for r in rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
