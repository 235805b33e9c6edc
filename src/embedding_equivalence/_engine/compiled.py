"""Compiled candidates: keep them compiled on every example, and count the ones that are not.

A candidate made by ``torch.compile`` (a function, or an ``OptimizedModule``) recompiles for
every new guard set: dtype, index dtype, memory layout, a 0 or 1 in a shape, an option's
value. Dynamo stops after ``recompile_limit`` (8) graphs and runs every later example eagerly,
which would verify eager code under the compiled candidate's name. While a verification runs,
[`compiled_context`][] raises that limit (and restores it afterwards), and
[`CompiledRunner`][] reads dynamo's counters around each call: an example during which
dynamo gave up on a frame (a graph break, an error while tracing, a limit) ran at least partly
eagerly, and is counted as a fallback with its reason. The report states both counts, and
how many graphs dynamo compiled: one per new guard set, not one per example, since dynamo
makes a size dynamic once it changes and the second call of the purity checks runs in the
first call's global state (so it reaches the same graph; see
[`call_again`][embedding_equivalence._engine.purity.call_again]).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..oracle.call import Call
from .check import Outcome, Runner, run_in_process
from .report import CompiledRun

#: The recompile limit while a compiled candidate is verified (one graph per example at most).
RECOMPILE_LIMIT = 100_000


@contextlib.contextmanager
def compiled_context() -> Iterator[None]:
    """Raise dynamo's recompile limits for the verification; restore them afterwards."""
    import torch._dynamo

    with torch._dynamo.config.patch(
        recompile_limit=RECOMPILE_LIMIT, accumulated_recompile_limit=RECOMPILE_LIMIT
    ):
        yield


def _graphs() -> int:
    """The graphs dynamo has compiled in this process."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _gave_up() -> Counter[str]:
    """Dynamo's counts of frames it did not compile, by reason (a graph break is one)."""
    from torch._dynamo.utils import counters

    seen: Counter[str] = Counter()
    for group in ("unimplemented", "graph_break"):
        for reason, count in counters[group].items():
            seen[str(reason).split("\n")[0].strip()] += count
    return seen


class CompiledRunner:
    """The runner seam for a compiled candidate: run in process, and note every fallback.

    Attributes:
        compiled: examples during which dynamo gave up on no frame.
        fell_back: examples during which it gave up on one at least (they ran partly eagerly).
        reasons: why, with how many examples each.
    """

    def __init__(self, base: Runner = run_in_process) -> None:
        self.base = base
        self.compiled = 0
        self.fell_back = 0
        self.reasons: Counter[str] = Counter()
        self.graphs = 0
        self.counting = True  # off after the first failure: shrinking is not counted

    def __call__(self, candidate: Callable[..., Any], call: Call) -> Outcome | Sequence[Outcome]:
        """Run ``call``; count it as compiled or as a fallback."""
        before, graphs = _gave_up(), _graphs()
        outcome = self.base(candidate, call)
        new = _gave_up() - before
        if self.counting:
            self.graphs += _graphs() - graphs
        if self.counting and new:
            self.fell_back += 1
            self.reasons.update(set(new))
        elif self.counting:
            self.compiled += 1
        return outcome

    def summary(self) -> CompiledRun:
        """The counts, as the report's record of a compiled run."""
        reasons = dict(self.reasons.most_common())
        return CompiledRun(self.compiled, self.fell_back, reasons, self.graphs)
