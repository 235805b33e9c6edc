"""Benchmark: the lookup and the one-hot matmul, time and peak memory, beside a roofline model.

Run it as ``embedding-equivalence bench`` or ``python -m embedding_equivalence.bench``
(``--help`` lists the options; ``--quick`` takes well under a minute).

**The sweep** (the default). Three one-at-a-time sweeps around a base point ``(N, V, D)``:
``V`` over ``--vocab`` (default 1,024 to 50,257, and 262,144 where the one-hot fits) at the base
``N`` and ``D``; ``D`` over ``--dims`` and ``N`` over ``--ns`` at ``V = --base-vocab``. At every
point it times five forms, forward and forward+backward:

- ``lookup_embedding`` (dense gradient) and ``lookup_embedding(sparse=True)`` (sparse gradient,
  forward+backward only: its forward is the same call);
- ``matmul_embedding`` (dense one-hot ``@ W``) and ``linear_embedding``
  (``F.linear(one_hot, W.T)``), both with a dense gradient;
- ``sparse_matmul_embedding`` (sparse COO one-hot ``@ W``, dense gradient).

Timing: ``torch.utils.benchmark.Timer.blocked_autorange`` with the intra-op threads fixed by
``--threads`` (default 1) and recorded; the median of the blocks is reported. With one thread on
the CPU the default clock is the process's CPU time (``time.process_time``), which does not count
the time spent waiting for a core on a shared machine; ``--clock wall`` gives elapsed time (always
used on CUDA, synchronised). A dense form whose one-hot cannot fit
(:func:`~embedding_equivalence._validation.check_one_hot_fits`) is skipped with a note.

**Calibration and the model.** Before the sweep the machine is measured: the copy bandwidth
``B(x)`` (``dst.copy_(src)``, ``x`` = bytes read + written, for ``x`` on a grid of powers of 4
that spans the sizes the sweep needs), the zero-fill bandwidth ``Z(x)`` (``torch.zeros`` of ``x``
bytes: allocation, first touch and memset, as every call pays for a fresh buffer), and the GEMM
throughput ``F`` at each ``(N, D)`` of the sweep (``(N, K) @ (K, D)`` and, for the backward,
``(N, K).T @ (N, D)``, ``K = min(4096, V)``). Between grid points bandwidths are interpolated
log-log. With ``s`` the itemsize of the dtype, the model times (:func:`model_time`) are:

=========================  =============================================================
lookup, fwd                ``2·N·D·s / B``: read ``N`` rows, write ``N`` rows (the roofline
                           of a gather)
lookup, fwd+bwd dense      fwd ``+ V·D·s / Z`` (zeroed ``V x D`` gradient)
                           ``+ 3·N·D·s / B`` (scatter-add: read ``G``, read+write rows)
lookup, fwd+bwd sparse     fwd only: the sparse gradient's values and indices are views of
                           ``G`` and the ids, so no ``N x D`` bytes move
one-hot matmul, fwd        ``N·V·s / Z`` (build the one-hot) ``+ 2·N·V·D / F_fwd``
one-hot matmul, fwd+bwd    fwd ``+ 2·N·V·D / F_bwd`` (``one_hot.T @ G``)
linear                     as the one-hot matmul
sparse matmul, fwd         as the lookup (a sparse product with one 1 per row is a gather)
sparse matmul, fwd+bwd     as the lookup with a dense gradient
=========================  =============================================================

Each bandwidth is taken at the byte count of its term (``B(2·N·D·s)`` for the gather), so the
model follows the cache level that a working set of that size lives in. The model has no fixed
per-call cost (dispatch, validation, autograd), so very small cases run slower than it says.

**Peak memory.** On CUDA: ``torch.cuda.max_memory_allocated`` after
``reset_peak_memory_stats``, minus the memory allocated before the call. On the CPU: every case
runs once in a fresh process (forked from a server process that has imported torch and run
nothing else); it warms up on a tiny input (so that one-time lazy initialisation is not counted),
builds the inputs, reads its resident set size, resets the kernel's peak
(``/proc/self/clear_refs``), runs the case, and reports peak RSS (``VmHWM``) minus the RSS before.
Where that reset is not available, the growth of ``ru_maxrss`` is reported instead. The analytic
memory beside it (:func:`analytic_memory_bytes`) counts the output ``N·D·s``, the one-hot
``N·V·s``, a dense gradient ``V·D·s`` and a sparse one-hot ``N·(2·8 + s)``.

**Outputs** (``--out DIR``, default ``bench-results/``): ``bench.json`` (keys ``schema``,
``machine``, ``config``, ``calibration``, ``model``, ``headline``, ``results``, ``notes``),
``bench.csv`` (one row per case, the columns of :data:`CSV_COLUMNS`), and, with matplotlib
(``pip install 'embedding-equivalence[bench]'``), ``time_vs_vocab.svg``,
``memory_vs_vocab.svg`` and ``ratio_vs_model.svg`` (the one-hot/lookup time ratio, measured and
modelled). The machine record holds the CPU model, cores, affinity, threads, torch and Python
versions, the device and its name, the dtype, the clock, the date and the load average.

**The form-vs-raw comparison** (``--compare``): for every ``V`` each form beside the raw torch
call(s) it wraps, with ratios from interleaved rounds, and three targets:
(a) ``lookup_embedding`` forward+backward within 10% of ``F.embedding``;
(b) ``matmul_embedding`` no slower than the naive scatter one-hot (ratio <= 1.05, for noise);
(c) ``sparse_matmul_embedding`` forward at most 2x slower at the largest ``V`` than at the
smallest. The raw calls build their one-hot inside the timed statement, as the forms do, so the
ratio is the cost of the form's wrapping (validation, range check, memory check, reshapes).

The ids and the weight come from a ``torch.Generator`` seeded by ``--seed``; the global RNG is
never used.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import gc
import itertools
import json
import math
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

from .forms.lookup import lookup_embedding
from .forms.matmul import linear_embedding, matmul_embedding, sparse_matmul_embedding
from .forms.validation import (
    OneHotTooLargeError,
    available_memory_bytes,
    check_one_hot_fits,
    format_bytes,
)
from ._usage import UsageError

__all__ = [
    "CSV_COLUMNS",
    "HEADLINE_COLUMNS",
    "IMPLEMENTATIONS",
    "MODEL_FORMULAS",
    "SWEEP_FORMS",
    "Calibration",
    "CaseResult",
    "Implementation",
    "Measurement",
    "ModelTime",
    "SweepForm",
    "SweepReport",
    "TargetResult",
    "analytic_memory_bytes",
    "build_inputs",
    "calibrate",
    "evaluate_targets",
    "format_calibration",
    "format_headline",
    "format_machine",
    "format_sweep_table",
    "format_table",
    "format_targets",
    "gemm_k",
    "headline_rows",
    "machine_info",
    "main",
    "measure_peak_memory",
    "model_time",
    "run_benchmark",
    "run_sweep",
    "sweep_points",
    "time_case",
    "time_group",
    "write_outputs",
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


def _timer_fn(clock: Clock, device: torch.device) -> Callable[[], float]:
    """The clock for ``Timer``: on CUDA always elapsed time after a synchronisation."""
    if device.type == "cuda":
        return _cuda_wall_clock
    return CLOCKS[clock]


EmbedFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


# --------------------------------------------------------------------------------------------
# The raw torch calls that the forms wrap. Each builds its one-hot inside the timed call.
# --------------------------------------------------------------------------------------------


def _raw_embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids, weight)


def _scatter_one_hot(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    one_hot = torch.zeros(ids.shape[0], weight.shape[0], dtype=weight.dtype, device=ids.device)
    return one_hot.scatter_(1, ids[:, None], 1)


def _raw_scatter_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _scatter_one_hot(ids, weight) @ weight


def _raw_f_one_hot_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight


def _raw_linear(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.linear(_scatter_one_hot(ids, weight), weight.t())


def _raw_sparse_mm(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n = ids.shape[0]
    indices = torch.stack([torch.arange(n, device=ids.device), ids])
    values = torch.ones(n, dtype=weight.dtype, device=ids.device)
    one_hot = torch.sparse_coo_tensor(indices, values, (n, weight.shape[0]), check_invariants=False)
    return torch.sparse.mm(one_hot, weight)


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


#: Every implementation, grouped by form; each form first, then its raw baselines.
IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("lookup_embedding", "lookup_embedding", True, lookup_embedding),
    Implementation("F.embedding", "lookup_embedding", False, _raw_embedding),
    Implementation("matmul_embedding", "matmul_embedding", True, matmul_embedding, True),
    Implementation("scatter one-hot @ W", "matmul_embedding", False, _raw_scatter_matmul, True),
    Implementation(
        "F.one_hot.to(dtype) @ W", "matmul_embedding", False, _raw_f_one_hot_matmul, True
    ),
    Implementation("linear_embedding", "linear_embedding", True, linear_embedding, True),
    Implementation("F.linear(one-hot, W.t())", "linear_embedding", False, _raw_linear, True),
    Implementation(
        "sparse_matmul_embedding", "sparse_matmul_embedding", True, sparse_matmul_embedding
    ),
    Implementation("sparse.mm(coo one-hot, W)", "sparse_matmul_embedding", False, _raw_sparse_mm),
)


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    """The timing of one implementation at one size, in one mode.

    Attributes:
        name: the implementation's label (see :class:`Implementation`).
        form: the package form the row belongs to.
        is_form: True for a package form, False for a raw torch baseline.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``, the number of ids.
        vocab: ``V``, the rows of the weight.
        dim: ``D``, the columns of the weight.
        dtype: the weight's dtype, e.g. ``"float32"``.
        threads: torch intra-op threads during the measurement.
        clock: ``"wall"`` or ``"cpu"`` (see :data:`CLOCKS`).
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


@dataclass
class TargetResult:
    """Whether one performance target holds, with the numbers that decide it.

    Attributes:
        key: short identifier, ``"a"``, ``"b"`` or ``"c"``.
        description: what the target states.
        holds: True if it holds, False if not, ``None`` if it could not be measured.
        ratio: the deciding ratio (the worst one when several sizes are measured).
        limit: the largest ratio for which the target holds.
        details: one string per measured size, e.g.
            ``"V=1024 fwd+bwd: 1.230 ms vs 1.200 ms, ratio 1.025 (median of per-round ratios)"``.
    """

    key: str
    description: str
    holds: bool | None
    ratio: float | None
    limit: float
    details: list[str] = field(default_factory=list)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


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


