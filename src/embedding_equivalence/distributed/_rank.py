"""What one rank does with one call: shard the table, run the candidate, gather what to judge.

Used by the spawned workers and by every rank of a group started under ``torchrun``. A
small call arrives whole on every rank (the same ids, table and upstream gradient); the rank
builds the table as a DTensor (``Shard(0)`` or ``Shard(1)`` over a 1-D mesh of the whole
group, with torch's chunking), calls the candidate, runs the backward pass with the same
upstream gradient, and gathers the full output, the full gradient
(``weight.grad.full_tensor()``) and the full table after the call. A large table's call
([`ShardedCall`][embedding_equivalence.distributed._large.ShardedCall]) carries a recipe
instead: the rank builds only its own shard and returns only the output and the referenced
rows (see [`embedding_equivalence.distributed._large_rank`][]). Everything it returns is a plain
CPU tensor or text, so it pickles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import pickle
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from .._engine.check import Outcome
from .._engine.names import import_reference
from .._engine.purity import LATER, Before, call_again, negated_values, shared_input
from ..oracle.call import Call
from ._large import ShardedCall
from ._large_rank import detached, plain, run_large_on_rank, wants_backward

#: The shardings and the dimension of the table each splits.
SHARDINGS: dict[str, int] = {"vocab": 0, "dim": 1}


@functools.cache
def load_candidate(reference: str) -> Callable[..., Any]:
    """Import ``"module:qualname"`` (cached per process)."""
    return import_reference(reference)


def prepare_on_rank(candidate: str, *, device: str = "cpu") -> None:
    """Import ``candidate`` and build this rank's mesh: what its first call would do first.

    The parent waits for this under the start-up timeout, so that a call's timeout bounds the
    call alone. A candidate that cannot be imported is left to its first call, which reports
    why in its outcome.
    """
    _mesh(device)
    # DTensor's methods import torch._dynamo at their first call (``torch._disable_dynamo``):
    # seconds on a loaded machine, which belong to start-up, not to the first call's timeout.
    importlib.import_module("torch._dynamo")
    with contextlib.suppress(Exception):
        load_candidate(candidate)


@functools.cache
def _mesh(device: str) -> DeviceMesh:
    return init_device_mesh(device, (dist.get_world_size(),))


def shutdown_group() -> None:
    """Forget the meshes and leave the process group, if this process is in one."""
    _mesh.cache_clear()
    if dist.is_initialized():
        dist.destroy_process_group()


def _portable(exc: BaseException) -> BaseException:
    """The exception itself if it pickles, else a RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _failed(outcome: Outcome, exc: BaseException, stage: str, start: float) -> Outcome:
    outcome.seconds = time.perf_counter() - start
    outcome.traceback = "".join(traceback.format_exception(exc))
    # The traceback is kept as text: the frames would keep the call's tensors (a shard of a
    # large table) alive in a reference cycle until the next garbage collection.
    traceback.clear_frames(exc.__traceback__)
    outcome.error, outcome.stage = _portable(exc.with_traceback(None)), stage
    return outcome


def run_on_rank(
    candidate: str,
    call: Call,
    sharding: str,
    *,
    device: str = "cpu",
    mesh: DeviceMesh | None = None,
) -> Outcome:
    """Run ``candidate`` on this rank's shard of ``call`` and gather the full results.

    Args:
        candidate: ``"module:qualname"`` of the candidate.
        call: the whole call (the same on every rank); ``call.grad_output`` set means run the
            backward pass.
        sharding: ``"vocab"`` (``Shard(0)``) or ``"dim"`` (``Shard(1)``).
        device: ``"cpu"`` or ``"cuda"``.
        mesh: the 1-D mesh to shard over (default: one over the whole default group).

    Returns:
        The [`Outcome`][embedding_equivalence._engine.check.Outcome] of this rank, with plain CPU
        tensors (``output`` and ``weight_grad`` full, ``table`` the full table after the call).
    """
    start = time.perf_counter()
    outcome = Outcome(rank=dist.get_rank())
    try:
        fn = load_candidate(candidate)
    except Exception as exc:
        return _failed(outcome, exc, "forward", start)
    mesh = mesh or _mesh(device)
    if isinstance(call, ShardedCall):  # a large table: this rank's shard only
        return run_large_on_rank(
            fn, call, SHARDINGS[sharding], device, mesh,
            lambda o, exc, stage: _failed(o, exc, stage, start),
        )  # fmt: skip
    backward = call.grad_output is not None
    full = call.weight.detach().to(device)
    # Every rank has the whole table: each keeps its own chunk, no data moves.
    weight = distribute_tensor(full, mesh, [Shard(SHARDINGS[sharding])], src_data_rank=None)
    weight.requires_grad_(backward)
    input = call.input.to(device)
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in call.kwargs.items()}
    grad_output = None if call.grad_output is None else call.grad_output.to(device)
    # What the rank must leave as it was: its arguments, the upstream gradient (which only the
    # backward pass sees) and its shard (with max_norm the judge compares the table instead).
    watched = {"input": input, **kwargs, "grad_output": grad_output}
    if "max_norm" not in kwargs:
        watched["weight.to_local()"] = weight.to_local()
    before = Before.of(call, [(k, v) for k, v in watched.items() if isinstance(v, torch.Tensor)])
    try:
        returned = fn(input, weight, **kwargs)
        out = plain(returned)
    except Exception as exc:  # the judge decides whether raising was right
        return _failed(outcome, exc, "forward", start)
    outcome.output = detached(out)
    outcome.side_effect = before.changed("the call")
    local = returned.to_local() if isinstance(returned, DTensor) else returned
    outcome.shares = shared_input(local, dataclasses.replace(call, weight=weight.to_local()))
    # A side effect seen on one rank ends nothing early: the others would wait for it in the
    # collectives of the backward pass and of the second call.
    if "max_norm" in kwargs:  # the renorm's side effect, judged on the whole table
        try:
            outcome.table = detached(plain(weight.detach()))  # type: ignore[assignment]
        except Exception as exc:
            return _failed(outcome, exc, "forward", start)
    if wants_backward(out, backward, outcome):
        try:
            out.backward(grad_output)
            outcome.weight_grad = detached(plain(weight.grad))  # type: ignore[assignment]
        except Exception as exc:
            return _failed(outcome, exc, "backward", start)
        outcome.side_effect = outcome.side_effect or before.changed("backward")
    if negated_values(call) is not None and isinstance(local, torch.Tensor):
        negate = torch.no_grad()(weight.neg_)  # this rank's shard, in place
        # The second output gathered whole and copied to the CPU, as the first.
        again = call_again(fn, (input, weight), kwargs, negate, local, lambda t: detached(plain(t)))
        again.error = None if again.error is None else _portable(again.error.with_traceback(None))
        outcome.again = again
        outcome.side_effect = outcome.side_effect or before.changed("a second call")
    # The large arguments (past STAGE_MAX_BYTES), compared once, at the end.
    outcome.side_effect = outcome.side_effect or before.changed(LATER, last=True)
    return outcome
