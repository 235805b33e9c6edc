"""The runner on a process group that already exists (``torchrun``): every rank is a worker.

Rank 0 draws, runs its share and judges; the other ranks serve. Three groups keep a rank that
fails inside the candidate from taking the verifier's own messages down with it:

- the **work** group, on which the candidate runs (the DTensor's mesh), with the verifier's
  ``timeout``: a rank left waiting in a collective that another rank never joined gets an
  error after ``timeout`` instead of waiting for the default group's 30 minutes. After a
  call in which the ranks did not all succeed or all fail alike, every rank builds a fresh
  work group (the old one may hold a half-finished collective);
- the **outbox** (gloo), on which rank 0 gathers every rank's outcome, with room for one
  timeout of the work group: a rank that does not report by then is hung, and the run ends;
- the **inbox** (gloo), on which rank 0 broadcasts each call and the final report; the
  serving ranks wait on it while rank 0 shrinks, so its timeout is long.

Each group is created under the start-up timeout (creating one waits for every rank to arrive,
which on a loaded machine can take longer than a call) and then given its own timeout.

A rank that dies ends the whole job: torchrun stops the other ranks. A rank that hangs is
reported by rank 0, which returns the failing report at once; the hung rank (and any rank
still waiting for rank 0's next message) stays until torchrun or the user stops the job.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from .._draw.cases import Call
from .._engine.check import Outcome
from ._group import DEFAULT_STARTUP_TIMEOUT, GroupFailure, narrow_timeout
from ._rank import run_on_rank

__all__ = ["TorchrunGroup"]

#: How long the serving ranks wait for rank 0's next call (it may be shrinking a failure).
_INBOX_TIMEOUT = timedelta(hours=1)


def _new_group(timeout: timedelta, startup: float, backend: str | None = None) -> dist.ProcessGroup:
    """``dist.new_group`` over every rank; this process is in it, so it is a real group.

    The group is created under ``startup`` seconds (or ``timeout`` if longer), then narrowed
    to ``timeout``.
    """
    group = dist.new_group(backend=backend, timeout=max(timeout, timedelta(seconds=startup)))
    assert isinstance(group, dist.ProcessGroup)
    narrow_timeout(group, timeout.total_seconds())
    return group


class TorchrunGroup:
    """The ranks of the current process group, driven by rank 0.

    Every rank constructs it (the groups are created collectively), then rank 0 calls
    [`run`][] for each call and [`finish`][] with the report, while the other ranks call
    [`serve`][], which returns that report.

    Args:
        device: ``"cpu"`` or ``"cuda"``.
        timeout: seconds a call may take on the work group.
        startup_timeout: seconds the ranks may take to create each group (default 120, or
            ``$EMBEDDING_EQUIVALENCE_DISTRIBUTED_STARTUP_TIMEOUT``).
    """

    def __init__(
        self, device: str, timeout: float, *, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    ) -> None:
        self.device = device
        self.world_size = dist.get_world_size()
        self.rank = dist.get_rank()
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.starts = 0
        self.startup_seconds: list[float] = []
        self._inbox = _new_group(_INBOX_TIMEOUT, startup_timeout, "gloo")
        self._outbox = _new_group(timedelta(seconds=2 * timeout + 10), startup_timeout, "gloo")
        self._stale = False
        self._hung = False
        self.mesh = self._new_mesh()

    def _new_mesh(self) -> DeviceMesh:
        start = time.perf_counter()
        group = _new_group(timedelta(seconds=self.timeout), self.startup_timeout)
        mesh = DeviceMesh.from_group(group, self.device)
        self.starts += 1
        self.startup_seconds.append(time.perf_counter() - start)
        return mesh

    def _exchange(self, reference: str, call: Call, sharding: str) -> list[Any]:
        outcome = run_on_rank(reference, call, sharding, device=self.device, mesh=self.mesh)
        gathered: list[Any] = [None] * self.world_size if self.rank == 0 else []
        dist.gather_object(outcome, gathered if self.rank == 0 else None, dst=0, group=self._outbox)
        return gathered

    def run(self, reference: str, call: Call, sharding: str) -> list[Outcome]:
        """Rank 0: broadcast the call, run it here, gather every rank's outcome.

        Returns:
            One outcome a rank, the ranks that raised first (earliest first).

        Raises:
            GroupFailure: a rank did not report (it hangs, or waits on a hung rank).
        """
        message: list[Any] = [("run", reference, call, sharding, self._stale)]
        dist.broadcast_object_list(message, src=0, group=self._inbox)
        if self._stale:
            self.mesh = self._new_mesh()
        try:
            gathered = self._exchange(reference, call, sharding)
        except RuntimeError as exc:
            self._hung = True
            raise GroupFailure(
                f"a rank did not report within {2 * self.timeout + 10:g} s (it hangs, or "
                f"waits on a rank that hangs); under torchrun the hung rank stays hung until "
                f"torchrun or you stop it: {exc}",
                [],
                "hung",
            ) from exc
        outcomes: list[Outcome] = gathered
        # Ranks that all refused the call alike (bad input, an unsupported option) left no
        # collective half done; any other error may have: build a fresh work group.
        errors = {repr(o.error) for o in outcomes}
        self._stale = errors != {"None"} and len(errors) > 1
        return sorted(outcomes, key=lambda o: (o.error is None, o.seconds, o.rank or 0))

    def serve(self) -> Any:
        """Ranks other than 0: run the calls rank 0 broadcasts; return its final report."""
        while True:
            message: list[Any] = [None]
            dist.broadcast_object_list(message, src=0, group=self._inbox)
            kind, *rest = message[0]
            if kind == "report":
                self._settle()
                return rest[0]
            reference, call, sharding, stale = rest
            if stale:
                self.mesh = self._new_mesh()
            self._exchange(reference, call, sharding)

    def finish(self, report: object) -> None:
        """Rank 0: send every rank the report (not after a hang: the broadcast would wait on it)."""
        if self._hung:
            return
        dist.broadcast_object_list([("report", report)], src=0, group=self._inbox)
        self._settle()

    def _settle(self) -> None:
        """Wait until every rank holds the report (a hung rank never will: go on without it)."""
        if self._hung:
            return
        with contextlib.suppress(RuntimeError):
            dist.barrier(group=self._outbox)
