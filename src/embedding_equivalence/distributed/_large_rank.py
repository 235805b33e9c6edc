"""What a rank does with a call of a table too large to build whole: its shard, and no more.

A [`ShardedCall`][embedding_equivalence.distributed._large.ShardedCall] carries the recipe of
its table, not the table. Each rank draws only its own shard from it, wraps the shard with
``DTensor.from_local``, runs the candidate and its backward pass, and sends back only what the
driver judges ([`LargeOutcome`][]): the full output, its entries of the referenced rows'
gradient (and of the table after ``max_norm``), and the first row that no id references yet got
a gradient or was changed ([`run_large_on_rank`][]). The driver assembles the pieces
([`judge_large`][embedding_equivalence.distributed._large_judge.judge_large]).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard

from .._engine.check import Outcome
from .._engine.compare import zero_off_rows
from ..oracle.expected import RowDigests, row_chunks
from ._large import ShardedCall
from .forms import shard_range


@dataclass
class LargeOutcome(Outcome):
    """A rank's [`Outcome`][] of a shard-local call: compact pieces, and what strayed.

    ``weight_grad`` and ``table`` are ``(R, D)`` and hold this rank's entries of the
    referenced rows (its rows under ``Shard(0)``, its columns under ``Shard(1)``), zero
    elsewhere: the driver sums the ranks' pieces, each entry coming from one rank.

    Attributes:
        stray: the first row of this rank's shard that no id references but whose gradient
            is not zero: ``(row, how many such rows, its values on this rank)``.
        moved: the first such row that the call changed: ``(row, how many, before, after)``.
    """

    stray: tuple[int, int, list[float]] | None = None
    moved: tuple[int, int, list[float], list[float]] | None = None


def _first_unreferenced(
    mask_of: Callable[[int, int], torch.Tensor],
    num_rows: int,
    dim: int,
    referenced: torch.Tensor,
    clean: Callable[[int, int, torch.Tensor], bool] | None = None,
) -> tuple[int, int] | None:
    """The first local row flagged by ``mask_of(lo, hi)`` and not in ``referenced``; and the count.

    Read a chunk at a time (no temporary of the shard's size); a chunk that ``clean(lo, hi,
    its referenced rows)`` passes is skipped.
    """
    first, count = None, 0
    for lo, hi in row_chunks(num_rows, dim):
        inside = referenced[(referenced >= lo) & (referenced < hi)] - lo
        if clean is not None and clean(lo, hi, inside):
            continue
        mask = mask_of(lo, hi).cpu()
        mask[inside] = False
        n = int(mask.sum())
        if n and first is None:
            first = lo + int(mask.nonzero()[0, 0])
        count += n
    return None if first is None else (first, count)


def _piece(
    local: torch.Tensor, rows: torch.Tensor, dim: int, lo: int, hi: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R, D)`` with this rank's entries of the referenced rows, and their local rows."""
    piece = torch.zeros(len(rows), width, dtype=local.dtype)
    if dim == 0:
        owned = (rows >= lo) & (rows < hi)
        local_rows = rows[owned] - lo
        piece[owned] = local.detach()[local_rows.to(local.device)].cpu()
        return piece, local_rows
    piece[:, lo:hi] = local.detach()[rows.to(local.device)].cpu()
    return piece, rows


