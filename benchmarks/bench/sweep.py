"""Running the sweep: calibrate, then time every form at every point and measure its memory.

[`SweepSizes`][] holds the three one-at-a-time sweeps (``V``, ``D`` and ``N`` around a
base point); [`run_sweep`][] runs them and returns a
[`SweepReport`][bench.results.SweepReport].
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from embedding_equivalence.forms.memory import (
    OneHotTooLargeError,
    available_memory_bytes,
    check_dense_fits,
    format_bytes,
)

from .calibration import Calibration, calibrate, gemm_k
from .console import Progress
from .machine import load_average, machine_info
from .memory import MemoryProbe, measure_here, memory_spec
from .model import analytic_memory_bytes, model_time
from .results import CaseResult, SweepReport
from .sweep_forms import SWEEP_FORMS, SweepForm
from .timing import MODES, Measurement, Mode, Timing, build_inputs, dtype_name, time_group

__all__ = ["SWEEP_TIMING", "SweepSizes", "run_sweep"]


@dataclass(frozen=True)
class SweepSizes:
    """The three one-at-a-time sweeps around a base point ``(N, V, D)``.

    Attributes:
        num_ids: the base ``N``.
        dim: the base ``D``.
        vocabs: the ``V`` sweep, at the base ``N`` and ``D``.
        dims: the ``D`` sweep, at the base ``N`` and ``V = base_vocab``.
        ns: the ``N`` sweep, at the base ``D`` and ``V = base_vocab``.
        base_vocab: ``V`` of the ``D`` and ``N`` sweeps.
    """

    num_ids: int
    dim: int
    vocabs: tuple[int, ...]
    dims: tuple[int, ...]
    ns: tuple[int, ...]
    base_vocab: int

    def points(self) -> list[tuple[int, int, int, str]]:
        """The points of the three sweeps, without duplicates.

        Returns:
            ``(N, V, D, sweeps)`` in the order V sweep, D sweep, N sweep, where ``sweeps`` names
            every sweep the point belongs to, e.g. ``"V,D,N"`` for the base point.
        """
        n0, v0, d0 = self.num_ids, self.base_vocab, self.dim
        found: dict[tuple[int, int, int], list[str]] = {}
        for v in self.vocabs:
            found.setdefault((n0, v, d0), []).append("V")
        for d in dict.fromkeys(self.dims):
            found.setdefault((n0, v0, d), []).append("D")
        for n in dict.fromkeys(self.ns):
            found.setdefault((n, v0, d0), []).append("N")
        return [(n, v, d, ",".join(dict.fromkeys(s))) for (n, v, d), s in found.items()]


#: How the sweep times by default: one thread, CPU time, 0.25 s per case, one round.
SWEEP_TIMING = Timing(threads=1, clock="cpu", min_run_time=0.25, rounds=1)


def _one_hot_skip_note(
    form: SweepForm, n: int, v: int, dtype: torch.dtype, device: torch.device
) -> str | None:
    if not form.impl.dense_one_hot:
        return None
    try:
        check_dense_fits(n, "ids", v, dtype, device, form.impl.name)
    except OneHotTooLargeError:
        available = available_memory_bytes(device)
        return (
            f"skipped: the one-hot would take {format_bytes(n * v * dtype.itemsize)} "
            f"(N={n} x V={v} x {dtype.itemsize} bytes), more than the "
            f"{format_bytes(available or 0)} available on {device} (OneHotTooLargeError)"
        )
    return None


def run_sweep(
    sizes: SweepSizes,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
    timing: Timing = SWEEP_TIMING,
    memory: bool = True,
    forms: Sequence[SweepForm] = SWEEP_FORMS,
    progress: bool = False,
) -> SweepReport:
    """Calibrate the machine, then time every form at every point and measure its memory.

    Args:
        sizes: the three sweeps, whose points are run.
        dtype: the weight's dtype.
        device: where the cases run.
        seed: base seed of the inputs (the inputs at ``V`` use ``seed + V``).
        timing: the torch intra-op threads (fixed for every measurement and recorded), the
            clock (CUDA always uses synchronised wall time), the seconds of measurement per
            case (and per calibration point), and the interleaved rounds over the forms of one
            point (see [`time_group`][bench.timing.time_group]).
        memory: measure the peak memory of every case.
        forms: the forms to run.
        progress: write progress lines on stderr.

    Returns:
        The [`SweepReport`][].
    """
    start = time.perf_counter()
    device = torch.device(device)
    if device.type == "cuda":
        timing = replace(timing, clock="wall")
    # The machine as it is when the run starts: the date and the load average before it.
    machine = machine_info(timing.threads, dtype, device, timing.clock)
    itemsize = dtype.itemsize
    points = sizes.points()
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
    # The copy bandwidth is the model's stand-in for a row primitive it could not calibrate.
    copy_sizes = [2 * n * d * itemsize for n, _, d in lookups]
    zero_sizes = [v * d * itemsize for _, v, d in lookups]
    zero_sizes += [n * d * itemsize for n, _, d in lookups]  # the sparse product's output
    zero_sizes += [n * v * itemsize for n, v, _ in dense]
    pair_sizes = [v * d * itemsize for _, v, d in lookups]  # the sparse product's backward
    row_shapes = sorted({(v, d) for _, v, d in lookups})
    gemm_shapes = sorted({(n, gemm_k(n, v, itemsize), d) for n, v, d in dense})
    use_memory = memory and device.type in ("cpu", "cuda")
    total = 1 + len(groups) + (len(runnable) if use_memory else 0)
    with Progress("bench", total, sys.stderr, enabled=progress) as bar:
        probe = MemoryProbe() if use_memory and device.type == "cpu" else None
        results: list[CaseResult] = []
        notes: list[str] = []
        try:
            if probe is not None:
                bar.note("starting the memory-measuring process in the background")
                probe.start()
            cal = calibrate(
                copy_sizes=copy_sizes,
                zero_sizes=zero_sizes,
                gemm_shapes=gemm_shapes,
                pair_sizes=pair_sizes,
                row_shapes=row_shapes,
                rows=sizes.num_ids,
                forms=forms,
                dtype=dtype,
                device=device,
                timing=timing,
                progress=bar.note,
            )
            bar.step(f"calibrated in {cal.seconds:.1f} s")
            for n, v, d, sweeps in points:
                point = (n, v, d)
                ids, weight = build_inputs(n, v, d, dtype, seed + v)
                ids, weight = ids.to(device), weight.to(device)
                for mode in MODES:
                    members = [f for (q, f, m) in runnable if q == point and m == mode]
                    measured: dict[str, Measurement] = {}
                    if members:
                        bar.step(f"timing {mode:<7} N={n} V={v} D={d}: {len(members)} forms")
                        cases = [(f.impl, ids, weight) for f in members]
                        for f, m in zip(members, time_group(cases, mode, timing), strict=True):
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
                                timing,
                                measured.get(f.label),
                                skips[(point, f.label)],
                                cal,
                            )
                        )
                        r = results[-1]
                        if r.status == "ok" and use_memory:
                            bar.step(f"memory {mode:<7} N={n} V={v} D={d}: {f.label}")
                            spec = memory_spec(
                                f, mode, point, dtype, device, seed + v, timing.threads
                            )
                            timeout = max(120.0, 50 * (r.model_ms or 0) / 1e3)
                            found = (
                                probe.measure(spec, timeout)
                                if probe is not None
                                else measure_here(spec)
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
    config: dict[str, Any] = {
        k: list(v) if isinstance(v, tuple) else v for k, v in asdict(sizes).items()
    }
    config |= {
        "points": [list(p[:3]) for p in points],
        "dtype": dtype_name(dtype),
        "device": str(device),
        "threads": timing.threads,
        "seed": seed,
        "min_run_time": timing.min_run_time,
        "rounds": timing.rounds,
        "clock": timing.clock,
        "memory": use_memory,
    }
    machine["load_after"] = load_average()
    return SweepReport(machine, config, cal, results, notes, time.perf_counter() - start)


def _case_result(
    form: SweepForm,
    mode: Mode,
    point: tuple[int, int, int],
    sweeps: str,
    dtype: torch.dtype,
    device: torch.device,
    timing: Timing,
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
        dtype=dtype_name(dtype),
        device=str(device),
        threads=timing.threads,
        clock=timing.clock,
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
