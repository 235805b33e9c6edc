"""Processes forked from warm servers, for the suite's ranks and fresh-interpreter runs.

Starting Python and importing torch costs about 1.7 CPU-seconds on the 2-core machine (the
import, then the interpreter's teardown); a rank of a
[`WorkerGroup`][embedding_equivalence.distributed._group.WorkerGroup] also imports DTensor and
the package (3.4 in all). The slow tier starts some fifty ranks and some thirty scripts and
console commands that way, and CI is bound by its CPU. So the suite forks them instead:

- **ranks**: inside [`forked_ranks`][] (every test but those marked ``spawned_ranks``), the
  launcher's ``subprocess.Popen`` is [`ForkedRank`][]: the same ``main()`` of
  ``embedding_equivalence.distributed._worker``, in a process forked from a server that imported
  that module once;
- **fresh interpreters**: [`run_python`][] is ``subprocess.run([sys.executable, *args])`` for
  ``-c code``, ``-m module`` and ``script.py``, run in a process forked from a server that
  imported torch alone, so that the package, the candidate and everything else are imported by
  the run itself, as in a fresh interpreter (its ``sys.path``, ``sys.argv``, environment,
  working directory and ``__main__`` are a fresh interpreter's; an uncaught exception prints
  its traceback and exits 1, ``SystemExit`` gives its status, ``atexit`` functions run).

A server is single-threaded and never runs a torch operation (it checks that it holds one
thread before each fork, and has ``OMP_NUM_THREADS=1`` so that loading torch starts no pool),
so a child inherits no thread pool. Each server starts on first use, once per test process,
and ends with it; it reaps its children and tells their exit status, ``Popen``'s way, and they
are ended by pid as spawned processes are.

What a fresh start itself does stays tested on spawned processes: the tests marked
``spawned_ranks`` (start-up and its timeout, the ranks' memory), every group started by a
process of its own (the command line's, the Real kernels replays', the ``torchrun`` launches),
and the commands the tests still run by ``subprocess``. As with ``tests/shared_ranks.py``,
only the suite does this: the verifier spawns its ranks.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ForkedRank", "forked_ranks", "run_python", "server_pids"]

#: The module a rank runs (``python -m`` ...): the only command [`ForkedRank`][] takes.
WORKER = "embedding_equivalence.distributed._worker"
#: What the server of [`run_python`][] imports: torch alone.
TORCH = "torch"
#: Seconds a server may take to start (Python, torch, and the worker's module for ranks).
SERVER_STARTUP = 240.0


class _Server:
    """A forking server that has imported ``preload``, started on first use."""

    def __init__(self, preload: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        if preload == WORKER:  # a rank imports its candidate from the suite's path
            env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p or os.getcwd() for p in sys.path))
        else:  # a run's own PYTHONPATH goes before the server's path (a fresh interpreter's)
            env.pop("PYTHONPATH", None)
        # One OpenMP thread, as every rank runs (its main() sets it): without the variable,
        # loading torch starts a second thread, and a fork would copy a pool without it.
        env["OMP_NUM_THREADS"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), preload],
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
            raise RuntimeError(f"the forking server ended (status {self.process.poll()})")
        return pickle.loads(data)

    def ask(self, request: tuple[Any, ...], fds: Sequence[int] = ()) -> Any:
        """Send one request (with file descriptors to pass) and return the answer."""
        with self.lock:
            socket.send_fds(self.sock, [pickle.dumps(request)], list(fds))
            answer = self._receive()
        if isinstance(answer, BaseException):
            raise answer
        return answer


#: This process's servers, by what they imported.
_SERVERS: dict[str, _Server] = {}


def _server(preload: str) -> _Server:
    server = _SERVERS.get(preload)
    if server is None or server.process.poll() is not None:
        server = _SERVERS[preload] = _Server(preload)
    return server


@atexit.register
def _stop_servers() -> None:
    """At exit: close each server's socket (it then exits) and wait for it, by its pid."""
    for server in _SERVERS.values():
        server.sock.close()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def server_pids() -> list[int]:
    """The pids of this process's running servers (their children are the forked processes)."""
    return [s.process.pid for s in _SERVERS.values() if s.process.poll() is None]


