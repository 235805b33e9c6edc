"""Ranks shared between worker groups, for the suite's process-group tests.

Starting a [`WorkerGroup`][embedding_equivalence.distributed._group.WorkerGroup]'s ranks takes
seconds (many times that on a loaded machine), so the tests that run verification after
verification on healthy groups share their ranks, as PyTorch's ``MultiProcContinousTest``
shares one group among its tests. Only the suite does this (the verifier starts and ends its
own ranks on every call), so the sharing lives here: inside [`shared_workers`][], the
``start``, ``run`` and ``close`` of ``WorkerGroup`` are replaced by ones that hand healthy ranks
on. [`running_pids`][] and [`shared_pids`][] give the pids the tests check for leftovers.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any
from unittest import mock

import torch.distributed as dist

from embedding_equivalence._engine.check import Outcome
from embedding_equivalence.distributed._group import WorkerGroup, _stop, _Worker

__all__ = ["running_pids", "shared_pids", "shared_workers"]

#: The settings a group's ranks were started with: who may take them over.
_Key = tuple[int, str, str, float]
#: The running ranks kept by [`shared_workers`][] (with the store they joined through), by
#: their settings; ``None`` outside it.
_SHARED: dict[_Key, tuple[list[_Worker], dist.TCPStore]] | None = None

#: The groups that were sent a call that has not returned (it may have raised): their ranks
#: may still be inside it.
_BUSY: weakref.WeakSet[WorkerGroup] = weakref.WeakSet()

_START = WorkerGroup.start
_RUN = WorkerGroup.run
_CLOSE = WorkerGroup.close


def _key(group: WorkerGroup) -> _Key:
    return (group.world_size, group.device, group.backend, float(group.timeout))


def _alive(workers: list[_Worker]) -> bool:
    """Every rank alive and connected."""
    return all(w.conn is not None and w.process.poll() is None for w in workers)


def _start(group: WorkerGroup) -> None:
    """``WorkerGroup.start``, taking over the kept ranks of these settings if there are.

    A group that takes them over counts it in ``group.reuses`` (its ``starts`` do not grow).
    """
    group._shut_down()
    kept = _SHARED.pop(_key(group), None) if _SHARED is not None else None
    if kept is not None and _alive(kept[0]):
        group._workers.extend(kept[0])
        group._store = kept[1]
        group.reuses = getattr(group, "reuses", 0) + 1  # type: ignore[attr-defined]
        return
    if kept is not None:
        _stop(kept[0])
    _START(group)


def _run(group: WorkerGroup, *request: Any) -> list[Outcome]:
    """``WorkerGroup.run``, marking the group busy until the call returns."""
    _BUSY.add(group)
    outcomes = _RUN(group, *request)
    _BUSY.discard(group)
    return outcomes


def _close(group: WorkerGroup) -> None:
    """``WorkerGroup.close``, keeping a healthy group's ranks running for the next group.

    Healthy: every rank alive, connected and idle. A group in which a rank raised while the
    others waited, hung or died is still ended.
    """
    healthy = len(group._workers) == group.world_size and group not in _BUSY
    if _SHARED is None or group._store is None or not (healthy and _alive(group._workers)):
        _CLOSE(group)
        return
    replaced = _SHARED.pop(_key(group), None)
    if replaced is not None:
        _stop(replaced[0])
    _SHARED[_key(group)] = (list(group._workers), group._store)
    group._workers.clear()
    group._store = None


@contextlib.contextmanager
def shared_workers() -> Iterator[None]:
    """Within this block, started ranks outlive their group and serve the next one.

    A [`WorkerGroup`][] closed in good health (every rank alive and idle) leaves its ranks
    running, and the next group with the same world size, device, backend and call timeout
    takes them over instead of starting its own, so that several verifications in a row (a
    test module) pay for one start-up. A group in which a rank raised while the others
    waited, hung or died is still killed, and the next group starts afresh. The ranks keep the
    environment and import path of the process as it was when they started. When the block
    ends, every kept rank is ended by its pid; a nested block uses the outer one's ranks.

    Yields:
        Nothing: the groups created inside the block share their ranks.
    """
    global _SHARED
    if _SHARED is not None:
        yield
        return
    _SHARED = {}
    try:
        with (
            mock.patch.object(WorkerGroup, "start", _start),
            mock.patch.object(WorkerGroup, "run", _run),
            mock.patch.object(WorkerGroup, "close", _close),
        ):
            yield
    finally:
        kept, _SHARED = _SHARED, None
        for workers, _ in kept.values():
            _stop(workers)


def shared_pids() -> list[int]:
    """The pids of the ranks that [`shared_workers`][] keeps between groups."""
    kept = _SHARED or {}
    return [w.process.pid for workers, _ in kept.values() for w in workers]


def running_pids(group: WorkerGroup) -> list[int]:
    """The pids of ``group``'s running workers."""
    return [w.process.pid for w in group._workers if w.process.poll() is None]
