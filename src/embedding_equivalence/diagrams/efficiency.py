"""Figures and tables of "Efficiency": the work of one call, and the benchmark's results."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._style import ID_COLOURS, RED, inline_svg, new_figure, render_svg, tidy_axes

__all__ = ["Cost", "bench_section", "forward_cost", "work_figure"]


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


#: How [`work_figure`][] draws each form.
_WORK_STYLES: dict[str, dict[str, Any]] = {
    "lookup": {"color": ID_COLOURS[2], "linewidth": 4.0, "alpha": 0.6, "marker": None},
    "sparse matmul": {
        "color": ID_COLOURS[0],
        "linewidth": 1.2,
        "linestyle": "--",
        "marker": "o",
        "ms": 3,
    },
    "dense matmul": {"color": RED, "linewidth": 1.2, "marker": "o", "ms": 3},
}


def work_figure(
    num_ids: int = 8 * 2048, dim: int = 4096, itemsize: int = 2, vocabs: Sequence[int] | None = None
) -> str:
    """Bytes moved and FLOPs of one forward call, lookup vs one-hot matmul, against ``V``.

    Computed with [`forward_cost`][]; log-log axes.

    Args:
        num_ids: ``N`` (default 16,384: a batch of 8 sequences of 2,048 tokens).
        dim: ``D`` (default 4,096).
        itemsize: bytes per value (default 2: bfloat16).
        vocabs: the ``V`` to plot (default 1,024 to 262,144).

    Returns:
        An SVG document.
    """
    vs = list(vocabs) if vocabs is not None else [2**k for k in range(10, 19)]
    fig, axes = new_figure(7.2, 2.8, ncols=2)
    for form, style in _WORK_STYLES.items():
        costs = [forward_cost(form, num_ids, v, dim, itemsize) for v in vs]
        axes[0].plot(vs, [x.bytes_moved for x in costs], label=form, **style)
        if form != "lookup":
            axes[1].plot(vs, [x.flops for x in costs], label=form, **style)
    axes[0].set_title("bytes moved", fontsize=9)
    axes[1].set_title("floating-point operations (lookup: none)", fontsize=9)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("vocabulary size V")
        tidy_axes(ax)
        ax.legend(fontsize=7.5, frameon=False)
    fig.suptitle(
        f"one forward call, N = {num_ids:,} ids, D = {dim:,}, {itemsize} bytes per value",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.17, top=0.8, wspace=0.3)
    return render_svg(fig, "work", "bytes and FLOPs of lookup, sparse and dense matmul against V")


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

    Accepts the records of ``embedding_equivalence.bench`` (``"name"``, or ``"call"`` and
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
    """HTML for the docs' benchmark section: the headline table of ``bench.json`` and the SVGs.

    Reads ``directory/bench.json`` when present and shows the ``"machine"`` it ran on, the
    scalar settings of its ``"config"``, and a table: its ``"headline"`` (a list of row
    objects, shown as they are) or else its timing records, ``"results"`` or
    ``"measurements"`` (pivoted to one row per implementation and mode and one column per
    ``V``), then its ``"targets"`` and ``"notes"`` when given. Every ``*.svg`` in ``directory``
    is inlined. Without ``bench.json`` it returns a note that says how to produce it.

    Args:
        directory: where ``embedding-equivalence bench --out`` wrote its results.

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
            "<code>embedding-equivalence bench --out docs/bench</code> and rebuild the site to "
            "show the measured table and plots here.</p></div>"
        )
    payload = json.loads(path.read_text(encoding="utf-8"))
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
            f"(keys: {sorted(payload)}); regenerate it with embedding-equivalence bench --out"
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
