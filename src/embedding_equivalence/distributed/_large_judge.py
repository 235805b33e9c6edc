"""How the driver judges the ranks' pieces of a call of a table too large to build whole.

Each rank sent back its entries of the referenced rows
([`LargeOutcome`][embedding_equivalence.distributed._large_rank.LargeOutcome]); the driver sums
them into the compact gradient (and table after ``max_norm``), judges them with the engine's
judge against the compact oracle of the
[`ShardedCall`][embedding_equivalence.distributed._large.ShardedCall], and names every row by
its global number ([`judge_large`][]).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._draw.recipes import dtype_source
from .._engine.check import EquivalenceError, Outcome, judge, on_rank
from .._engine.repro import describe_call, format_float
from ..oracle import EmbeddingOracle
from ..oracle.call import Call
from ._large import LargeShardedCase, ShardedCall
from ._large_rank import LargeOutcome


def _summed(pieces: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
    """The sum of the ranks' pieces (each entry is one rank's), or ``None`` if one is missing."""
    if not pieces or any(p is None for p in pieces):
        return None
    return functools.reduce(torch.add, pieces[1:], pieces[0].clone())  # type: ignore[arg-type, union-attr]


_ROW = re.compile(r"^(weight\.grad|weight \(after max_norm\))\[(\d+)")
_ELEMENTS = re.compile(r"; (\d+) of (\d+) elements differ\)")


def _global_message(message: str, rows: Sequence[int]) -> str:
    """A judge's message about the compact table, with the rows named by their global number."""
    text = _ROW.sub(lambda m: f"{m.group(1)}[{rows[int(m.group(2))]}", message)
    return _ELEMENTS.sub(
        lambda m: f"; {m.group(1)} of the referenced rows' {m.group(2)} elements differ)", text
    )


def _values_text(values: Sequence[float]) -> str:
    shown = ", ".join(format_float(x) for x in values[:4])
    return f"[{shown}{', ...' if len(values) > 4 else ''}]"


def large_name(candidate: Callable[..., Any], case: LargeShardedCase, sharding: str) -> str:
    """The call in one line for messages, with the global ids and the table's shape."""
    v, d = case.num_embeddings, case.embedding_dim
    dim = 0 if sharding == "vocab" else 1
    table = f"DTensor(shape=({v}, {d}), dtype={dtype_source(case.dtype)}, Shard({dim}))"
    stand_in = torch.empty((1, 1), dtype=case.dtype).expand(1, d)
    text = describe_call(candidate, Call(case.ids.build(), stand_in, dict(case.kwargs)))
    head, _, rest = text.partition(", weight=")
    _, _, tail = rest.partition(")")  # the stand-in's description ends at its first ")"
    return f"{head}, weight={table}{tail} (each rank building its shard from the recipe)"


def judge_large(
    candidate: Callable[..., Any], call: ShardedCall, outcomes: Sequence[Outcome], sharding: str
) -> list[Outcome]:
    """Judge the ranks' outcomes of a shard-local call; the assembled compact outcomes.

    Every rank's output is judged; the gradient (and the table after ``max_norm``) is the sum
    of the ranks' pieces. A row that no id references and yet got a gradient, or was changed,
    is named by its global number; every other difference is the engine's judge's message on
    the compact table, with its rows renamed.

    Args:
        candidate: the candidate, for the message.
        call: the compact call.
        outcomes: one a rank, as the group returned them.
        sharding: ``"vocab"`` or ``"dim"``, for the message.

    Returns:
        The outcomes with the assembled compact gradient and table, which the engine judges
        again (it passes where this passed).

    Raises:
        EquivalenceError: the first difference.
    """
    __tracebackhide__ = True
    case = call.case
    assert case is not None
    if case.invalid is not None:
        return list(outcomes)
    merged = list(outcomes)
    if all(o.error is None for o in outcomes):
        grad = _summed([o.weight_grad for o in outcomes])
        table = _summed([o.table for o in outcomes])
        merged = [dataclasses.replace(o, weight_grad=grad, table=table) for o in outcomes]
    name = large_name(candidate, case, sharding)
    oracle = EmbeddingOracle.for_call(dataclasses.replace(call, weight=call.weight.detach()))
    for o in merged:
        try:
            judge(o, call, oracle, on_rank(name, o), "")
        except EquivalenceError as exc:
            raise EquivalenceError(_global_message(exc.message, call.rows), "", exc.worst) from None
    moved = [o.moved for o in outcomes if isinstance(o, LargeOutcome) and o.moved is not None]
    if moved:
        row, _, was, now = min(moved)
        raise EquivalenceError(
            f"weight (after max_norm)[{row}, :] = {_values_text(now)}, but no id references row "
            f"{row}, which must be left as it was, {_values_text(was)} "
            f"({sum(m[1] for m in moved)} such rows changed) [{name}]"
        )
    stray = [o.stray for o in outcomes if isinstance(o, LargeOutcome) and o.stray is not None]
    if stray:
        row, _, values = min(stray)
        raise EquivalenceError(
            f"weight.grad[{row}, :] = {_values_text(values)}, but no id references row {row}: "
            f"its gradient must be exactly zero ({sum(s[1] for s in stray)} such rows) [{name}]"
        )
    return merged