def _error_str(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


_CAUGHT = (RuntimeError, NotImplementedError, MemoryError, TypeError, ValueError)

#: One thing to time: an implementation and its inputs, ``(impl, ids, weight)``.
Case = tuple[Implementation, torch.Tensor, torch.Tensor]


def time_group(
    cases: Sequence[Case],
    mode: Mode,
    *,
    threads: int = 1,
    min_run_time: float = 0.5,
    rounds: int = 3,
    clock: Clock = "wall",
) -> list[Measurement]:
    """Time several cases in one mode, interleaved, with ``torch.utils.benchmark.Timer``.

    ``"fwd"`` calls ``impl.fn(ids, weight)`` with a weight that does not require grad.
    ``"fwd+bwd"`` uses a copy of ``weight`` that requires grad (one copy per distinct weight,
    shared by the cases that use it) and times
    ``weight.grad = None; impl.fn(ids, weight).backward(ones)``, with a fixed upstream
    gradient of ones.

    The cases take turns for ``rounds`` rounds (the order rotates every round), each measuring
    blocks of calls for ``min_run_time / rounds`` seconds: in the first round with
    ``Timer.blocked_autorange``, which warms up and chooses the number of calls per block, in
    later rounds with ``Timer.timeit`` and the same block size. Interleaving puts the cases
    that a ratio compares (a form and its raw call, or one form at two sizes) under the same
    load of a shared machine, which measuring one after the other does not. A call that raises
    (e.g. an operation not implemented for the dtype) gives a measurement with ``error`` set.

    Args:
        cases: ``(impl, ids, weight)`` triples: 1-D int64 ids and a ``(V, D)`` weight.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        threads: torch intra-op threads for the measurement (``Timer``'s ``num_threads``).
        min_run_time: seconds of measurement per case, over all rounds.
        rounds: number of interleaved rounds (at least 1).
        clock: what to measure, ``"wall"`` or ``"cpu"`` time (see :data:`CLOCKS`).

    Returns:
        One :class:`Measurement` per case, in the order of ``cases``.
    """
    rounds = max(1, rounds)
    per_round = min_run_time / rounds
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
                timer=_timer_fn(clock, weight.device),
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
                    errors[i] = _error_str(exc)
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
                dtype=_dtype_name(weight.dtype),
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


def time_case(
    impl: Implementation,
    ids: torch.Tensor,
    weight: torch.Tensor,
    mode: Mode,
    *,
    threads: int = 1,
    min_run_time: float = 0.5,
    rounds: int = 1,
    clock: Clock = "wall",
) -> Measurement:
    """Time one implementation in one mode; see :func:`time_group` for the method.

    Args:
        impl: what to time.
        ids: 1-D int64 ids.
        weight: ``(V, D)`` weight.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        threads: torch intra-op threads for the measurement.
        min_run_time: seconds of measurement, over all rounds.
        rounds: number of rounds.
        clock: ``"wall"`` or ``"cpu"`` time (see :data:`CLOCKS`).

    Returns:
        The :class:`Measurement`.
    """
    (m,) = time_group(
        [(impl, ids, weight)],
        mode,
        threads=threads,
        min_run_time=min_run_time,
        rounds=rounds,
        clock=clock,
    )
    return m


def run_benchmark(
    *,
    num_ids: int,
    dim: int,
    vocabs: Sequence[int],
    dtype: torch.dtype,
    threads: int,
    seed: int,
    min_run_time: float,
    rounds: int = 3,
    clock: Clock = "wall",
    implementations: Iterable[Implementation] = IMPLEMENTATIONS,
    progress: Callable[[str], None] | None = None,
    device: torch.device | str = "cpu",
) -> list[Measurement]:
    """Time every implementation in both modes at every vocabulary size.

    One group per form and mode: the form and its raw torch calls at every ``V``, timed
    interleaved by :func:`time_group`, so that both the ``form / raw`` ratios and the ratios
    between sizes compare measurements taken under the same machine load. All
    implementations at one ``V`` see the same ids and weight (built by :func:`build_inputs`
    from ``seed + V``).

    Args:
        num_ids: ``N``, the number of ids.
        dim: ``D``, the embedding dimension.
        vocabs: the vocabulary sizes ``V``.
        dtype: floating dtype of the weight.
        threads: torch intra-op threads.
        seed: base seed of the inputs.
        min_run_time: seconds of measurement per implementation, size and mode.
        rounds: interleaved rounds per group (see :func:`time_group`).
        clock: ``"wall"`` or ``"cpu"`` time (see :data:`CLOCKS`).
        implementations: what to time; by default :data:`IMPLEMENTATIONS`.
        progress: called with a one-line note before each group (e.g. to print to stderr).
        device: where the inputs live and the calls run.

    Returns:
        One :class:`Measurement` per (V, implementation, mode), in that order.
    """
    impls = list(implementations)
    inputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for v in vocabs:
        ids, weight = build_inputs(num_ids, v, dim, dtype, seed + v)
        inputs[v] = (ids.to(device), weight.to(device))
    groups: dict[str, list[Implementation]] = {}
    for impl in impls:
        groups.setdefault(impl.form, []).append(impl)
    found: dict[tuple[int, str, Mode], Measurement] = {}
    for form, members in groups.items():
        for mode in MODES:
            if progress is not None:
                progress(f"{mode} {form} and {len(members) - 1} raw call(s) at V={list(vocabs)}")
            cases = [(impl, *inputs[v]) for v in vocabs for impl in members]
            measured = time_group(
                cases,
                mode,
                threads=threads,
                min_run_time=min_run_time,
                rounds=rounds,
                clock=clock,
            )
            for m in measured:
                found[(m.vocab, m.name, mode)] = m
    return [found[(v, impl.name, mode)] for v in vocabs for impl in impls for mode in MODES]


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def _find(
    measurements: Iterable[Measurement], name: str, vocab: int, mode: Mode
) -> Measurement | None:
    for m in measurements:
        if m.name == name and m.vocab == vocab and m.mode == mode:
            return m
    return None


def _ms(m: Measurement | None) -> str:
    if m is None:
        return "-"
    if m.median_ms is None:
        return "error"
    return f"{m.median_ms:.3f}"


def _ratio(
    num: Measurement | None, den: Measurement | None, *, paired: bool = True
) -> float | None:
    """``num / den``: the median of the per-round ratios if ``paired``, else of the medians.

    Paired ratios compare round ``r`` with round ``r``, which ran in the same interleaved
    sweep (see :func:`time_group`), so a change of machine load between rounds cancels out.
    Measurements from different groups fall back to the ratio of the medians.
    """
    if num is None or den is None or num.median_ms is None or den.median_ms is None:
        return None
    same_group = num.form == den.form and num.mode == den.mode
    if paired and same_group and num.round_ms and len(num.round_ms) == len(den.round_ms):
        pairs = list(zip(num.round_ms, den.round_ms, strict=True))
        if all(d > 0 for _, d in pairs):
            return statistics.median(n / d for n, d in pairs)
    if den.median_ms == 0:
        return None
    return num.median_ms / den.median_ms


def _ratio_str(r: float | None) -> str:
    return "" if r is None else f"{r:.3f}"


def format_table(measurements: Sequence[Measurement]) -> str:
    """Format the measurements as a plain-text table, one row per (V, implementation).

    Columns: forward and forward+backward median in ms; on the row of a raw torch call, the
    ratio ``form / raw`` of the form it is compared with (above 1: the form is slower), the
    median of the per-round ratios of the interleaved rounds. Failed cases show ``error`` and
    their messages are listed under the table.

    Args:
        measurements: as returned by :func:`run_benchmark`.

    Returns:
        The table, without a trailing newline.
    """
    header = (
        f"{'V':>6}  {'implementation':<32}{'fwd ms':>11}{'fwd+bwd ms':>12}"
        f"{'form/raw fwd':>14}{'form/raw f+b':>14}"
    )
    lines = [header, "-" * len(header)]
    errors: list[str] = []
    vocabs = list(dict.fromkeys(m.vocab for m in measurements))
    names = list(dict.fromkeys(m.name for m in measurements))
    for vocab in vocabs:
        first = True
        for name in names:
            fwd = _find(measurements, name, vocab, "fwd")
            fb = _find(measurements, name, vocab, "fwd+bwd")
            ref = fwd or fb
            if ref is None:
                continue
            r_fwd = r_fb = None
            if not ref.is_form:
                r_fwd = _ratio(_find(measurements, ref.form, vocab, "fwd"), fwd)
                r_fb = _ratio(_find(measurements, ref.form, vocab, "fwd+bwd"), fb)
            label = name if ref.is_form else f"  vs {name}"
            lines.append(
                f"{vocab if first else '':>6}  {label:<32}{_ms(fwd):>11}{_ms(fb):>12}"
                f"{_ratio_str(r_fwd):>14}{_ratio_str(r_fb):>14}"
            )
            first = False
            errors.extend(
                f"V={vocab} {m.name} {m.mode}: {m.error}" for m in (fwd, fb) if m and m.error
            )
        lines.append("")
    lines.append(
        "form/raw: median over the interleaved rounds of (form time / raw time) in that round; "
        "> 1 means the form is slower"
    )
    if errors:
        lines.append("errors:")
        lines.extend(f"  {e}" for e in errors)
    return "\n".join(lines).rstrip()


def _ratio_detail(
    label: str, num: Measurement | None, den: Measurement | None, *, paired: bool = True
) -> tuple[float | None, str]:
    r = _ratio(num, den, paired=paired)
    how = "median of per-round ratios" if paired else "ratio of medians"
    return r, f"{label}: {_ms(num)} ms vs {_ms(den)} ms, ratio {_ratio_str(r) or 'n/a'} ({how})"


def evaluate_targets(measurements: Sequence[Measurement]) -> list[TargetResult]:
    """Decide the three performance targets from the measurements.

    (a) ``lookup_embedding`` forward+backward / ``F.embedding`` forward+backward <= 1.10 at
    every ``V``; (b) ``matmul_embedding`` / scatter one-hot matmul <= 1.05 in both modes at
    every ``V`` (exact parity, with 5% for measurement noise); (c) ``sparse_matmul_embedding``
    forward at the largest ``V`` / at the smallest ``V`` <= 2. The ratio reported is the worst.

    Args:
        measurements: as returned by :func:`run_benchmark`.

    Returns:
        One :class:`TargetResult` per target, in the order a, b, c.
    """
    vocabs = sorted({m.vocab for m in measurements})

    def decide(
        key: str, description: str, limit: float, pairs: list[tuple[float | None, str]]
    ) -> TargetResult:
        ratios = [r for r, _ in pairs if r is not None]
        details = [d for _, d in pairs]
        if not ratios or len(ratios) < len(pairs):
            return TargetResult(key, description, None, max(ratios, default=None), limit, details)
        worst = max(ratios)
        return TargetResult(key, description, worst <= limit, worst, limit, details)

    a = [
        _ratio_detail(
            f"V={v} fwd+bwd",
            _find(measurements, "lookup_embedding", v, "fwd+bwd"),
            _find(measurements, "F.embedding", v, "fwd+bwd"),
        )
        for v in vocabs
    ]
    b = [
        _ratio_detail(
            f"V={v} {mode}",
            _find(measurements, "matmul_embedding", v, mode),
            _find(measurements, "scatter one-hot @ W", v, mode),
        )
        for v in vocabs
        for mode in MODES
    ]
    c: list[tuple[float | None, str]] = []
    if len(vocabs) < 2:
        c.append((None, "needs at least two vocabulary sizes (--vocab)"))
    else:
        c.append(
            _ratio_detail(
                f"fwd V={vocabs[-1]} / V={vocabs[0]}",
                _find(measurements, "sparse_matmul_embedding", vocabs[-1], "fwd"),
                _find(measurements, "sparse_matmul_embedding", vocabs[0], "fwd"),
            )
        )
    return [
        decide("a", "lookup_embedding fwd+bwd within 10% of F.embedding", 1.10, a),
        decide(
            "b",
            "matmul_embedding no slower than the naive scatter one-hot @ W (5% noise allowed)",
            1.05,
            b,
        ),
        decide(
            "c",
            "sparse_matmul_embedding fwd at most 2x from smallest to largest V",
            2.0,
            c,
        ),
    ]


def format_targets(results: Sequence[TargetResult]) -> str:
    """Format the targets, one block each: verdict, worst ratio against the limit, details.

    Args:
        results: as returned by :func:`evaluate_targets`.

    Returns:
        The text, without a trailing newline.
    """
    lines: list[str] = []
    for t in results:
        verdict = {True: "HOLDS", False: "FAILS", None: "NOT MEASURED"}[t.holds]
        ratio = "n/a" if t.ratio is None else f"{t.ratio:.3f}"
        lines.append(f"({t.key}) {t.description}: {verdict} (worst ratio {ratio} <= {t.limit}?)")
        lines.extend(f"      {d}" for d in t.details)
    return "\n".join(lines)


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
        "dtype": _dtype_name(dtype),
        "clock": clock or "wall",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load": _load_average(),
    }


