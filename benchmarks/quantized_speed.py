"""Seconds of ``verify_quantized_embedding`` beside ``verify_embedding`` at the same settings.

Both verify a correct kernel over the same budget (100 examples, seed 0, the CPU, one
intra-op thread) and their default size ranges: ``verify_embedding(F.embedding)``, forward
and backward and forward only, and ``verify_quantized_embedding`` of the package's
``lookup_quantized_embedding`` for each scheme (forward only: a quantized table has no
gradient). Best of ``--rounds`` runs each, interleaved, so that a busy moment of the machine
falls on every verifier alike; the load average is printed beside the figures. Usage::

    python benchmarks/quantized_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    report = run()
    seconds = time.perf_counter() - start
    assert getattr(report, "passed", False), report
    return seconds


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each (best is kept)")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    import embedding_equivalence as ee

    torch.set_num_threads(1)
    runs: dict[str, Callable[[], object]] = {
        "verify_embedding (fwd+bwd)": lambda: ee.verify_embedding(F.embedding, seed=0),
        "verify_embedding (fwd)": lambda: ee.verify_embedding(F.embedding, seed=0, backward=False),
    }
    for scheme in ee.SCHEMES:
        kernel = functools.partial(ee.lookup_quantized_embedding, scheme=scheme)
        runs[f"verify_quantized_embedding ({scheme})"] = functools.partial(
            ee.verify_quantized_embedding, kernel, scheme=scheme, seed=0
        )
    for run in runs.values():  # warm-up: imports and first kernel calls
        run()
    best = dict.fromkeys(runs, float("inf"))
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, run in runs.items():
            best[name] = min(best[name], _timed(run))
    load_after = os.getloadavg()[0]
    reference = best["verify_embedding (fwd)"]
    print(f"100 examples, seed 0, cpu, 1 thread, best of {args.rounds}")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    for name, seconds in best.items():
        print(f"{name:<42} {seconds:6.2f} s  ({seconds / reference:.2f}x verify_embedding fwd)")


if __name__ == "__main__":
    main()
