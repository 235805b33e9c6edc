"""The worker launcher: a process group of spawned ranks, driven from this process.

[`WorkerGroup`][] starts ``world_size`` processes (``python -m
embedding_equivalence.distributed._worker``), each joining a torch.distributed group (gloo on
the CPU, nccl on CUDA) through a TCP store that this process hosts on a free port. This
process is not a rank: it sends each rank the call to run and waits for every rank's outcome,
so that it can notice a rank that raises, hangs or dies while the others wait in a collective:

- a rank that **raises** reports its outcome at once; the other ranks are usually stuck in a
  collective that will never complete, so after a short grace the group is killed and
  restarted for the next call, and those ranks are reported as waiting;
- a rank that **hangs** is found by the timeout: its Python stacks are dumped (faulthandler,
  ``SIGUSR1``) into its log, and the group is killed;
- a rank that **dies** is found when its connection closes; its exit status and the end of
  its log are reported.

Start-up has its own timeout (``startup_timeout``, 120 s by default), separate from a call's
(``timeout``): on a loaded machine starting Python, importing torch and joining the group can take
far longer than a call, and a slow start is not a hung rank. What a rank does once per
candidate, importing its module and building the device mesh, is start-up too: before a
candidate's first call the ranks prepare it under the start-up timeout, so that a call's timeout
bounds the call alone.

Workers are ended by their pid: at `WorkerGroup.close`, when the group is restarted, and
when this process exits. Each worker also asks Linux to kill it if this process dies. (The
test suite shares healthy ranks between groups, ``tests/shared_ranks.py``, and forks its ranks
from a process that has imported this module's worker once, ``tests/forked.py``.)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection, Listener, wait
from typing import Any

import torch
import torch.distributed as dist

from .._engine.check import Outcome

#: The first item of the request that has a rank import a candidate (see ``_prepare``).
PREPARE = "prepare the candidate"
#: Environment variable that raises the default per-call timeout (seconds).
TIMEOUT_ENV = "EMBEDDING_EQUIVALENCE_DISTRIBUTED_TIMEOUT"
#: Seconds a call may take on every rank before the group is declared hung.
DEFAULT_TIMEOUT = float(os.environ.get(TIMEOUT_ENV, "20"))
#: Environment variable that raises the default start-up timeout (seconds).
STARTUP_TIMEOUT_ENV = "EMBEDDING_EQUIVALENCE_DISTRIBUTED_STARTUP_TIMEOUT"
#: Seconds the ranks may take to start and join the process group: Python's start, torch's
#: import and the rendezvous take a few seconds on an idle machine and many times that under
#: load, so this is generous and separate from a call's timeout.
DEFAULT_STARTUP_TIMEOUT = float(os.environ.get(STARTUP_TIMEOUT_ENV, "120"))
#: Seconds the other ranks get to report after one rank raised or died.
_GRACE = 1.0
_HOST = "127.0.0.1"


def send(conn: Connection, obj: object) -> None:
    """Send ``obj`` pickled by value (never as shared memory, which torch's pickler prefers)."""
    conn.send_bytes(pickle.dumps(obj))


def receive(conn: Connection) -> Any:
    """Receive what [`send`][] sent."""
    return pickle.loads(conn.recv_bytes())


def narrow_timeout(group: dist.ProcessGroup | None, seconds: float) -> None:
    """Give a process group, joined under the start-up timeout, the timeout of a call.

    A group's timeout bounds its rendezvous as well as its collectives, so the ranks join
    with the generous start-up timeout and then narrow it here (torch's ``_set_pg_timeout``;
    where a torch lacks it, the group keeps the start-up timeout and the caller's own
    timeout still ends a hung call).

    Args:
        group: the group (``None``: the default group).
        seconds: the timeout of one collective from now on.
    """
    setter = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
    if setter is not None:
        setter(timedelta(seconds=seconds), group)


class StillWaiting(RuntimeError):
    """The error of a rank that was still in a collective when another rank raised."""


class GroupFailure(Exception):
    """A rank hung, died or was lost: the group could not run the call to the end.

    Attributes:
        ranks: the ranks that failed.
        kind: ``"hung"``, ``"died"`` (a spawned rank), or ``"lost"`` (under torchrun: ranks
            gone, alone or with their node and its launcher).
    """

    def __init__(self, message: str, ranks: list[int], kind: str) -> None:
        super().__init__(message)
        self.ranks = ranks
        self.kind = kind


@dataclass
class _Worker:
    rank: int
    process: subprocess.Popen[bytes]
    log: Any  # the temporary file that holds its stdout and stderr
    conn: Connection | None = None
    prepared: set[str] = field(default_factory=set)  # candidates this rank has imported

    def tail(self, lines: int = 15) -> str:
        self.log.flush()
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").rstrip().splitlines()
        return "\n".join(text[-lines:])


def _kill(workers: list[_Worker]) -> None:
    """End every worker by its pid and wait for it; close connections and logs."""
    for w in workers:
        if w.process.poll() is None:
            w.process.kill()
    for w in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process in the D state
            w.process.wait(timeout=10)
        if w.conn is not None:
            w.conn.close()
        w.log.close()


def _stop(workers: list[_Worker]) -> None:
    """Ask every worker to leave its group and exit, then end them all by pid."""
    for w in workers:
        if w.conn is not None and w.process.poll() is None:
            with contextlib.suppress(OSError):
                send(w.conn, None)
    deadline = time.monotonic() + 2.0
    for w in workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    _kill(workers)


def gpus_short(world_size: int, device: str, backend: str | None, flag: str) -> str | None:
    """Why ``world_size`` spawned ranks over nccl cannot start here, or ``None`` when they can.

    nccl takes one GPU per rank and refuses two ranks on one GPU, a setup mistake that would
    otherwise fail every call as if the kernel had.

    Args:
        world_size: the ranks to spawn on this machine.
        device: ``"cpu"`` or ``"cuda"``.
        backend: the backend asked for (``None``: nccl on CUDA).
        flag: how the caller names the setting, ``"world_size="`` or ``"--world-size "``.

    Returns:
        ``None`` when the ranks fit; else the message, naming the value and what to pass.
    """
    if device != "cuda" or (backend or "nccl") != "nccl":
        return None
    gpus = torch.cuda.device_count()
    if world_size <= gpus:
        return None
    return (
        f"{flag}{world_size}: {world_size} ranks over nccl need {world_size} GPUs, one per "
        f"rank, and this machine has {gpus} (nccl refuses two ranks on one GPU); pass "
        f"{flag}{gpus} or less"
    )


class WorkerGroup(contextlib.AbstractContextManager["WorkerGroup"]):
    """``world_size`` spawned ranks in a process group, and this process as their driver.

    Use it as a context manager; the group starts lazily on the first [`run`][].

    Args:
        world_size: the number of ranks (at least 1).
        device: ``"cpu"`` (gloo) or ``"cuda"`` (nccl; one GPU per rank, round robin).
        backend: the torch.distributed backend; ``None`` picks gloo or nccl by ``device``.
        timeout: seconds a call may take before the group is declared hung; also the
            process group's own timeout once the ranks have joined.
        startup_timeout: seconds the ranks may take to start and join the process group
            (default 120, or ``$EMBEDDING_EQUIVALENCE_DISTRIBUTED_STARTUP_TIMEOUT``); a rank
            that has not joined by then is reported as hung.
    """

    def __init__(
        self,
        world_size: int,
        *,
        device: str = "cpu",
        backend: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        self.world_size = world_size
        self.device = device
        self.backend = backend or ("nccl" if device == "cuda" else "gloo")
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        #: Processes started (a restart counts again).
        self.starts = 0
        self.startup_seconds: list[float] = []
        self._workers: list[_Worker] = []
        self._store: dist.TCPStore | None = None
        self._finalizer = weakref.finalize(self, _kill, self._workers)
        atexit.register(self._finalizer)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (by its pid) and release the store."""
        self._shut_down()

    def _shut_down(self) -> None:
        """Stop every worker (by its pid) and release the store (what ``close`` does)."""
        _stop(self._workers)
        self._workers.clear()
        self._store = None

    def _environment(self, rank: int, conn_port: int, key: bytes) -> dict[str, str]:
        env = dict(os.environ)
        # The workers import the candidate by name: give them this process's import path.
        paths = [p or os.getcwd() for p in sys.path]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        assert self._store is not None
        env.update(
            EE_RANK=str(rank),
            EE_WORLD_SIZE=str(self.world_size),
            EE_HOST=_HOST,
            EE_CONN_PORT=str(conn_port),
            EE_STORE_PORT=str(self._store.port),
            EE_KEY=key.hex(),
            EE_TIMEOUT=str(self.timeout),
            EE_STARTUP_TIMEOUT=str(self.startup_timeout),
            EE_BACKEND=self.backend,
            EE_DEVICE=self.device,
        )
        return env

    def start(self) -> None:
        """Start the workers and wait until every rank has joined the process group.

        Raises:
            GroupFailure: a worker died or did not join within the start-up timeout.
        """
        self._shut_down()
        begin = time.perf_counter()
        self._store = dist.TCPStore(_HOST, 0, None, is_master=True, wait_for_workers=False)
        key = secrets.token_bytes(16)
        with Listener((_HOST, 0), authkey=key) as listener:
            port = int(listener.address[1])
            for rank in range(self.world_size):
                log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _kill
                process = subprocess.Popen(
                    [sys.executable, "-m", "embedding_equivalence.distributed._worker"],
                    env=self._environment(rank, port, key),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                self._workers.append(_Worker(rank, process, log))
            self._accept(listener)
        self._await_every_rank("joining the process group", "did not join the process group")
        self.starts += 1
        self.startup_seconds.append(time.perf_counter() - begin)

    def _accept(self, listener: Listener) -> None:
        """Accept one connection a worker, failing fast if a worker dies first."""
        listener._listener._socket.settimeout(0.2)  # type: ignore[attr-defined]
        deadline = time.monotonic() + self.startup_timeout
        pending = {w.rank for w in self._workers}
        while pending:
            self._raise_if_dead("starting")
            if time.monotonic() > deadline:
                self._fail(
                    sorted(pending), "hung", "did not connect while starting", self.startup_timeout
                )
            try:
                conn = listener.accept()
            except (TimeoutError, OSError):
                continue
            _, rank, _ = receive(conn)
            self._workers[rank].conn = conn
            pending.discard(rank)

    def _connections(self) -> dict[Connection, int]:
        """Each worker's connection, and its rank."""
        conns = {w.conn: w.rank for w in self._workers if w.conn is not None}
        assert len(conns) == self.world_size
        return conns

    def _await_every_rank(self, doing: str, failure: str) -> None:
        """Wait for one message from every rank, under the start-up timeout.

        Raises:
            GroupFailure: a rank died while ``doing`` it, or ``failure`` in time (hung).
        """
        pending = self._connections()
        deadline = time.monotonic() + self.startup_timeout
        while pending:
            for conn in wait(list(pending), timeout=0.2):
                assert isinstance(conn, Connection)
                try:
                    receive(conn)
                except (EOFError, OSError):
                    self._raise_if_dead(doing)
                pending.pop(conn)
            self._raise_if_dead(doing)
            if pending and time.monotonic() > deadline:
                self._fail(sorted(pending.values()), "hung", failure, self.startup_timeout)

    def _raise_if_dead(self, doing: str) -> None:
        dead = [w for w in self._workers if w.process.poll() is not None]
        if dead:
            self._fail([w.rank for w in dead], "died", f"died while {doing}")

    def _fail(self, ranks: list[int], kind: str, what: str, timeout: float | None = None) -> None:
        """Kill the group and raise [`GroupFailure`][] with each failed rank's log.

        ``timeout`` is the one that ran out (default: the call's).
        """
        workers = [self._workers[r] for r in ranks]
        if kind == "hung":
            for w in workers:
                if w.process.poll() is None:
                    os.kill(w.process.pid, signal.SIGUSR1)  # faulthandler: dump the stacks
            time.sleep(0.5)
        parts = []
        for w in workers:
            code = w.process.poll()
            status = "" if code is None else f" (exit status {code})"
            parts.append(f"rank {w.rank}{status}, the end of its log:\n{w.tail() or '(empty)'}")
        names = ", ".join(f"rank {r}" for r in ranks)
        limit = (
            f"timeout {self.timeout:g} s" if timeout is None else f"start-up timeout {timeout:g} s"
        )
        message = f"{names} {what} ({limit})\n\n" + "\n\n".join(parts)
        self._shut_down()
        raise GroupFailure(message, ranks, kind)

    def run(self, *request: Any) -> list[Outcome]:
        """Send ``request`` to every rank and collect every rank's [`Outcome`][].

        A rank that raised is reported in its outcome. The ranks that did not answer within a
        short grace after it (stuck in a collective the failed rank never joined) get an
        outcome whose error says so, and the group is restarted before the next call.

        Args:
            request: the arguments of ``run_on_rank`` after ``device``.

        Returns:
            One outcome a rank, the ranks that raised first, then the others by rank.

        Raises:
            GroupFailure: a rank died, or no rank answered within the timeout.
        """
        if not self._workers:
            self.start()
        self._prepare(request[0])
        conns = self._connections()
        for conn in conns:
            try:
                send(conn, request)
            except OSError:
                self._raise_if_dead("receiving a call")
                raise
        outcomes: dict[int, Outcome] = {}
        deadline = time.monotonic() + self.timeout
        while len(outcomes) < self.world_size:
            if any(o.error is not None for o in outcomes.values()):
                deadline = min(deadline, time.monotonic() + _GRACE)
            remaining = deadline - time.monotonic()
            ready = wait([c for c in conns if conns[c] not in outcomes], max(0.0, remaining))
            for conn in ready:
                assert isinstance(conn, Connection)
                try:
                    outcomes[conns[conn]] = receive(conn)
                except (EOFError, OSError):  # the worker is gone: wait for its exit status
                    worker = self._workers[conns[conn]]
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        worker.process.wait(timeout=_GRACE)
                    self._fail([worker.rank], "died", "died while running the call")
            if not ready and time.monotonic() >= deadline:
                break
        missing = sorted(set(range(self.world_size)) - set(outcomes))
        if missing:
            self._raise_if_dead("running the call")
            if all(o.error is None for o in outcomes.values()):  # none raised (or none answered)
                self._fail(missing, "hung", "did not finish the call")
            failed = [r for r, o in outcomes.items() if o.error is not None]
            for r in missing:
                error = StillWaiting(
                    f"rank {r} was still waiting (in a collective) after rank {failed[0]} "
                    f"raised; the group was restarted"
                )
                outcomes[r] = Outcome(rank=r, error=error, stage="forward")
            self._shut_down()  # restarted by the next run
        # The ranks that raised, then those that did not, then those left waiting; each by rank.
        return sorted(
            outcomes.values(),
            key=lambda o: (isinstance(o.error, StillWaiting), o.error is None, o.rank or 0),
        )

    def _prepare(self, candidate: str) -> None:
        """Have every rank import ``candidate`` and build its mesh, under the start-up timeout.

        Once per candidate and set of workers. A rank that cannot import it answers at once:
        its call then reports the import error, as before.
        """
        if all(candidate in w.prepared for w in self._workers):
            return
        for conn in self._connections():
            send(conn, (PREPARE, candidate))
        self._await_every_rank("importing the candidate", "did not import the candidate")
        for w in self._workers:
            w.prepared.add(candidate)
