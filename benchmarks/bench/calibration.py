"""Calibration: row gathers and scatters, zero-fill and copy bandwidths, GEMMs, per-call costs.

[`calibrate`][] measures this machine at the sizes a sweep needs; the [`Calibration`][]
it returns is what [`model_time`][bench.model.model_time] reads, and it is
saved in ``bench.json``. [`ROW_PRIMITIVES`][] are the per-row operations it times (the random
row gather of a lookup, the scatter-add of its backward, the rows of a sparse product);
[`gemm_k`][] says at which inner size a one-hot's GEMM is measured; [`settle_allocator`][]
puts the C allocator in its steady state before anything is timed.
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

from embedding_equivalence.forms.matmul import sparse_one_hot
from embedding_equivalence.forms.memory import available_memory_bytes

from .sweep_forms import SweepForm
from .timing import MODES, Timing, build_inputs, time_group, timer_fn

__all__ = [
    "GEMM_A_BYTES",
    "GLIBC_MMAP_THRESHOLD_MAX",
    "ROW_PRIMITIVES",
    "Calibration",
    "calibrate",
    "gemm_k",
    "settle_allocator",
]

#: The per-row operations [`calibrate`][] times, by name: ``(statement, what it is)``. Each is
#: timed at two numbers of rows ``N`` of ``D`` elements at random positions of a ``(V, D)``
#: table, with the same ids on every call as the benchmark calls the forms, and its cost per
#: row is the slope between them: what one more row costs, without the call's fixed cost.
ROW_PRIMITIVES: dict[str, tuple[str, str]] = {
    "gather": (
        "torch.index_select(W, 0, ids, out=out)",
        "rows copied out of the table: the lookup's forward",
    ),
    "scatter_add": (
        "torch.ops.aten.embedding_dense_backward(G, ids, V, -1, False)",
        "rows added into a gradient the call has just zero-filled: the lookup's backward "
        "(twice the cost per row of index_add_, and more where the fresh gradient is not in "
        "the cache)",
    ),
    "sparse_rows": (
        "torch.sparse.mm(one_hot, W)",
        "one row added per stored one, into an output the product zeroes twice: the forward "
        "of the sparse matmul",
    ),
    "sparse_rows_t": (
        "torch.sparse.mm(one_hot.t(), G)",
        "rows added into a (V, D) result the product has just zeroed twice: the backward of "
        "the sparse matmul",
    ),
}
#: The primitives that zero a fresh ``(V, D)`` buffer on every call. The slope leaves that
#: cost out (the model counts it at the zero-fill bandwidth), but on the CPU a buffer over
#: glibc's mmap threshold takes far longer to zero (a page fault per 4 KiB) than the rows take
#: to add, and its noise would swamp the slope: there they are timed on a table of at most
#: half the threshold, whose rows are just as far from the cache once it has been zero-filled.
_ZEROES_TABLE = frozenset({"scatter_add", "sparse_rows_t"})


def _interp_loglog(points: Sequence[tuple[float, float]], x: float) -> float:
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
        zero_pair: ``(bytes, bytes/s)`` points: two ``torch.zeros`` of ``bytes`` each, the
            first alive while the second is made (as torch's sparse product zeroes its result),
            at the bandwidth of both: two buffers that no longer fit the cache together are
            zeroed far slower than one.
        gemm: ``(N, K, D, "fwd" | "bwd") -> FLOP/s``: ``(N, K) @ (K, D)`` for ``"fwd"``,
            ``(N, K).T @ (N, D)`` for ``"bwd"``.
        overhead: ``(model, mode) -> seconds``: the time of the form's call on a tiny input
            (one id, two rows, one column), its fixed cost per call.
        rows: per primitive of [`ROW_PRIMITIVES`][], ``(row bytes, table bytes, seconds per
            row, seconds per row beyond the base count)`` points: the time one more row costs,
            rows of ``row bytes`` at random positions of a table of ``table bytes``.
        row_counts: ``(fewer, base, more)``: the numbers of rows each row primitive was timed
            with. Its seconds per row are the slope from ``fewer`` to ``base`` rows, so that
            the fixed cost of the call is not counted per row, and, for the rows beyond
            ``base``, the slope from ``base`` to ``more`` (once the rows and their output
            outgrow a cache, each costs more).
        allocator_warmup_bytes: the block [`settle_allocator`][] allocated and freed before
            anything was timed (0: none, e.g. on CUDA).
        seconds: how long the calibration took.
    """

    copy: list[tuple[int, float]]
    zero_fill: list[tuple[int, float]]
    zero_pair: list[tuple[int, float]] = field(default_factory=list)
    gemm: dict[tuple[int, int, int, str], float] = field(default_factory=dict)
    overhead: dict[tuple[str, str], float] = field(default_factory=dict)
    rows: dict[str, list[tuple[int, int, float, float]]] = field(default_factory=dict)
    row_counts: tuple[int, int, int] = (0, 0, 0)
    allocator_warmup_bytes: int = 0
    seconds: float = 0.0

    def row_seconds(
        self, primitive: str, row_bytes: int, table_bytes: int, *, beyond: bool = False
    ) -> float | None:
        """Seconds one row of ``primitive`` costs, for rows of a table of ``table_bytes``.

        Among the points measured with ``row_bytes``, interpolated log-log in the table's
        size (constant beyond the smallest and largest table). For a row size that was not
        measured, the nearest measured row size (in ratio), scaled by ``row_bytes`` over it.

        Args:
            primitive: a key of [`ROW_PRIMITIVES`][].
            row_bytes: bytes of one row, ``D * itemsize``.
            table_bytes: bytes of the table, ``V * D * itemsize``.
            beyond: the cost of a row beyond the base count of [`row_counts`][] (else up to
                it).

        Returns:
            Seconds per row, or ``None`` if ``primitive`` was not calibrated.
        """
        points = self.rows.get(primitive)
        if not points:
            return None
        near = min({p[0] for p in points}, key=lambda r: abs(math.log(r / row_bytes)))
        curve = [(float(t), above if beyond else sec) for r, t, sec, above in points if r == near]
        return _interp_loglog(curve, table_bytes) * row_bytes / near

    def rows_seconds(
        self, primitive: str, count: int, row_bytes: int, table_bytes: int
    ) -> float | None:
        """Seconds ``count`` rows of ``primitive`` cost, its fixed cost per call left out.

        Up to the base count of [`row_counts`][], each row at [`row_seconds`][]; beyond it,
        each further row at its cost beyond the base.

        Args:
            primitive: a key of [`ROW_PRIMITIVES`][].
            count: the number of rows, ``N``.
            row_bytes: bytes of one row, ``D * itemsize``.
            table_bytes: bytes of the table, ``V * D * itemsize``.

        Returns:
            Seconds, or ``None`` if ``primitive`` was not calibrated.
        """
        per_row = self.row_seconds(primitive, row_bytes, table_bytes)
        if per_row is None:
            return None
        base = self.row_counts[1] or count
        beyond = self.row_seconds(primitive, row_bytes, table_bytes, beyond=True) or per_row
        return min(count, base) * per_row + max(0, count - base) * beyond

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

    def zero_pair_bandwidth(self, nbytes: float) -> float:
        """Bandwidth in bytes/s of zeroing two fresh buffers of ``nbytes`` each, one by one.

        Falls back to [`zero_fill_bandwidth`][] where no pair was measured (a calibration from
        before pairs were).

        Args:
            nbytes: size of each buffer.

        Returns:
            Bytes per second, over both buffers.
        """
        if not self.zero_pair:
            return self.zero_fill_bandwidth(nbytes)
        return _interp_loglog(self.zero_pair, nbytes)

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
            model: a key of [`MODEL_FORMULAS`][bench.model.MODEL_FORMULAS].
            mode: ``"fwd"`` or ``"fwd+bwd"``.

        Returns:
            Seconds.
        """
        return self.overhead.get((model, mode), 0.0)

    def to_json(self) -> dict[str, Any]:
        """The calibration as JSON-ready data.

        Returns:
            Keys ``copy``, ``zero_fill`` and ``zero_pair`` (lists of ``{"bytes",
            "bytes_per_s"}``), ``gemm``
            (list of ``{"num_ids", "k", "dim", "shape", "flops_per_s"}``), ``overhead`` (list
            of ``{"model", "mode", "seconds"}``), ``rows`` (list of ``{"primitive",
            "row_bytes", "table_bytes", "seconds_per_row", "seconds_per_row_beyond"}``),
            ``row_counts``,
            ``allocator_warmup_bytes`` and ``seconds``.
        """
        return {
            "copy": [{"bytes": b, "bytes_per_s": bw} for b, bw in self.copy],
            "zero_fill": [{"bytes": b, "bytes_per_s": bw} for b, bw in self.zero_fill],
            "zero_pair": [{"bytes": b, "bytes_per_s": bw} for b, bw in self.zero_pair],
            "gemm": [
                {"num_ids": n, "k": k, "dim": d, "shape": w, "flops_per_s": f}
                for (n, k, d, w), f in sorted(self.gemm.items())
            ],
            "overhead": [
                {"model": m, "mode": mode, "seconds": t} for (m, mode), t in self.overhead.items()
            ],
            "rows": [
                {
                    "primitive": p,
                    "row_bytes": r,
                    "table_bytes": t,
                    "seconds_per_row": sec,
                    "seconds_per_row_beyond": above,
                }
                for p, points in self.rows.items()
                for r, t, sec, above in points
            ],
            "row_counts": list(self.row_counts),
            "allocator_warmup_bytes": self.allocator_warmup_bytes,
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        """Rebuild a calibration from [`to_json`][]'s output.

        Args:
            data: as returned by [`to_json`][] (a file of the first schema, without
                ``zero_pair``, ``rows``, ``row_counts`` and ``allocator_warmup_bytes``, reads
                as having none).

        Returns:
            The [`Calibration`][].
        """
        rows: dict[str, list[tuple[int, int, float, float]]] = {}
        for p in data.get("rows", []):
            sec = float(p["seconds_per_row"])
            rows.setdefault(str(p["primitive"]), []).append(
                (
                    int(p["row_bytes"]),
                    int(p["table_bytes"]),
                    sec,
                    float(p.get("seconds_per_row_beyond", sec)),
                )
            )
        fewer, base, more = data.get("row_counts", (0, 0, 0))
        return cls(
            copy=[(int(p["bytes"]), float(p["bytes_per_s"])) for p in data["copy"]],
            zero_fill=[(int(p["bytes"]), float(p["bytes_per_s"])) for p in data["zero_fill"]],
            zero_pair=[
                (int(p["bytes"]), float(p["bytes_per_s"])) for p in data.get("zero_pair", [])
            ],
            gemm={
                (int(g["num_ids"]), int(g["k"]), int(g["dim"]), str(g["shape"])): float(
                    g["flops_per_s"]
                )
                for g in data["gemm"]
            },
            overhead={
                (str(o["model"]), str(o["mode"])): float(o["seconds"]) for o in data["overhead"]
            },
            rows=rows,
            row_counts=(int(fewer), int(base), int(more)),
            allocator_warmup_bytes=int(data.get("allocator_warmup_bytes", 0)),
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


#: glibc's malloc serves a request below its *mmap threshold* from the heap it keeps (pages
#: already faulted in) and maps fresh memory for a larger one (every page faulted in again on
#: each call). The threshold starts at 128 KiB and rises to the size of each larger block that
#: is freed, up to this ceiling (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit Linux).
GLIBC_MMAP_THRESHOLD_MAX = 32 * 2**20


def settle_allocator(device: torch.device) -> int:
    """Put glibc's malloc in the steady state a long-running process reaches, before timing.

    Allocates and frees one block just under [`GLIBC_MMAP_THRESHOLD_MAX`][], which raises
    the mmap threshold to its ceiling at once. Without it, whether a buffer of a few MiB comes
    from the heap or from fresh pages (which cost a page fault each, often more than the work
    on them) depends on which calls ran before: the same case can time 10x apart within one
    run. After it, buffers under 32 MiB are reused and larger ones are always fresh, for every
    case and for the calibration alike. Harmless under another allocator; nothing on CUDA.

    Args:
        device: where the cases run.

    Returns:
        The bytes allocated and freed (0 on a device other than the CPU).
    """
    if device.type != "cpu":
        return 0
    nbytes = GLIBC_MMAP_THRESHOLD_MAX - 4 * 4096  # its block, header and page rounding included
    block = torch.empty(nbytes, dtype=torch.uint8)
    del block
    return nbytes


def _median_seconds(stmt: str, env: dict[str, Any], timing: Timing, device: torch.device) -> float:
    clock = timer_fn(timing.clock, device)
    timer = Timer(stmt=stmt, globals=env, num_threads=timing.threads, timer=clock)
    return max(timer.blocked_autorange(min_run_time=timing.min_run_time).median, 1e-12)


def _zero_pair(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zero two buffers, the first alive while the second is made, as ``torch.sparse.mm`` does."""
    first = torch.zeros(numel, dtype=dtype, device=device)
    second = torch.zeros(numel, dtype=dtype, device=device)
    del first
    return second


