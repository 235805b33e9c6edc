"""Run under torchrun by tests/test_distributed.py, tests/test_two_nodes.py and
benchmarks/lost_node.py: every rank calls the verifier and writes its line of the report;
and the harness that starts two launchers on this machine, standing in for two nodes.

Usage: torchrun ... torchrun_verify.py CANDIDATE SHARDING EXAMPLES OUT [TIMEOUT]

Each rank writes its line to ``OUT/rank<r>.txt`` (and prints it), its pid to
``OUT/rank<r>.pid`` once it has joined, and ``OUT/rank<r>.json``: when it joined the process
group and when the report came back (``time.time()``), and the report's start-up seconds.
``CANDIDATE`` and ``SHARDING`` may list several, joined by commas: the ranks then verify each
in turn on the one process group (a test module's runs share one launch), and the lines of the
``i``-th go to ``OUT/<i>/``. It
exits 1 when ranks were lost (a failing report of another kind exits 0, for the tests that
read it), so that torchrun does not wait at its exit barrier (300 s) for a launcher that is
gone. ``slow_vocab_parallel`` is a correct kernel that takes 0.2 s a call and marks
``OUT/running`` when it first runs, so that a test can kill a node in the middle of a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from embedding_equivalence.distributed import verify_sharded_embedding, vocab_parallel_embedding
from embedding_equivalence.distributed._torchrun import broken_group

#: Where ``slow_vocab_parallel`` marks that a run is under way (set by the script's ``OUT``).
MARK_ENV = "EE_TEST_RUNNING_MARK"


def slow_vocab_parallel(input: torch.Tensor, weight: Any, **options: Any) -> torch.Tensor:
    """``vocab_parallel_embedding`` after 0.2 s, marking the run's first call in a file."""
    mark = os.environ.get(MARK_ENV)
    if mark and not os.path.exists(mark):
        Path(mark).write_text(str(time.time()))
    time.sleep(0.2)
    return vocab_parallel_embedding(input, weight, **options)


def main() -> int:
    """Verify each ``CANDIDATE`` on the group torchrun describes; write this rank's lines."""
    candidates, shardings = sys.argv[1].split(","), sys.argv[2].split(",")
    examples, out = int(sys.argv[3]), Path(sys.argv[4])
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 20.0
    os.environ[MARK_ENV] = str(out / "running")
    # Joining waits for every rank to start: a loaded machine gets a generous start-up timeout.
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    joined = time.time()
    (out / f"rank{rank}.pid").write_text(str(os.getpid()))
    for i, (candidate, sharding) in enumerate(zip(candidates, shardings, strict=True)):
        report = verify_sharded_embedding(
            candidate, sharding=sharding, max_examples=examples, seed=0, timeout=timeout
        )
        returned = time.time()
        first_line = (report.failure or "").splitlines()[0] if report.failure else ""
        group = report.sharded  # None only where a rank's own report knows no sharding
        line = (
            f"rank {rank} of {world}: passed={report.passed} examples={report.examples} "
            f"(boundaries {report.boundary_examples}) world={group.world_size if group else world} "
            f"failure={first_line}"
        )
        folder = out / str(i) if len(candidates) > 1 else out
        folder.mkdir(exist_ok=True)
        (folder / f"rank{rank}.txt").write_text(line)
        times = {
            "joined": joined,
            "returned": returned,
            "startup_seconds": group.startup_seconds if group else (),
        }
        (folder / f"rank{rank}.json").write_text(json.dumps(times))
        print(line, flush=True)
    dist.destroy_process_group()
    broken = broken_group()
    if broken is None:
        return 0
    # A rank that exits non-zero makes its launcher stop the other ranks of its node at once:
    # give the other survivors time to write their lines first (5 s was too short for rank 1
    # on a loaded 2-core machine; the tests allow 30 s to report and 30 s more to exit).
    deadline = time.monotonic() + 20.0
    while len(list(out.glob("rank*.txt"))) < world - len(broken.ranks):
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return 1


if __name__ == "__main__":
    sys.exit(main())


# --- the harness: two launchers on this machine, standing in for two nodes -----------------