def _load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (OSError, AttributeError):
        return "unknown"


def format_machine(info: dict[str, str]) -> str:
    """Format :func:`machine_info` as one line.

    Args:
        info: as returned by :func:`machine_info`.

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


# --------------------------------------------------------------------------------------------
# The sweep: the forms, the calibration, the model, the memory measurement
# --------------------------------------------------------------------------------------------


def _lookup_sparse_grad(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return lookup_embedding(ids, weight, sparse=True)


@dataclass(frozen=True)
class SweepForm:
    """One form that the sweep times.

    Attributes:
        label: its name in the tables and plots, e.g. ``"one-hot matmul"``.
        impl: the call (``impl.name`` is the function, e.g. ``"matmul_embedding"``).
        model: the key of its model in :data:`MODEL_FORMULAS`.
        grad: the layout of the weight's gradient in forward+backward, ``"dense"`` or
            ``"sparse"``.
        modes: the modes it is timed in.
    """

    label: str
    impl: Implementation
    model: str
    grad: str
    modes: tuple[Mode, ...] = MODES


#: The forms of the sweep, in the order of the tables.
SWEEP_FORMS: tuple[SweepForm, ...] = (
    SweepForm(
        "lookup",
        Implementation("lookup_embedding", "lookup_embedding", True, lookup_embedding),
        "lookup",
        "dense",
    ),
    SweepForm(
        "lookup (sparse grad)",
        Implementation(
            "lookup_embedding(sparse=True)", "lookup_embedding", True, _lookup_sparse_grad
        ),
        "lookup_sparse_grad",
        "sparse",
        ("fwd+bwd",),
    ),
    SweepForm(
        "one-hot matmul",
        Implementation("matmul_embedding", "matmul_embedding", True, matmul_embedding, True),
        "one_hot",
        "dense",
    ),
    SweepForm(
        "linear",
        Implementation("linear_embedding", "linear_embedding", True, linear_embedding, True),
        "linear",
        "dense",
    ),
    SweepForm(
        "sparse matmul",
        Implementation(
            "sparse_matmul_embedding", "sparse_matmul_embedding", True, sparse_matmul_embedding
        ),
        "sparse_mm",
        "dense",
    ),
)
_FORMS_BY_LABEL = {f.label: f for f in SWEEP_FORMS}

_GATHER = "2*N*D*s / B(2*N*D*s)"
_DENSE_GRAD = " + V*D*s / Z(V*D*s) + 3*N*D*s / B(3*N*D*s)"
_ONE_HOT = "N*V*s / Z(N*V*s) + 2*N*V*D / F_fwd(N, D)"
_ONE_HOT_BWD = " + 2*N*V*D / F_bwd(N, D)"

#: The model of each form and mode, as text (``s``: itemsize; ``B``, ``Z``: copy and zero-fill
#: bandwidth at that many bytes; ``F``: GEMM throughput at ``(N, D)``). See :func:`model_time`.
MODEL_FORMULAS: dict[str, dict[str, str]] = {
    "lookup": {"fwd": _GATHER, "fwd+bwd": _GATHER + _DENSE_GRAD},
    "lookup_sparse_grad": {"fwd": _GATHER, "fwd+bwd": _GATHER},
    "one_hot": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "linear": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "sparse_mm": {"fwd": _GATHER, "fwd+bwd": _GATHER + _DENSE_GRAD},
}


def _interp_loglog(points: Sequence[tuple[int, float]], x: float) -> float:
    """``y(x)`` interpolated linearly in ``log x``/``log y``, constant beyond the ends."""
    if not points:
        raise ValueError("no calibration points")
    pts = sorted(points)
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if x0 <= x <= x1:
            t = math.log(x / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass
class Calibration:
    """What the model needs to know about the machine, measured by :func:`calibrate`.

    Attributes:
        copy: ``(bytes, bytes/s)`` points: ``dst.copy_(src)`` moving ``bytes`` (read + write).
        zero_fill: ``(bytes, bytes/s)`` points: ``torch.zeros`` of ``bytes`` (allocation, first
            touch of the pages, memset).
        gemm: ``(N, K, D, "fwd" | "bwd") -> FLOP/s``: ``(N, K) @ (K, D)`` for ``"fwd"``,
            ``(N, K).T @ (N, D)`` for ``"bwd"``.
        overhead: ``(model, mode) -> seconds``: the time of the form's call on a tiny input
            (one id, two rows, one column), its fixed cost per call.
        seconds: how long the calibration took.
    """

    copy: list[tuple[int, float]]
    zero_fill: list[tuple[int, float]]
    gemm: dict[tuple[int, int, int, str], float] = field(default_factory=dict)
    overhead: dict[tuple[str, str], float] = field(default_factory=dict)
    seconds: float = 0.0

    def copy_bandwidth(self, nbytes: float) -> float:
        """Copy bandwidth in bytes/s for a copy that moves ``nbytes`` (interpolated log-log).

        Args:
            nbytes: bytes read plus bytes written.

        Returns:
            Bytes per second.
        """
        return _interp_loglog(self.copy, nbytes)

    def zero_fill_bandwidth(self, nbytes: float) -> float:
        """Bandwidth in bytes/s of creating a zeroed buffer of ``nbytes`` (interpolated log-log).

        Args:
            nbytes: size of the buffer.

        Returns:
            Bytes per second.
        """
        return _interp_loglog(self.zero_fill, nbytes)

    def gemm_flops(self, num_ids: int, k: int, dim: int, which: str) -> float:
        """GEMM throughput in FLOP/s at ``(N, K, D)``, or at the nearest calibrated shape.

        Args:
            num_ids: ``N``.
            k: ``K``, the inner dimension.
            dim: ``D``.
            which: ``"fwd"`` or ``"bwd"``.

        Returns:
            FLOP per second.

        Raises:
            ValueError: nothing was calibrated for ``which``.
        """
        if (num_ids, k, dim, which) in self.gemm:
            return self.gemm[(num_ids, k, dim, which)]
        near = [
            (abs(math.log(n / num_ids)) + abs(math.log(kk / k)) + abs(math.log(d / dim)), f)
            for (n, kk, d, w), f in self.gemm.items()
            if w == which
        ]
        if not near:
            raise ValueError(f"no GEMM throughput was calibrated for {which!r}")
        return min(near)[1]

    def call_overhead(self, model: str, mode: str) -> float:
        """The fixed cost per call of a form in seconds (0 if it was not measured).

        Args:
            model: a key of :data:`MODEL_FORMULAS`.
            mode: ``"fwd"`` or ``"fwd+bwd"``.

        Returns:
            Seconds.
        """
        return self.overhead.get((model, mode), 0.0)

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON-ready data.

        Returns:
            Keys ``copy`` and ``zero_fill`` (lists of ``{"bytes", "bytes_per_s"}``), ``gemm``
            (list of ``{"num_ids", "k", "dim", "shape", "flops_per_s"}``), ``overhead`` (list
            of ``{"model", "mode", "seconds"}``) and ``seconds``.
        """
        return {
            "copy": [{"bytes": b, "bytes_per_s": bw} for b, bw in self.copy],
            "zero_fill": [{"bytes": b, "bytes_per_s": bw} for b, bw in self.zero_fill],
            "gemm": [
                {"num_ids": n, "k": k, "dim": d, "shape": w, "flops_per_s": f}
                for (n, k, d, w), f in sorted(self.gemm.items())
            ],
            "overhead": [
                {"model": m, "mode": mode, "seconds": t} for (m, mode), t in self.overhead.items()
            ],
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        """Rebuild a calibration from :meth:`to_json`'s output.

        Args:
            data: as returned by :meth:`to_json`.

        Returns:
            The :class:`Calibration`.
        """
        return cls(
            copy=[(int(p["bytes"]), float(p["bytes_per_s"])) for p in data["copy"]],
            zero_fill=[(int(p["bytes"]), float(p["bytes_per_s"])) for p in data["zero_fill"]],
            gemm={
                (int(g["num_ids"]), int(g["k"]), int(g["dim"]), str(g["shape"])): float(
                    g["flops_per_s"]
                )
                for g in data["gemm"]
            },
            overhead={
                (str(o["model"]), str(o["mode"])): float(o["seconds"]) for o in data["overhead"]
            },
            seconds=float(data.get("seconds", 0.0)),
        )


#: The one-hot GEMM is calibrated with ``K = min(V, max(4096, GEMM_A_BYTES / (N * s)))``:
#: the whole GEMM when it is small, else one whose ``(N, K)`` operand (64 MiB) is, like the
#: one-hot, far larger than the last-level cache.
GEMM_A_BYTES = 64 * 2**20


def gemm_k(num_ids: int, vocab: int, itemsize: int) -> int:
    """The inner size ``K`` at which the GEMM of a one-hot ``(N, V)`` product is calibrated.

    Args:
        num_ids: ``N``.
        vocab: ``V``.
        itemsize: bytes per element.

    Returns:
        ``min(V, max(4096, ceil(GEMM_A_BYTES / (N * itemsize))))``.
    """
    return min(vocab, max(4096, -(-GEMM_A_BYTES // (num_ids * itemsize))))


def _median_seconds(
    stmt: str,
    env: dict[str, Any],
    *,
    threads: int,
    clock: Clock,
    device: torch.device,
    min_run_time: float,
) -> float:
    timer = Timer(stmt=stmt, globals=env, num_threads=threads, timer=_timer_fn(clock, device))
    return max(timer.blocked_autorange(min_run_time=min_run_time).median, 1e-12)


def calibrate(
    *,
    copy_sizes: Iterable[int],
    zero_sizes: Iterable[int],
    gemm_shapes: Iterable[tuple[int, int, int]],
    forms: Sequence[SweepForm] = (),
    dtype: torch.dtype,
    device: torch.device,
    threads: int,
    clock: Clock,
    min_run_time: float,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure the bandwidths, GEMM throughputs and per-call costs that the model needs.

    Each is measured at exactly the size the model asks about (sizes above a quarter of the
    available memory are skipped; the model then uses the largest measured), with
    ``torch.utils.benchmark.Timer.blocked_autorange`` under the same threads and clock as
    the cases.

    Args:
        copy_sizes: bytes moved (read + written) at which to time ``dst.copy_(src)``.
        zero_sizes: buffer sizes in bytes at which to time ``torch.zeros``.
        gemm_shapes: ``(N, K, D)`` triples: time ``(N, K) @ (K, D)`` and ``(N, K).T @ (N, D)``.
        forms: time each of these forms on a tiny input (its fixed cost per call), in each of
            its modes.
        dtype: dtype of the buffers and matrices.
        device: where to measure.
        threads: torch intra-op threads.
        clock: ``"wall"`` or ``"cpu"`` (see :data:`CLOCKS`).
        min_run_time: seconds of measurement per point.
        progress: called with a one-line note before each group of measurements.

    Returns:
        The :class:`Calibration`.
    """
    start = time.perf_counter()
    itemsize = dtype.itemsize
    available = available_memory_bytes(device)
    cap = None if available is None else available // 4

    def fits(nbytes: int) -> bool:
        return cap is None or nbytes <= cap

    timing = {"threads": threads, "clock": clock, "device": device, "min_run_time": min_run_time}
    copy: list[tuple[int, float]] = []
    zero: list[tuple[int, float]] = []
    copy_sizes = sorted({max(2 * itemsize, s) for s in copy_sizes if fits(s)})
    zero_sizes = sorted({max(itemsize, s) for s in zero_sizes if fits(s)})
    if progress is not None:
        progress(f"calibrating copy bandwidth at {len(copy_sizes)} sizes")
    for nbytes in copy_sizes or [1 << 20]:
        elems = max(1, nbytes // (2 * itemsize))
        src = torch.ones(elems, dtype=dtype, device=device)
        dst = torch.empty_like(src)
        dst.copy_(src)
        t = _median_seconds("dst.copy_(src)", {"dst": dst, "src": src}, **timing)
        copy.append((2 * elems * itemsize, 2 * elems * itemsize / t))
        del src, dst
    if progress is not None:
        progress(f"calibrating zero-fill bandwidth at {len(zero_sizes)} sizes")
    for nbytes in zero_sizes or [1 << 20]:
        elems = max(1, nbytes // itemsize)
        env = {"torch": torch, "n": elems, "dtype": dtype, "device": device}
        t = _median_seconds("torch.zeros(n, dtype=dtype, device=device)", env, **timing)
        zero.append((elems * itemsize, elems * itemsize / t))
    gemm: dict[tuple[int, int, int, str], float] = {}
    gen = torch.Generator().manual_seed(0)
    for n, k, d in dict.fromkeys(gemm_shapes):
        if progress is not None:
            progress(f"calibrating GEMM throughput at N={n}, K={k}, D={d}")
        a = torch.randn(n, k, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(k, d, generator=gen).to(device=device, dtype=dtype)
        g = torch.randn(n, d, generator=gen).to(device=device, dtype=dtype)
        flops = 2 * n * k * d
        gemm[(n, k, d, "fwd")] = flops / _median_seconds("a @ b", {"a": a, "b": b}, **timing)
        gemm[(n, k, d, "bwd")] = flops / _median_seconds("a.t() @ g", {"a": a, "g": g}, **timing)
        del a, b, g
    overhead: dict[tuple[str, str], float] = {}
    if forms:
        if progress is not None:
            progress(f"calibrating the fixed cost per call of {len(forms)} forms")
        ids, weight = build_inputs(1, 2, 1, dtype, 0)
        ids, weight = ids.to(device), weight.to(device)
        for mode in MODES:
            members = [f for f in forms if mode in f.modes]
            measured = time_group(
                [(f.impl, ids, weight) for f in members],
                mode,
                threads=threads,
                min_run_time=min_run_time,
                rounds=1,
                clock=clock,
            )
            for f, m in zip(members, measured, strict=True):
                if m.median_ms is not None:
                    overhead[(f.model, mode)] = m.median_ms / 1e3
    return Calibration(copy, zero, gemm, overhead, time.perf_counter() - start)


@dataclass(frozen=True)
class ModelTime:
    """The model time of one case: the sum of its terms.

    Attributes:
        seconds: the total, ``overhead + roofline``.
        roofline: the bandwidth and throughput terms alone.
        overhead: the fixed cost per call of the form (see :class:`Calibration`).
        terms: ``(description, seconds)`` per term, e.g.
            ``("gather 2.0 MiB at 21.3 GB/s", 9.8e-05)``.
    """

    seconds: float
    roofline: float
    overhead: float
    terms: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        """The terms as one line, e.g. ``"gather 2.0 MiB at 21.3 GB/s: 0.098 ms"``.

        Returns:
            The terms joined by ``" + "``.
        """
        return " + ".join(f"{what}: {t * 1e3:.3g} ms" for what, t in self.terms)


def model_time(
    model: str,
    mode: Mode,
    num_ids: int,
    vocab: int,
    dim: int,
    itemsize: int,
    calibration: Calibration,
) -> ModelTime:
    """The model time of one case: the form's fixed cost per call plus its roofline.

    Memory-bound terms are ``bytes / bandwidth`` with the bandwidth measured at that byte count;
    compute-bound terms are ``FLOP / throughput``. With ``s = itemsize`` (formulas in
    :data:`MODEL_FORMULAS`):

    - gather (lookup and sparse matmul forward): ``2·N·D·s`` bytes at the copy bandwidth;
    - dense gradient (backward of the lookup and the sparse matmul): a zeroed ``V·D·s`` buffer
      at the zero-fill bandwidth, plus a scatter-add of ``3·N·D·s`` bytes at the copy bandwidth;
    - sparse gradient: nothing (its values and indices are views of ``G`` and of the ids);
    - one-hot matmul and linear: building the one-hot, ``N·V·s`` bytes at the zero-fill
      bandwidth, plus ``2·N·V·D`` FLOP at the forward GEMM throughput, plus as many at the
      backward GEMM throughput for forward+backward (both measured at ``K = gemm_k(N, V, s)``).

    Args:
        model: a key of :data:`MODEL_FORMULAS`.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``.
        vocab: ``V``.
        dim: ``D``.
        itemsize: bytes per element of the weight's dtype.
        calibration: the measured bandwidths, throughputs and per-call costs.

    Returns:
        The :class:`ModelTime`.

    Raises:
        ValueError: an unknown ``model`` or ``mode``.
    """
    if model not in MODEL_FORMULAS:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODEL_FORMULAS)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    n, v, d, s = num_ids, vocab, dim, itemsize
    terms: list[tuple[str, float]] = []

    def memory(what: str, nbytes: int, bandwidth: Callable[[float], float]) -> None:
        bw = bandwidth(nbytes)
        terms.append((f"{what} {format_bytes(nbytes)} at {bw / 1e9:.3g} GB/s", nbytes / bw))

    def gemm(what: str, which: str) -> None:
        rate = calibration.gemm_flops(n, gemm_k(n, v, s), d, which)
        flops = 2 * n * v * d
        terms.append((f"{what} {flops:.3g} FLOP at {rate / 1e9:.3g} GFLOP/s", flops / rate))

    if model in ("one_hot", "linear"):
        memory("build one-hot", n * v * s, calibration.zero_fill_bandwidth)
        gemm("GEMM", "fwd")
        if mode == "fwd+bwd":
            gemm("GEMM one_hot.T @ G", "bwd")
    else:
        memory("gather", 2 * n * d * s, calibration.copy_bandwidth)
        if mode == "fwd+bwd" and model != "lookup_sparse_grad":
            memory("zero grad", v * d * s, calibration.zero_fill_bandwidth)
            memory("scatter-add", 3 * n * d * s, calibration.copy_bandwidth)
    roofline = sum(t for _, t in terms)
    overhead = calibration.call_overhead(model, mode)
    if overhead:
        terms.insert(0, ("call overhead", overhead))
    return ModelTime(overhead + roofline, roofline, overhead, tuple(terms))


def analytic_memory_bytes(
    model: str, mode: Mode, num_ids: int, vocab: int, dim: int, itemsize: int
) -> int:
    """The memory one call allocates beyond its inputs, counted from the shapes.

    The output ``N·D·s``; the dense one-hot ``N·V·s`` (kept for the backward); a dense gradient
    ``V·D·s``; the sparse one-hot's indices and values ``N·(2·8 + s)``. A sparse gradient
    adds nothing: its values and indices are views of the upstream gradient and of the ids.

    Args:
        model: a key of :data:`MODEL_FORMULAS`.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``.
        vocab: ``V``.
        dim: ``D``.
        itemsize: bytes per element of the weight's dtype.

    Returns:
        Bytes.

    Raises:
        ValueError: an unknown ``model``.
    """
    if model not in MODEL_FORMULAS:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODEL_FORMULAS)}")
    n, v, d, s = num_ids, vocab, dim, itemsize
    total = n * d * s
    dense_grad = v * d * s if mode == "fwd+bwd" else 0
    if model in ("one_hot", "linear"):
        total += n * v * s + dense_grad
    elif model == "sparse_mm":
        total += n * (2 * 8 + s) + dense_grad
    elif model == "lookup":
        total += dense_grad
    return total


# --- peak memory ----------------------------------------------------------------------------

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


def _measure_here(spec: dict[str, Any]) -> dict[str, Any]:
    """Build one case's inputs, run it once, and return its peak memory (this process)."""
    budget = spec.get("budget")
    if budget:
        os.environ[_BUDGET_ENV] = str(budget)
    else:
        os.environ.pop(_BUDGET_ENV, None)
    torch.set_num_threads(int(spec["threads"]))
    form = _FORMS_BY_LABEL[spec["form"]]
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
    allocations of another. Not for direct use: :class:`_MemoryProbe` starts it.
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
                result = _measure_here(spec)
            except BaseException as exc:
                result = {"error": _error_str(exc)}
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


_SERVER = "from embedding_equivalence.bench import _memory_server; _memory_server()"
_ONE_SHOT = (
    "import json, sys; from embedding_equivalence.bench import _measure_here; "
    "print(json.dumps(_measure_here(json.loads(sys.argv[1]))))"
)


class _MemoryProbe:
    """Runs each case once in a fresh process and returns what :func:`_measure_here` found.

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
        """Measure one case; ``{"error": ...}`` if it failed or took longer than ``timeout``."""
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


def _memory_spec(
    form: SweepForm,
    mode: Mode,
    point: tuple[int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    seed: int,
    threads: int,
) -> dict[str, Any]:
    n, v, d = point
    return {
        "form": form.label,
        "mode": mode,
        "num_ids": n,
        "vocab": v,
        "dim": d,
        "dtype": _dtype_name(dtype),
        "device": str(device),
        "seed": seed,
        "threads": threads,
        "budget": os.environ.get(_BUDGET_ENV),
    }


def measure_peak_memory(
    form: str,
    mode: Mode,
    num_ids: int,
    vocab: int,
    dim: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
    threads: int = 1,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Peak memory of one call of a sweep form beyond its inputs.

    On the CPU the call runs in a fresh process: it builds the inputs, resets the kernel's peak
    RSS, runs once, and reports peak RSS minus the RSS before the call. On CUDA it runs here:
    ``torch.cuda.max_memory_allocated`` minus the memory allocated before the call.

    Args:
        form: the label of a :data:`SWEEP_FORMS` entry, e.g. ``"one-hot matmul"``.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``.
        vocab: ``V``.
        dim: ``D``.
        dtype: the weight's dtype.
        device: where to run.
        seed: seed of the inputs (see :func:`build_inputs`).
        threads: torch intra-op threads.
        timeout: seconds before the measuring process is stopped (CPU only).

    Returns:
        ``{"peak_bytes", "baseline_bytes", "method"}``, or ``{"error": message}``.

    Raises:
        ValueError: an unknown ``form``.
    """
    if form not in _FORMS_BY_LABEL:
        raise ValueError(f"unknown form {form!r}; choose from {', '.join(_FORMS_BY_LABEL)}")
    device = torch.device(device)
    spec = _memory_spec(
        _FORMS_BY_LABEL[form], mode, (num_ids, vocab, dim), dtype, device, seed, threads
    )
    if device.type != "cpu":
        return _measure_here(spec)
    probe = _MemoryProbe()
    try:
        return probe.measure(spec, timeout)
    finally:
        probe.close()


# --- running the sweep ----------------------------------------------------------------------


@dataclass
class CaseResult:
    """One form in one mode at one ``(N, V, D)``: time, model, memory.

    Attributes:
        form: the form's label (see :class:`SweepForm`).
        call: the function timed, e.g. ``"matmul_embedding"``.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        grad: the gradient's layout, ``"dense"`` or ``"sparse"`` (``"-"`` for ``"fwd"``).
        num_ids: ``N``.
        vocab: ``V``.
        dim: ``D``.
        sweeps: the sweeps this point belongs to, e.g. ``"V"`` or ``"V,D,N"``.
        dtype: the weight's dtype.
        device: the device.
        threads: torch intra-op threads.
        clock: ``"wall"`` or ``"cpu"``.
        status: ``"ok"``, ``"skipped"`` (the one-hot cannot fit) or ``"error"``.
        median_ms: median time of one call in ms.
        iqr_ms: interquartile range of the block times in ms.
        runs: calls measured.
        model_ms: the model time in ms, ``overhead_ms + roofline_ms`` (:func:`model_time`).
        ratio: ``median_ms / model_ms``.
        roofline_ms: the bandwidth and throughput terms of the model alone.
        overhead_ms: the form's fixed cost per call, measured on a tiny input.
        model_terms: the model's terms, e.g. ``"gather 2.0 MiB at 21.3 GB/s: 0.098 ms"``.
        peak_bytes: measured peak memory beyond the inputs.
        analytic_bytes: :func:`analytic_memory_bytes`.
        memory_method: how ``peak_bytes`` was measured.
        note: why the case was skipped or failed.
    """

    form: str
    call: str
    mode: Mode
    grad: str
    num_ids: int
    vocab: int
    dim: int
    sweeps: str
    dtype: str
    device: str
    threads: int
    clock: str
    status: str
    median_ms: float | None = None
    iqr_ms: float | None = None
    runs: int = 0
    model_ms: float | None = None
    ratio: float | None = None
    roofline_ms: float | None = None
    overhead_ms: float | None = None
    model_terms: str = ""
    peak_bytes: int | None = None
    analytic_bytes: int = 0
    memory_method: str | None = None
    note: str | None = None


#: The columns of ``bench.csv``: the fields of :class:`CaseResult`, in order.
CSV_COLUMNS: tuple[str, ...] = tuple(CaseResult.__dataclass_fields__)


@dataclass
class SweepReport:
    """Everything a sweep measured.

    Attributes:
        machine: :func:`machine_info` at the start of the run, plus ``load_after`` (the load
            average at its end).
        config: the sizes and settings of the run.
        calibration: the measured bandwidths and throughputs.
        results: one :class:`CaseResult` per form, mode and point.
        notes: one line per skipped or failed case.
        seconds: wall time of the sweep.
    """

    machine: dict[str, str]
    config: dict[str, Any]
    calibration: Calibration
    results: list[CaseResult]
    notes: list[str]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The report as the content of ``bench.json``.

        Returns:
            Keys ``schema``, ``machine``, ``config``, ``calibration``, ``model``,
            ``headline`` (:func:`headline_rows`), ``results`` and ``notes``.
        """
        return {
            "schema": "embedding-equivalence/bench/1",
            "machine": self.machine,
            "config": {**self.config, "seconds": round(self.seconds, 1)},
            "calibration": self.calibration.to_json(),
            "model": {
                "formulas": MODEL_FORMULAS,
                "symbols": {
                    "s": "bytes per element of the dtype",
                    "B(x)": "copy bandwidth (bytes read + written per second) measured at x "
                    "bytes, interpolated log-log",
                    "Z(x)": "bandwidth of torch.zeros of x bytes (allocation, page faults, memset)",
                    "F_fwd(N, D)": "GEMM FLOP/s of (N, K) @ (K, D)",
                    "F_bwd(N, D)": "GEMM FLOP/s of (N, K).T @ (N, D)",
                },
            },
            "headline": headline_rows(self),
            "results": [asdict(r) for r in self.results],
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepReport:
        """Rebuild a report from the content of ``bench.json`` (to redraw its tables and plots).

        Args:
            data: as written by :func:`write_outputs`.

        Returns:
            The :class:`SweepReport`.
        """
        config = dict(data["config"])
        seconds = float(config.pop("seconds", 0.0))
        return cls(
            machine=dict(data["machine"]),
            config=config,
            calibration=Calibration.from_json(data["calibration"]),
            results=[CaseResult(**r) for r in data["results"]],
            notes=list(data["notes"]),
            seconds=seconds,
        )


def sweep_points(
    num_ids: int,
    dim: int,
    vocabs: Sequence[int],
    dims: Sequence[int],
    ns: Sequence[int],
    base_vocab: int,
) -> list[tuple[int, int, int, str]]:
    """The points of the three one-at-a-time sweeps, without duplicates.

    Args:
        num_ids: the base ``N``.
        dim: the base ``D``.
        vocabs: the ``V`` sweep, at the base ``N`` and ``D``.
        dims: the ``D`` sweep, at the base ``N`` and ``V = base_vocab``.
        ns: the ``N`` sweep, at the base ``D`` and ``V = base_vocab``.
        base_vocab: ``V`` of the ``D`` and ``N`` sweeps.

    Returns:
        ``(N, V, D, sweeps)`` in the order V sweep, D sweep, N sweep, where ``sweeps`` names
        every sweep the point belongs to, e.g. ``"V,D,N"`` for the base point.
    """
    found: dict[tuple[int, int, int], list[str]] = {}
    for v in vocabs:
        found.setdefault((num_ids, v, dim), []).append("V")
    for d in dict.fromkeys([*dims]):
        found.setdefault((num_ids, base_vocab, d), []).append("D")
    for n in dict.fromkeys([*ns]):
        found.setdefault((n, base_vocab, dim), []).append("N")
    return [(n, v, d, ",".join(dict.fromkeys(s))) for (n, v, d), s in found.items()]


class _Progress:
    """Progress lines on stderr: ``bench [k/total] elapsed  what``."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.start = time.perf_counter()

    def note(self, what: str, *, step: bool = True) -> None:
        if step:
            self.done += 1
        if self.enabled:
            elapsed = time.perf_counter() - self.start
            width = len(str(self.total))
            sys.stderr.write(f"bench [{self.done:>{width}}/{self.total}] {elapsed:6.1f}s  {what}\n")
            sys.stderr.flush()


def _one_hot_skip_note(
    form: SweepForm, n: int, v: int, dtype: torch.dtype, device: torch.device
) -> str | None:
    if not form.impl.dense_one_hot:
        return None
    try:
        check_one_hot_fits(n, v, dtype, device, form.impl.name)
    except OneHotTooLargeError:
        available = available_memory_bytes(device)
        return (
            f"skipped: the one-hot would take {format_bytes(n * v * dtype.itemsize)} "
            f"(N={n} x V={v} x {dtype.itemsize} bytes), more than the "
            f"{format_bytes(available or 0)} available on {device} (OneHotTooLargeError)"
        )
    return None


def run_sweep(
    *,
    num_ids: int,
    dim: int,
    vocabs: Sequence[int],
    dims: Sequence[int],
    ns: Sequence[int],
    base_vocab: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    threads: int = 1,
    seed: int = 0,
    min_run_time: float = 0.25,
    rounds: int = 1,
    clock: Clock = "cpu",
    memory: bool = True,
    forms: Sequence[SweepForm] = SWEEP_FORMS,
    progress: bool = False,
) -> SweepReport:
    """Calibrate the machine, then time every form at every point and measure its memory.

    Args:
        num_ids: the base ``N``.
        dim: the base ``D``.
        vocabs: the ``V`` sweep.
        dims: the ``D`` sweep (at ``base_vocab``).
        ns: the ``N`` sweep (at ``base_vocab``).
        base_vocab: ``V`` of the ``D`` and ``N`` sweeps.
        dtype: the weight's dtype.
        device: where the cases run.
        threads: torch intra-op threads (fixed for every measurement and recorded).
        seed: base seed of the inputs (the inputs at ``V`` use ``seed + V``).
        min_run_time: seconds of measurement per case (and per calibration point).
        rounds: interleaved rounds over the forms of one point (see :func:`time_group`).
        clock: ``"wall"`` or ``"cpu"``; CUDA always uses synchronised wall time.
        memory: measure the peak memory of every case.
        forms: the forms to run.
        progress: write progress lines on stderr.

    Returns:
        The :class:`SweepReport`.
    """
    start = time.perf_counter()
    device = torch.device(device)
    # The machine as it is when the run starts: the date and the load average before it.
    machine = machine_info(threads, dtype, device, "wall" if device.type == "cuda" else clock)
    itemsize = dtype.itemsize
    points = sweep_points(num_ids, dim, vocabs, dims, ns, base_vocab)
    skips = {
        ((n, v, d), f.label): _one_hot_skip_note(f, n, v, dtype, device)
        for n, v, d, _ in points
        for f in forms
    }
    runnable = [
        ((n, v, d), f, m)
        for n, v, d, _ in points
        for f in forms
        for m in f.modes
        if skips[((n, v, d), f.label)] is None
    ]
    groups = {(q, m) for q, _, m in runnable}
    lookups = {q for q, f, _ in runnable if not f.impl.dense_one_hot}
    dense = {q for q, f, _ in runnable if f.impl.dense_one_hot}
    copy_sizes = [k * n * d * itemsize for n, _, d in lookups for k in (2, 3)]
    zero_sizes = [v * d * itemsize for _, v, d in lookups]
    zero_sizes += [n * v * itemsize for n, v, _ in dense]
    gemm_shapes = sorted({(n, gemm_k(n, v, itemsize), d) for n, v, d in dense})
    use_memory = memory and device.type in ("cpu", "cuda")
    bar = _Progress(1 + len(groups) + (len(runnable) if use_memory else 0), progress)
    probe = _MemoryProbe() if use_memory and device.type == "cpu" else None
    results: list[CaseResult] = []
    notes: list[str] = []
    try:
        if probe is not None:
            bar.note("starting the memory-measuring process in the background", step=False)
            probe.start()
        timing_clock: Clock = "wall" if device.type == "cuda" else clock
        cal = calibrate(
            copy_sizes=copy_sizes,
            zero_sizes=zero_sizes,
            gemm_shapes=gemm_shapes,
            forms=forms,
            dtype=dtype,
            device=device,
            threads=threads,
            clock=timing_clock,
            min_run_time=min_run_time,
            progress=lambda s: bar.note(s, step=False),
        )
        bar.note(f"calibrated in {cal.seconds:.1f} s")
        for n, v, d, sweeps in points:
            point = (n, v, d)
            ids, weight = build_inputs(n, v, d, dtype, seed + v)
            ids, weight = ids.to(device), weight.to(device)
            for mode in MODES:
                members = [f for (q, f, m) in runnable if q == point and m == mode]
                measured: dict[str, Measurement] = {}
                if members:
                    bar.note(f"timing {mode:<7} N={n} V={v} D={d}: {len(members)} forms")
                    cases = [(f.impl, ids, weight) for f in members]
                    for f, m in zip(
                        members,
                        time_group(
                            cases,
                            mode,
                            threads=threads,
                            min_run_time=min_run_time,
                            rounds=rounds,
                            clock=timing_clock,
                        ),
                        strict=True,
                    ):
                        measured[f.label] = m
                for f in forms:
                    if mode not in f.modes:
                        continue
                    results.append(
                        _case_result(
                            f,
                            mode,
                            point,
                            sweeps,
                            dtype,
                            device,
                            threads,
                            timing_clock,
                            measured.get(f.label),
                            skips[(point, f.label)],
                            cal,
                        )
                    )
                    r = results[-1]
                    if r.status == "ok" and use_memory:
                        bar.note(f"memory {mode:<7} N={n} V={v} D={d}: {f.label}")
                        spec = _memory_spec(f, mode, point, dtype, device, seed + v, threads)
                        timeout = max(120.0, 50 * (r.model_ms or 0) / 1e3)
                        found = (
                            probe.measure(spec, timeout)
                            if probe is not None
                            else _measure_here(spec)
                        )
                        if "error" in found:
                            r.note = f"memory not measured: {found['error']}"
                        else:
                            r.peak_bytes = int(found["peak_bytes"])
                            r.memory_method = str(found["method"])
                    if r.note:
                        notes.append(f"{f.label} {mode} at N={n}, V={v}, D={d}: {r.note}")
            del ids, weight
    finally:
        if probe is not None:
            probe.close()
    config = {
        "num_ids": num_ids,
        "dim": dim,
        "vocabs": list(vocabs),
        "dims": list(dims),
        "ns": list(ns),
        "base_vocab": base_vocab,
        "points": [list(p[:3]) for p in points],
        "dtype": _dtype_name(dtype),
        "device": str(device),
        "threads": threads,
        "seed": seed,
        "min_run_time": min_run_time,
        "rounds": rounds,
        "clock": "wall" if device.type == "cuda" else clock,
        "memory": use_memory,
    }
    machine["load_after"] = _load_average()
    return SweepReport(machine, config, cal, results, notes, time.perf_counter() - start)


def _case_result(
    form: SweepForm,
    mode: Mode,
    point: tuple[int, int, int],
    sweeps: str,
    dtype: torch.dtype,
    device: torch.device,
    threads: int,
    clock: Clock,
    measured: Measurement | None,
    skip: str | None,
    cal: Calibration,
) -> CaseResult:
    n, v, d = point
    model = model_time(form.model, mode, n, v, d, dtype.itemsize, cal)
    r = CaseResult(
        form=form.label,
        call=form.impl.name,
        mode=mode,
        grad=form.grad if mode == "fwd+bwd" else "-",
        num_ids=n,
        vocab=v,
        dim=d,
        sweeps=sweeps,
        dtype=_dtype_name(dtype),
        device=str(device),
        threads=threads,
        clock=clock,
        status="ok",
        model_ms=model.seconds * 1e3,
        roofline_ms=model.roofline * 1e3,
        overhead_ms=model.overhead * 1e3,
        model_terms=model.describe(),
        analytic_bytes=analytic_memory_bytes(form.model, mode, n, v, d, dtype.itemsize),
    )
    if skip is not None:
        r.status, r.note = "skipped", skip
    elif measured is None or measured.median_ms is None:
        r.status = "error"
        r.note = measured.error if measured is not None else "not measured"
    else:
        r.median_ms, r.iqr_ms, r.runs = measured.median_ms, measured.iqr_ms, measured.runs
        r.ratio = measured.median_ms / r.model_ms if r.model_ms else None
    return r


# --------------------------------------------------------------------------------------------
# Reporting the sweep: tables, JSON, CSV, plots
# --------------------------------------------------------------------------------------------

#: Where a measured/model ratio counts as agreeing with the model: within 30% of 1.
RATIO_BAND = (0.7, 1.3)


def _mib(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.3g}"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def _render(header: Sequence[str], rows: Sequence[Sequence[str]], left: Iterable[int]) -> list[str]:
    """Lines of a table; the columns in ``left`` are left-aligned; a row ``[]`` is blank."""
    left = set(left)
    widths = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) if r else "" for r in rows]
    return out


def format_calibration(cal: Calibration) -> str:
    """Format the calibration in a few lines.

    Args:
        cal: as returned by :func:`calibrate`.

    Returns:
        The text, without a trailing newline.
    """
    copy = ", ".join(f"{format_bytes(b)}: {bw / 1e9:.1f}" for b, bw in cal.copy)
    zero = ", ".join(f"{format_bytes(b)}: {bw / 1e9:.1f}" for b, bw in cal.zero_fill)
    wrap = {"width": 100, "subsequent_indent": "    "}
    lines = [
        f"calibration ({cal.seconds:.1f} s):",
        textwrap.fill(f"  copy bandwidth GB/s at bytes moved: {copy}", **wrap),
        textwrap.fill(f"  zero-fill bandwidth GB/s at buffer size: {zero}", **wrap),
    ]
    for (n, k, d, which), f in sorted(cal.gemm.items()):
        if which == "fwd":
            lines.append(
                f"  GEMM GFLOP/s at N={n}, K={k}, D={d}: fwd {f / 1e9:.1f}, "
                f"bwd {cal.gemm[(n, k, d, 'bwd')] / 1e9:.1f}"
            )
    if cal.overhead:
        costs = ", ".join(f"{m} {mode} {t * 1e6:.0f}" for (m, mode), t in cal.overhead.items())
        lines.append(f"  fixed cost per call, us: {costs}")
    return "\n".join(lines)


def _find_case(
    results: Iterable[CaseResult], form: str, mode: Mode, point: tuple[int, int, int]
) -> CaseResult | None:
    for r in results:
        if r.form == form and r.mode == mode and (r.num_ids, r.vocab, r.dim) == point:
            return r
    return None


def _v_sweep(report: SweepReport) -> list[tuple[int, int, int]]:
    n, d = report.config["num_ids"], report.config["dim"]
    return [(n, v, d) for v in report.config["vocabs"]]


#: The keys of each row of :func:`headline_rows` (and of ``bench.json``'s ``"headline"``).
HEADLINE_COLUMNS: tuple[str, ...] = (
    "mode",
    "V",
    "lookup ms",
    "lookup model ms",
    "lookup measured/model",
    "one-hot ms",
    "one-hot model ms",
    "one-hot measured/model",
    "one-hot/lookup measured",
    "one-hot/lookup model",
    "lookup peak MiB",
    "one-hot peak MiB",
    "one-hot status",
)


def headline_rows(report: SweepReport) -> list[dict[str, Any]]:
    """The headline: the ``V`` sweep, lookup against the one-hot matmul, one row per mode and V.

    Args:
        report: as returned by :func:`run_sweep`.

    Returns:
        Dicts with the keys of :data:`HEADLINE_COLUMNS` (times in ms, memory in MiB beyond
        the inputs, ``None`` where not measured; ``"one-hot status"`` is ``"ok"``,
        ``"skipped"`` or ``"error"``).
    """
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        for point in _v_sweep(report):
            lk = _find_case(report.results, "lookup", mode, point)
            oh = _find_case(report.results, "one-hot matmul", mode, point)
            if lk is None or oh is None:
                continue
            values = (
                mode,
                point[1],
                lk.median_ms,
                lk.model_ms,
                lk.ratio,
                oh.median_ms,
                oh.model_ms,
                oh.ratio,
                oh.median_ms / lk.median_ms if oh.median_ms and lk.median_ms else None,
                oh.model_ms / lk.model_ms if oh.model_ms and lk.model_ms else None,
                None if lk.peak_bytes is None else lk.peak_bytes / 2**20,
                None if oh.peak_bytes is None else oh.peak_bytes / 2**20,
                oh.status,
            )
            rows.append(dict(zip(HEADLINE_COLUMNS, values, strict=True)))
    return rows


def format_headline(report: SweepReport) -> str:
    """The headline table (:func:`headline_rows`) as text.

    Per mode and ``V``: measured and model time of the lookup and of the one-hot matmul in ms
    with their ratio measured/model, the one-hot/lookup time ratio measured and modelled, and
    the measured peak memory of both (MiB beyond the inputs).

    Args:
        report: as returned by :func:`run_sweep`.

    Returns:
        The table, without a trailing newline.
    """
    c = report.config
    title = (
        f"V sweep at N={c['num_ids']}, D={c['dim']}, {c['dtype']} on {c['device']}, "
        f"{c['threads']} thread(s), {c['clock']} clock. Times in ms; m/m = measured/model; "
        f"MiB = measured peak memory beyond the inputs."
    )
    header = [
        "mode",
        "V",
        "lookup ms",
        "model",
        "m/m",
        "one-hot ms",
        "model",
        "m/m",
        "one-hot/lookup",
        "model",
        "lookup MiB",
        "one-hot MiB",
    ]
    rows: list[list[str]] = []
    for h in headline_rows(report):
        if rows and rows[-1] and h["mode"] != rows[-1][0]:
            rows.append([])
        skipped = h["one-hot status"] != "ok"
        rows.append(
            [
                h["mode"],
                str(h["V"]),
                _num(h["lookup ms"], ".4g"),
                _num(h["lookup model ms"], ".4g"),
                _num(h["lookup measured/model"], ".2f"),
                h["one-hot status"] if skipped else _num(h["one-hot ms"], ".4g"),
                _num(h["one-hot model ms"], ".4g"),
                _num(h["one-hot measured/model"], ".2f"),
                _num(h["one-hot/lookup measured"], ".3g"),
                _num(h["one-hot/lookup model"], ".3g"),
                _num(h["lookup peak MiB"], ".3g"),
                _num(h["one-hot peak MiB"], ".3g"),
            ]
        )
    return "\n".join([title, *_render(header, rows, left={0})])


def format_sweep_table(report: SweepReport) -> str:
    """Every case: time, model, measured/model, peak and analytic memory, and notes.

    Args:
        report: as returned by :func:`run_sweep`.

    Returns:
        The table and a summary of the measured/model ratios, without a trailing newline.
    """
    header = [
        "form",
        "mode",
        "grad",
        "N",
        "V",
        "D",
        "ms",
        "model ms",
        "m/m",
        "peak MiB",
        "analytic MiB",
        "note",
    ]
    rows: list[list[str]] = []
    last: tuple[int, int, int] | None = None
    for r in report.results:
        point = (r.num_ids, r.vocab, r.dim)
        if last is not None and point != last:
            rows.append([])
        last = point
        note = "" if r.status == "ok" and not r.note else (r.note or r.status)
        rows.append(
            [
                r.form,
                r.mode,
                r.grad,
                str(r.num_ids),
                str(r.vocab),
                str(r.dim),
                _num(r.median_ms, ".4g"),
                _num(r.model_ms, ".4g"),
                _num(r.ratio, ".2f"),
                _mib(r.peak_bytes),
                _mib(r.analytic_bytes),
                note[:70],
            ]
        )
    lines = _render(header, rows, left={0, 1, 2, len(header) - 1})
    ratios = [r for r in report.results if r.ratio is not None]
    inside = [r for r in ratios if RATIO_BAND[0] <= (r.ratio or 0) <= RATIO_BAND[1]]
    lines.append("")
    lines.append(
        f"measured/model within 30% ({RATIO_BAND[0]} to {RATIO_BAND[1]}): "
        f"{len(inside)} of {len(ratios)} cases"
    )
    by_form: dict[tuple[str, str], list[float]] = {}
    for r in ratios:
        by_form.setdefault((r.form, r.mode), []).append(r.ratio or 0.0)
    width = max((len(f) for f, _ in by_form), default=0)
    for (form, mode), values in by_form.items():
        lines.append(
            f"  {form:<{width}}  {mode:<7}  {min(values):.2f} to {max(values):.2f} "
            f"(median {statistics.median(values):.2f}, {len(values)} points)"
        )
    return "\n".join(lines)


def _write_csv(report: SweepReport, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for r in report.results:
            writer.writerow({k: "" if v is None else v for k, v in asdict(r).items()})


_MATPLOTLIB_MISSING = (
    "matplotlib is needed for the plots: pip install 'embedding-equivalence[bench]' "
    "(or pass --no-plots)"
)


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(_MATPLOTLIB_MISSING) from None


def _series(
    report: SweepReport, form: str, mode: Mode, value: Callable[[CaseResult], float | None]
) -> tuple[list[int], list[float]]:
    xs: list[int] = []
    ys: list[float] = []
    for point in _v_sweep(report):
        r = _find_case(report.results, form, mode, point)
        y = None if r is None else value(r)
        if y is not None and y > 0:
            xs.append(point[1])
            ys.append(y)
    return xs, ys


def _plot_title(report: SweepReport) -> str:
    c, m = report.config, report.machine
    return (
        f"N={c['num_ids']}, D={c['dim']}, {c['dtype']}, {m.get('device_name', c['device'])}, "
        f"{c['threads']} thread(s), torch {m.get('torch', '?')}"
    )


def _skipped_footnote(report: SweepReport) -> str:
    vs = set(report.config["vocabs"])
    skipped = sorted(
        {
            (r.form, r.vocab)
            for r in report.results
            if r.status == "skipped" and r.vocab in vs and "V" in r.sweeps
        }
    )
    if not skipped:
        return ""
    return "skipped (the one-hot does not fit): " + ", ".join(
        f"{form} at V={v}" for form, v in skipped
    )


def _write_plots(report: SweepReport, out: Path) -> list[Path]:
    _require_matplotlib()
    import matplotlib
    from matplotlib.figure import Figure

    colors = {f.label: f"C{i}" for i, f in enumerate(SWEEP_FORMS)}
    rc: dict[Any, Any] = {"svg.hashsalt": "embedding-equivalence", "svg.fonttype": "none"}
    footnote = _skipped_footnote(report)
    paths: list[Path] = []

    def save(fig: Figure, name: str) -> None:
        if footnote:
            fig.text(0.01, 0.005, footnote, fontsize=7, ha="left", va="bottom")
        path = out / name
        fig.savefig(path, format="svg", metadata={"Date": None})
        paths.append(path)

    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(11, 4.6), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, mode in zip(axes, MODES, strict=True):
            for f in SWEEP_FORMS:
                if mode not in f.modes:
                    continue
                xs, ys = _series(report, f.label, mode, lambda r: r.median_ms)
                if xs:
                    ax.plot(xs, ys, "o-", color=colors[f.label], label=f.label)
                xs, ys = _series(report, f.label, mode, lambda r: r.model_ms)
                if xs:
                    ax.plot(xs, ys, "--", color=colors[f.label], alpha=0.6)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("vocabulary size V")
            ax.set_ylabel("time per call (ms)")
            ax.set_title(f"{'forward' if mode == 'fwd' else 'forward + backward'}")
            ax.grid(True, which="both", alpha=0.3)
        axes[1].plot([], [], "k--", alpha=0.6, label="model (dashed)")
        axes[1].legend(fontsize=8)
        fig.suptitle(
            f"Time vs V: measured (solid) and roofline model (dashed)\n{_plot_title(report)}",
            fontsize=10,
        )
        save(fig, "time_vs_vocab.svg")

        fig = Figure(figsize=(11, 4.6), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, mode in zip(axes, MODES, strict=True):
            for f in SWEEP_FORMS:
                if mode not in f.modes:
                    continue
                xs, ys = _series(
                    report,
                    f.label,
                    mode,
                    lambda r: None if r.peak_bytes is None else r.peak_bytes / 2**20,
                )
                if xs:
                    ax.plot(xs, ys, "o-", color=colors[f.label], label=f.label)
                xs, ys = _series(
                    report,
                    f.label,
                    mode,
                    lambda r: r.analytic_bytes / 2**20 if r.status == "ok" else None,
                )
                if xs:
                    ax.plot(xs, ys, "--", color=colors[f.label], alpha=0.6)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("vocabulary size V")
            ax.set_ylabel("peak memory beyond the inputs (MiB)")
            ax.set_title(f"{'forward' if mode == 'fwd' else 'forward + backward'}")
            ax.grid(True, which="both", alpha=0.3)
        axes[1].plot([], [], "k--", alpha=0.6, label="analytic (dashed)")
        axes[1].legend(fontsize=8)
        method = (
            "torch.cuda.max_memory_allocated"
            if report.config["device"].startswith("cuda")
            else "peak RSS of a fresh process per case"
        )
        fig.suptitle(
            f"Peak memory vs V: measured ({method}, solid) and analytic (dashed)\n"
            f"{_plot_title(report)}",
            fontsize=10,
        )
        save(fig, "memory_vs_vocab.svg")

        fig = Figure(figsize=(7, 4.8), layout="constrained")
        ax = fig.subplots()
        for mode, color in zip(MODES, ("C2", "C3"), strict=True):
            for what, style, value in (
                ("measured", "o-", lambda r: r.median_ms),
                ("model", "--", lambda r: r.model_ms),
            ):
                ox, oy = _series(report, "one-hot matmul", mode, value)
                lx, ly = _series(report, "lookup", mode, value)
                look = dict(zip(lx, ly, strict=True))
                xs = [x for x in ox if x in look]
                ys = [y / look[x] for x, y in zip(ox, oy, strict=True) if x in look]
                if xs:
                    ax.plot(xs, ys, style, color=color, label=f"{mode} {what}")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("vocabulary size V")
        ax.set_ylabel("time(one-hot matmul) / time(lookup)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.suptitle(
            f"How much slower the one-hot matmul is: measured vs model\n{_plot_title(report)}",
            fontsize=10,
        )
        save(fig, "ratio_vs_model.svg")
    return paths


def write_outputs(report: SweepReport, out: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ``bench.json``, ``bench.csv`` and (with ``plots``) the three SVG plots.

    Args:
        report: as returned by :func:`run_sweep`.
        out: the folder (created if missing).
        plots: also draw ``time_vs_vocab.svg``, ``memory_vs_vocab.svg`` and
            ``ratio_vs_model.svg`` (needs matplotlib).

    Returns:
        The paths written.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench.json"
    with path.open("w", encoding="utf-8") as f:
        json.dump(report.to_json(), f, indent=1)
        f.write("\n")
    paths = [path]
    _write_csv(report, folder / "bench.csv")
    paths.append(folder / "bench.csv")
    if plots:
        paths += _write_plots(report, folder)
    return paths


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

#: Defaults of the sweep: base N and D, the V, D and N sweeps, and V of the D and N sweeps.
SWEEP_DEFAULTS: dict[str, Any] = {
    "n": 1024,
    "d": 256,
    "vocab": (1024, 4096, 16384, 50257, 262144),
    "dims": (64, 256, 768),
    "ns": (256, 1024, 4096),
    "base_vocab": 50257,
    "min_run_time": 0.25,
}
#: ``--quick``: small sizes and short timing, well under a minute on two cores.
SWEEP_QUICK: dict[str, Any] = {
    "n": 256,
    "d": 64,
    "vocab": (1024, 8192, 50257),
    "dims": (128,),
    "ns": (1024,),
    "base_vocab": 8192,
    "min_run_time": 0.03,
}
#: Defaults and ``--quick`` sizes of ``--compare`` (the form-vs-raw comparison).
DEFAULT_VOCABS = (1024, 8192, 50257)
QUICK = {"n": 256, "d": 64, "vocab": (128, 1024, 8192), "min_run_time": 0.06}

_PROG = "embedding-equivalence bench"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_int(value: str) -> int:
    try:
        n = int(value.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be at least 1")
    return n


def _positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not x > 0 or not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{value!r} must be a positive number")
    return x


def _int_list(value: str) -> list[int]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{value!r} holds no size; e.g. 1024,8192")
    return [_positive_int(p) for p in parts]


def _flatten(values: Sequence[Sequence[int]] | None) -> list[int] | None:
    if not values:
        return None
    return list(dict.fromkeys(v for group in values for v in group))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=_PROG,
        description=(
            "Time and peak memory of the lookup, the dense one-hot matmul, the linear layer and "
            "the sparse matmul, forward and forward+backward, over sweeps of V, D and N, beside "
            "a roofline model calibrated on this machine; writes JSON, CSV and plots. "
            "--compare instead times each form beside the raw torch call it wraps."
        ),
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="the form-vs-raw-torch comparison and its three targets instead of the sweep",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and short timing, well under a minute (sweep: N=256, D=64, "
        "V=1024,8192,50257, D=64,128, N=256,1024; compare: N=256, D=64, V=128,1024,8192)",
    )
    p.add_argument(
        "--n", type=_positive_int, help="base number of ids N (default 1024; compare 2048)"
    )
    p.add_argument(
        "--d", type=_positive_int, help="base embedding dim D (default 256; compare 768)"
    )
    p.add_argument(
        "--vocab",
        action="append",
        type=_int_list,
        metavar="V[,V...]",
        help="the V sweep, at the base N and D; repeatable (default 1024,4096,16384,50257,"
        "262144; compare 1024,8192,50257)",
    )
    p.add_argument(
        "--dims",
        action="append",
        type=_int_list,
        metavar="D[,D...]",
        help="the D sweep, at V=--base-vocab (default 64,256,768)",
    )
    p.add_argument(
        "--ns",
        action="append",
        type=_int_list,
        metavar="N[,N...]",
        help="the N sweep, at V=--base-vocab (default 256,1024,4096)",
    )
    p.add_argument(
        "--base-vocab", type=_positive_int, help="V of the D and N sweeps (default 50257)"
    )
    p.add_argument("--dtype", choices=list(DTYPES), default="float32", help="weight dtype")
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda or cuda:K (default: cuda when present, else cpu)",
    )
    p.add_argument(
        "--threads", type=_positive_int, default=1, help="torch intra-op threads (default 1)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the input generator")
    p.add_argument(
        "--min-run-time",
        type=_positive_float,
        help="seconds of measurement per case (sweep default 0.25, 0.03 with --quick; "
        "compare 0.5, 0.06 with --quick)",
    )
    p.add_argument(
        "--rounds",
        type=_positive_int,
        help="interleaved rounds over the forms of a point (sweep default 1, compare 3)",
    )
    p.add_argument(
        "--clock",
        choices=["auto", *CLOCKS],
        default="auto",
        help="wall: elapsed time; cpu: process CPU time, which ignores the time spent "
        "waiting for a core on a loaded machine (one thread only). auto: cpu for the sweep "
        "with one CPU thread, else wall",
    )
    p.add_argument(
        "--out",
        default="bench-results",
        metavar="DIR",
        help="folder for bench.json, bench.csv and the plots (default bench-results/)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")
    p.add_argument("--no-plots", action="store_true", help="skip the plots (no matplotlib)")
    p.add_argument(
        "--json", metavar="PATH", default=None, help="--compare: write the measurements here"
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"--device: {name!r} is not a device name, e.g. cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device: CUDA is not available here; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"--device: {name!r} is not supported; use cpu or cuda")
    return device


def _compare_main(args: argparse.Namespace, device: torch.device) -> int:
    quick: bool = args.quick
    num_ids: int = args.n if args.n is not None else (int(QUICK["n"]) if quick else 2048)
    dim: int = args.d if args.d is not None else (int(QUICK["d"]) if quick else 768)
    vocabs = _flatten(args.vocab) or list(QUICK["vocab"] if quick else DEFAULT_VOCABS)
    min_run_time: float = (
        args.min_run_time
        if args.min_run_time is not None
        else (float(QUICK["min_run_time"]) if quick else 0.5)
    )
    dtype = DTYPES[args.dtype]
    threads: int = args.threads
    rounds: int = args.rounds or 3
    clock: Clock = "wall" if args.clock == "auto" else args.clock
    torch.set_num_threads(threads)

    info = machine_info(torch.get_num_threads(), dtype, device, clock)
    print(format_machine(info))
    print(
        f"N={num_ids} ids, D={dim}, V in {vocabs}, seed {args.seed}; median ms of "
        f"torch.utils.benchmark.Timer.blocked_autorange ({clock} clock), {rounds} interleaved "
        f"rounds of min_run_time={min_run_time / rounds:.3g} s per implementation"
    )
    progress = None if args.quiet else (lambda s: print(f"  timing {s}", file=sys.stderr))
    measurements = run_benchmark(
        num_ids=num_ids,
        dim=dim,
        vocabs=vocabs,
        dtype=dtype,
        threads=threads,
        seed=args.seed,
        min_run_time=min_run_time,
        rounds=rounds,
        clock=clock,
        progress=progress,
        device=device,
    )
    print()
    print(format_table(measurements))
    print()
    targets = evaluate_targets(measurements)
    print(format_targets(targets))
    load_after = _load_average()
    print(f"load average after the run: {load_after}")
    if args.json:
        payload = {
            "machine": info,
            "config": {
                "num_ids": num_ids,
                "dim": dim,
                "vocabs": vocabs,
                "dtype": _dtype_name(dtype),
                "threads": threads,
                "seed": args.seed,
                "min_run_time": min_run_time,
                "rounds": rounds,
                "clock": clock,
            },
            "load_after": load_after,
            "measurements": [asdict(m) for m in measurements],
            "targets": [asdict(t) for t in targets],
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
            f.write("\n")
    return 0


def _sweep_main(args: argparse.Namespace, device: torch.device) -> int:
    if args.json:
        raise UsageError("--json goes with --compare; the sweep writes DIR/bench.json (--out DIR)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {str(out)!r} exists and is not a folder")
    plots = not args.no_plots
    if plots:
        _require_matplotlib()
    preset = SWEEP_QUICK if args.quick else SWEEP_DEFAULTS
    num_ids: int = args.n or preset["n"]
    dim: int = args.d or preset["d"]
    vocabs = _flatten(args.vocab) or list(preset["vocab"])
    dims = _flatten(args.dims) or list(preset["dims"])
    ns = _flatten(args.ns) or list(preset["ns"])
    base_vocab: int = args.base_vocab or preset["base_vocab"]
    min_run_time: float = args.min_run_time or preset["min_run_time"]
    dtype = DTYPES[args.dtype]
    threads: int = args.threads
    if args.clock == "auto":
        clock: Clock = "cpu" if device.type == "cpu" and threads == 1 else "wall"
    else:
        clock = args.clock
    if device.type == "cuda" and clock == "cpu":
        raise UsageError("--clock cpu cannot time CUDA kernels; use --clock wall")
    torch.set_num_threads(threads)
    report = run_sweep(
        num_ids=num_ids,
        dim=dim,
        vocabs=vocabs,
        dims=dims,
        ns=ns,
        base_vocab=base_vocab,
        dtype=dtype,
        device=device,
        threads=threads,
        seed=args.seed,
        min_run_time=min_run_time,
        rounds=args.rounds or 1,
        clock=clock,
        memory=not args.no_memory,
        progress=not args.quiet,
    )
    report.config["quick"] = args.quick
    print(format_machine(report.machine) + f" | clock: {report.config['clock']}")
    print(format_calibration(report.calibration))
    print()
    print(format_headline(report))
    print()
    print(format_sweep_table(report))
    if report.notes:
        print("\nnotes:")
        print("\n".join(f"  {note}" for note in report.notes))
    paths = write_outputs(report, out, plots=plots)
    print(f"\nwrote {', '.join(str(p) for p in paths)} ({report.seconds:.0f} s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line (``embedding-equivalence bench ARGS``).

    Args:
        argv: the arguments (without the program name); ``None`` reads ``sys.argv``.

    Returns:
        The exit status: 0, or 2 on a usage error (one line on stderr). A performance target
        that does not hold, or a ratio outside the model's band, is reported, not an error.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    threads_before = torch.get_num_threads()
    try:
        args = _parser().parse_args(args_list)
        device = _resolve_device(args.device)
        if args.compare:
            return _compare_main(args, device)
        return _sweep_main(args, device)
    except UsageError as exc:
        sys.stderr.write(f"{_PROG}: error: {exc}\n")
        return 2
    finally:
        torch.set_num_threads(threads_before)


if __name__ == "__main__":
    raise SystemExit(main())