def _row_case(
    primitive: str, table: torch.Tensor, count: int, gen: torch.Generator
) -> dict[str, Any]:
    """The globals that time ``primitive`` on ``count`` rows of ``table``."""
    vocab, dim = table.shape
    ids = torch.randint(0, vocab, (count,), generator=gen).to(table.device)
    rows = torch.ones(count, dim, dtype=table.dtype, device=table.device)
    one_hot = sparse_one_hot(ids, vocab, table.dtype)
    return {
        "torch": torch,
        "W": table,
        "ids": ids,
        "out": rows,
        "G": rows,
        "V": vocab,
        "one_hot": one_hot,
    }


def _row_seconds(
    primitive: str,
    table: torch.Tensor,
    counts: tuple[int, int, int],
    timing: Timing,
    gen: torch.Generator,
) -> tuple[float, float]:
    """Seconds per row of ``primitive``: the slopes of its time up to and beyond the base."""
    stmt = ROW_PRIMITIVES[primitive][0]
    times = [
        _median_seconds(stmt, _row_case(primitive, table, count, gen), timing, table.device)
        for count in counts
    ]
    slopes = []
    for (n0, t0), (n1, t1) in itertools.pairwise(zip(counts, times, strict=True)):
        slope = (t1 - t0) / (n1 - n0) if n1 > n0 else 0.0
        if slope <= 0:
            # Noise made the slope vanish: the rows cost less than the noise of the fixed
            # part. Without a large fixed part, the time per row of the larger count (fixed
            # cost included) bounds them; with one (a zeroed table), they count as free.
            slope = 0.0 if primitive in _ZEROES_TABLE else t1 / n1
        slopes.append(slope)
    return slopes[0], slopes[1]