class _Forked:
    """A forked process: its pid, and ``Popen``'s ``poll``, ``wait`` and ``kill``."""

    def __init__(self, preload: str, args: list[str], pid: int) -> None:
        self.preload, self.args, self.pid = preload, args, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once it has ended (``-N`` for signal ``N``), else ``None``."""
        if self.returncode is None:
            self.returncode = _server(self.preload).ask(("poll", self.pid))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """``SIGKILL``, unless it has ended (its pid is then no longer its own)."""
        # Not reaped yet (only this object's poll reaps it): the pid is still the process's.
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


class ForkedRank(_Forked):
    """A rank forked by the server, with the parts of ``subprocess.Popen`` the launcher uses.

    Args:
        args: ``[python, "-m", WORKER]``, the launcher's command.
        env: the rank's environment (its ``EE_*`` settings and ``PYTHONPATH``).
        stdout: the rank's log (a file); stderr goes there too, stdin is ``/dev/null``.
    """

    def __init__(self, args: list[str], *, env: dict[str, str], stdout: Any, **_: Any) -> None:
        if list(args[1:]) != ["-m", WORKER]:
            raise ValueError(f"ForkedRank runs {WORKER} only, not {args!r}")
        # In this process's working directory, as a spawned rank (a candidate's path is
        # relative to it).
        pid = _server(WORKER).ask(("rank", env, os.getcwd()), (stdout.fileno(),))
        super().__init__(WORKER, args, pid)


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


def run_python(
    args: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    capture_output: bool = False,
    text: bool = False,
    check: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run([sys.executable, *args], ...)``, forked from a server that imported torch.

    Args:
        args: ``["-c", code, *argv]``, ``["-m", module, *argv]`` or ``[script, *argv]``.
        cwd: the working directory (default: this process's).
        env: the environment (default: this process's).
        timeout: seconds before the run is killed and ``subprocess.TimeoutExpired`` raised.
        capture_output: keep stdout and stderr (else they go to this process's).
        text: decode them as UTF-8.
        check: raise ``subprocess.CalledProcessError`` on a non-zero status.

    Returns:
        What ``subprocess.run`` returns.
    """
    command = [sys.executable, *args]
    environment = dict(os.environ if env is None else env)
    where = str(cwd) if cwd is not None else os.getcwd()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        fds = (out.fileno(), err.fileno()) if capture_output else (1, 2)
        pid = _server(TORCH).ask(("python", list(args), where, environment), fds)
        child = _Forked(TORCH, command, pid)
        try:
            status = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        outputs: list[Any] = [None, None]
        if capture_output:
            for k, stream in enumerate((out, err)):
                stream.seek(0)
                data = stream.read()
                outputs[k] = data.decode(errors="replace") if text else data
    done = subprocess.CompletedProcess(command, status, outputs[0], outputs[1])
    if check:
        done.check_returncode()
    return done


# --- the servers ---------------------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _streams(stdout: int, stderr: int) -> None:
    """The child's stdin from ``/dev/null``, its stdout and stderr to the given descriptors."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if stdout != 1:
        os.dup2(stdout, 1)
    if stderr != 2:
        os.dup2(stderr, 2)
    for fd in {stdout, stderr} - {0, 1, 2}:
        os.close(fd)


def _run_rank(worker: types.ModuleType, env: dict[str, str], cwd: str) -> int:
    """In a forked child: the rank's folder, environment and ``sys.path``, then its ``main()``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [p for p in paths if p not in sys.path]
    worker.main()
    return 0


def _run_python(args: list[str], cwd: str, env: dict[str, str]) -> int:
    """In a forked child: what ``python *args`` would do in ``cwd`` with ``env``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if args[0] == "-c":
        first = ""
    elif args[0] == "-m":
        first = os.getcwd()
    else:
        first = os.path.dirname(os.path.abspath(args[0]))
    sys.path[:] = [first, *extra, *sys.path[1:]]  # the server's first entry is its folder
    try:
        if args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            runpy.run_path(args[0], run_name="__main__")
    finally:
        atexit._run_exitfuncs()
    return 0


def _child(run: Any, *arguments: Any) -> None:
    """Run ``run(*arguments)`` in the forked child and exit with Python's status; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = run(*arguments)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
            tb = tb.tb_next  # as a fresh interpreter shows it: from the run's own frames
        traceback.print_exception(type(exc), exc, tb)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(fd: int, preload: str) -> None:
    import importlib

    sock = socket.socket(fileno=fd)
    # Die with the test process (PR_SET_PDEATHSIG); the forked processes die with this one.
    # (The worker's own _die_with_parent is not imported here: the torch server imports torch
    # alone, so that its runs import the package themselves.)
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    module = importlib.import_module(preload)
    sock.send(pickle.dumps("ready"))
    while True:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
        if not data:
            return
        request = pickle.loads(data)
        try:
            if request[0] in ("rank", "python"):
                if _threads() != 1:
                    raise RuntimeError(f"the server holds {_threads()} threads: no fork")
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    if request[0] == "rank":
                        _streams(fds[0], fds[0])
                        _child(_run_rank, module, *request[1:])
                    _streams(fds[0], fds[1])
                    _child(_run_python, *request[1:])
                for passed in fds:
                    os.close(passed)
                answer: Any = pid
            else:
                done, status = os.waitpid(request[1], os.WNOHANG)
                answer = os.waitstatus_to_exitcode(status) if done else None
        except Exception as exc:  # told to the test, which raises it
            answer = exc
        sock.send(pickle.dumps(answer))


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2])
