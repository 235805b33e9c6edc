"""Which ranks of a group under ``torchrun`` are gone: a heartbeat through the store.

[`TorchrunGroup`][embedding_equivalence.distributed._torchrun.TorchrunGroup]'s second rule for
lost ranks and nodes: every rank publishes its node, host and pid in the store and beats there
every second, and a thread on each rank watches the others. A rank on this host is lost when
its process is gone, a rank on another host when its beat has not advanced for
``_LOST_AFTER`` seconds, and rank 0's node when the store (which rank 0's launcher hosts) no
longer answers. The same thread makes a rank whose torchrun launcher is gone leave, and a
rank still inside the candidate's call after rank 0 reported it hung exit with its stack.
"""

from __future__ import annotations

import faulthandler
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch.distributed as dist

#: Seconds between two heartbeats of a rank.
_BEAT = 1.0
#: Seconds without a heartbeat after which a rank on another host is lost (its connections may
#: not close when a machine vanishes; a process that dies on this host is seen at once).
_LOST_AFTER = 10.0
#: Seconds to wait, once a rank is found lost, for the rest of its node to be found too.
_SETTLE = 2 * _BEAT + 0.5
#: Seconds a rank may stay inside the candidate's call once rank 0's failing report is in the
#: store (a rank on its way out of a failed collective leaves the call well within them).
_HUNG_GRACE = 2 * _BEAT + 1.0


def _node_name() -> str:
    """This process's node: torchrun's node rank (``GROUP_RANK``), else the host name."""
    group_rank = os.environ.get("GROUP_RANK")
    return f"node {group_rank}" if group_rank is not None else f"host {socket.gethostname()}"


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc here: the signal said enough
        return True


@dataclass(frozen=True)
class Peer:
    """Where a rank runs, as it published itself."""

    rank: int
    node: str
    host: str
    pid: int


def _heartbeat_store(prefix: str) -> dist.Store:
    """A store of the default group's for the heartbeat, with a connection of its own.

    The heartbeat thread must not share a TCP connection with the main thread's group
    creation, and its calls must fail within seconds when the store's host is gone.
    """
    store = dist.distributed_c10d._get_default_store()
    inner: Any = store
    while isinstance(inner, dist.PrefixStore):
        inner = inner.underlying_store
    if isinstance(inner, dist.TCPStore):
        store = dist.TCPStore(
            inner.host, inner.port, is_master=False, wait_for_workers=False,
            timeout=timedelta(seconds=_LOST_AFTER),
        )  # fmt: skip
    return dist.PrefixStore(prefix, store)


