"""Peak memory: each case runs once in a fresh process, and its peak beyond the inputs is read.

On the CPU a server process ([`_memory_server`][], started by [`MemoryProbe`][]) imports
torch once and forks a child per case; the child runs [`measure_here`][], which reads the
resident set size before the call and the kernel's peak after it. On CUDA [`measure_here`][]
runs in this process and reads ``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from .sweep_forms import FORMS_BY_LABEL, SWEEP_FORMS, SweepForm
from .timing import DTYPES, Mode, build_inputs, dtype_name, error_str

__all__ = ["MemoryProbe", "measure_here", "memory_spec"]

_BUDGET_ENV = "EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES"


def _proc_status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _peak_rss_bytes() -> int | None:
    peak = _proc_status_kib("VmHWM")
    if peak is not None:
        return peak
    try:
        import resource
    except ImportError:  # Windows
        return None
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # Linux >= 4.0: reset the peak RSS (VmHWM) to the current RSS
    except OSError:
        return False
    return True


def memory_spec(
    form: SweepForm,
    mode: Mode,
    point: tuple[int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    seed: int,
    threads: int,
) -> dict[str, Any]:
    """The description of one case that [`measure_here`][] runs, as JSON-ready data.

    Args:
        form: the form.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        point: ``(N, V, D)``.
        dtype: the weight's dtype.
        device: where the case runs.
        seed: seed of the inputs (see
            [`build_inputs`][bench.timing.build_inputs]).
        threads: torch intra-op threads.

    Returns:
        Keys ``form`` (its label), ``mode``, ``num_ids``, ``vocab``, ``dim``, ``dtype``,
        ``device``, ``seed``, ``threads`` and ``budget`` (this process's one-hot memory budget,
        ``EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES``, which the measuring process applies too).
    """
    n, v, d = point
    return {
        "form": form.label,
        "mode": mode,
        "num_ids": n,
        "vocab": v,
        "dim": d,
        "dtype": dtype_name(dtype),
        "device": str(device),
        "seed": seed,
        "threads": threads,
        "budget": os.environ.get(_BUDGET_ENV),
    }


def measure_here(spec: dict[str, Any]) -> dict[str, Any]:
    """Build one case's inputs, run it once, and return its peak memory (in this process).

    Args:
        spec: as made by [`memory_spec`][].

    Returns:
        ``{"peak_bytes", "baseline_bytes", "method"}``, or ``{"error": message}`` where the peak
        cannot be read on this platform.
    """
    budget = spec.get("budget")
    if budget:
        os.environ[_BUDGET_ENV] = str(budget)
    else:
        os.environ.pop(_BUDGET_ENV, None)
    torch.set_num_threads(int(spec["threads"]))
    form = FORMS_BY_LABEL[spec["form"]]
    device = torch.device(spec["device"])
    dtype = DTYPES[spec["dtype"]]
    n, v, d = int(spec["num_ids"]), int(spec["vocab"]), int(spec["dim"])
    backward = spec["mode"] == "fwd+bwd"

    def inputs(
        n: int, v: int, d: int, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, weight = build_inputs(n, v, d, dtype, seed)
        ids, weight = ids.to(device), weight.to(device).requires_grad_(backward)
        return ids, weight, torch.ones(n, d, dtype=dtype, device=device)

    def run(ids: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor) -> None:
        out = form.impl.fn(ids, weight)
        if backward:
            out.backward(grad_out)

    # A warm-up call on a tiny input first: one-time lazy initialisation (the autograd engine,
    # kernel libraries, their buffers) is a cost of the process, not of this call.
    run(*inputs(2, 4, 2, 0))
    ids, weight, grad_out = inputs(n, v, d, int(spec["seed"]))

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        run(ids, weight, grad_out)
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        weight.grad = None
        return {
            "peak_bytes": int(peak),
            "baseline_bytes": int(base),
            "method": "torch.cuda.max_memory_allocated minus memory_allocated before the call",
        }
    base = _proc_status_kib("VmRSS")
    reset = base is not None and _reset_peak_rss()
    before = _peak_rss_bytes()
    run(ids, weight, grad_out)
    after = _peak_rss_bytes()
    if after is None or before is None:
        return {"error": "peak RSS is not available on this platform"}
    if reset and base is not None:
        return {
            "peak_bytes": after - base,
            "baseline_bytes": base,
            "method": "fresh process: VmHWM after clear_refs minus VmRSS before the call",
        }
    return {
        "peak_bytes": max(0, after - max(before, base or 0)),
        "baseline_bytes": before,
        "method": "fresh process: growth of ru_maxrss during the call",
    }


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        hint = " (out of memory?)" if sig == signal.SIGKILL else ""
        return f"killed by signal {sig}{hint}"
    return f"exit status {os.WEXITSTATUS(status)} without a result"


def _run_tiny(form: SweepForm, mode: Mode) -> None:
    ids, weight = build_inputs(2, 4, 2, torch.float32, 0)
    result = form.impl.fn(ids, weight.requires_grad_(mode == "fwd+bwd"))
    if mode == "fwd+bwd":
        result.backward(torch.ones_like(result))


def _memory_server() -> None:
    """Answer memory measurements: one JSON spec per line on stdin, one JSON line back.

    Each case runs in a child forked from this process, which has imported torch and run no
    tensor operation, so every case starts from the same fresh state and no case sees the
    allocations of another. Not for direct use: [`MemoryProbe`][] starts it.
    """
    import warnings

    # Initialise torch once here, so that no child pays for it: one thread (no OpenMP pool
    # exists when the children fork), and every form in every mode on a tiny input.
    torch.set_num_threads(1)
    for form in SWEEP_FORMS:
        for mode in form.modes:
            _run_tiny(form, mode)
    gc.collect()
    gc.freeze()  # the children do not copy the pages of these objects when the GC runs
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        spec = json.loads(line)
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():
            # Python >= 3.12 warns about fork() in a multi-threaded process; nothing here has
            # run a torch kernel, so there is no thread pool whose state the child could break.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()  # type: ignore[attr-defined]
        if pid == 0:  # the child: measure, send the result, exit without cleanup
            os.close(read_fd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # nothing else may write on the protocol's stdout
            try:
                result = measure_here(spec)
            except BaseException as exc:
                result = {"error": error_str(exc)}
            data = json.dumps(result).encode()
            try:
                while data:
                    data = data[os.write(write_fd, data) :]
            finally:
                os._exit(0)
        os.close(write_fd)
        chunks: list[bytes] = []
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        if chunks:
            answer = json.loads(b"".join(chunks))
        else:
            answer = {"error": f"the measuring process died: {_describe_exit(status)}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


#: What a measuring process runs first: the folder of the package ``bench`` (``benchmarks/``)
#: joins its ``sys.path``, as it does for ``python benchmarks/efficiency.py``.
_PATH = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
_SERVER = _PATH + "from bench.memory import _memory_server; _memory_server()"
_ONE_SHOT = (
    _PATH + "import json; from bench.memory import measure_here; "
    "print(json.dumps(measure_here(json.loads(sys.argv[1]))))"
)


class MemoryProbe:
    """Runs each case once in a fresh process and returns what [`measure_here`][] found.

    With ``os.fork`` (Linux, macOS): a server process imports torch once and forks a child per
    case. Without it: a new interpreter per case.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._ready = False

    def start(self) -> None:
        """Start the server without waiting for it (it imports torch, which takes seconds)."""
        if hasattr(os, "fork") and self._proc is None:
            self._ready = False
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its own process group: a timeout ends it and its child
            )

    def _wait_ready(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = None
            self.start()
        if not self._ready:
            if self._readline(300.0) != "ready":
                self._kill()
                raise RuntimeError("the memory-measuring process did not start")
            self._ready = True

    def _readline(self, timeout: float) -> str | None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = proc.stdout.readline()
        return line.strip() if line else None

    def measure(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Measure one case in a fresh process.

        Args:
            spec: as made by [`memory_spec`][].
            timeout: seconds before the measuring process is stopped.

        Returns:
            What [`measure_here`][] found, or ``{"error": message}`` if the case failed or
            took longer than ``timeout``.
        """
        if not hasattr(os, "fork"):
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _ONE_SHOT, json.dumps(spec)],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return {"error": f"no result within {timeout:.0f} s"}
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0 or not lines:
                return {"error": f"the measuring process failed (exit status {done.returncode})"}
            return json.loads(lines[-1])
        try:
            self._wait_ready()
        except RuntimeError as exc:
            return {"error": str(exc)}
        proc = self._proc
        assert proc is not None
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec) + "\n")
        proc.stdin.flush()
        line = self._readline(timeout)
        if line is None:
            self._kill()
            return {"error": f"no result within {timeout:.0f} s"}
        return json.loads(line)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the server and the case it runs
        except (OSError, AttributeError):
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def close(self) -> None:
        """Stop the server (it exits when its stdin closes)."""
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc = proc
            self._kill()
        if proc.stdout is not None:
            proc.stdout.close()
