"""How fast the verifier catches each planted bug: examples and seconds to the minimal failure.

Runs ``verify_embedding`` over ``tests/mutants.py`` (seed 0) and ``verify_embedding_bag`` over
``tests/bag_mutants.py`` (seed 2, the suite's seed) with default settings, one thread, and
prints a table and the totals. Usage::

    python benchmarks/catch_times.py            # both catalogues
    python benchmarks/catch_times.py --verify   # also time the CLI's default verify table
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import embedding_equivalence as ee  # noqa: E402
from bag_mutants import BAG_MUTANTS  # noqa: E402
from mutants import MUTANTS  # noqa: E402


def main() -> int:
    """Print the table; exit status 1 if a mutant was missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify", action="store_true", help="also time `verify` (CLI)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    missed = 0
    total = 0.0
    print(f"{'mutant':44s} {'examples':>8s} {'seconds':>8s}")
    for m in MUTANTS:
        r = ee.verify_embedding(m.fn, options=m.options, backward=m.backward, seed=0)
        missed += r.passed
        total += r.elapsed
        print(f"{m.name:44s} {r.examples:8d} {r.elapsed:8.2f}{'  MISSED' if r.passed else ''}")
    for m in BAG_MUTANTS:
        r = ee.verify_embedding_bag(m.fn, options=m.options, seed=2)
        missed += r.passed
        total += r.elapsed
        print(f"{m.name:44s} {r.examples:8d} {r.elapsed:8.2f}{'  MISSED' if r.passed else ''}")
    n = len(MUTANTS) + len(BAG_MUTANTS)
    print(f"caught {n - missed} of {n} mutants in {total:.1f} s")
    if args.verify:
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "embedding_equivalence", "verify", "--seed", "0"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        print(
            f"`embedding-equivalence verify --seed 0`: exit {done.returncode}, "
            f"{time.perf_counter() - start:.1f} s"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
