"""Benchmark: each embedding form beside the raw torch call it wraps, forward and forward+backward.

Run it as ``python -m embedding_equivalence.bench`` (``--help`` lists the options). For every
vocabulary size ``V`` it times each form beside the raw torch call(s) it wraps:

- ``lookup_embedding`` vs ``F.embedding(ids, W)``;
- ``matmul_embedding`` vs ``zeros(N, V, dtype).scatter_(1, ids[:, None], 1) @ W`` and vs
  ``F.one_hot(ids, V).to(dtype) @ W``;
- ``linear_embedding`` vs ``F.linear(scatter_one_hot, W.t())``;
- ``sparse_matmul_embedding`` vs ``torch.sparse.mm(coo_one_hot, W)``, the COO one-hot built
  without the form's ``is_coalesced`` hint.

Every raw call builds its one-hot inside the timed statement, as the form does, so the two
columns measure the same work and the ratio is the cost of the form's wrapping (validation,
range check, memory check, reshapes). The ids and the weight come from a ``torch.Generator``
seeded by ``--seed``; the global RNG is never used. Forward+backward runs with a weight that
requires grad, a fixed upstream gradient of ones, and ``weight.grad = None`` before each run.

After the table it prints three targets and whether each holds:

(a) ``lookup_embedding`` forward+backward within 10% of ``F.embedding``;
(b) ``matmul_embedding`` no slower than the naive scatter one-hot (ratio <= 1.05, for noise);
(c) ``sparse_matmul_embedding`` forward at most 2x slower at the largest ``V`` than at the
    smallest.

The pieces (:class:`Measurement`, :func:`time_case`, :func:`run_benchmark`,
:func:`format_table`, :func:`evaluate_targets`) are reusable by a fuller ``bench`` command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

from ._lookup import lookup_embedding
from ._matmul import linear_embedding, matmul_embedding, sparse_matmul_embedding

__all__ = [
    "IMPLEMENTATIONS",
    "Implementation",
    "Measurement",
    "TargetResult",
    "build_inputs",
    "evaluate_targets",
    "format_machine",
    "format_table",
    "format_targets",
    "machine_info",
    "main",
    "run_benchmark",
    "time_case",
    "time_group",
]

Mode = Literal["fwd", "fwd+bwd"]
MODES: tuple[Mode, ...] = ("fwd", "fwd+bwd")

Clock = Literal["wall", "cpu"]
#: ``wall``: elapsed time (``time.perf_counter``, ``Timer``'s default). ``cpu``: CPU time of
#: the process (``time.process_time``, user + system of all its threads), which does not count
#: the time the process waits for a core on a shared machine; meaningful with one thread.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}

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
            None if mode == "fwd" else torch.ones(ids.shape[0], weight.shape[1], dtype=weight.dtype)
        )
        timers.append(
            Timer(
                stmt="step()",
                globals={"step": _make_step(impl.fn, ids, timed[key], grad_out)},
                num_threads=threads,
                timer=CLOCKS[clock],
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

    Returns:
        One :class:`Measurement` per (V, implementation, mode), in that order.
    """
    impls = list(implementations)
    inputs = {v: build_inputs(num_ids, v, dim, dtype, seed + v) for v in vocabs}
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


def machine_info(threads: int, dtype: torch.dtype) -> dict[str, str]:
    """Describe the machine and the settings of the run.

    Args:
        threads: the torch intra-op threads of the measurement.
        dtype: the weight's dtype.

    Returns:
        Keys ``cpu``, ``cores``, ``torch``, ``python``, ``threads``, ``dtype`` and ``load``
        (the 1-minute load average now: above 0 other processes share the cores, and the
        timings are noisier).
    """
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": str(threads),
        "dtype": _dtype_name(dtype),
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
    return (
        f"cpu: {info['cpu']} ({info['cores']} cores) | torch {info['torch']} | "
        f"python {info['python']} | threads: {info['threads']} | dtype: {info['dtype']} | "
        f"load average: {info['load']}"
    )


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

DEFAULT_VOCABS = (1024, 8192, 50257)
QUICK = {"n": 256, "d": 64, "vocab": (128, 1024, 8192), "min_run_time": 0.06}


def _vocab_list(values: Sequence[str] | None) -> list[int] | None:
    if not values:
        return None
    out: list[int] = []
    for value in values:
        for part in value.split(","):
            if part.strip():
                out.append(int(part))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m embedding_equivalence.bench",
        description=(
            "Time lookup_embedding, matmul_embedding, linear_embedding and "
            "sparse_matmul_embedding beside the raw torch calls they wrap, forward and "
            "forward+backward, and check the three performance targets."
        ),
    )
    p.add_argument("--n", type=int, default=None, help="number of ids N (default 2048)")
    p.add_argument("--d", type=int, default=None, help="embedding dim D (default 768)")
    p.add_argument(
        "--vocab",
        action="append",
        default=None,
        metavar="V[,V...]",
        help="vocabulary size(s); repeatable or comma-separated (default 1024,8192,50257)",
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="weight dtype")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input generator")
    p.add_argument(
        "--min-run-time",
        type=float,
        default=None,
        help="seconds of measurement per case, over all rounds (default 0.5; 0.06 with --quick)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds per form and its raw calls (default 3)",
    )
    p.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: elapsed time (default); cpu: process CPU time, which ignores the time "
        "spent waiting for a core on a loaded machine (use with --threads 1)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (N=256, D=64, V=128,1024,8192) and short timing: a few seconds",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="write the measurements here")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line and print the table and the targets.

    Args:
        argv: the arguments (without the program name); ``None`` reads ``sys.argv``.

    Returns:
        The exit status: 0 (a target that does not hold is reported, not an error).
    """
    args = _parser().parse_args(argv)
    quick: bool = args.quick
    num_ids: int = args.n if args.n is not None else (int(QUICK["n"]) if quick else 2048)
    dim: int = args.d if args.d is not None else (int(QUICK["d"]) if quick else 768)
    vocabs = _vocab_list(args.vocab) or list(QUICK["vocab"] if quick else DEFAULT_VOCABS)
    min_run_time: float = (
        args.min_run_time
        if args.min_run_time is not None
        else (float(QUICK["min_run_time"]) if quick else 0.5)
    )
    dtype = DTYPES[args.dtype]
    threads: int = args.threads
    rounds: int = args.rounds
    clock: Clock = args.clock
    if min(threads, rounds, num_ids, dim, *vocabs) < 1 or min_run_time <= 0:
        print(
            "bench: --threads, --rounds, --n, --d, --vocab and --min-run-time must be positive",
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(threads)

    info = machine_info(torch.get_num_threads(), dtype)
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


if __name__ == "__main__":
    raise SystemExit(main())
