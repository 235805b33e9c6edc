"""Reporting a sweep: the printed tables, and the files ``bench.json`` and ``bench.csv``.

[`format_calibration`][], [`format_headline`][] and [`format_sweep_table`][] are the text
of the ``bench`` command; it prints [`headline_table`][] and [`sweep_table`][] as rich tables
on a terminal (see [`console`][embedding_equivalence._cli.console]). [`write_outputs`][] writes
the result files and the plots ([`plots`][bench.plots]).
"""

from __future__ import annotations

import csv
import json
import statistics
import textwrap
from dataclasses import asdict
from pathlib import Path

from embedding_equivalence.forms.memory import format_bytes

from .calibration import Calibration
from .console import SectionedTable
from .plots import write_plots
from .results import CSV_COLUMNS, SweepReport, headline_rows

__all__ = [
    "RATIO_BAND",
    "format_calibration",
    "format_headline",
    "format_sweep_table",
    "headline_table",
    "ratio_summary",
    "sweep_table",
    "write_outputs",
]

#: Where a measured/model ratio counts as agreeing with the model: within 30% of 1.
RATIO_BAND = (0.7, 1.3)


def _mib(nbytes: int | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.3g}"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def format_calibration(cal: Calibration) -> str:
    """Format the calibration in a few lines.

    Args:
        cal: as returned by [`calibrate`][bench.calibration.calibrate].

    Returns:
        The text, without a trailing newline.
    """
    copy = ", ".join(f"{format_bytes(b)}: {bw / 1e9:.1f}" for b, bw in cal.copy)
    zero = ", ".join(f"{format_bytes(b)}: {bw / 1e9:.1f}" for b, bw in cal.zero_fill)
    pair = ", ".join(f"{format_bytes(b)}: {bw / 1e9:.1f}" for b, bw in cal.zero_pair)
    wrap = {"width": 100, "subsequent_indent": "    "}
    lines = [
        f"calibration ({cal.seconds:.1f} s):",
        textwrap.fill(f"  copy bandwidth GB/s at bytes moved: {copy}", **wrap),
        textwrap.fill(f"  zero-fill bandwidth GB/s at buffer size: {zero}", **wrap),
    ]
    if pair:
        lines.append(textwrap.fill(f"  zero-fill GB/s of two buffers of each size: {pair}", **wrap))
    if cal.allocator_warmup_bytes:
        lines.append(f"  allocator settled by one {format_bytes(cal.allocator_warmup_bytes)} block")
    for primitive, points in cal.rows.items():
        costs = ", ".join(
            f"{format_bytes(r)} of {format_bytes(t)}: {sec * 1e9:.3g} ({above * 1e9:.3g})"
            for r, t, sec, above in points
        )
        lines.append(
            textwrap.fill(
                f"  {primitive} ns per row (beyond the base N) for rows of a table: {costs}",
                **wrap,
            )
        )
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


def headline_table(report: SweepReport) -> SectionedTable:
    """The headline table ([`headline_rows`][]), titled, one section per mode.

    Per mode and ``V``: measured and model time of the lookup and of the one-hot matmul in ms
    with their ratio measured/model, the one-hot/lookup time ratio measured and modelled, and
    the measured peak memory of both (MiB beyond the inputs).

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        The [`SectionedTable`][bench.console.SectionedTable].
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
    table = SectionedTable(header, right=range(1, len(header)), title=title)
    mode = None
    for h in headline_rows(report):
        if mode is not None and h["mode"] != mode:
            table.add_section()
        mode = h["mode"]
        skipped = h["one-hot status"] != "ok"
        table.add_row(
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
        )
    return table


def format_headline(report: SweepReport) -> str:
    """The headline table ([`headline_table`][]) as plain text.

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        The title and the table, without a trailing newline.
    """
    return headline_table(report).plain()


def sweep_table(report: SweepReport) -> SectionedTable:
    """Every case: time, model, measured/model, peak and analytic memory, and notes.

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        The [`SectionedTable`][bench.console.SectionedTable], one section per point.
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
    table = SectionedTable(header, right=range(3, len(header) - 1))
    last: tuple[int, int, int] | None = None
    for r in report.results:
        point = (r.num_ids, r.vocab, r.dim)
        if last is not None and point != last:
            table.add_section()
        last = point
        note = "" if r.status == "ok" and not r.note else (r.note or r.status)
        table.add_row(
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
        )
    return table


def ratio_summary(report: SweepReport) -> str:
    """How many cases agree with the model, and the range of measured/model per form and mode.

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        The lines, without a trailing newline.
    """
    ratios = [r for r in report.results if r.ratio is not None]
    inside = [r for r in ratios if RATIO_BAND[0] <= (r.ratio or 0) <= RATIO_BAND[1]]
    lines = [
        f"measured/model within 30% ({RATIO_BAND[0]} to {RATIO_BAND[1]}): "
        f"{len(inside)} of {len(ratios)} cases"
    ]
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


def format_sweep_table(report: SweepReport) -> str:
    """Every case ([`sweep_table`][]) as plain text, then the [`ratio_summary`][].

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].

    Returns:
        The table and the summary, without a trailing newline.
    """
    return f"{sweep_table(report).plain()}\n\n{ratio_summary(report)}"


def _write_csv(report: SweepReport, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for r in report.results:
            writer.writerow({k: "" if v is None else v for k, v in asdict(r).items()})


def write_outputs(report: SweepReport, out: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ``bench.json``, ``bench.csv`` and (with ``plots``) the three SVG plots.

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].
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
        paths += write_plots(report, folder)
    return paths
