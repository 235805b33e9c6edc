"""The results of a sweep: one [`CaseResult`][] per case, and the [`SweepReport`][].

`SweepReport.to_json` is the content of ``bench.json`` (and `SweepReport.from_json`
reads it back); [`CSV_COLUMNS`][] are the columns of ``bench.csv``; [`headline_rows`][]
is the headline, the lookup against the one-hot matmul over the ``V`` sweep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .calibration import ROW_PRIMITIVES, Calibration
from .model import MODEL_FORMULAS
from .timing import MODES, Mode

__all__ = [
    "CSV_COLUMNS",
    "HEADLINE_COLUMNS",
    "SCHEMA",
    "CaseResult",
    "SweepReport",
    "find_case",
    "headline_rows",
    "v_sweep_points",
]


@dataclass
class CaseResult:
    """One form in one mode at one ``(N, V, D)``: time, model, memory.

    Attributes:
        form: the form's label (see
            [`SweepForm`][bench.sweep_forms.SweepForm]).
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
        model_ms: the model time in ms, ``overhead_ms + roofline_ms``
            ([`model_time`][bench.model.model_time]).
        ratio: ``median_ms / model_ms``.
        roofline_ms: the bandwidth and throughput terms of the model alone.
        overhead_ms: the form's fixed cost per call, measured on a tiny input.
        model_terms: the model's terms, e.g. ``"gather 1024 rows at 24.5 ns: 0.0251 ms"``.
        peak_bytes: measured peak memory beyond the inputs.
        analytic_bytes:
        [`analytic_memory_bytes`][bench.model.analytic_memory_bytes].
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


#: The ``"schema"`` of ``bench.json``. Version 2 added the row primitives, the zero fill of a
#: pair of buffers and the allocator's warm-up to the calibration, and models the lookup and
#: the sparse matmul from them; a file of version 1 still reads (its calibration has none).
SCHEMA = "embedding-equivalence/bench/2"

#: The columns of ``bench.csv``: the fields of [`CaseResult`][], in order.
CSV_COLUMNS: tuple[str, ...] = tuple(CaseResult.__dataclass_fields__)


@dataclass
class SweepReport:
    """Everything a sweep measured.

    Attributes:
        machine: [`machine_info`][bench.machine.machine_info] at the start of
            the run, plus ``load_after`` (the load average at its end).
        config: the sizes and settings of the run.
        calibration: the measured bandwidths and throughputs.
        results: one [`CaseResult`][] per form, mode and point.
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
            ``headline`` ([`headline_rows`][]), ``results`` and ``notes``.
        """
        return {
            "schema": SCHEMA,
            "machine": self.machine,
            "config": {**self.config, "seconds": round(self.seconds, 1)},
            "calibration": self.calibration.to_json(),
            "model": {
                "formulas": MODEL_FORMULAS,
                "symbols": {
                    "c": "the form's fixed cost per call (its time on one id of a 2 x 1 "
                    "table), added to every formula",
                    "s": "bytes per element of the dtype",
                    **{
                        f"{name}(r, T)": f"seconds per row of {stmt} ({ids} ids every call), "
                        "rows of r bytes at random positions of a T-byte table, the slope "
                        "between two numbers of rows; interpolated log-log in T"
                        for name, (stmt, ids) in ROW_PRIMITIVES.items()
                    },
                    "Z(x)": "bandwidth of torch.zeros of x bytes (allocation, page faults, memset)",
                    "Z2(x)": "bandwidth of two torch.zeros of x bytes each, the first alive "
                    "while the second is made (the pair torch.sparse.mm zeroes)",
                    "F_fwd(N, D)": "GEMM FLOP/s of (N, K) @ (K, D)",
                    "F_bwd(N, D)": "GEMM FLOP/s of (N, K).T @ (N, D)",
                    "B(x)": "copy bandwidth (bytes read + written per second) at x bytes: "
                    "used only for a row primitive that could not be calibrated",
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
            data: as written by [`write_outputs`][bench.report.write_outputs].

        Returns:
            The [`SweepReport`][].
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


def find_case(
    results: Iterable[CaseResult], form: str, mode: Mode, point: tuple[int, int, int]
) -> CaseResult | None:
    """The result of one form in one mode at one point.

    Args:
        results: where to look.
        form: the form's label.
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        point: ``(N, V, D)``.

    Returns:
        The first matching [`CaseResult`][], or ``None``.
    """
    for r in results:
        if r.form == form and r.mode == mode and (r.num_ids, r.vocab, r.dim) == point:
            return r
    return None


def v_sweep_points(report: SweepReport) -> list[tuple[int, int, int]]:
    """The points ``(N, V, D)`` of the report's ``V`` sweep, at its base ``N`` and ``D``.

    Args:
        report: a sweep's report.

    Returns:
        One point per ``V`` of ``report.config["vocabs"]``, in that order.
    """
    n, d = report.config["num_ids"], report.config["dim"]
    return [(n, v, d) for v in report.config["vocabs"]]


#: The keys of each row of [`headline_rows`][] (and of ``bench.json``'s ``"headline"``).
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
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        Dicts with the keys of [`HEADLINE_COLUMNS`][] (times in ms, memory in MiB beyond
        the inputs, ``None`` where not measured; ``"one-hot status"`` is ``"ok"``,
        ``"skipped"`` or ``"error"``).
    """
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        for point in v_sweep_points(report):
            lk = find_case(report.results, "lookup", mode, point)
            oh = find_case(report.results, "one-hot matmul", mode, point)
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
