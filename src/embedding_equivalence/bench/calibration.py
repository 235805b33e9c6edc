"""Calibration: the copy and zero-fill bandwidths, GEMM throughputs and per-call costs.

[`calibrate`][] measures this machine at the sizes a sweep needs; the [`Calibration`][]
it returns is what [`model_time`][embedding_equivalence.bench.model.model_time] reads, and it is
saved in ``bench.json``. [`gemm_k`][] says at which inner size a one-hot's GEMM is measured.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.utils.benchmark import Timer

from ..forms.validation import available_memory_bytes
from .sweep_forms import SweepForm
from .timing import MODES, Timing, build_inputs, time_group, timer_fn

__all__ = ["GEMM_A_BYTES", "Calibration", "calibrate", "gemm_k"]


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
    """What the model needs to know about the machine, measured by [`calibrate`][].

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
            model: a key of [`MODEL_FORMULAS`][embedding_equivalence.bench.model.MODEL_FORMULAS].
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
        """Rebuild a calibration from [`to_json`][]'s output.

        Args:
            data: as returned by [`to_json`][].

        Returns:
            The [`Calibration`][].
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


def _median_seconds(stmt: str, env: dict[str, Any], timing: Timing, device: torch.device) -> float:
    clock = timer_fn(timing.clock, device)
    timer = Timer(stmt=stmt, globals=env, num_threads=timing.threads, timer=clock)
    return max(timer.blocked_autorange(min_run_time=timing.min_run_time).median, 1e-12)


def calibrate(
    *,
    copy_sizes: Iterable[int],
    zero_sizes: Iterable[int],
    gemm_shapes: Iterable[tuple[int, int, int]],
    forms: Sequence[SweepForm] = (),
    dtype: torch.dtype,
    device: torch.device,
    timing: Timing,
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
        timing: the threads, the clock and the seconds of measurement per point (each point
            is timed in one round).
        progress: called with a one-line note before each group of measurements.

    Returns:
        The [`Calibration`][].
    """
    start = time.perf_counter()
    itemsize = dtype.itemsize
    available = available_memory_bytes(device)
    cap = None if available is None else available // 4

    def fits(nbytes: int) -> bool:
        return cap is None or nbytes <= cap

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
        t = _median_seconds("dst.copy_(src)", {"dst": dst, "src": src}, timing, device)
        copy.append((2 * elems * itemsize, 2 * elems * itemsize / t))
        del src, dst
    if progress is not None:
        progress(f"calibrating zero-fill bandwidth at {len(zero_sizes)} sizes")
    for nbytes in zero_sizes or [1 << 20]:
        elems = max(1, nbytes // itemsize)
        env = {"torch": torch, "n": elems, "dtype": dtype, "device": device}
        t = _median_seconds("torch.zeros(n, dtype=dtype, device=device)", env, timing, device)
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
        fwd = _median_seconds("a @ b", {"a": a, "b": b}, timing, device)
        bwd = _median_seconds("a.t() @ g", {"a": a, "g": g}, timing, device)
        gemm[(n, k, d, "fwd")], gemm[(n, k, d, "bwd")] = flops / fwd, flops / bwd
        del a, b, g
    overhead: dict[tuple[str, str], float] = {}
    if forms:
        if progress is not None:
            progress(f"calibrating the fixed cost per call of {len(forms)} forms")
        ids, weight = build_inputs(1, 2, 1, dtype, 0)
        ids, weight = ids.to(device), weight.to(device)
        for mode in MODES:
            members = [f for f in forms if mode in f.modes]
            cases = [(f.impl, ids, weight) for f in members]
            measured = time_group(cases, mode, replace(timing, rounds=1))
            for f, m in zip(members, measured, strict=True):
                if m.median_ms is not None:
                    overhead[(f.model, mode)] = m.median_ms / 1e3
    return Calibration(copy, zero, gemm, overhead, time.perf_counter() - start)
