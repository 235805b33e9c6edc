"""What the purity checks cost: a default ``verify_embedding`` run with and without them.

The checks of "What a kernel must not do" (the arguments kept and compared after each call,
the output's memory, the second call on the negated table under torch's deterministic
algorithms) run on every example of every verifier. This runs the same default verification
of ``F.embedding`` (and of ``F.embedding_bag``) with a fixed seed, alternately with the checks
and with them switched off in this process only, ``--repeats`` times each, on one thread, and
prints the median seconds of each and their ratio. The goal: at most 5% more.

Usage::

    python benchmarks/purity_cost.py
    python benchmarks/purity_cost.py --repeats 7 --seed 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

import embedding_equivalence as ee
from embedding_equivalence._engine import check
from embedding_equivalence._engine.purity import Before


@contextlib.contextmanager
def checks_off() -> Iterator[None]:
    """Switch the purity checks off in the engine (nothing kept, no second call)."""
    saved = check.Before, check.shared_input, check.negated_values

    class Nothing(Before):
        @classmethod
        def of(cls, call: object, named: object = None) -> Before:  # type: ignore[override]
            return Before([], "")

    check.Before, check.shared_input, check.negated_values = (  # type: ignore[misc]
        Nothing, lambda *_: None, lambda *_: None,
    )  # fmt: skip
    try:
        yield
    finally:
        check.Before, check.shared_input, check.negated_values = saved  # type: ignore[misc]


def main() -> None:
    """Time each run with the checks and without them, alternately; print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs: dict[str, Callable[[], ee.VerificationReport]] = {
        "verify_embedding(F.embedding)": lambda: ee.verify_embedding(F.embedding, seed=args.seed),
        "verify_embedding(F.embedding, boundaries=False)": lambda: ee.verify_embedding(
            F.embedding, seed=args.seed, boundaries=False
        ),
        "verify_embedding_bag(lookup_embedding_bag)": lambda: ee.verify_embedding_bag(
            ee.lookup_embedding_bag, seed=args.seed
        ),
    }
    print(f"{'run':56s} {'checks on':>10s} {'off':>8s} {'ratio':>7s}  examples")
    for name, run in runs.items():
        run()  # warm up: first calls of torch's kernels
        seconds: dict[bool, list[float]] = {True: [], False: []}
        examples = 0
        for _ in range(args.repeats):
            for on in (True, False):
                with contextlib.nullcontext() if on else checks_off():
                    start = time.perf_counter()
                    report = run()
                    seconds[on].append(time.perf_counter() - start)
                    examples = report.examples
        on, off = (statistics.median(seconds[k]) for k in (True, False))
        print(f"{name:56s} {on:9.2f}s {off:7.2f}s {on / off:7.3f}  {examples}")


if __name__ == "__main__":
    main()