def plain(t: object) -> object:
    """A DTensor's full tensor (a collective); a plain tensor as it is."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def detached(t: object) -> object:
    """A plain CPU copy of a tensor result.

    ``clone`` (not ``detach`` alone) because a functional collective's result, such as
    ``RowwiseParallel``'s output, is an ``AsyncCollectiveTensor`` that waits for its
    collective only on a non-view op: reading its storage after ``detach`` races the reduction.
    """
    return t.detach().clone().cpu() if isinstance(t, torch.Tensor) else t


def wants_backward(out: object, backward: bool, outcome: Outcome) -> TypeGuard[torch.Tensor]:
    """Whether a rank runs the backward pass of ``out``; records ``outcome.requires_grad``.

    No backward without ``backward``, for a result that is not a tensor, or for an output
    that does not require grad (the judge decides whether that was right).
    """
    if not backward or not isinstance(out, torch.Tensor):
        return False
    outcome.requires_grad = out.requires_grad
    return out.requires_grad


def run_large_on_rank(
    fn: Callable[..., Any],
    call: ShardedCall,
    sharding_dim: int,
    device: str,
    mesh: DeviceMesh,
    failed: Callable[[Outcome, BaseException, str], Outcome],
) -> LargeOutcome:
    """Build this rank's shard of ``call.case``, run the candidate, keep only what is judged.

    Args:
        fn: the candidate.
        call: the compact call with its case (global ids, the table's recipe, the options).
        sharding_dim: ``0`` (``Shard(0)``) or ``1`` (``Shard(1)``).
        device: the rank's device.
        mesh: the 1-D mesh of the group.
        failed: records an exception in the outcome (``(outcome, exc, stage)``).

    Returns:
        This rank's [`LargeOutcome`][]: the full output, its pieces of the referenced rows'
        gradient (and table after ``max_norm``), and the first stray row.
    """
    gc.collect()  # what a previous call left in reference cycles, before the next shard
    outcome = LargeOutcome(rank=dist.get_rank())
    case = call.case
    assert case is not None
    v, d = case.num_embeddings, case.embedding_dim
    world, rank = mesh.size(), mesh.get_local_rank()
    lo, hi = shard_range(v if sharding_dim == 0 else d, world, rank)
    shape = (hi - lo, d) if sharding_dim == 0 else (v, hi - lo)  # this rank's shard
    if case.invalid is None:
        local = case.table.shard(sharding_dim, world, rank).to(device)
    else:  # the candidate must refuse the ids before it reads a value: none are drawn
        local = torch.empty(shape, dtype=case.dtype, device=device)
    backward = call.grad_output is not None
    weight = DTensor.from_local(
        local, mesh, [Shard(sharding_dim)], run_check=False, shape=torch.Size((v, d)), stride=(d, 1)
    )
    weight.requires_grad_(backward)
    kwargs = dict(case.kwargs)
    before = RowDigests.of(local) if "max_norm" in kwargs else None
    input = case.ids.build().to(device)
    rows = torch.tensor(call.rows, dtype=torch.int64)
    try:
        out = plain(fn(input, weight, **kwargs))
    except Exception as exc:  # the judge decides whether raising was right
        return failed(outcome, exc, "forward")  # type: ignore[return-value]
    outcome.output = detached(out)
    if before is not None:
        shard = weight.to_local().detach()
        outcome.table, local_rows = _piece(shard, rows, sharding_dim, lo, hi, d)
        changed = before.changed(shard)
        found = _first_unreferenced(lambda a, b: changed[a:b].clone(), shard.shape[0], 1,
                                    local_rows)  # fmt: skip
        if found is not None:
            row, count = found
            global_row = row + lo if sharding_dim == 0 else row
            cols = (0, d) if sharding_dim == 0 else (lo, hi)
            was = case.table.rows(global_row, global_row + 1, cols)[0]
            outcome.moved = (global_row, count, was.double().tolist(),
                             shard[row].double().cpu().tolist())  # fmt: skip
    if not wants_backward(out, backward, outcome):
        return outcome
    assert call.grad_output is not None
    try:
        out.backward(call.grad_output.to(device))
        grad = weight.grad
        if isinstance(grad, DTensor):  # its local shard (redistributing only if it must)
            grad = grad.redistribute(mesh, [Shard(sharding_dim)]).to_local()
    except Exception as exc:
        return failed(outcome, exc, "backward")  # type: ignore[return-value]
    if grad is None:
        return outcome
    if tuple(grad.shape) != shape:
        error = ValueError(
            f"weight.grad's local shard on rank {rank} has shape {tuple(grad.shape)}, expected "
            f"{shape} (Shard({sharding_dim}) of ({v}, {d}) over {world} ranks)"
        )
        return failed(outcome, error, "backward")  # type: ignore[return-value]
    outcome.weight_grad, local_rows = _piece(grad, rows, sharding_dim, lo, hi, d)
    g = grad.detach()
    found = _first_unreferenced(
        lambda a, b: g[a:b].ne(0).any(dim=1), g.shape[0], g.shape[1], local_rows,
        clean=lambda a, b, inside: zero_off_rows(g[a:b], inside),
    )  # fmt: skip

    if found is not None:
        row, count = found
        outcome.stray = (row + lo if sharding_dim == 0 else row, count,
                         g[row].double().cpu().tolist())  # fmt: skip
    return outcome
