"""The pytest plugin's recommended pattern against the hand-made rows, on one kernel, in one run.

Both patterns verify ``F.embedding`` on every dtype of the CPU (float32, float64, float16,
bfloat16), with the default budget of 100 random examples a row, in a fresh pytest session
each (one intra-op thread, no xdist):

- ``embedding_verify``: a ``cpu-boundaries`` row runs the boundary phase once for every
  dtype (the dtypes take turns along its axes), and a row per dtype its random examples;
- ``embedding_device_dtype``: a row per dtype runs ``verify_embedding(..., dtypes=[dtype])``,
  the boundary phase included, so the phase runs once per dtype.

Prints, per pattern, the seconds of the pytest session, the rows, the boundary examples and
the random examples summed over the rows. ``--max-examples`` sets the budget a row. Usage::

    python benchmarks/plugin_cost.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_TESTS = """
import json

import torch.nn.functional as F

import embedding_equivalence as ee


def _record(report):
    with open("rows.jsonl", "a") as rows:
        rows.write(json.dumps([report.boundary_examples, report.examples]) + "\\n")


def test_recommended(embedding_verify):
    _record(embedding_verify(F.embedding, seed=0))


def test_by_hand(embedding_device_dtype, embedding_max_examples):
    device, dtype = embedding_device_dtype
    report = ee.verify_embedding(
        F.embedding, dtypes=[dtype], devices=[device], max_examples=embedding_max_examples, seed=0
    )
    report.raise_for_failure()
    _record(report)
"""

PATTERNS = {"embedding_verify": "test_recommended", "embedding_device_dtype": "test_by_hand"}


def _session(folder: Path, test: str, max_examples: int) -> dict[str, float | int]:
    """One pattern's pytest session in ``folder``: its seconds and the rows' examples."""
    rows = folder / "rows.jsonl"
    rows.unlink(missing_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "EMBEDDING_TEST_DEVICES": "cpu"}
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
        f"--embedding-max-examples={max_examples}", f"test_pattern.py::{test}",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{test} did not pass:\n{done.stdout[-2000:]}")
    counts = [json.loads(line) for line in rows.read_text().splitlines()]
    boundary = sum(b for b, _ in counts)
    return {
        "seconds": round(seconds, 1), "rows": len(counts), "boundary_examples": boundary,
        "random_examples": sum(e for _, e in counts) - boundary,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Time both patterns; print one row each."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100, help="random examples a row")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "test_pattern.py").write_text(_TESTS, encoding="utf-8")
        figures = {p: _session(folder, test, args.max_examples) for p, test in PATTERNS.items()}
    print(f"{'pattern':24s} {'seconds':>8s} {'rows':>5s} {'boundary':>9s} {'random':>7s}")
    for pattern, f in figures.items():
        print(
            f"{pattern:24s} {f['seconds']:>8.1f} {f['rows']:>5d} {f['boundary_examples']:>9d} "
            f"{f['random_examples']:>7d}"
        )
    ratio = figures["embedding_device_dtype"]["seconds"] / figures["embedding_verify"]["seconds"]
    print(f"the rows by hand take {ratio:.2f}x the recommended pattern's time (one thread)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
