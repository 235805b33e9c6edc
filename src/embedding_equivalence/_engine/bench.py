"""``bench_embedding``: a verified kernel's speed beside ``F.embedding``'s, at the caller's sizes.

A fast wrong kernel has no speed: the candidate is verified first
([`verify_embedding`][embedding_equivalence.verify_embedding], on the dtype and device it is
timed on), and a failure is raised, not timed. Then each size is timed with
``torch.utils.benchmark`` (its ``Timer.blocked_autorange``, which synchronizes CUDA), forward
and forward plus backward, the reference and the candidate taking turns twice so that a drift
of the machine's speed falls on both.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis.errors import InvalidArgument
from torch.utils import benchmark

from ..forms.dtypes import dtype_name
from .names import candidate_name
from .report import VerificationReport
from .verify import verify_embedding

#: The sizes timed when none are given: GPT-2's vocabulary and width, a batch of 4,096 ids.
DEFAULT_BENCH_SIZES = {"vocab_sizes": (50_257,), "embedding_dims": (768,), "num_ids": (4_096,)}


@dataclass(frozen=True)
class BenchTiming:
    """One size and one pass: the candidate's and ``F.embedding``'s seconds a call.

    Attributes:
        vocab_size: ``V``.
        embedding_dim: ``D``.
        num_ids: ``N``, the ids of a call (1-D).
        stage: ``"forward"`` or ``"forward+backward"``.
        candidate: the candidate's median seconds a call.
        reference: ``F.embedding``'s median seconds a call.
        ratio: ``candidate / reference``: below 1, the candidate is faster.
        low: the ratio's spread, from the quartiles of the measurements: the candidate's first
            over the reference's third.
        high: the candidate's third quartile over the reference's first.
    """

    vocab_size: int
    embedding_dim: int
    num_ids: int
    stage: str
    candidate: float
    reference: float
    ratio: float
    low: float
    high: float


@dataclass(frozen=True)
class BenchReport:
    """What [`bench_embedding`][embedding_equivalence.bench_embedding] measured.

    Attributes:
        candidate: the candidate's name.
        dtype: the table's dtype, by name.
        device: where it ran.
        verification: the passing verification that came first.
        timings: one per size and stage.
    """

    candidate: str
    dtype: str
    device: str
    verification: VerificationReport
    timings: tuple[BenchTiming, ...]

    def __str__(self) -> str:
        v = self.verification
        rows = [
            f"{t.vocab_size:>9,} {t.embedding_dim:>6,} {t.num_ids:>8,}  {t.stage:16} "
            f"{_seconds(t.candidate):>11} {_seconds(t.reference):>11} {t.ratio:>6.2f}  "
            f"{t.low:.2f}-{t.high:.2f}"
            for t in self.timings
        ]
        return "\n".join(
            [
                f"{self.candidate} against F.embedding, {self.dtype} on {self.device} (verified "
                f"first: passed, {v.examples} examples, {v.elapsed:.1f} s)",
                f"{'V':>9} {'D':>6} {'N':>8}  {'stage':16} {'candidate':>11} {'F.embedding':>11} "
                f"{'ratio':>6}  spread",
                *rows,
                "ratio = candidate / F.embedding (below 1: faster); spread: from quartiles",
            ]
        )


def _seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _sizes(name: str, values: Sequence[int] | None) -> tuple[int, ...]:
    sizes = tuple(DEFAULT_BENCH_SIZES[name] if values is None else values)
    if not sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
        raise InvalidArgument(
            f"{name}={values!r} must be positive ints, e.g. bench_embedding(fn, {name}=[1000])"
        )
    return sizes


def _times(
    fn: Callable[..., Any], args: tuple[torch.Tensor, ...], min_run_time: float
) -> list[float]:
    """Seconds a call of ``fn`` on ``(ids, weight, grad)`` takes, one figure a block of calls."""
    timer = benchmark.Timer(stmt="call()", globals={"call": functools.partial(_call, fn, *args)})
    return list(timer.blocked_autorange(min_run_time=min_run_time).times)


def _call(
    fn: Callable[..., Any], ids: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor
) -> None:
    """One timed call of ``fn``: forward, and backward when ``weight`` requires grad."""
    weight.grad = None
    out = fn(ids, weight)
    if weight.requires_grad:
        out.backward(grad)


def bench_embedding(
    candidate: Callable[..., Any],
    *,
    vocab_sizes: Sequence[int] | None = None,
    embedding_dims: Sequence[int] | None = None,
    num_ids: Sequence[int] | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    backward: bool = True,
    seed: int = 0,
    min_run_time: float = 0.2,
) -> BenchReport:
    """Time ``candidate`` against ``F.embedding`` at the given sizes, once it has been verified.

    ``candidate`` is verified first with
    [`verify_embedding`][embedding_equivalence.verify_embedding] on ``dtype`` and ``device``
    (its defaults otherwise: the boundary phase and the random examples); a failure raises
    and nothing is timed. Each combination of the sizes is then timed forward, and with
    ``backward`` forward plus backward (the table's gradient set to ``None`` before each
    call), on the same table and ids for both kernels, drawn from ``seed``.

    Args:
        candidate: the kernel, with ``F.embedding``'s signature.
        vocab_sizes: the ``V`` to time (default 50,257).
        embedding_dims: the ``D`` to time (default 768).
        num_ids: the ``N`` (ids a call, 1-D) to time (default 4,096).
        dtype: the table's dtype.
        device: where the tensors live.
        backward: also time forward plus backward (and verify the gradients).
        seed: the verification's seed and the timed tensors' seed.
        min_run_time: seconds each of the four measurements of a size runs at least.

    Returns:
        A [`BenchReport`][embedding_equivalence.BenchReport]; ``str()`` of it is a table.

    Raises:
        EquivalenceError: ``candidate`` failed verification (with the repro).
        InvalidArgument: a size that is not a positive int, or a bad dtype or device.

    Examples:
        >>> import torch.nn.functional as F
        >>> from embedding_equivalence import bench_embedding
        >>> report = bench_embedding(F.embedding, vocab_sizes=[100], min_run_time=0.01)
        >>> [t.stage for t in report.timings]
        ['forward', 'forward+backward']
    """
    given = (vocab_sizes, embedding_dims, num_ids)
    sizes = [_sizes(name, v) for name, v in zip(DEFAULT_BENCH_SIZES, given, strict=True)]
    report = verify_embedding(
        candidate, dtypes=[dtype], devices=[device], backward=backward, seed=seed
    )
    report.raise_for_failure()
    gen = torch.Generator().manual_seed(seed)
    timings = []
    for v, d, n in itertools.product(*sizes):
        ids = torch.randint(0, v, (n,), generator=gen).to(device)
        weight = torch.randn(v, d, generator=gen, dtype=dtype).to(device)
        grad = torch.randn(n, d, generator=gen, dtype=dtype).to(device)
        for stage in ("forward", "forward+backward")[: 1 + backward]:
            weight.requires_grad_(stage != "forward")
            ref: list[float] = []
            cand: list[float] = []
            for _ in range(2):  # taking turns: a drift of the machine falls on both
                ref += _times(F.embedding, (ids, weight, grad), min_run_time)
                cand += _times(candidate, (ids, weight, grad), min_run_time)
            # Quartiles: each list holds at least two figures, one a turn.
            (r1, r, r3), (c1, c, c3) = (
                statistics.quantiles(t, method="inclusive") for t in (ref, cand)
            )
            timings.append(BenchTiming(v, d, n, stage, c, r, c / r, c1 / r3, c3 / r1))
    where = str(torch.device(device))
    return BenchReport(candidate_name(candidate), dtype_name(dtype), where, report, tuple(timings))
