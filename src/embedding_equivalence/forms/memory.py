"""The memory a dense one-hot (or bag-count) matrix would take, refused before it is built.

A dense matmul form multiplies an ``(N, V)`` one-hot (a bag form a ``(B, V)`` bag-count
matrix) with the table. [`check_dense_fits`][] compares its size with the memory available on
the device ([`available_memory_bytes`][]) and refuses it with [`OneHotTooLargeError`][],
naming the size, before anything is allocated.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch


class OneHotTooLargeError(MemoryError):
    """A dense one-hot matrix would not fit in memory; raised before anything is allocated.

    The message names the size of the one-hot and points to the forms that never build it
    ([`lookup_embedding`][embedding_equivalence.lookup_embedding] and
    [`sparse_matmul_embedding`][embedding_equivalence.sparse_matmul_embedding]).
    """


def format_bytes(n: float) -> str:
    """Format a byte count with binary prefixes, e.g. ``12.0 GiB``.

    Args:
        n: number of bytes.

    Returns:
        A short human-readable string.
    """
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")
    value = float(n)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


_BUDGET_ENV = "EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES"


@functools.lru_cache(maxsize=1)
def _small_allocation_bytes() -> int:
    """1/64 of the physical memory (read once): smaller one-hots need no memory check."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 64
    except (ValueError, OSError, AttributeError):
        return 0


def available_memory_bytes(device: torch.device) -> int | None:
    """Memory that a new allocation on ``device`` can use, or ``None`` when unknown.

    CPU: ``MemAvailable`` of ``/proc/meminfo`` (else the physical pages reported by
    ``sysconf``). CUDA: the free memory reported by ``torch.cuda.mem_get_info``. The
    environment variable ``EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES`` overrides both, which
    lets tests and CI impose a smaller budget.

    Args:
        device: where the allocation would happen.

    Returns:
        A byte count, or ``None`` when nothing is known (e.g. the ``meta`` device).
    """
    if override := os.environ.get(_BUDGET_ENV):
        return int(override)
    if device.type == "cpu":
        with contextlib.suppress(OSError), open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return None


#: The dense matrix a form would build, by what its rows are (``"ids"``, ``"bags"``), as a
#: refusal names it, and the forms that never build it.
_DENSE_MATRICES = {
    "ids": (
        "one-hot matrix",
        "lookup_embedding(input, weight, ...) or sparse_matmul_embedding(input, weight, ...), "
        "which never build the dense one-hot.",
    ),
    "bags": (
        "bag-count (multi-hot) matrix",
        "lookup_embedding_bag(input, weight, offsets, ...), which never builds it.",
    ),
}


def check_dense_fits(
    rows: int, what: str, num_embeddings: int, dtype: torch.dtype, device: torch.device, fn: str
) -> None:
    """Refuse a dense ``(rows, V)`` matrix that cannot fit, naming its size and the memory there.

    ``what`` names the rows (``"ids"``, ``"bags"``): the one-hot's message reads ``fn: the
    dense one-hot matrix would take 12.0 GiB (N ids x V rows x 4 bytes of torch.float32), more
    than the 8.0 GiB available on cpu; nothing was allocated. Use lookup_embedding(...) ...``.
    A matmul bag form refuses its ``(B, V)`` bag-count matrix with ``what="bags"``, the same
    budget with a message about bags.

    Args:
        rows: ``N``, the number of ids, or ``B``, the number of bags.
        what: ``"ids"`` or ``"bags"``.
        num_embeddings: ``V``, the number of rows of the weight.
        dtype: the dtype the matrix would be built in (the weight's).
        device: where it would be built.
        fn: name of the calling function, for the message.

    Raises:
        OneHotTooLargeError: ``rows * V * itemsize`` exceeds the memory available on
            ``device``.
    """
    needed = rows * num_embeddings * dtype.itemsize
    if needed == 0:
        return
    if needed <= _small_allocation_bytes() and not os.environ.get(_BUDGET_ENV):
        return  # far below the machine's memory: skip reading /proc/meminfo on every call
    if (available := available_memory_bytes(device)) is None or needed <= available:
        return
    matrix, instead = _DENSE_MATRICES[what]
    raise OneHotTooLargeError(
        f"{fn}: the dense {matrix} would take {format_bytes(needed)} ({rows} {what} x "
        f"{num_embeddings} rows x {dtype.itemsize} bytes of {dtype}), more than the "
        f"{format_bytes(available)} available on {device}; nothing was allocated. Use {instead}"
    )
