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
  serving ranks wait on it while rank 0 judges and shrinks, so its timeout is long.

Each group is created under the start-up timeout (creating one waits for every rank to arrive,
which on a loaded machine can take longer than a call) and then given its own timeout.

**Lost ranks and nodes.** Under torchrun a rank, or a whole node with its launcher, can vanish
while the others wait in a collective. Three rules bring every survivor out within seconds:

1. *A broken group is closed at once.* A rank whose collective on one of the three groups
   fails (a peer's connection closed, or a timeout) closes all three. Closing drops its
   connections (gloo closes them with a group's last reference, so the rank keeps none), so
   every peer waiting on it gets an error at once and does the same: the
   failure spreads through the group instead of leaving ranks waiting on live peers that have
   already given up.
2. *A heartbeat names the lost ranks.* Every rank publishes its node, host and pid in the
   store and beats there every second; a thread on each rank watches the others: a rank on
   this host is lost when its process is gone, a rank on another host when its beat has not
   advanced for ``_LOST_AFTER`` seconds, and rank 0's node when the store (which rank 0's
   launcher hosts) no longer answers. When it finds a lost rank while this rank is between
   collectives (rank 0 judging), it closes the groups itself (rule 1). A rank whose own
   torchrun launcher is gone (killed with its process group: torchrun starts each rank in a
   session of its own, so the rank lives on) exits: its node is lost, and its peers report it.
3. *Every survivor returns a failing report.* Rank 0's run ends with a report that names the
   lost ranks and their node; rank 0 leaves it in the store, where the serving ranks pick it
   up; when rank 0 is among the lost, each survivor writes its own. Every verifier call in
   this process afterwards raises the same
   [`GroupFailure`][embedding_equivalence.distributed._group.GroupFailure] at once
   ([`broken_group`][] says so): the default group has ranks that will never answer.

A rank that hangs inside the candidate is reported by rank 0 after the outbox's timeout; the
groups are closed, so the other ranks return that report too. Rank 0 leaves the report in the
store, and the hung rank's heartbeat thread, which finds it there while its main thread is
still inside the call, prints the rank's stack to its stderr and exits the process (as
NCCL's watchdog ends a process whose collective timed out), so that torchrun ends the job
instead of waiting on it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import pickle
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from .._engine.check import Outcome
from .._engine.names import candidate_name
from .._engine.report import ShardedRun, VerificationReport
from ..oracle.call import Call
from ._group import DEFAULT_STARTUP_TIMEOUT, GroupFailure, narrow_timeout
from ._liveness import Liveness
from ._rank import load_candidate, run_on_rank

#: How long the serving ranks wait for rank 0's next call (it may be shrinking a failure).
_INBOX_TIMEOUT = timedelta(hours=1)
#: Seconds a serving rank waits for rank 0's failing report in the store after the group broke.
_REPORT_WAIT = 10.0
_T = TypeVar("_T")

#: Numbers the groups of this process, the same on every rank (each rank builds them in turn).
_GENERATIONS = itertools.count()
#: The failure that broke this process's group, if one did: every later group would wait on
#: ranks that are gone.
_BROKEN: GroupFailure | None = None


def broken_group() -> GroupFailure | None:
    """The failure that left this process's group with lost ranks, or ``None``.

    Once set, [`TorchrunGroup`][] raises it at once instead of waiting on ranks that are gone,
    and the caller should end the job (the CLI stops and skips its closing barrier).
    """
    return _BROKEN


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

    Raises:
        GroupFailure: an earlier group of this process lost ranks ([`broken_group`][]).
    """

    def __init__(
        self, device: str, timeout: float, *, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    ) -> None:
        if _BROKEN is not None:
            raise _BROKEN
        self.device = device
        self.world_size = dist.get_world_size()
        self.rank = dist.get_rank()
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.starts = 0
        self.startup_seconds: list[float] = []
        self._began = time.perf_counter()
        self._calls = 0
        self._reference = ""
        self._sharding = ""
        self._failure: GroupFailure | None = None
        self._lock = threading.RLock()  # held by the main thread in each collective
        prefix = f"embedding_equivalence/{next(_GENERATIONS)}"  # this group's store keys
        self._liveness = Liveness(prefix, self.rank, self.world_size)
        self._groups: list[dist.ProcessGroup] = []
        self._inbox = self._new_group(_INBOX_TIMEOUT, "gloo")
        self._outbox = self._new_group(timedelta(seconds=2 * timeout + 10), "gloo")
        self._stale = False
        self.mesh = self._new_mesh()
        # The first start counts the three groups (and the liveness keys), not the mesh alone.
        self.startup_seconds[0] = time.perf_counter() - self._began
        self._liveness.on_lost = self._lost_between_collectives
        self._liveness.start()

    def _new_group(self, timeout: timedelta, backend: str | None = None) -> dist.ProcessGroup:
        """``dist.new_group`` over every rank; this process is in it, so it is a real group.

        The group is created under the start-up timeout (or ``timeout`` if longer), then
        narrowed to ``timeout``; the verifier's groups are closed together (``_close``).
        """
        startup = timedelta(seconds=self.startup_timeout)
        group = dist.new_group(backend=backend, timeout=max(timeout, startup))
        assert isinstance(group, dist.ProcessGroup)
        narrow_timeout(group, timeout.total_seconds())
        self._groups.append(group)
        return group

    def _new_mesh(self) -> DeviceMesh:
        start = time.perf_counter()
        group = self._new_group(timedelta(seconds=self.timeout))
        mesh = DeviceMesh.from_group(group, self.device)
        self.starts += 1
        self.startup_seconds.append(time.perf_counter() - start)
        return mesh

    # --- failures --------------------------------------------------------------------------

    def _collective(self, doing: str, op: Callable[[], _T]) -> _T:
        """Run ``op`` (collectives on the verifier's groups); a failure breaks the group.

        Raises:
            GroupFailure: ``op`` failed, or the group broke before (it names the lost ranks).
        """
        with self._lock:
            if self._failure is not None:
                raise self._failure
            try:
                return op()
            except RuntimeError as exc:
                raise self._break(doing, exc) from exc

    def _close(self, exc: BaseException | None) -> None:
        """Destroy the verifier's groups and drop every reference to them.

        Gloo closes a group's connections when the group's last reference goes, not when it is
        destroyed: only then do the peers waiting on this rank wake. The references are this
        object's attributes and the locals of the finished frames in ``exc``'s traceback (a
        collective's ``group`` argument).
        """
        if exc is not None:
            traceback.clear_frames(exc.__traceback__)
        while self._groups:
            with contextlib.suppress(Exception):
                dist.destroy_process_group(self._groups.pop())
        del self._inbox, self._outbox
        self.mesh = None  # type: ignore[assignment]
        gc.collect()  # the groups' last references: their sockets close with them

    def _break(self, doing: str, exc: BaseException | None) -> GroupFailure:
        """Close the groups, name the lost ranks, and remember the failure for what follows."""
        global _BROKEN
        self._close(exc)
        lost = self._liveness.lost()
        self._liveness.stop()
        if lost:
            message = (
                f"lost {self._liveness.describe(lost)}: gone from the group while rank "
                f"{self.rank} ({self._liveness.me.node}) was {doing}; the verifier closed its "
                f"groups and ended the run (torchrun does not bring lost ranks back: restart "
                f"the job)"
            )
        elif self.rank == 0:
            message = (
                f"a rank did not report within {2 * self.timeout + 10:g} s (it hangs, or "
                f"waits on a rank that hangs); the verifier closed its groups, so the other "
                f"ranks return this report, and the hung rank prints its stack to its stderr "
                f"and exits: {exc}"
            )
        else:
            message = (
                f"rank {self.rank} ({self._liveness.me.node}) lost its connection to the "
                f"group while {doing}, and no rank is gone: {exc}"
            )
        failure = GroupFailure(message, lost, "lost" if lost else "hung")
        if lost:
            _BROKEN = failure
        self._failure = failure
        return failure

    def _lost_between_collectives(self) -> None:
        """The heartbeat found lost ranks: close the groups unless a collective is running.

        A collective running here ends by itself (its connection to the lost rank closes, or
        the peers that notice close theirs); between collectives (rank 0 judging or drawing)
        nothing would tell the ranks that wait on this one.
        """
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._failure is None:
                self._break("between two calls", None)
        finally:
            self._lock.release()

    # --- rank 0 ----------------------------------------------------------------------------

    def _exchange(self, reference: str, call: Call, sharding: str, stale: bool) -> list[Any]:
        """One call on this rank: a fresh work group if rank 0 asks, the call, the gather."""
        if stale:
            self.mesh = self._new_mesh()
        self._liveness.in_call = True
        try:
            outcome = run_on_rank(reference, call, sharding, device=self.device, mesh=self.mesh)
        finally:
            self._liveness.in_call = False
        gathered: list[Any] = [None] * self.world_size if self.rank == 0 else []
        dist.gather_object(outcome, gathered if self.rank == 0 else None, dst=0, group=self._outbox)
        return gathered

    def run(self, reference: str, call: Call, sharding: str) -> list[Outcome]:
        """Rank 0: broadcast the call, run it here, gather every rank's outcome.

        Returns:
            One outcome a rank, the ranks that raised first (earliest first).

        Raises:
            GroupFailure: a rank did not report (it hangs, or waits on a hung rank), or ranks
                were lost (it names them and their node).
        """
        message: list[Any] = [("run", reference, call, sharding, self._stale)]

        def one_call() -> list[Any]:
            dist.broadcast_object_list(message, src=0, group=self._inbox)
            return self._exchange(reference, call, sharding, self._stale)

        outcomes: list[Outcome] = self._collective("running a call", one_call)
        self._calls += 1
        # Ranks that all refused the call alike (bad input, an unsupported option) left no
        # collective half done; any other error may have: build a fresh work group.
        errors = {repr(o.error) for o in outcomes}
        self._stale = errors != {"None"} and len(errors) > 1
        return sorted(outcomes, key=lambda o: (o.error is None, o.seconds, o.rank or 0))

    def finish(self, report: VerificationReport) -> None:
        """Rank 0: send every rank the report.

        After a failure of the group (its groups closed), the report goes into the store,
        where the serving ranks that survive pick it up.
        """
        with self._lock:
            if self._failure is None:
                try:
                    dist.broadcast_object_list([("report", report)], src=0, group=self._inbox)
                    dist.barrier(group=self._outbox)  # every rank holds the report
                except RuntimeError as exc:
                    self._break("sending the report", exc)
            if self._failure is not None:
                with contextlib.suppress(Exception):
                    self._liveness.store.set("report", pickle.dumps(report).hex())
            # The heartbeat stops after the last collective. The groups of a run that ended
            # well stay: destroying them would leave torch's DTensor caches, which compare
            # meshes by their ranks, pointing at a group that is gone.
            self._liveness.stop()

    # --- the other ranks -------------------------------------------------------------------

    def serve(self) -> VerificationReport:
        """Ranks other than 0: run the calls rank 0 broadcasts; return its final report.

        When the group breaks, the report is rank 0's failing report if rank 0 survives,
        else a failing report of this rank's own that names the lost ranks.
        """

        def next_message() -> Any:
            message: list[Any] = [None]
            dist.broadcast_object_list(message, src=0, group=self._inbox)
            return message[0]

        try:
            while True:
                kind, *rest = self._collective("waiting for rank 0's next call", next_message)
                if kind == "report":
                    # Tell rank 0 that this rank holds the report (no local keeps the group).
                    self._collective("confirming the report", lambda: dist.barrier(self._outbox))
                    self._liveness.stop()
                    return rest[0]
                reference, _, sharding, _ = rest  # the arguments of _exchange
                self._reference, self._sharding = reference, sharding
                self._collective("running a call", functools.partial(self._exchange, *rest))
                self._calls += 1
        except GroupFailure as failure:
            return self._report_after(failure)

    def _report_after(self, failure: GroupFailure) -> VerificationReport:
        """Rank 0's report from the store, or this rank's own when rank 0 is gone."""
        self._liveness.stop()
        if 0 not in failure.ranks and not self._liveness.store_lost:
            with contextlib.suppress(Exception):
                self._liveness.store.wait(["report"], timedelta(seconds=_REPORT_WAIT))
                raw = self._liveness.store.get("report")
                report: VerificationReport = pickle.loads(bytes.fromhex(raw.decode()))
                return report
        name = candidate_name(load_candidate(self._reference)) if self._reference else "?"
        seconds = tuple(round(s, 3) for s in self.startup_seconds)
        record = ShardedRun(self._sharding, self.world_size, self.starts, seconds)
        return VerificationReport(
            candidate=name,
            passed=False,
            examples=self._calls,
            counterexample=None,
            failure=f"{failure} (rank {self.rank}'s own report: rank 0 did not send one)",
            worst_error=0.0,
            seed=0,
            elapsed=time.perf_counter() - self._began,
            devices=(self.device,),
            sharded=record if self._sharding else None,
        )