class Liveness:
    """Which ranks of the group are gone: pids on this host, a heartbeat through the store.

    Args:
        prefix: the store keys of this group.
        rank: this rank.
        world_size: the number of ranks.
    """

    def __init__(self, prefix: str, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size
        self.store = _heartbeat_store(prefix)
        self.me = Peer(rank, _node_name(), socket.gethostname(), os.getpid())
        self.store.set(f"peer/{rank}", json.dumps([self.me.node, self.me.host, self.me.pid]))
        self.store.set(f"beat/{rank}", "0")
        self.peers: list[Peer] = []
        self.store_lost = False
        self._beats: dict[int, tuple[bytes, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.on_lost: Callable[[], None] | None = None
        #: Whether this rank's main thread is inside the candidate's call (set by the group).
        self.in_call = False
        self._ended_at: float | None = None  # when rank 0's failing report was first seen
        # torchrun starts each rank as its child: a rank whose launcher is gone is orphaned.
        self.launcher = os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else None

    def start(self) -> None:
        """Read every rank's place (each set it before the groups were created) and beat."""
        keys = [f"peer/{r}" for r in range(self.world_size)]
        self.peers = [Peer(r, *json.loads(raw)) for r, raw in enumerate(self.store.multi_get(keys))]
        self._beats = dict.fromkeys(range(self.world_size), (b"", time.monotonic()))
        self._thread = threading.Thread(target=self._run, name="ee-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the heartbeat thread."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * _BEAT)

    def _run(self) -> None:
        keys = [f"beat/{p.rank}" for p in self.peers]
        while not self._stop.wait(_BEAT):
            if self.launcher is not None and os.getppid() != self.launcher:
                self._leave()
            if not self.store_lost:
                try:
                    self.store.add(f"beat/{self.rank}", 1)
                    values = self.store.multi_get(keys)
                except Exception:  # any store error: its host is gone
                    self.store_lost = True
                else:
                    now = time.monotonic()
                    for peer, value in zip(self.peers, values, strict=True):
                        if value != self._beats[peer.rank][0]:
                            self._beats[peer.rank] = (value, now)
            if self.on_lost is not None and self.lost_now():
                self.on_lost()
            if self.in_call and self.rank != 0 and not self.store_lost:
                self._check_hung()  # rank 0 writes the report: it is never the one reported

    def _check_hung(self) -> None:
        """Exit if rank 0 ended the run while this rank stays inside the candidate's call.

        Rank 0 puts its report in the store only when the group failed. A rank still inside
        the call [`_HUNG_GRACE`][] seconds after that is the hung rank that rank 0 reported:
        nothing will call it back, and torchrun would wait on it for ever.
        """
        try:
            ended = self.store.check(["report"])
        except Exception:  # the store's host is gone: the lost-rank rules apply
            return
        if not ended:
            return
        now = time.monotonic()
        if self._ended_at is None:
            self._ended_at = now
        elif now - self._ended_at >= _HUNG_GRACE and self.in_call:
            self._exit(
                "is still inside the candidate's call after rank 0 ended the run with a rank "
                "hung; its stack follows, and it exits so that torchrun can end the job",
                stack=True,
            )

    def _leave(self) -> None:
        """This rank's launcher is gone: leave the group, as the launcher would have made it.

        torchrun starts each rank in a session of its own, so a launcher killed with its
        process group leaves its ranks running with nobody to stop them or report their exit
        status. They exit here (their connections close, and the other ranks report them
        lost); the main thread may be waiting in a collective that nothing else would end.
        """
        self._exit(f"leaves the group: its torchrun launcher (pid {self.launcher}) is gone")

    def _exit(self, why: str, *, stack: bool = False) -> None:
        """Say on stderr why this rank exits (with its stack if asked), and end its process."""
        sys.stderr.write(f"embedding-equivalence: rank {self.rank} ({self.me.node}) {why}\n")
        sys.stderr.flush()
        if stack:
            faulthandler.dump_traceback(all_threads=True)
        os._exit(1)

    def lost_now(self) -> list[int]:
        """The ranks known to be gone now."""
        now = time.monotonic()

        def gone(peer: Peer) -> bool:
            if peer.host == self.me.host:
                return not _pid_alive(peer.pid)
            if self.store_lost:  # the store's host, rank 0's node, is gone
                return peer.node == self.peers[0].node
            return now - self._beats[peer.rank][1] > _LOST_AFTER

        return [p.rank for p in self.peers if p.rank != self.rank and gone(p)]

    def lost(self) -> list[int]:
        """The ranks gone, waiting as long as a rank on another host takes to be found lost.

        Once one is found, the others of a node that goes down together (a killed launcher's
        ranks each leave within a heartbeat) get ``_SETTLE`` seconds to be found as well.
        """
        remote = any(p.host != self.me.host for p in self.peers)
        deadline = time.monotonic() + (_LOST_AFTER + 2 * _BEAT if remote else 0.0)
        while True:
            lost = self.lost_now()
            if lost:
                time.sleep(_SETTLE)
                return self.lost_now()
            if time.monotonic() >= deadline:
                return lost
            time.sleep(0.2)

    def describe(self, lost: list[int]) -> str:
        """``"ranks 2, 3 (node 1, all of its ranks)"``: the lost ranks by node."""
        parts = []
        for node in dict.fromkeys(self.peers[r].node for r in lost):
            on_node = [p.rank for p in self.peers if p.node == node]
            gone = [r for r in lost if self.peers[r].node == node]
            which = "all of its ranks" if gone == on_node else f"which has {_ranks(on_node)}"
            parts.append(f"{_ranks(gone)} ({node}, {which})")
        return "; ".join(parts)


def _ranks(ranks: list[int]) -> str:
    """``"rank 2"`` or ``"ranks 2, 3"``."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
