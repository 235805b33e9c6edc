"""Reporting a sweep: the printed tables, and the files ``bench.json`` and ``bench.csv``.

[`format_calibration`][], [`format_headline`][] and [`format_sweep_table`][] are the text
the ``bench`` command prints; [`write_outputs`][] writes the result files and the plots
([`plots`][embedding_equivalence.bench.plots]).
"""

from __future__ import annotations

import csv
import json
import statistics
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

from ..forms.validation import format_bytes
from .calibration import Calibration
from .plots import write_plots
from .results import CSV_COLUMNS, SweepReport, headline_rows

__all__ = [
    "RATIO_BAND",
    "format_calibration",
    "format_headline",
    "format_sweep_table",
    "write_outputs",
]

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
        cal: as returned by [`calibrate`][embedding_equivalence.bench.calibration.calibrate].

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


def format_headline(report: SweepReport) -> str:
    """The headline table ([`headline_rows`][]) as text.

    Per mode and ``V``: measured and model time of the lookup and of the one-hot matmul in ms
    with their ratio measured/model, the one-hot/lookup time ratio measured and modelled, and
    the measured peak memory of both (MiB beyond the inputs).

    Args:
        report: as returned by [`run_sweep`][embedding_equivalence.bench.sweep.run_sweep].

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
        report: as returned by [`run_sweep`][embedding_equivalence.bench.sweep.run_sweep].

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


def write_outputs(report: SweepReport, out: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ``bench.json``, ``bench.csv`` and (with ``plots``) the three SVG plots.

    Args:
        report: as returned by [`run_sweep`][embedding_equivalence.bench.sweep.run_sweep].
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


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------
