"""The machine a benchmark ran on: CPU, cores, affinity, memory, versions, device, load.

[`machine_info`][] is recorded in every result file; [`format_machine`][] is its one-line
form at the top of the printed output.
"""

from __future__ import annotations

import datetime
import os
import platform

import torch

from embedding_equivalence.forms.memory import format_bytes

from .timing import dtype_name

__all__ = ["format_machine", "load_average", "machine_info"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _affinity() -> str:
    try:
        cpus = sorted(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return "unknown"
    return ",".join(str(c) for c in cpus)


def _memory_total() -> str:
    try:
        return format_bytes(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return "unknown"


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return _cpu_model()
    return device.type


def machine_info(
    threads: int,
    dtype: torch.dtype,
    device: torch.device | None = None,
    clock: str | None = None,
) -> dict[str, str]:
    """Describe the machine and the settings of the run.

    Args:
        threads: the torch intra-op threads of the measurement.
        dtype: the weight's dtype.
        device: the device the cases run on (default the CPU).
        clock: the clock of the timings (``"wall"`` or ``"cpu"``), if known.

    Returns:
        Keys ``cpu`` (model name), ``cores`` (``os.cpu_count()``), ``affinity`` (the CPUs this
        process may run on), ``memory`` (physical), ``torch``, ``python``, ``platform``,
        ``device``, ``device_name`` (the GPU's name, or the CPU model), ``threads``,
        ``interop_threads``, ``dtype``, ``clock``, ``date`` (UTC, ISO 8601) and ``load`` (the
        1-minute load average now: above 0 other processes share the cores, and the timings
        are noisier).
    """
    device = device or torch.device("cpu")
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "affinity": _affinity(),
        "memory": _memory_total(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "device": str(device),
        "device_name": _device_name(device),
        "threads": str(threads),
        "interop_threads": str(torch.get_num_interop_threads()),
        "dtype": dtype_name(dtype),
        "clock": clock or "wall",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load": load_average(),
    }


def load_average() -> str:
    """The 1-minute load average now, e.g. ``"0.12"`` (``"unknown"`` where not available).

    Returns:
        The load average, formatted with two decimals.
    """
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (OSError, AttributeError):
        return "unknown"


def format_machine(info: dict[str, str]) -> str:
    """Format [`machine_info`][] as one line.

    Args:
        info: as returned by [`machine_info`][].

    Returns:
        E.g. ``"cpu: AMD EPYC (2 cores) | torch 2.4.0 | python 3.11.7 | threads: 1 |
        dtype: float32 | load average: 0.10"``.
    """
    device = info.get("device", "cpu")
    on = "" if device == "cpu" else f" | device: {device} ({info.get('device_name', '?')})"
    return (
        f"cpu: {info['cpu']} ({info['cores']} cores) | torch {info['torch']} | "
        f"python {info['python']}{on} | threads: {info['threads']} | dtype: {info['dtype']} | "
        f"load average: {info['load']}"
    )