def calibrate(
    *,
    copy_sizes: Iterable[int],
    zero_sizes: Iterable[int],
    gemm_shapes: Iterable[tuple[int, int, int]],
    pair_sizes: Iterable[int] = (),
    row_shapes: Iterable[tuple[int, int]] = (),
    rows: int = 1,
    forms: Sequence[SweepForm] = (),
    dtype: torch.dtype,
    device: torch.device,
    timing: Timing,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure the bandwidths, per-row costs, GEMM throughputs and per-call costs of the model.

    First [`settle_allocator`][]. Then each quantity is measured at exactly the size the model
    asks about (sizes above a quarter of the available memory are skipped; the model then uses
    the largest measured), with ``torch.utils.benchmark.Timer.blocked_autorange`` under the same
    threads and clock as the cases.

    Args:
        copy_sizes: bytes moved (read + written) at which to time ``dst.copy_(src)``.
        zero_sizes: buffer sizes in bytes at which to time ``torch.zeros``.
        pair_sizes: buffer sizes in bytes at which to time two ``torch.zeros``, the first
            alive while the second is made.
        gemm_shapes: ``(N, K, D)`` triples: time ``(N, K) @ (K, D)`` and ``(N, K).T @ (N, D)``.
        row_shapes: ``(V, D)`` tables on which to time every primitive of
            [`ROW_PRIMITIVES`][], each at ``rows // 4``, ``rows`` and ``4 * rows`` rows (on
            the CPU, a primitive that zeroes its table on a table of at most 16 MiB).
        rows: the base number of rows of the row primitives (a sweep passes its base ``N``).
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
    warmup = settle_allocator(device)
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
    pairs: list[tuple[int, float]] = []
    pair_sizes = sorted({max(itemsize, s) for s in pair_sizes if fits(2 * s)})
    if pair_sizes and progress is not None:
        progress(f"calibrating the zero fill of two buffers at {len(pair_sizes)} sizes")
    for nbytes in pair_sizes:
        elems = max(1, nbytes // itemsize)
        env = {"pair": _zero_pair, "n": elems, "dtype": dtype, "device": device}
        t = _median_seconds("pair(n, dtype, device)", env, timing, device)
        pairs.append((elems * itemsize, 2 * elems * itemsize / t))
    gen = torch.Generator().manual_seed(0)
    counts = (max(1, rows // 4), max(1, rows), 4 * max(1, rows))
    row_costs: dict[str, list[tuple[int, int, float, float]]] = {}
    zeroed_cap = GLIBC_MMAP_THRESHOLD_MAX // 2 if device.type == "cpu" else None
    for vocab, dim in sorted(set(row_shapes)):
        if not fits(vocab * dim * itemsize):
            continue
        if progress is not None:
            progress(f"calibrating row gather and scatter costs on a {vocab} x {dim} table")
        for primitive in ROW_PRIMITIVES:
            rows_of = vocab
            if zeroed_cap is not None and primitive in _ZEROES_TABLE:
                rows_of = max(1, min(vocab, zeroed_cap // (dim * itemsize)))
            measured = {(p[0], p[1]) for p in row_costs.get(primitive, [])}
            if (dim * itemsize, rows_of * dim * itemsize) in measured:
                continue  # a capped table already timed for another V
            table = torch.ones(rows_of, dim, dtype=dtype, device=device)
            try:
                per_row, beyond = _row_seconds(primitive, table, counts, timing, gen)
            except (RuntimeError, NotImplementedError):  # e.g. a sparse product a device lacks
                continue
            finally:
                del table
            row_costs.setdefault(primitive, []).append(
                (dim * itemsize, rows_of * dim * itemsize, per_row, beyond)
            )
    gemm: dict[tuple[int, int, int, str], float] = {}
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
    return Calibration(
        copy,
        zero,
        pairs,
        gemm,
        overhead,
        rows=row_costs,
        row_counts=counts if row_costs else (0, 0, 0),
        allocator_warmup_bytes=warmup,
        seconds=time.perf_counter() - start,
    )
