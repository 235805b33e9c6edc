"""Figures and tables of "Efficiency": the work of one call, and the benchmark's results."""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._style import (
    COLUMN_PX,
    FORM_COLOURS,
    GRID,
    MID_GREY,
    MUTED,
    TEXT,
    figure_style,
    inline_svg,
    log_tick_labels,
    new_figure,
    render_svg,
    screens_of,
    tidy_axes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["REGENERATE", "Cost", "bench_section", "forward_cost", "sweep_section", "work_figure"]

#: The benchmark harness (``benchmarks/bench``) lives beside these docs, in the repository.
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"

#: The one command that regenerates everything the "Measured" section shows: the sweep's
#: ``bench.json`` (and ``bench.csv``); the section draws its tables and figures from it.
REGENERATE = "python benchmarks/efficiency.py --out docs/bench --no-plots"


@dataclass(frozen=True)
class Cost:
    """Work of one forward call: bytes moved through memory and floating-point operations.

    Attributes:
        form: ``"lookup"``, ``"dense matmul"`` or ``"sparse matmul"``.
        bytes_moved: bytes read plus bytes written, counting each tensor once (no cache).
        flops: floating-point operations (a multiply-add counts 2).
        temporary_bytes: bytes of the one-hot the form builds (0 for the lookup).
    """

    form: str
    bytes_moved: int
    flops: int
    temporary_bytes: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


def forward_cost(
    form: str, num_ids: int, vocab: int, dim: int, itemsize: int, index_itemsize: int = 8
) -> Cost:
    """The minimal memory traffic and arithmetic of one forward call of a form.

    - ``"lookup"``: read ``N`` ids and ``N`` rows of ``D`` values, write ``N * D``; no FLOPs.
    - ``"dense matmul"``: write the ``(N, V)`` one-hot, read it and the whole ``(V, D)``
      table, write ``N * D``; ``2 N V D`` FLOPs (of which ``2 N D`` multiply by a one).
    - ``"sparse matmul"``: read ``N`` ids and ``N`` ones (the COO one-hot, ``2N`` indices),
      read ``N`` rows, write ``N * D``; ``2 N D`` FLOPs.

    Args:
        form: one of the three forms above.
        num_ids: ``N``.
        vocab: ``V``.
        dim: ``D``.
        itemsize: bytes per value of the table.
        index_itemsize: bytes per id (8 for int64).

    Returns:
        The [`Cost`][].

    Raises:
        ValueError: an unknown form.
    """
    n, v, d, s = num_ids, vocab, dim, itemsize
    rows = n * d * s
    if form == "lookup":
        return Cost(form, n * index_itemsize + 2 * rows, 0, 0)
    if form == "dense matmul":
        one_hot = n * v * s
        return Cost(
            form, n * index_itemsize + 2 * one_hot + v * d * s + rows, 2 * n * v * d, one_hot
        )
    if form == "sparse matmul":
        coo = 2 * n * index_itemsize + n * s
        return Cost(form, 2 * coo + 2 * rows, 2 * n * d, coo)
    raise ValueError(
        f"forward_cost: unknown form {form!r}; use lookup, dense matmul, sparse matmul"
    )


#: How [`work_figure`][] draws each form (the dense matmul is the one-hot matmul): the lookup
#: as a broad band, so that the sparse matmul's dashes on it show.
_WORK_STYLES: dict[str, dict[str, Any]] = {
    "lookup": {"color": FORM_COLOURS["lookup"], "linewidth": 4.0, "alpha": 0.5, "marker": None},
    "sparse matmul": {
        "color": FORM_COLOURS["sparse matmul"],
        "linewidth": 1.2,
        "linestyle": "--",
        "marker": "o",
        "ms": 3,
    },
    "dense matmul": {
        "color": FORM_COLOURS["one-hot matmul"],
        "linewidth": 1.2,
        "marker": "o",
        "ms": 3,
    },
}


def work_figure(
    num_ids: int = 8 * 2048, dim: int = 4096, itemsize: int = 2, vocabs: Sequence[int] | None = None
) -> str:
    """Bytes moved and FLOPs of one forward call, lookup vs one-hot matmul, against ``V``.

    Computed with [`forward_cost`][]; log-log axes, side by side on a desktop and one above
    the other on a phone.

    Args:
        num_ids: ``N`` (default 16,384: a batch of 8 sequences of 2,048 tokens).
        dim: ``D`` (default 4,096).
        itemsize: bytes per value (default 2: bfloat16).
        vocabs: the ``V`` to plot (default 1,024 to 262,144).

    Returns:
        An SVG document.
    """
    vs = list(vocabs) if vocabs is not None else [2**k for k in range(10, 19)]
    args = (vs, num_ids, dim, itemsize)
    return render_svg(
        _draw_work(*args, phone=False),
        "work",
        "bytes and FLOPs of lookup, sparse and dense matmul against V",
        phone=_draw_work(*args, phone=True),
    )


def _draw_work(vs: Sequence[int], num_ids: int, dim: int, itemsize: int, *, phone: bool) -> Figure:
    width, height = (_PHONE_WIDTH, 5.8) if phone else (7.2, 2.8)
    screens = screens_of(phone)
    with figure_style(width, screens):
        fig, axes = new_figure(
            width, height, ncols=1 if phone else 2, nrows=2 if phone else 1, screens=screens
        )
        _plot_work(fig, axes, vs, num_ids, dim, itemsize, phone=phone)
    return fig


def _plot_work(
    fig: Figure,
    axes: Sequence[Any],
    vs: Sequence[int],
    num_ids: int,
    dim: int,
    itemsize: int,
    *,
    phone: bool,
) -> None:
    for form, style in _WORK_STYLES.items():
        costs = [forward_cost(form, num_ids, v, dim, itemsize) for v in vs]
        axes[0].plot(vs, [x.bytes_moved for x in costs], label=form, **style)
        if form != "lookup":
            axes[1].plot(vs, [x.flops for x in costs], label=form, **style)
    axes[0].set_title("bytes moved")
    axes[1].set_title("FLOPs (lookup: none)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        log_tick_labels(ax.xaxis, 2)
        log_tick_labels(ax.yaxis, 10)
        ax.set_xlabel("vocabulary size V")
        tidy_axes(ax)
        ax.legend(frameon=False)
    settings = f"N = {num_ids:,} ids, D = {dim:,}, {itemsize} bytes per value"
    fig.suptitle(f"one forward call,{chr(10) if phone else ' '}{settings}")
    fig.set_layout_engine("constrained")  # room for the shared style's sizes, whatever they are


def _bench_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div style="overflow-x: auto;">{table}</div>'  # wide tables scroll


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(x) for x in value)
    return str(value)


def _pivot_records(
    records: Sequence[dict[str, Any]], config: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Pivot timing records: one row per implementation and mode, one column per ``V``.

    Accepts the records of the benchmark (``benchmarks/bench``) (``"name"``, or ``"call"`` and
    ``"grad"``). When the configuration names one ``num_ids`` and ``dim``, only the records of
    that ``N`` and ``D`` are kept (the ``V`` sweep).
    """
    n, d = config.get("num_ids"), config.get("dim")
    if isinstance(n, int) and isinstance(d, int):
        records = [r for r in records if r.get("num_ids", n) == n and r.get("dim", d) == d]
    vocabs = sorted({int(r["vocab"]) for r in records})
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        name = str(r.get("name") or r.get("call"))
        if r.get("grad") not in (None, "-", "dense") and str(r["grad"]) not in name:
            name += f" ({r['grad']} grad)"
        key = (name, str(r["mode"]))
        row = rows.setdefault(key, {"implementation": key[0], "mode": key[1]})
        value = r.get("median_ms")
        row[f"V={int(r['vocab']):,} (ms)"] = r.get("status") or "error" if value is None else value
    columns = ["implementation", "mode", *(f"V={v:,} (ms)" for v in vocabs)]
    return list(rows.values()), columns


#: The benchmark's plots, in the order the page shows them (others follow by name).
_BENCH_PLOTS = ("time_vs_vocab", "memory_vs_vocab", "ratio_vs_model")


def _settings(payload: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """Paragraphs for the machine the benchmark ran on and its scalar settings."""
    parts: list[str] = []
    machine = payload.get("machine")
    if isinstance(machine, dict):
        desc = "; ".join(f"{k}: {v}" for k, v in machine.items())
        parts.append(f"<p><strong>Machine.</strong> {html.escape(desc)}</p>")
    scalars = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool)}
    if scalars:
        desc = ", ".join(f"{k}={_cell(v)}" for k, v in scalars.items())
        parts.append(f"<p><strong>Configuration.</strong> {html.escape(desc)}</p>")
    return parts


def _plots(folder: Path) -> list[str]:
    """Every ``*.svg`` of ``folder`` as an inline figure, [`_BENCH_PLOTS`][] first."""
    order = {name: k for k, name in enumerate(_BENCH_PLOTS)}
    plots = sorted(folder.glob("*.svg"), key=lambda p: (order.get(p.stem, len(order)), p.name))
    parts = []
    for svg_path in plots:
        name = "bench-" + re.sub(r"[^A-Za-z0-9_-]", "-", svg_path.stem)
        svg = inline_svg(svg_path.read_text(encoding="utf-8"), name, svg_path.stem)
        parts.append(f"<figure>{svg}<figcaption>{html.escape(svg_path.name)}</figcaption></figure>")
    return parts


def bench_section(directory: str | Path = "docs/bench") -> str:
    """HTML for the docs' benchmark section, from ``directory/bench.json``.

    A sweep of ``benchmarks/efficiency.py`` (its ``"results"`` carry a model time) is shown
    by [`sweep_section`][]: its tables and figures, all drawn from that one file. Any other
    ``bench.json`` shows the ``"machine"`` it ran on, the scalar settings of its ``"config"``,
    and a table: its ``"headline"`` (a list of row objects, shown as they are) or else its
    timing records, ``"results"`` or ``"measurements"`` (pivoted to one row per
    implementation and mode and one column per ``V``), then its ``"targets"`` and ``"notes"``
    when given, and every ``*.svg`` in ``directory``, inlined. Without ``bench.json`` it
    returns a note that says how to produce it.

    Args:
        directory: where ``benchmarks/efficiency.py --out`` wrote its results.

    Returns:
        An HTML fragment.

    Raises:
        ValueError: ``bench.json`` exists but holds no table to show.
    """
    folder = Path(directory)
    path = folder / "bench.json"
    if not path.is_file():
        return (
            '<div class="admonition note"><p class="admonition-title">No benchmark results yet'
            "</p><p>This build found no <code>docs/bench/bench.json</code>. Run "
            f"<code>{html.escape(REGENERATE)}</code> and rebuild the site to "
            "show the measured table and plots here.</p></div>"
        )
    payload = json.loads(path.read_text(encoding="utf-8"))
    results = payload.get("results")
    first = results[0] if isinstance(results, list) and results else None
    if isinstance(first, dict) and "model_ms" in first:  # a sweep of benchmarks/bench
        return sweep_section(payload, source=path.as_posix())
    config = payload.get("config")
    config = config if isinstance(config, dict) else {}
    parts = _settings(payload, config)
    headline = payload.get("headline")
    records = payload.get("results") or payload.get("measurements")
    if isinstance(headline, list) and headline and isinstance(headline[0], dict):
        columns = list(dict.fromkeys(k for row in headline for k in row))
        parts.append(_bench_table(headline, columns))
    elif isinstance(records, list) and records and isinstance(records[0], dict):
        rows, columns = _pivot_records(records, config)
        parts.append(_bench_table(rows, columns))
    else:
        raise ValueError(
            f"bench_section: {path} has no 'headline', 'results' or 'measurements' list "
            f"(keys: {sorted(payload)}); regenerate it with {REGENERATE}"
        )
    targets = payload.get("targets")
    if isinstance(targets, list) and targets and isinstance(targets[0], dict):
        cols = [c for c in ("key", "description", "holds", "ratio", "limit") if c in targets[0]]
        parts.append(_bench_table(targets, cols))
    notes = payload.get("notes")
    if isinstance(notes, list) and notes:
        items = "".join(f"<li>{html.escape(str(n))}</li>" for n in notes)
        parts.append(f"<ul>{items}</ul>")
    return "\n".join(parts + _plots(folder))


# --------------------------------------------------------------------------------------------
# A sweep of benchmarks/bench: tables and figures from its bench.json
# --------------------------------------------------------------------------------------------

#: The colour of a form that [`FORM_COLOURS`][figures._style.FORM_COLOURS] does not name.
_OTHER_FORM = MID_GREY
_MODE_TITLES = {"fwd": "forward", "fwd+bwd": "forward + backward"}
_MODE_MARKERS = {"fwd": "o", "fwd+bwd": "s"}
#: The width of the sweep's figures in inches: the page's text column, so that they are shown
#: at their natural size and their text at the shared style's sizes.
_FIGURE_WIDTH = COLUMN_PX / 96
#: The width of a figure's phone layout, in inches: about a 390 px phone's text column
#: (358 px; 343 px on the narrowest phone, which scales it down).
_PHONE_WIDTH = 3.7


def _ms(value: float | None) -> str:
    """Milliseconds with three significant digits, thousands separated (``"-"`` for none)."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _line(form: str) -> dict[str, Any]:
    """How a form's measured line is drawn.

    The linear layer is the one-hot matmul (a matmul with the one-hot), and times the same:
    the one-hot matmul is drawn as a broad, pale band and the linear layer as a thin line with
    white diamonds on it, so that both show where they coincide. Every other form is a line
    with dots at the points.
    """
    if form == "one-hot matmul":
        return {"marker": None, "lw": 5.0, "alpha": 0.4, "solid_capstyle": "round"}
    if form == "linear":
        return {"marker": "D", "ms": 4.5, "mfc": "white", "lw": 1.0}
    return {"marker": "o", "ms": 3.5, "lw": 1.2}


def _dots(form: str) -> dict[str, Any]:
    """How a form's cases are drawn in a scatter: as its line is (see [`_line`][])."""
    colour = _form_colour(form)
    if form == "one-hot matmul":  # large and pale, under the linear layer's
        return {"s": 70, "color": colour, "alpha": 0.4, "linewidths": 0}
    if form == "linear":  # small and white, on the one-hot matmul's
        return {"s": 18, "facecolors": "white", "edgecolors": colour, "linewidths": 1.0}
    return {"s": 22, "color": colour}


def _form_colour(form: str) -> str:
    return FORM_COLOURS.get(form, _OTHER_FORM)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
    """A plain HTML table (the theme's table style); columns from ``numeric_from`` align right."""

    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f'<{tag} align="right">{html.escape(v)}</{tag}>'
            if i >= numeric_from
            else f"<{tag}>{html.escape(v)}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', header)}</tr></thead><tbody>{body}</tbody></table>"


def _ok(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r.get("ratio") is not None and r.get("median_ms")]


def _within(results: Sequence[dict[str, Any]], band: tuple[float, float]) -> list[dict[str, Any]]:
    return [r for r in _ok(results) if band[0] <= r["ratio"] <= band[1]]


def _run_paragraphs(payload: dict[str, Any], source: str) -> list[str]:
    """The machine, the settings and the load, and what the sweep covered."""
    m = payload.get("machine") or {}
    c = payload.get("config") or {}
    device = m.get("device", c.get("device", "cpu"))
    on = m.get("cpu", "?") if device == "cpu" else f"{device} ({m.get('device_name', '?')})"
    clock = {
        "cpu": "CPU time of the process (time.process_time)",
        "wall": "elapsed time",
    }.get(str(m.get("clock", c.get("clock"))), str(m.get("clock", c.get("clock", "?"))))
    run = (
        f"{m.get('date', '?')}, {on}, {m.get('cores', '?')} cores, torch "
        f"{m.get('torch', '?')}, {c.get('dtype', m.get('dtype', '?'))}, "
        f"{c.get('threads', m.get('threads', '?'))} thread(s), timed by {clock}, "
        f"{c.get('min_run_time', '?')} s per case, {c.get('seconds', '?')} s in all."
    )
    before, after = str(m.get("load", "unknown")), str(m.get("load_after", "unknown"))
    load = (
        f"Load average (1 minute): {before} before the run and {after} after it, on "
        f"{m.get('cores', '?')} cores."
    )
    try:
        busy = float(before) >= 1.0  # at least one other process wanted a core, on average
    except ValueError:
        busy = False
    if busy:
        load += (
            " Other processes were running when it started: its times are noisier than those "
            "of a quiet machine, whose load average reads close to 0 before the run."
        )
    parts = [f"<p><strong>Run.</strong> {html.escape(run)} {html.escape(load)}</p>"]
    if c.get("quick"):
        parts.append(
            '<div class="admonition warning"><p class="admonition-title">A quick run</p><p>'
            "These numbers come from <code>--quick</code> (small sizes, short timing): a "
            f"placeholder. Run <code>{html.escape(REGENERATE)}</code> on a quiet machine for "
            "the real sweep.</p></div>"
        )
    n, d, v0 = c.get("num_ids"), c.get("dim"), c.get("base_vocab")
    vocabs = ", ".join(f"{v:,}" for v in c.get("vocabs", []))
    dims = ", ".join(f"{x:,}" for x in c.get("dims", []))
    ns = ", ".join(f"{x:,}" for x in c.get("ns", []))
    sweeps = (
        f"Three sweeps around N = {n:,} ids, D = {d:,}: V = {vocabs} (the tables and the "
        f"first figure); D = {dims} and N = {ns} at V = {v0:,}. The tables and the figures "
        f"below are all drawn from this one run, {source}, when the site is built."
        if isinstance(n, int) and isinstance(d, int) and isinstance(v0, int)
        else f"The tables and figures below are drawn from {source}."
    )
    parts.append(f"<p><strong>Sweeps.</strong> {html.escape(sweeps)}</p>")
    return parts


def _v_sweep(payload: dict[str, Any]) -> tuple[int, int, list[int]]:
    """``(N, D, vocabularies)`` of the ``V`` sweep (from the config, else from the results)."""
    c = payload.get("config") or {}
    results = payload["results"]
    n = int(c.get("num_ids", results[0]["num_ids"]))
    d = int(c.get("dim", results[0]["dim"]))
    found = sorted({int(r["vocab"]) for r in results if (r["num_ids"], r["dim"]) == (n, d)})
    return n, d, [int(v) for v in c.get("vocabs", found)]


def _find(
    results: Sequence[dict[str, Any]], form: str, mode: str, point: tuple[int, int, int]
) -> dict[str, Any] | None:
    for r in results:
        if (r["form"], r["mode"], r["num_ids"], r["vocab"], r["dim"]) == (form, mode, *point):
            return r
    return None


def _headline_tables(payload: dict[str, Any]) -> list[str]:
    """Per mode, over the ``V`` sweep: lookup and one-hot matmul, measured and modelled."""
    results = payload["results"]
    n, d, vocabs = _v_sweep(payload)
    parts: list[str] = []
    for mode in ("fwd", "fwd+bwd"):
        rows = []
        for v in vocabs:
            lookup = _find(results, "lookup", mode, (n, v, d))
            one_hot = _find(results, "one-hot matmul", mode, (n, v, d))
            if lookup is None or one_hot is None:
                continue
            both = lookup.get("median_ms") and one_hot.get("median_ms")
            rows.append(
                [
                    f"{v:,}",
                    _ms(lookup.get("median_ms")),
                    _ms(lookup.get("model_ms")),
                    _ms(one_hot.get("median_ms")) if one_hot.get("median_ms") else "skipped",
                    _ms(one_hot.get("model_ms")),
                    _ms(one_hot["median_ms"] / lookup["median_ms"]) if both else "-",
                ]
            )
        if not rows:
            continue
        caption = (
            f"{_MODE_TITLES[mode].capitalize()}, N = {n:,}, D = {d:,}: time per call in ms, "
            "measured and modelled; ratio = one-hot ÷ lookup, measured."
        )
        header = ["V", "lookup, ms", "model, ms", "one-hot, ms", "model, ms", "ratio"]
        parts.append(f"<p><em>{html.escape(caption)}</em></p>{_html_table(header, rows, 0)}")
    return parts


def _agreement(payload: dict[str, Any], band: tuple[float, float]) -> list[str]:
    """How many cases the model predicts within the band, overall and per form and mode."""
    results = payload["results"]
    ok, inside = _ok(results), _within(results, band)
    share = f" ({100 * len(inside) / len(ok):.0f}%)" if ok else ""
    lead = (
        f"{len(inside)} of {len(ok)} measured cases{share} are within 30% of the model "
        f"(measured ÷ model from {band[0]} to {band[1]})."
    )
    groups: dict[tuple[str, str], list[float]] = {}
    for r in ok:
        groups.setdefault((r["form"], r["mode"]), []).append(r["ratio"])
    rows = [
        [
            form,
            mode,
            str(sum(band[0] <= x <= band[1] for x in ratios)),
            str(len(ratios)),
            f"{min(ratios):.2f} to {max(ratios):.2f}",
        ]
        for (form, mode), ratios in groups.items()
    ]
    header = ["form", "mode", "within", "cases", "measured ÷ model"]
    return [f"<p><strong>Model.</strong> {html.escape(lead)}</p>", _html_table(header, rows, 2)]


def _all_cases(payload: dict[str, Any]) -> str:
    results = payload["results"]
    rows = [
        [
            r["form"],
            r["mode"],
            f"{r['num_ids']:,} x {r['vocab']:,} x {r['dim']:,}",
            _ms(r.get("median_ms")) if r.get("median_ms") else str(r.get("status", "-")),
            _ms(r.get("model_ms")),
            "-" if r.get("ratio") is None else f"{r['ratio']:.2f}",
        ]
        for r in results
    ]
    header = ["form", "mode", "N x V x D", "ms", "model, ms", "ratio"]
    table = _html_table(header, rows, 2)
    summary = f"Every case ({len(results)}): time per call, its model, and measured ÷ model"
    return f'<details class="note"><summary>{html.escape(summary)}</summary>{table}</details>'


def _calibration(payload: dict[str, Any]) -> str:
    """The calibrated row costs and zero-fill bandwidths, in a collapsible block."""
    cal = payload.get("calibration") or {}
    rows = [
        [
            str(p["primitive"]),
            f"{p['row_bytes']:,}",
            f"{p['table_bytes'] / 2**20:,.3g}",
            f"{p['seconds_per_row'] * 1e9:.3g}",
            f"{p.get('seconds_per_row_beyond', p['seconds_per_row']) * 1e9:.3g}",
        ]
        for p in cal.get("rows", [])
    ]
    pairs = {p["bytes"]: p["bytes_per_s"] for p in cal.get("zero_pair", [])}
    zero = [
        [
            f"{p['bytes'] / 2**20:,.3g}",
            f"{p['bytes_per_s'] / 1e9:.3g}",
            f"{pairs[p['bytes']] / 1e9:.3g}" if p["bytes"] in pairs else "-",
        ]
        for p in cal.get("zero_fill", [])
    ]
    parts = []
    if rows:
        header = ["primitive", "row, B", "table, MiB", "ns per row", "beyond N"]
        parts.append(_html_table(header, rows, 1))
    else:
        parts.append(
            "<p>This run predates the row primitives: its model times the lookup as a copy.</p>"
        )
    if zero:
        parts.append(_html_table(["buffer, MiB", "one, GB/s", "two, GB/s"], zero, 0))
    summary = "The calibration: time per row of each row primitive, zero-fill bandwidths"
    return f'<details class="note"><summary>{summary}</summary>{"".join(parts)}</details>'


def _sweep_axes(ax: Any, mode: str) -> None:
    """Log axes over ``V`` with plain tick labels, titled by the mode."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    log_tick_labels(ax.xaxis, 10)
    log_tick_labels(ax.yaxis, 10)
    ax.set_xlabel("vocabulary size V")
    ax.set_title(_MODE_TITLES[mode])
    tidy_axes(ax)


def _finish_sweep(
    fig: Figure, axes: Any, ylabel: str, dashed: str, title: str, *, phone: bool
) -> Figure:
    """The y label, one legend under both panels (``dashed`` names the dashed lines), a title."""
    for ax in axes if phone else axes[:1]:
        ax.set_ylabel(ylabel)
    axes[1].plot([], [], color=TEXT, ls="--", lw=1, label=f"{dashed} (dashed)")
    fig.legend(
        *axes[1].get_legend_handles_labels(),
        loc="outside lower center",
        ncols=2 if phone else 3,
        frameon=False,
    )
    fig.suptitle(title.replace(", N =", ",\nN =") if phone else title)
    fig.set_layout_engine("constrained")
    return fig


def _sweep_figure(height: float, *, phone: bool) -> tuple[Figure, list[Any]]:
    """A figure of the two modes' panels: side by side, or one above the other on a phone."""
    if phone:
        return new_figure(_PHONE_WIDTH, 2 * height - 0.6, nrows=2, screens=screens_of(True))
    return new_figure(_FIGURE_WIDTH, height, ncols=2, screens=screens_of(False))


def _rendered(draw: Callable[[bool], Figure | None], name: str, label: str) -> str | None:
    """``draw(phone)`` for a desktop and a phone, as one inline SVG (``None``: nothing drawn)."""

    def drawn(phone: bool) -> Figure | None:
        width = _PHONE_WIDTH if phone else _FIGURE_WIDTH
        # Titles, labels and legends take the shared sizes.
        with figure_style(width, screens_of(phone)):
            return draw(phone)

    desktop = drawn(False)
    if desktop is None:
        return None
    return render_svg(desktop, name, label, phone=drawn(True))


def _draw_time(payload: dict[str, Any], *, phone: bool) -> Figure | None:
    """Every form over the ``V`` sweep: measured (markers) and modelled (dashed), per mode."""
    results = payload["results"]
    n, d, vocabs = _v_sweep(payload)
    forms = list(dict.fromkeys(r["form"] for r in results))
    fig, axes = _sweep_figure(3.4, phone=phone)
    drawn = False
    for ax, mode in zip(axes, ("fwd", "fwd+bwd"), strict=True):
        for form in forms:
            found = [(v, _find(results, form, mode, (n, v, d))) for v in vocabs]
            points = [(v, r) for v, r in found if r is not None]
            measured = [(v, r["median_ms"]) for v, r in points if r.get("median_ms")]
            model = [(v, r["model_ms"]) for v, r in points if r.get("model_ms")]
            colour = _form_colour(form)
            if measured:
                ax.plot(*zip(*measured, strict=True), color=colour, label=form, **_line(form))
                drawn = True
            if model:
                ax.plot(*zip(*model, strict=True), ls="--", lw=1, color=colour, alpha=0.8)
        _sweep_axes(ax, mode)
    if not drawn:
        return None
    title = f"Time per call over the V sweep, N = {n:,}, D = {d:,}"
    return _finish_sweep(fig, axes, "ms per call", "model", title, phone=phone)


def _time_figure(payload: dict[str, Any]) -> str | None:
    label = "time per call of every form against V, with the model"
    return _rendered(lambda phone: _draw_time(payload, phone=phone), "bench-time", label)


def _draw_agreement(
    payload: dict[str, Any], band: tuple[float, float], *, phone: bool
) -> Figure | None:
    """Measured against modelled time of every case, the band of agreement shaded."""
    ok = _ok(payload["results"])
    if not ok:
        return None
    if phone:
        fig, (ax,) = new_figure(_PHONE_WIDTH, 6.2, screens=screens_of(True))
    else:
        fig, (ax,) = new_figure(_FIGURE_WIDTH, 4.2, screens=screens_of(False))
    lo = min(min(r["model_ms"], r["median_ms"]) for r in ok) / 2
    hi = max(max(r["model_ms"], r["median_ms"]) for r in ok) * 2
    ax.fill_between(
        [lo, hi],
        [lo * band[0], hi * band[0]],
        [lo * band[1], hi * band[1]],
        color=MUTED,
        alpha=0.5,
        lw=0,
        label=f"within 30% ({band[0]} to {band[1]})",
    )
    ax.plot([lo, hi], [lo, hi], color=GRID, lw=0.8)
    for form in dict.fromkeys(r["form"] for r in ok):
        for mode, marker in _MODE_MARKERS.items():
            pts = [
                (r["model_ms"], r["median_ms"])
                for r in ok
                if (r["form"], r["mode"]) == (form, mode)
            ]
            if pts:
                ax.scatter(
                    *zip(*pts, strict=True),
                    marker=marker,
                    label=f"{form}, {mode}",
                    **_dots(form),
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    log_tick_labels(ax.xaxis, 10)
    log_tick_labels(ax.yaxis, 10)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("model, ms per call")
    ax.set_ylabel("measured, ms per call")
    inside = len(_within(payload["results"], band))
    ax.set_title(
        f"Every case: {inside} of {len(ok)}{chr(10) if phone else ' '}within 30% of the model"
    )
    tidy_axes(ax)
    if phone:  # below the axes: the corner is too small on a phone
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", frameon=False)
    else:  # the diagonal leaves that corner empty
        ax.legend(loc="upper left", ncols=2, frameon=False)
    fig.set_layout_engine("constrained")
    return fig


def _agreement_figure(payload: dict[str, Any], band: tuple[float, float]) -> str | None:
    label = "measured against modelled time of every case"
    return _rendered(
        lambda phone: _draw_agreement(payload, band, phone=phone), "bench-model", label
    )


def _draw_memory(payload: dict[str, Any], *, phone: bool) -> Figure | None:
    """Peak memory over the ``V`` sweep: measured (markers) and analytic (dashed), per mode."""
    results = payload["results"]
    n, d, vocabs = _v_sweep(payload)
    if not any(r.get("peak_bytes") is not None for r in results):
        return None
    forms = list(dict.fromkeys(r["form"] for r in results))
    fig, axes = _sweep_figure(3.4, phone=phone)
    for ax, mode in zip(axes, ("fwd", "fwd+bwd"), strict=True):
        for form in forms:
            found = [(v, _find(results, form, mode, (n, v, d))) for v in vocabs]
            points = [(v, r) for v, r in found if r is not None and r.get("status") == "ok"]
            peak = [(v, r["peak_bytes"] / 2**20) for v, r in points if r.get("peak_bytes")]
            analytic = [
                (v, r["analytic_bytes"] / 2**20) for v, r in points if r.get("analytic_bytes")
            ]
            colour = _form_colour(form)
            if peak:
                ax.plot(*zip(*peak, strict=True), color=colour, label=form, **_line(form))
            if analytic:
                ax.plot(*zip(*analytic, strict=True), ls="--", lw=1, color=colour, alpha=0.8)
        _sweep_axes(ax, mode)
    return _finish_sweep(
        fig,
        axes,
        "MiB beyond the inputs",
        "analytic",
        f"Peak memory over the V sweep, N = {n:,}, D = {d:,}",
        phone=phone,
    )


def _memory_figure(payload: dict[str, Any]) -> str | None:
    label = "peak memory of every form against V, with the count"
    return _rendered(lambda phone: _draw_memory(payload, phone=phone), "bench-memory", label)


def _figure(svg: str | None, caption: str) -> list[str]:
    return (
        []
        if svg is None
        else [f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"]
    )


def _ratio_band() -> tuple[float, float]:
    """The benchmark's band of measured/model ratios that count as "within 30%"."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))  # the package bench, as benchmarks/*.py see it
    from bench.report import RATIO_BAND

    return float(RATIO_BAND[0]), float(RATIO_BAND[1])


def sweep_section(payload: dict[str, Any], source: str = "bench.json") -> str:
    """HTML for a sweep's results: the run, tables of the ``V`` sweep, the model's agreement.

    Everything is drawn from ``payload`` (the content of a sweep's ``bench.json``, of either
    schema), so the tables and the figures show the same run: the machine, the settings and
    the load average before and after the run; per mode, the lookup against the one-hot
    matmul over the ``V`` sweep (measured and modelled); the time of every form over the ``V``
    sweep; how many cases lie within 30% of the model, overall and per form, and a figure of
    measured against modelled time for every case; the peak memory (when measured); and, in
    collapsible blocks, every case and the calibration. The tables stay narrow (a few short
    columns, units in the headers) so that they fit the page.

    Args:
        payload: the content of ``bench.json``, with ``"results"`` that carry ``model_ms``.
        source: the file it was read from, as the text names it.

    Returns:
        An HTML fragment.
    """
    band = _ratio_band()
    parts = _run_paragraphs(payload, source)
    parts += _headline_tables(payload)
    parts += _figure(
        _time_figure(payload),
        "Time per call of every form over the V sweep: measured (solid, markers) and the "
        "model (dashed).",
    )
    parts += _agreement(payload, band)
    parts += _figure(
        _agreement_figure(payload, band),
        "Measured against modelled time, every case of the three sweeps; the shaded band is "
        "within 30% of the model.",
    )
    parts += _figure(
        _memory_figure(payload),
        "Peak memory beyond the inputs over the V sweep: measured in a fresh process (solid, "
        "markers) and counted from the shapes (dashed).",
    )
    parts.append(_all_cases(payload))
    parts.append(_calibration(payload))
    notes = payload.get("notes")
    if isinstance(notes, list) and notes:
        items = "".join(f"<li>{html.escape(str(n))}</li>" for n in notes)
        parts.append(f"<p>Notes:</p><ul>{items}</ul>")
    return "\n".join(parts)
