"""Input checks shared by every implementation, so that each raises the same error.

Every public function of the package calls :func:`check_embedding_args` (or the bag
variant) first. Nothing here clamps, casts or repairs an input: a bad input is refused
with a message that names the value and shows the correct call.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

__all__ = [
    "INDEX_DTYPES",
    "OneHotTooLargeError",
    "available_memory_bytes",
    "check_embedding_args",
    "check_ids_in_range",
    "check_one_hot_fits",
    "format_bytes",
    "normalize_padding_idx",
]

#: Index dtypes accepted by ``F.embedding`` (and so by every implementation here).
INDEX_DTYPES: tuple[torch.dtype, ...] = (torch.int64, torch.int32)


class OneHotTooLargeError(MemoryError):
    """A dense one-hot matrix would not fit in memory; raised before anything is allocated.

    The message names the size of the one-hot and points to the forms that never build it
    (:func:`~embedding_equivalence.lookup_embedding` and
    :func:`~embedding_equivalence.sparse_matmul_embedding`).
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


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _position_str(position: Sequence[int]) -> str:
    return "[" + ", ".join(str(p) for p in position) + "]"


def normalize_padding_idx(padding_idx: int | None, num_embeddings: int, fn: str) -> int | None:
    """Check ``padding_idx`` against ``[-V, V)`` and map a negative value to ``V + padding_idx``.

    Args:
        padding_idx: ``None`` or an integer row of the table; negative counts from the end.
        num_embeddings: ``V``, the number of rows of the weight.
        fn: name of the calling function, for the message.

    Returns:
        ``None`` or the non-negative row index.

    Raises:
        TypeError: ``padding_idx`` is not an integer.
        ValueError: ``padding_idx`` lies outside ``[-V, V)``.
    """
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, int):
        raise TypeError(
            f"{fn}: padding_idx must be an int or None, got {padding_idx!r} "
            f"({type(padding_idx).__name__})"
        )
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"{fn}: padding_idx={padding_idx} is outside [-{num_embeddings}, {num_embeddings}) "
            f"for a weight with {num_embeddings} rows; pass a row of the table, e.g. "
            f"padding_idx=0 or padding_idx=-1 (the last row)"
        )
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def check_ids_in_range(input: torch.Tensor, num_embeddings: int, fn: str) -> None:
    """Refuse ids outside ``[0, V)``, naming the first offending id and its position.

    The check reads the ids (a device synchronisation on CUDA); on the ``meta`` device there
    are no values and nothing is checked.

    Args:
        input: integer ids of any shape.
        num_embeddings: ``V``, the number of rows of the weight.
        fn: name of the calling function, for the message.

    Raises:
        IndexError: an id is negative or ``>= V``.
    """
    if input.numel() == 0 or input.device.type == "meta":
        return
    bad = (input < 0) | (input >= num_embeddings)
    if not bool(bad.any()):
        return
    first = bad.nonzero()[0].tolist() if input.dim() > 0 else []
    value = int(input[tuple(first)].item()) if first else int(input.item())
    where = f"input{_position_str(first)}" if first else "input (0-d)"
    if value < 0:
        hint = "negative ids are not accepted (they do not count from the end)"
    else:
        hint = f"pass ids < {num_embeddings}, or a weight with at least {value + 1} rows"
    raise IndexError(
        f"{fn}: {where} = {value} is out of range for a weight with {num_embeddings} rows; "
        f"ids must lie in [0, {num_embeddings - 1}]: {hint}"
    )


