"""Ranks forked from a warm process, for the suite's process-group tests.

A rank that a [`WorkerGroup`][embedding_equivalence.distributed._group.WorkerGroup] starts is a
fresh interpreter, ``python -m embedding_equivalence.distributed._worker``: it imports torch,
DTensor and the package (about 3.4 CPU-seconds on the 2-core machine) before it joins its group,
and the suite starts some fifty of them. Inside [`forked_ranks`][], the launcher's
``subprocess.Popen`` is [`ForkedRank`][]: the same ``main()`` of the same module, in a process
forked from a server that imported that module once. The server is single-threaded and never
runs a torch operation (it checks that it holds one thread before each fork), so a child
inherits no thread pool; it is started once per test process, ends when that process ends, and
its children are ended by pid as spawned ranks are (the server reaps them and tells their exit
status, ``Popen``'s way).

What the fresh start itself does stays tested on spawned ranks: the tests marked
``spawned_ranks`` (start-up and its timeout), and every group started by a process of its own
(the command line's, the Real kernels replays', the ``torchrun`` launches). As with
``tests/shared_ranks.py``, only the suite does this: the verifier spawns its ranks.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["ForkedRank", "forked_ranks", "server_pid"]

#: The module a rank runs (``python -m`` ...): the only command [`ForkedRank`][] takes.
WORKER = "embedding_equivalence.distributed._worker"
#: Seconds the server may take to start (Python, torch and the worker's module).
SERVER_STARTUP = 240.0


class _Server:
    """The forking server of this process, started on first use."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p or os.getcwd() for p in sys.path))
        # One OpenMP thread, as every rank runs (its main() sets it): without the variable,
        # loading torch starts a second thread, and a fork would copy a pool without it.
        env["OMP_NUM_THREADS"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.sock.settimeout(SERVER_STARTUP)
        self.lock = threading.Lock()
        assert self._receive() == "ready"
        self.sock.settimeout(None)

    def _receive(self) -> Any:
        data = self.sock.recv(1 << 16)
        if not data:
            raise RuntimeError(f"the rank-forking server ended (status {self.process.poll()})")
        return pickle.loads(data)

    def ask(self, request: tuple[Any, ...], fds: tuple[int, ...] = ()) -> Any:
        """Send one request (with file descriptors to pass) and return the answer."""
        with self.lock:
            socket.send_fds(self.sock, [pickle.dumps(request)], list(fds))
            answer = self._receive()
        if isinstance(answer, BaseException):
            raise answer
        return answer


_SERVER: _Server | None = None


def _server() -> _Server:
    global _SERVER
    if _SERVER is None or _SERVER.process.poll() is not None:
        _SERVER = _Server()
    return _SERVER


@atexit.register
def _stop_server() -> None:
    """At exit: close the server's socket (it then exits) and wait for it, by its pid."""
    if _SERVER is not None:
        _SERVER.sock.close()
        try:
            _SERVER.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _SERVER.process.kill()
            _SERVER.process.wait()


def server_pid() -> int | None:
    """The pid of this process's server, while it runs (its children are the forked ranks)."""
    return _SERVER.process.pid if _SERVER is not None and _SERVER.process.poll() is None else None


class ForkedRank:
    """A rank forked by the server, with the parts of ``subprocess.Popen`` the launcher uses.

    Args:
        args: ``[python, "-m", WORKER]``, the launcher's command.
        env: the rank's environment (its ``EE_*`` settings and ``PYTHONPATH``).
        stdout: the rank's log (a file); stderr goes there too, stdin is ``/dev/null``.
    """

    def __init__(self, args: list[str], *, env: dict[str, str], stdout: Any, **_: Any) -> None:
        if list(args[1:]) != ["-m", WORKER]:
            raise ValueError(f"ForkedRank runs {WORKER} only, not {args!r}")
        self.args = args
        self.returncode: int | None = None
        self.pid: int = _server().ask(("start", env), (stdout.fileno(),))

    def poll(self) -> int | None:
        """The exit status once the rank has ended (``-N`` for signal ``N``), else ``None``."""
        if self.returncode is None:
            self.returncode = _server().ask(("poll", self.pid))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the rank to end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """``SIGKILL`` to the rank, unless it has ended (its pid is then no longer its own)."""
        # Not reaped yet (only this object's poll reaps it): the pid is still the rank's.
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


@contextlib.contextmanager
def forked_ranks() -> Iterator[None]:
    """Groups started inside the block fork their ranks from the server (see the module)."""
    from embedding_equivalence.distributed import _group

    forking = types.SimpleNamespace(
        Popen=ForkedRank,
        DEVNULL=subprocess.DEVNULL,
        STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired,
    )
    spawning = _group.subprocess
    _group.subprocess = forking  # type: ignore[assignment]
    try:
        yield
    finally:
        _group.subprocess = spawning


# --- the server ----------------------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _run_rank(worker: types.ModuleType, env: dict[str, str], log: int) -> None:
    """In the forked child: the rank's streams and environment, then its ``main()``; never
    returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.environ.clear()
        os.environ.update(env)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [p for p in paths if p not in sys.path]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        worker.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(fd: int) -> None:
    import importlib

    sock = socket.socket(fileno=fd)
    # Die with the test process (PR_SET_PDEATHSIG); the ranks die with this one.
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    worker = importlib.import_module(WORKER)
    sock.send(pickle.dumps("ready"))
    while True:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 1)
        if not data:
            return
        request = pickle.loads(data)
        try:
            if request[0] == "start":
                if _threads() != 1:
                    raise RuntimeError(f"the server holds {_threads()} threads: no fork")
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    _run_rank(worker, request[1], fds[0])
                os.close(fds[0])
                answer: Any = pid
            else:
                done, status = os.waitpid(request[1], os.WNOHANG)
                answer = os.waitstatus_to_exitcode(status) if done else None
        except Exception as exc:  # told to the test, which raises it
            answer = exc
        sock.send(pickle.dumps(answer))


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
