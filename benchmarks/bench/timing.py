"""Timing: the modes and clocks, the inputs of a case, and interleaved ``Timer`` measurement.

[`time_group`][] times several [`Implementation`][] s in one mode, taking turns, and
returns one [`Measurement`][] each; [`build_inputs`][] makes the ids and the weight of a
case from a seeded generator. The sweep, the calibration and the form-vs-raw comparison all
time through here.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch.utils.benchmark import Timer

__all__ = [
    "CLOCKS",
    "DTYPES",
    "MODES",
    "Case",
    "Clock",
    "EmbedFn",
    "Implementation",
    "Measurement",
    "Mode",
    "Timing",
    "build_inputs",
    "dtype_name",
    "error_str",
    "time_group",
    "timer_fn",
]

Mode = Literal["fwd", "fwd+bwd"]
MODES: tuple[Mode, ...] = ("fwd", "fwd+bwd")

Clock = Literal["wall", "cpu"]
#: ``wall``: elapsed time (``time.perf_counter``, ``Timer``'s default). ``cpu``: CPU time of
#: the process (``time.process_time``, user + system of all its threads), which does not count
#: the time the process waits for a core on a shared machine; meaningful with one thread.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _cuda_wall_clock() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()


def timer_fn(clock: Clock, device: torch.device) -> Callable[[], float]:
    """The clock for ``Timer``: on CUDA always elapsed time after a synchronisation.

    Args:
        clock: ``"wall"`` or ``"cpu"`` (see [`CLOCKS`][]).
        device: where the timed calls run.

    Returns:
        A function that returns the time in seconds.
    """
    if device.type == "cuda":
        return _cuda_wall_clock
    return CLOCKS[clock]


@dataclass(frozen=True)
class Timing:
    """How to time: the threads, the clock, and how long and in how many rounds.

    Attributes:
        threads: torch intra-op threads for the measurement (``Timer``'s ``num_threads``).
        clock: what to measure, ``"wall"`` or ``"cpu"`` time (see [`CLOCKS`][]).
        min_run_time: seconds of measurement per case, over all rounds.
        rounds: number of interleaved rounds (see [`time_group`][]).
    """

    threads: int = 1
    clock: Clock = "wall"
    min_run_time: float = 0.5
    rounds: int = 3


EmbedFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: The dtypes a benchmark can run in, by the name ``--dtype`` takes.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def dtype_name(dtype: torch.dtype) -> str:
    """The name of ``dtype`` without ``torch.``, e.g. ``"float32"``.

    Args:
        dtype: a torch dtype.

    Returns:
        Its name.
    """
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Implementation:
    """One timed callable: a form of this package or a raw torch call it is compared with.

    Attributes:
        name: label in the table, e.g. ``"matmul_embedding"`` or ``"F.embedding"``.
        form: the package form this row belongs to (its own name for a form's row).
        is_form: True for the package's form, False for a raw torch baseline.
        fn: ``fn(ids, weight) -> (N, D)``, with 1-D int64 ``ids`` and a ``(V, D)`` weight.
        dense_one_hot: True if it builds an ``(N, V)`` dense one-hot (memory and time grow
            with ``V``).
    """

    name: str
    form: str
    is_form: bool
    fn: EmbedFn
    dense_one_hot: bool = False


@dataclass
class Measurement:
    """The timing of one implementation at one size, in one mode.

    Attributes:
        name: the implementation's label (see [`Implementation`][]).
        form: the package form the row belongs to.
        is_form: True for a package form, False for a raw torch baseline.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``, the number of ids.
        vocab: ``V``, the rows of the weight.
        dim: ``D``, the columns of the weight.
        dtype: the weight's dtype, e.g. ``"float32"``.
        threads: torch intra-op threads during the measurement.
        clock: ``"wall"`` or ``"cpu"`` (see [`CLOCKS`][]).
        median_ms: median time of one call in milliseconds, over every block of every round
            (``None`` if the call failed).
        iqr_ms: interquartile range of the per-call block times in milliseconds.
        runs: number of calls measured (warm-up calls excluded).
        round_ms: the median of each round in milliseconds; rounds are interleaved with the
            other implementations of the same form, so that round ``r`` of a form and round
            ``r`` of its raw call ran under the same machine load.
        error: ``"ExceptionType: message"`` if the call failed, else ``None``.
    """

    name: str
    form: str
    is_form: bool
    mode: Mode
    num_ids: int
    vocab: int
    dim: int
    dtype: str
    threads: int
    clock: Clock
    median_ms: float | None
    iqr_ms: float | None = None
    runs: int = 0
    round_ms: list[float] = field(default_factory=list)
    error: str | None = None


def build_inputs(
    num_ids: int, vocab: int, dim: int, dtype: torch.dtype, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Build the ids and the weight for one size from a generator seeded with ``seed``.

    The global RNG is not touched: the same arguments give the same tensors.

    Args:
        num_ids: ``N``, the number of ids.
        vocab: ``V``, the rows of the weight.
        dim: ``D``, the columns of the weight.
        dtype: floating dtype of the weight.
        seed: seed of the ``torch.Generator``.

    Returns:
        ``(ids, weight)``: 1-D int64 ids of length ``N`` uniform in ``[0, V)``, and a
        contiguous ``(V, D)`` standard-normal weight in ``dtype`` that does not require grad.
    """
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (num_ids,), generator=gen)
    weight = torch.randn(vocab, dim, generator=gen, dtype=torch.float32).to(dtype)
    return ids, weight


def _make_step(
    fn: EmbedFn, ids: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor | None
) -> Callable[[], None]:
    if grad_out is None:

        def forward() -> None:
            fn(ids, weight)

        return forward

    def forward_backward() -> None:
        weight.grad = None
        fn(ids, weight).backward(grad_out)

    return forward_backward


def error_str(exc: BaseException) -> str:
    """An exception as one line, ``"ExceptionType: first line of the message"``.

    Args:
        exc: the exception.

    Returns:
        The line.
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


_CAUGHT = (RuntimeError, NotImplementedError, MemoryError, TypeError, ValueError)

#: One thing to time: an implementation and its inputs, ``(impl, ids, weight)``.
Case = tuple[Implementation, torch.Tensor, torch.Tensor]


def time_group(cases: Sequence[Case], mode: Mode, timing: Timing) -> list[Measurement]:
    """Time several cases in one mode, interleaved, with ``torch.utils.benchmark.Timer``.

    ``"fwd"`` calls ``impl.fn(ids, weight)`` with a weight that does not require grad.
    ``"fwd+bwd"`` uses a copy of ``weight`` that requires grad (one copy per distinct weight,
    shared by the cases that use it) and times
    ``weight.grad = None; impl.fn(ids, weight).backward(ones)``, with a fixed upstream
    gradient of ones.

    The cases take turns for ``timing.rounds`` rounds (the order rotates every round), each
    measuring blocks of calls for ``min_run_time / rounds`` seconds: in the first round with
    ``Timer.blocked_autorange``, which warms up and chooses the number of calls per block, in
    later rounds with ``Timer.timeit`` and the same block size. Interleaving puts the cases
    that a ratio compares (a form and its raw call, or one form at two sizes) under the same
    load of a shared machine, which measuring one after the other does not. A call that raises
    (e.g. an operation not implemented for the dtype) gives a measurement with ``error`` set.

    Args:
        cases: ``(impl, ids, weight)`` triples: 1-D int64 ids and a ``(V, D)`` weight.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        timing: the threads, the clock, the seconds per case and the rounds (at least 1).

    Returns:
        One [`Measurement`][] per case, in the order of ``cases``.
    """
    threads, clock = timing.threads, timing.clock
    rounds = max(1, timing.rounds)
    per_round = timing.min_run_time / rounds
    timed: dict[int, torch.Tensor] = {}  # id(weight) -> the weight the calls receive
    timers: list[Timer] = []
    for impl, ids, weight in cases:
        key = id(weight)
        if key not in timed:
            timed[key] = (
                weight.detach() if mode == "fwd" else weight.detach().clone().requires_grad_(True)
            )
        grad_out = (
            None
            if mode == "fwd"
            else torch.ones(ids.shape[0], weight.shape[1], dtype=weight.dtype, device=weight.device)
        )
        timers.append(
            Timer(
                stmt="step()",
                globals={"step": _make_step(impl.fn, ids, timed[key], grad_out)},
                num_threads=threads,
                timer=timer_fn(clock, weight.device),
                label="embedding forms",
                sub_label=f"V={weight.shape[0]}",
                description=f"{impl.name} {mode}",
            )
        )
    count = len(cases)
    errors: dict[int, str] = {}
    times: list[list[float]] = [[] for _ in cases]
    round_ms: list[list[float]] = [[] for _ in cases]
    runs = [0] * count
    number: dict[int, int] = {}
    try:
        for r in range(rounds if count else 0):
            for i in [(j + r) % count for j in range(count)]:
                if i in errors:
                    continue
                try:
                    if i not in number:  # first round: warm up, choose the block size
                        m = timers[i].blocked_autorange(min_run_time=per_round)
                        number[i] = m.number_per_run
                        block = list(m.times)
                    else:  # later rounds: blocks of the same size, no second warm-up
                        block = []
                        start = time.perf_counter()
                        while not block or time.perf_counter() - start < per_round:
                            block.extend(timers[i].timeit(number[i]).times)
                except _CAUGHT as exc:
                    errors[i] = error_str(exc)
                    continue
                times[i].extend(block)
                round_ms[i].append(statistics.median(block) * 1e3)
                runs[i] += len(block) * number[i]
    finally:
        for w in timed.values():
            w.grad = None
    out: list[Measurement] = []
    for i, (impl, ids, weight) in enumerate(cases):
        measured = i not in errors and bool(times[i])
        if measured:
            t = torch.tensor(times[i], dtype=torch.float64)
            q = torch.quantile(t, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
        else:
            q = [float("nan")] * 3
        out.append(
            Measurement(
                name=impl.name,
                form=impl.form,
                is_form=impl.is_form,
                mode=mode,
                num_ids=ids.shape[0],
                vocab=weight.shape[0],
                dim=weight.shape[1],
                dtype=dtype_name(weight.dtype),
                threads=threads,
                clock=clock,
                median_ms=q[1] * 1e3 if measured else None,
                iqr_ms=(q[2] - q[0]) * 1e3 if measured else None,
                runs=runs[i] if measured else 0,
                round_ms=round_ms[i] if measured else [],
                error=errors.get(i),
            )
        )
    return out