def check_embedding_args(
    input: object,
    weight: object,
    padding_idx: int | None,
    max_norm: float | None,
    norm_type: float,
    fn: str,
) -> int | None:
    """Validate the arguments of an embedding call in a fixed order, without the range check.

    Order: types of ``input`` and ``weight``, the weight's rank and dtype, devices,
    ``padding_idx``, ``max_norm`` and ``norm_type``. The range check of the ids
    (:func:`check_ids_in_range`) is separate so that a matmul form can refuse an oversized
    one-hot first, before reading any id.

    Args:
        input: the ids; must be an int64 or int32 tensor of any shape.
        weight: the table; must be a floating tensor of shape ``(V, D)``.
        padding_idx: ``None`` or a row in ``[-V, V)``.
        max_norm: ``None`` or a non-negative finite float.
        norm_type: the ``p`` of the p-norm used by ``max_norm``; must be positive.
        fn: name of the calling function, for the messages.

    Returns:
        ``padding_idx`` mapped into ``[0, V)`` (or ``None``).

    Raises:
        TypeError: ``input`` or ``weight`` is not a tensor, the ids are not integers, or
            the weight is not floating point.
        ValueError: the weight is not 2-D, the tensors are on different devices, or
            ``padding_idx``/``max_norm``/``norm_type`` is invalid.
    """
    if not isinstance(input, torch.Tensor):
        raise TypeError(
            f"{fn}: input must be a torch.Tensor of int64 or int32 ids, got "
            f"{type(input).__name__}; call {fn}(torch.as_tensor(ids), weight)"
        )
    if not isinstance(weight, torch.Tensor):
        raise TypeError(
            f"{fn}: weight must be a torch.Tensor of shape (num_embeddings, embedding_dim), "
            f"got {type(weight).__name__}"
        )
    if input.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"{fn}: input must hold integer ids of dtype torch.int64 or torch.int32, got "
            f"{input.dtype}; convert them with {fn}(input.long(), weight)"
            + (
                " (floating ids are refused rather than truncated)"
                if input.dtype.is_floating_point
                else ""
            )
        )
    if weight.dim() != 2:
        raise ValueError(
            f"{fn}: weight must be 2-D of shape (num_embeddings, embedding_dim), got shape "
            f"{_shape_str(weight.shape)}"
            + (
                f"; for a single row pass weight.unsqueeze(0) of shape (1, {weight.shape[0]})"
                if weight.dim() == 1
                else ""
            )
        )
    if not weight.dtype.is_floating_point:
        raise TypeError(
            f"{fn}: weight must be floating point (float16, bfloat16, float32 or float64), got "
            f"{weight.dtype}; call {fn}(input, weight.float())"
        )
    if input.device != weight.device:
        raise ValueError(
            f"{fn}: input is on {input.device} but weight is on {weight.device}; move the ids "
            f"to the weight's device: {fn}(input.to({str(weight.device)!r}), weight)"
        )
    num_embeddings = weight.shape[0]
    padding = normalize_padding_idx(padding_idx, num_embeddings, fn)
    if max_norm is not None:
        if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)):
            raise TypeError(f"{fn}: max_norm must be a float or None, got {max_norm!r}")
        if not (math.isfinite(max_norm) and max_norm >= 0):
            raise ValueError(
                f"{fn}: max_norm={max_norm!r} must be a finite non-negative float (rows whose "
                f"norm exceeds it are rescaled to it), e.g. max_norm=1.0"
            )
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"{fn}: norm_type must be a float, got {norm_type!r}")
    if not norm_type > 0:
        raise ValueError(
            f"{fn}: norm_type={norm_type!r} must be positive (the p of the p-norm), "
            f"e.g. norm_type=2.0 or norm_type=float('inf')"
        )
    return padding


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
    override = os.environ.get("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES")
    if override:
        return int(override)
    if device.type == "cpu":
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return None


def check_one_hot_fits(
    num_ids: int, num_embeddings: int, dtype: torch.dtype, device: torch.device, fn: str
) -> None:
    """Refuse a dense ``(N, V)`` one-hot that cannot fit, before anything is allocated.

    Args:
        num_ids: ``N``, the number of ids (``input.numel()``).
        num_embeddings: ``V``, the number of rows of the weight.
        dtype: the dtype the one-hot would be built in (the weight's).
        device: where it would be built.
        fn: name of the calling function, for the message.

    Raises:
        OneHotTooLargeError: ``N * V * itemsize`` exceeds the memory available on ``device``.
    """
    itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
    needed = num_ids * num_embeddings * itemsize
    if needed == 0:
        return
    available = available_memory_bytes(device)
    if available is None or needed <= available:
        return
    raise OneHotTooLargeError(
        f"{fn}: the dense one-hot matrix would take {format_bytes(needed)} "
        f"({num_ids} ids x {num_embeddings} rows x {itemsize} bytes of {dtype}), more than the "
        f"{format_bytes(available)} available on {device}; nothing was allocated. Use "
        f"lookup_embedding(input, weight, ...) or sparse_matmul_embedding(input, weight, ...), "
        f"which never build the dense one-hot."
    )
