"""The plots of a sweep, drawn with matplotlib as SVG files.

[`write_plots`][] draws ``time_vs_vocab.svg`` and ``memory_vs_vocab.svg`` (each form over the
``V`` sweep, measured and modelled, one panel per mode) and ``ratio_vs_model.svg`` (the
one-hot/lookup time ratio, measured and modelled). matplotlib is optional
(``pip install 'embedding-equivalence[bench]'``): [`require_matplotlib`][] says so clearly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedding_equivalence._cli.usage import UsageError

from .results import CaseResult, SweepReport, find_case, v_sweep_points
from .sweep_forms import SWEEP_FORMS
from .timing import MODES, Mode

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["require_matplotlib", "write_plots"]

_MATPLOTLIB_MISSING = (
    "matplotlib is needed for the plots: pip install 'embedding-equivalence[bench]' "
    "(or pass --no-plots)"
)

#: A value to plot from one case, ``None`` where there is none.
_Value = Callable[[CaseResult], float | None]


def require_matplotlib() -> None:
    """Check that matplotlib can be imported.

    Raises:
        UsageError: it cannot; the message says how to install it, or to pass ``--no-plots``.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(_MATPLOTLIB_MISSING) from None


def _series(
    report: SweepReport, form: str, mode: Mode, value: _Value
) -> tuple[list[int], list[float]]:
    xs: list[int] = []
    ys: list[float] = []
    for point in v_sweep_points(report):
        r = find_case(report.results, form, mode, point)
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


def _forms_vs_vocab(
    report: SweepReport,
    measured: _Value,
    modelled: _Value,
    *,
    ylabel: str,
    dashed: str,
    title: str,
) -> Figure:
    """One panel per mode: every form over the ``V`` sweep, measured solid, modelled dashed."""
    from matplotlib.figure import Figure

    colors = {f.label: f"C{i}" for i, f in enumerate(SWEEP_FORMS)}
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, mode in zip(axes, MODES, strict=True):
        for f in SWEEP_FORMS:
            if mode not in f.modes:
                continue
            xs, ys = _series(report, f.label, mode, measured)
            if xs:
                ax.plot(xs, ys, "o-", color=colors[f.label], label=f.label)
            xs, ys = _series(report, f.label, mode, modelled)
            if xs:
                ax.plot(xs, ys, "--", color=colors[f.label], alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("vocabulary size V")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{'forward' if mode == 'fwd' else 'forward + backward'}")
        ax.grid(True, which="both", alpha=0.3)
    axes[1].plot([], [], "k--", alpha=0.6, label=f"{dashed} (dashed)")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"{title}\n{_plot_title(report)}", fontsize=10)
    return fig


def _ratio_vs_model(report: SweepReport) -> Figure:
    """The one-hot/lookup time ratio over the ``V`` sweep, measured and modelled, per mode."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.8), layout="constrained")
    ax = fig.subplots()
    for mode, color in zip(MODES, ("C2", "C3"), strict=True):
        values: tuple[tuple[str, str, _Value], ...] = (
            ("measured", "o-", lambda r: r.median_ms),
            ("model", "--", lambda r: r.model_ms),
        )
        for what, style, value in values:
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
    return fig


def write_plots(report: SweepReport, out: Path) -> list[Path]:
    """Draw ``time_vs_vocab.svg``, ``memory_vs_vocab.svg`` and ``ratio_vs_model.svg``.

    The SVGs are reproducible: no date, a fixed hash salt, text kept as text. Cases skipped
    because their one-hot cannot fit are named in a footnote.

    Args:
        report: as returned by [`run_sweep`][bench.sweep.run_sweep].
        out: the folder to write in (it exists).

    Returns:
        The paths written.

    Raises:
        UsageError: matplotlib is not installed.
    """
    require_matplotlib()
    import matplotlib

    rc: dict[Any, Any] = {"svg.hashsalt": "embedding-equivalence", "svg.fonttype": "none"}
    footnote = _skipped_footnote(report)
    method = (
        "torch.cuda.max_memory_allocated"
        if report.config["device"].startswith("cuda")
        else "peak RSS of a fresh process per case"
    )
    paths: list[Path] = []
    with matplotlib.rc_context(rc):
        figures = {
            "time_vs_vocab.svg": _forms_vs_vocab(
                report,
                lambda r: r.median_ms,
                lambda r: r.model_ms,
                ylabel="time per call (ms)",
                dashed="model",
                title="Time vs V: measured (solid) and roofline model (dashed)",
            ),
            "memory_vs_vocab.svg": _forms_vs_vocab(
                report,
                lambda r: None if r.peak_bytes is None else r.peak_bytes / 2**20,
                lambda r: r.analytic_bytes / 2**20 if r.status == "ok" else None,
                ylabel="peak memory beyond the inputs (MiB)",
                dashed="analytic",
                title=f"Peak memory vs V: measured ({method}, solid) and analytic (dashed)",
            ),
            "ratio_vs_model.svg": _ratio_vs_model(report),
        }
        for name, fig in figures.items():
            if footnote:
                fig.text(0.01, 0.005, footnote, fontsize=7, ha="left", va="bottom")
            path = out / name
            fig.savefig(path, format="svg", metadata={"Date": None})
            paths.append(path)
    return paths