def free_port() -> int:
    """A TCP port that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Launcher:
    """One torchrun launcher (a node) and the workers it started (each in its own session)."""

    node: int
    process: subprocess.Popen[str]
    workers: set[int] = field(default_factory=set)

    def poll_workers(self) -> None:
        """Remember the launcher's worker pids (torchrun starts each in a session of its own,
        so killing the launcher's process group does not reach them)."""
        if self.process.poll() is None:
            self.workers.update(_children(self.process.pid))

    def pids(self) -> list[int]:
        """The launcher and its workers that still run."""
        return [p for p in (self.process.pid, *self.workers) if _alive(p)]

    def kill(self) -> None:
        """SIGKILL the launcher's process group, then each worker's (the whole node)."""
        self.poll_workers()
        for pgid in (self.process.pid, *self.workers):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def launch(
    node: int, args: list[str], *, port: int, rdzv: str, env: dict[str, str], log: Path
) -> Launcher:
    """Start ``torchrun --nnodes=2 --nproc-per-node=2`` for ``node`` (a new session).

    ``rdzv="static"`` passes ``--node-rank`` and the master address; ``"c10d"`` passes the
    rendezvous endpoint, and node ranks follow the order of arrival.
    """
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2"]
    if rdzv == "static":
        command += [f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}"]
    else:
        command += ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=ee"]
    handle = log.open("w")
    process = subprocess.Popen(
        [*command, *args], stdout=handle, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    handle.close()
    return Launcher(node, process)


@contextlib.contextmanager
def two_nodes(
    args: list[str], out: Path, *, rdzv: str = "static", env: dict[str, str] | None = None
) -> Iterator[list[Launcher]]:
    """Two launchers of two ranks each (world 4), ended with every worker on the way out."""
    port = free_port()
    paths = [str(Path(__file__).resolve().parent), *sys.path]
    environment = {**(env or os.environ), "PYTHONPATH": os.pathsep.join(paths)}
    launchers: list[Launcher] = []
    try:
        for node in range(2):
            launchers.append(
                launch(
                    node, args, port=port, rdzv=rdzv, env=environment, log=out / f"node{node}.log"
                )
            )
        yield launchers
    finally:
        for launcher in launchers:
            launcher.kill()


def wait_running(launchers: list[Launcher], out: Path, world: int, timeout: float) -> None:
    """Wait until every rank has joined and the candidate has run once (a run under way).

    Raises:
        TimeoutError: not within ``timeout`` seconds (the launchers' logs attached).
    """
    deadline = time.monotonic() + timeout
    while not (
        (out / "running").exists() and all((out / f"rank{r}.pid").exists() for r in range(world))
    ):
        for launcher in launchers:
            launcher.poll_workers()
            if launcher.process.poll() is not None:
                raise RuntimeError(f"node {launcher.node}'s launcher ended early\n{logs(out)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run did not start within {timeout:g} s\n{logs(out)}")
        time.sleep(0.1)
    for launcher in launchers:
        launcher.poll_workers()


def wait_gone(launchers: list[Launcher], timeout: float) -> list[int]:
    """Wait until every launcher and worker has exited; the pids still running after that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for launcher in launchers:
            launcher.poll_workers()
        if not any(launcher.pids() for launcher in launchers):
            break
        time.sleep(0.2)
    for launcher in launchers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.process.wait(timeout=0.1)
    return [pid for launcher in launchers for pid in launcher.pids()]


def kill_rank(out: Path, rank: int) -> None:
    """SIGKILL the worker of ``rank`` alone (its pid from ``OUT/rank<r>.pid``)."""
    os.kill(int((out / f"rank{rank}.pid").read_text()), signal.SIGKILL)


def rank_lines(out: Path) -> dict[int, str]:
    """The line each rank wrote, by rank."""
    return {int(p.stem.removeprefix("rank")): p.read_text() for p in sorted(out.glob("rank*.txt"))}


def rank_times(out: Path) -> dict[int, dict[str, Any]]:
    """What each rank wrote to ``OUT/rank<r>.json``, by rank."""
    return {
        int(p.stem.removeprefix("rank")): json.loads(p.read_text())
        for p in sorted(out.glob("rank*.json"))
    }


def logs(out: Path) -> str:
    """The end of both launchers' logs, for a failure message."""
    parts = []
    for log in sorted(out.glob("node*.log")):
        text = log.read_text(errors="replace").splitlines()
        parts.append(f"--- {log.name}\n" + "\n".join(text[-40:]))
    return "\n".join(parts)
