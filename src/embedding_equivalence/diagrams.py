"""Figures and generated tables of the documentation, drawn from the package's real tensors.

Every figure function returns a self-contained SVG document as a string, ready to be printed
into an HTML page (the docs do so from ``markdown-exec`` blocks at build time, so no figure is
ever drawn by hand or committed). The tensors in a figure are computed by the package itself:
a lookup figure calls :func:`~embedding_equivalence.lookup_embedding`, a gradient figure runs
autograd, an error figure measures real rounding errors against
:func:`~embedding_equivalence.testing.gradient_error_bound`. Called without arguments, each
figure draws the worked example of the seed notebook (``torch.manual_seed(123)``,
``nn.Embedding(4, 5)``, ids ``[2, 3, 1]``), which :func:`worked_example` rebuilds.

Matplotlib is needed (``pip install "embedding-equivalence[docs]"``); the rest of the package
does not import this module.

Example:
    ```python
    from embedding_equivalence import diagrams

    weight, ids = diagrams.worked_example()
    svg = diagrams.lookup_figure(weight, ids)  # '<svg ...>...</svg>'
    ```
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from .forms.bag import lookup_embedding_bag, matmul_embedding_bag
from .forms.lookup import lookup_embedding
from .forms.matmul import matmul_embedding
from ._oracle import gamma, reference_embedding_grad, unit_roundoff

__all__ = [
    "FIGURES",
    "MAX_SIDE",
    "Cost",
    "bag_figure",
    "bench_section",
    "error_bound_figure",
    "forward_cost",
    "gradient_figure",
    "keras_layout_figure",
    "layout_figure",
    "lookup_figure",
    "matmul_figure",
    "one_hot_figure",
    "renorm_figure",
    "storage_figure",
    "work_figure",
    "worked_example",
]

#: The largest side a cell-by-cell figure draws (every cell carries its value).
MAX_SIDE = 16

# Colours: one per distinct id (rows of the table), then neutral tones.
_ID_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948")
_GRID = "#9aa0a6"
_MUTED = "#c8ccd0"
_TEXT = "#202124"
_FAINT_TEXT = "#80868b"
_PAPER = "#ffffff"
_ZERO_FILL = "#f1f3f4"

_RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays text: searchable, selectable, small
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "text.color": _TEXT,
    "axes.edgecolor": _TEXT,
    "axes.labelcolor": _TEXT,
    "xtick.color": _TEXT,
    "ytick.color": _TEXT,
}

# Cell sizes in inches (the drawing canvases use inches as data units).
_CELL_W = 0.62
_CELL_H = 0.28
_SQUARE = 0.28


# --------------------------------------------------------------------------------------------
# The worked example and small helpers
# --------------------------------------------------------------------------------------------


def worked_example() -> tuple[torch.Tensor, torch.Tensor]:
    """The seed notebook's table and ids: ``torch.manual_seed(123)``, ``nn.Embedding(4, 5)``.

    The global RNG is forked, so calling this leaves it as it was.

    Returns:
        ``(weight, ids)``: the ``(4, 5)`` float32 table (detached) and ``tensor([2, 3, 1])``.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        embedding = torch.nn.Embedding(4, 5)
    return embedding.weight.detach().clone(), torch.tensor([2, 3, 1])


def _defaults(
    weight: torch.Tensor | None, ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    w0, i0 = worked_example()
    w = (w0 if weight is None else weight).detach().cpu()
    i = (i0 if ids is None else ids).detach().cpu().reshape(-1)
    return w, i


def _check_drawable(name: str, *sides: int) -> None:
    if any(s > MAX_SIDE for s in sides):
        raise ValueError(
            f"{name}: every cell is drawn with its value, so each side must be at most "
            f"{MAX_SIDE}; got sides {sides}. Draw a slice, e.g. weight[:8, :8]."
        )


def _id_colour(v: int) -> str:
    return _ID_COLOURS[v % len(_ID_COLOURS)]


def _tint(colour: str, amount: float) -> tuple[float, float, float]:
    """Mix ``colour`` with white: 0 gives white, 1 the colour itself."""
    r, g, b = to_rgb(colour)
    return (1 - amount * (1 - r), 1 - amount * (1 - g), 1 - amount * (1 - b))


def _fmt(x: float, decimals: int = 4) -> str:
    """Format like torch's default print (4 decimals), keeping the sign of zero."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{decimals}f}"


def _fmt_short(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return _fmt(x)
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x)}" if not (x == 0 and math.copysign(1, x) < 0) else "-0"
    return f"{x:.4g}"


def _svg(fig: Figure, name: str, label: str) -> str:
    """Render ``fig`` as an inline SVG element with ids unique to ``name``."""
    buf = io.StringIO()
    with mpl.rc_context({**_RC, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, facecolor=_PAPER)
    return _inline_svg(buf.getvalue(), name, label)


def _inline_svg(text: str, prefix: str, label: str) -> str:
    """Make an SVG document fit for inlining: no prolog, unique ids, responsive, labelled."""
    start = text.find("<svg")
    if start < 0:
        raise ValueError(f"{prefix}: not an SVG document")
    body = text[start:].strip()
    ids = set(re.findall(r'\bid="([^"]+)"', body))
    if ids:
        pattern = re.compile(
            r'(\bid="|href="#|url\(#)(' + "|".join(re.escape(i) for i in ids) + r')(?=["\)])'
        )
        body = pattern.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", body)
    attrs = (
        f'<svg class="ee-figure" role="img" aria-label="{html.escape(label, quote=True)}" '
        'style="max-width: 100%; height: auto;"'
    )
    return body.replace("<svg", attrs, 1)


class _Canvas:
    """A figure whose data units are inches, origin at the top left, y pointing down."""

    def __init__(self, width: float, height: float) -> None:
        self.width = width
        self.height = height
        with mpl.rc_context(_RC):
            self.fig = Figure(figsize=(width, height))
            self.ax: Axes = self.fig.add_axes((0.0, 0.0, 1.0, 1.0))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(height, 0)
        self.ax.set_axis_off()

    def text(self, x: float, y: float, s: str, **kwargs: Any) -> None:
        kwargs.setdefault("ha", "center")
        kwargs.setdefault("va", "center")
        kwargs.setdefault("fontsize", 8.5)
        kwargs.setdefault("color", _TEXT)
        self.ax.text(x, y, s, **kwargs)

    def arrow(
        self,
        start: tuple[float, float],
        end: tuple[float, float],
        colour: str,
        rad: float = 0.0,
        width: float = 1.2,
    ) -> None:
        self.ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=9,
                color=colour,
                linewidth=width,
                connectionstyle=f"arc3,rad={rad}",
                shrinkA=1,
                shrinkB=1,
            )
        )

    def matrix(
        self,
        x: float,
        y: float,
        cells: Sequence[Sequence[str]],
        *,
        cell_w: float = _CELL_W,
        cell_h: float = _CELL_H,
        fills: dict[tuple[int, int], Any] | None = None,
        text_colours: dict[tuple[int, int], str] | None = None,
        hatched: Sequence[int] = (),
        row_labels: Sequence[str] | None = None,
        col_labels: Sequence[str] | None = None,
        title: str | None = None,
        fontsize: float = 8.0,
        bold: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Draw a matrix of text cells with its top-left corner at ``(x, y)``."""
        fills = fills or {}
        text_colours = text_colours or {}
        rows = len(cells)
        cols = len(cells[0]) if rows else 0
        for i in range(rows):
            for j in range(cols):
                face = fills.get((i, j), _PAPER)
                self.ax.add_patch(
                    Rectangle(
                        (x + j * cell_w, y + i * cell_h),
                        cell_w,
                        cell_h,
                        facecolor=face,
                        edgecolor=_GRID,
                        linewidth=0.5,
                        hatch="////" if i in hatched else None,
                    )
                )
                self.text(
                    x + (j + 0.5) * cell_w,
                    y + (i + 0.5) * cell_h,
                    cells[i][j],
                    fontsize=fontsize,
                    family="monospace",
                    color=text_colours.get((i, j), _TEXT),
                    fontweight="bold" if (i, j) in bold else "normal",
                )
        self.ax.add_patch(
            Rectangle(
                (x, y), cols * cell_w, rows * cell_h, fill=False, edgecolor=_TEXT, linewidth=1.0
            )
        )
        if row_labels is not None:
            for i, lab in enumerate(row_labels):
                self.text(x - 0.06, y + (i + 0.5) * cell_h, lab, ha="right", fontsize=7.5)
        if col_labels is not None:
            for j, lab in enumerate(col_labels):
                self.text(x + (j + 0.5) * cell_w, y - 0.09, lab, fontsize=7, color=_FAINT_TEXT)
        if title is not None:
            top = y - (0.26 if col_labels is not None else 0.12)
            self.text(x + cols * cell_w / 2, top, title, va="bottom", fontsize=8.5)

    def svg(self, name: str, label: str) -> str:
        return _svg(self.fig, name, label)


def _values(t: torch.Tensor, fmt: Callable[[float], str] = _fmt) -> list[list[str]]:
    return [[fmt(float(x)) for x in row] for row in t.detach().cpu().double().tolist()]


# --------------------------------------------------------------------------------------------
# "Lookup is a matmul"
# --------------------------------------------------------------------------------------------


def lookup_figure(weight: torch.Tensor | None = None, ids: torch.Tensor | None = None) -> str:
    """The table with the looked-up rows highlighted, and the rows they become.

    The output is computed by :func:`~embedding_equivalence.lookup_embedding`.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: 1-D ids (default ``[2, 3, 1]``).

    Returns:
        An SVG document.
    """
    w, i = _defaults(weight, ids)
    v, d = w.shape
    n = i.numel()
    _check_drawable("lookup_figure", v, d, n)
    out = lookup_embedding(i, w)
    ids_list = [int(x) for x in i.tolist()]
    left, top = 0.75, 0.55
    gap = 1.3
    right = left + d * _CELL_W + gap
    height = top + max(v, n) * _CELL_H + 0.25
    c = _Canvas(right + d * _CELL_W + 0.2, height)
    fills = {(r, j): _tint(_id_colour(r), 0.35) for r in set(ids_list) for j in range(d)}
    c.matrix(
        left,
        top,
        _values(w),
        fills=fills,
        row_labels=[f"row {r}" for r in range(v)],
        col_labels=[str(j) for j in range(d)],
        title=f"weight  (V={v}, D={d})",
    )
    out_fills = {
        (k, j): _tint(_id_colour(r), 0.35) for k, r in enumerate(ids_list) for j in range(d)
    }
    c.matrix(
        right,
        top,
        _values(out),
        fills=out_fills,
        row_labels=[f"ids[{k}]={r}" for k, r in enumerate(ids_list)],
        col_labels=[str(j) for j in range(d)],
        title=f"weight[ids]  (N={n}, D={d})",
    )
    for k, r in enumerate(ids_list):
        c.arrow(
            (left + d * _CELL_W + 0.03, top + (r + 0.5) * _CELL_H),
            (right - 0.62, top + (k + 0.5) * _CELL_H),
            _id_colour(r),
        )
    return c.svg("lookup", f"lookup: rows {ids_list} of the table become the output rows")


def one_hot_figure(ids: torch.Tensor | None = None, num_embeddings: int | None = None) -> str:
    """The ``(N, V)`` one-hot matrix of the ids (``F.one_hot``), each 1 in its id's colour.

    Args:
        ids: 1-D ids (default ``[2, 3, 1]``).
        num_embeddings: ``V`` (default: ``max(ids) + 1``, as the seed notebook does).

    Returns:
        An SVG document.
    """
    _, i = _defaults(None, ids)
    one_hot = F.one_hot(i, num_embeddings if num_embeddings is not None else -1)
    n, v = one_hot.shape
    _check_drawable("one_hot_figure", n, v)
    ids_list = [int(x) for x in i.tolist()]
    left, top = 0.85, 0.6
    c = _Canvas(left + v * _SQUARE + 0.3, top + n * _SQUARE + 0.15)
    fills = {(k, r): _tint(_id_colour(r), 0.55) for k, r in enumerate(ids_list)}
    c.matrix(
        left,
        top,
        [[str(int(x)) for x in row] for row in one_hot.tolist()],
        cell_w=_SQUARE,
        cell_h=_SQUARE,
        fills=fills,
        text_colours={
            (k, j): (_TEXT if one_hot[k, j] else _FAINT_TEXT) for k in range(n) for j in range(v)
        },
        bold=[(k, r) for k, r in enumerate(ids_list)],
        row_labels=[f"ids[{k}]={r}" for k, r in enumerate(ids_list)],
        col_labels=[str(j) for j in range(v)],
        title=f"one_hot(ids, {v})",
    )
    return c.svg("onehot", f"one-hot matrix of ids {ids_list}, {n} rows and {v} columns")


def matmul_figure(
    ids: torch.Tensor | None = None, weight: torch.Tensor | None = None, row: int = 0
) -> str:
    """``one_hot(ids, V) @ weight``, with one output row traced back to the row it selects.

    The product is computed by :func:`~embedding_equivalence.matmul_embedding`.

    Args:
        ids: 1-D ids (default ``[2, 3, 1]``).
        weight: ``(V, D)`` table (default: the worked example's).
        row: the output row to trace.

    Returns:
        An SVG document.
    """
    w, i = _defaults(weight, ids)
    v, d = w.shape
    n = i.numel()
    _check_drawable("matmul_figure", v, d, n)
    if not 0 <= row < n:
        raise ValueError(f"matmul_figure: row={row} must lie in [0, {n})")
    one_hot = F.one_hot(i, v)
    out = matmul_embedding(i, w)
    ids_list = [int(x) for x in i.tolist()]
    sel = ids_list[row]
    colour = _id_colour(sel)
    top = 0.62
    x_oh = 0.85
    x_w = x_oh + v * _SQUARE + 0.75
    x_out = x_w + d * _CELL_W + 0.75
    body_h = max(n, v) * _CELL_H
    c = _Canvas(x_out + d * _CELL_W + 0.2, top + body_h + 0.62)
    oh_fills: dict[tuple[int, int], Any] = {(row, j): _tint(colour, 0.15) for j in range(v)}
    oh_fills[(row, sel)] = _tint(colour, 0.6)
    c.matrix(
        x_oh,
        top,
        [[str(int(x)) for x in r] for r in one_hot.tolist()],
        cell_w=_SQUARE,
        cell_h=_CELL_H,
        fills=oh_fills,
        text_colours={
            (k, j): (_TEXT if k == row else _FAINT_TEXT) for k in range(n) for j in range(v)
        },
        bold=[(row, sel)],
        row_labels=[f"ids[{k}]={r}" for k, r in enumerate(ids_list)],
        col_labels=[str(j) for j in range(v)],
        title=f"one_hot  ({n}, {v})",
    )
    w_fills: dict[tuple[int, int], Any] = {(sel, j): _tint(colour, 0.45) for j in range(d)}
    w_text = {(r, j): _FAINT_TEXT for r in range(v) if r != sel for j in range(d)}
    c.matrix(
        x_w,
        top,
        _values(w),
        fills=w_fills,
        text_colours=w_text,
        row_labels=[f"{r}" for r in range(v)],
        col_labels=[str(j) for j in range(d)],
        title=f"weight  ({v}, {d})",
    )
    out_fills: dict[tuple[int, int], Any] = {(row, j): _tint(colour, 0.45) for j in range(d)}
    c.matrix(
        x_out,
        top,
        _values(out),
        fills=out_fills,
        text_colours={(k, j): _FAINT_TEXT for k in range(n) if k != row for j in range(d)},
        col_labels=[str(j) for j in range(d)],
        title=f"one_hot @ weight  ({n}, {d})",
    )
    mid_y = top + min(n, v) * _CELL_H / 2
    c.text((x_oh + v * _SQUARE + x_w) / 2, mid_y, "@", fontsize=14)
    c.text((x_w + d * _CELL_W + x_out) / 2, mid_y, "=", fontsize=14)
    # The 1 of the traced row selects row `sel` of the table ...
    c.arrow(
        (x_oh + (sel + 0.5) * _SQUARE, top + (row + 1) * _CELL_H),
        (x_w - 0.2, top + (sel + 0.5) * _CELL_H),
        colour,
        rad=0.35,
    )
    # ... which becomes the output row.
    c.arrow(
        (x_w + d * _CELL_W + 0.02, top + (sel + 0.5) * _CELL_H),
        (x_out - 0.02, top + (row + 0.5) * _CELL_H),
        colour,
        rad=-0.15,
    )
    terms = " + ".join(f"{int(one_hot[row, r])}·W[{r}]" for r in range(v))
    c.text(
        c.width / 2,
        top + body_h + 0.36,
        f"out[{row}] = {terms} = W[{sel}]",
        fontsize=9,
        family="monospace",
        color=colour,
    )
    return c.svg(
        f"matmul{row}", f"one_hot @ weight: output row {row} is 1 times row {sel}, plus zeros"
    )


def layout_figure(weight: torch.Tensor | None = None) -> str:
    """``nn.Embedding``'s ``(V, D)`` weight beside ``nn.Linear``'s ``(D, V)`` weight (its ``.T``).

    Row ``v`` of the embedding table is column ``v`` of the linear weight.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, i = _defaults(weight, None)
    v, d = w.shape
    _check_drawable("layout_figure", v, d)
    sel = int(i[0]) if weight is None else min(2, v - 1)
    colour = _id_colour(sel)
    top, left = 0.8, 0.45
    x_t = left + d * _CELL_W + 1.0
    c = _Canvas(x_t + v * _CELL_W + 0.2, top + max(v, d) * _CELL_H + 0.2)
    c.matrix(
        left,
        top,
        _values(w),
        fills={(sel, j): _tint(colour, 0.45) for j in range(d)},
        row_labels=[str(r) for r in range(v)],
        col_labels=[str(j) for j in range(d)],
        title=f"nn.Embedding({v}, {d}).weight\n(num_embeddings, embedding_dim) = ({v}, {d})",
    )
    c.matrix(
        x_t,
        top,
        _values(w.t()),
        fills={(j, sel): _tint(colour, 0.45) for j in range(d)},
        row_labels=[str(j) for j in range(d)],
        col_labels=[str(r) for r in range(v)],
        title=f"nn.Linear({v}, {d}).weight = W.T\n(out_features, in_features) = ({d}, {v})",
    )
    return c.svg(
        "layout", f"row {sel} of the embedding weight is column {sel} of the linear weight"
    )


def storage_figure(weight: torch.Tensor | None = None) -> str:
    """One storage, two views: ``weight`` (stride ``(D, 1)``) and ``weight.T`` (stride ``(1, D)``).

    Each cell shows the storage index it reads, computed from the real tensors' strides and
    storage offsets; colour marks the table row the element belongs to.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, _ = _defaults(weight, None)
    v, d = w.shape
    _check_drawable("storage_figure", v, d)
    t = w.t()

    def index_grid(x: torch.Tensor) -> list[list[int]]:
        s0, s1 = x.stride()
        off = x.storage_offset()
        rows, cols = int(x.shape[0]), int(x.shape[1])
        return [[int(off + a * s0 + b * s1) for b in range(cols)] for a in range(rows)]

    grid_w, grid_t = index_grid(w), index_grid(t)
    base = min(min(r) for r in grid_w)
    size = v * d
    cell = 0.34
    top = 0.62
    strip_y = top + max(v, d) * _SQUARE + 0.8
    width = max(size * cell, 2 * (d + v) * cell + 2.0) + 0.4
    c = _Canvas(width, strip_y + _SQUARE + 0.12)
    row_of = {k - base: r for r, row in enumerate(grid_w) for k in row}

    def fills(grid: list[list[int]]) -> dict[tuple[int, int], Any]:
        return {
            (a, b): _tint(_id_colour(row_of[k - base]), 0.4)
            for a, row in enumerate(grid)
            for b, k in enumerate(row)
        }

    x_w = width / 4 - d * cell / 2
    x_t = 3 * width / 4 - v * cell / 2
    c.matrix(
        x_w,
        top,
        [[str(k - base) for k in row] for row in grid_w],
        cell_w=cell,
        cell_h=_SQUARE,
        fills=fills(grid_w),
        row_labels=[str(r) for r in range(v)],
        title=f"embedding.weight: shape {tuple(w.shape)}, stride {w.stride()}",
    )
    c.matrix(
        x_t,
        top,
        [[str(k - base) for k in row] for row in grid_t],
        cell_w=cell,
        cell_h=_SQUARE,
        fills=fills(grid_t),
        row_labels=[str(j) for j in range(d)],
        title=f"nn.Parameter(embedding.weight.T): shape {tuple(t.shape)}, stride {t.stride()}",
    )
    x_s = (width - size * cell) / 2
    c.matrix(
        x_s,
        strip_y,
        [[str(k) for k in range(size)]],
        cell_w=cell,
        cell_h=_SQUARE,
        fills={(0, k): _tint(_id_colour(row_of[k]), 0.4) for k in range(size)},
        title="the one storage both read (element index = offset + i * stride[0] + j * stride[1])",
    )
    c.arrow((width / 4, top + v * _SQUARE + 0.05), (width / 2 - 0.3, strip_y - 0.3), _FAINT_TEXT)
    c.arrow(
        (3 * width / 4, top + d * _SQUARE + 0.05), (width / 2 + 0.3, strip_y - 0.3), _FAINT_TEXT
    )
    return c.svg("storage", "the table and its transpose read the same storage")


# --------------------------------------------------------------------------------------------
# "How gradients flow back"
# --------------------------------------------------------------------------------------------


def _default_grad_output(n: int, d: int) -> torch.Tensor:
    scale = torch.tensor([10.0**k for k in range(n)])
    return scale[:, None].expand(n, d).clone()


def gradient_figure(
    ids: torch.Tensor | None = None,
    grad_output: torch.Tensor | None = None,
    num_embeddings: int = 4,
    *,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> str:
    """Upstream gradient rows flowing into the rows of ``weight.grad`` (an ``index_add``).

    The gradient is computed by autograd through
    :func:`~embedding_equivalence.lookup_embedding` with the given options: each row ``G[n]``
    is added into row ``ids[n]``; duplicates accumulate, rows that no id references stay zero,
    the ``padding_idx`` row (hatched) gets nothing, and ``scale_grad_by_freq`` divides each row
    by its id's count.

    Args:
        ids: 1-D ids (default ``[2, 3, 1, 2]``: id 2 twice).
        grad_output: ``(N, D)`` upstream gradient (default rows of 1, 10, 100, 1000).
        num_embeddings: ``V``.
        padding_idx: as in ``F.embedding``.
        scale_grad_by_freq: as in ``F.embedding``.

    Returns:
        An SVG document.
    """
    i = (torch.tensor([2, 3, 1, 2]) if ids is None else ids).detach().cpu().reshape(-1)
    n = i.numel()
    d = 5 if grad_output is None else grad_output.shape[-1]
    g = _default_grad_output(n, d) if grad_output is None else grad_output.detach().cpu()
    g = g.reshape(n, d).float()
    v = num_embeddings
    _check_drawable("gradient_figure", v, d, n)
    weight = torch.zeros(v, d, requires_grad=True)
    lookup_embedding(
        i, weight, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq
    ).backward(g)
    assert weight.grad is not None
    grad = weight.grad
    ids_list = [int(x) for x in i.tolist()]
    counts = [ids_list.count(r) for r in range(v)]
    pad = None if padding_idx is None else padding_idx % v
    cw = 0.5
    left, top = 0.95, 0.55
    x_g = left + d * cw + 1.6
    c = _Canvas(x_g + d * cw + 1.25, top + max(n, v) * _CELL_H + 0.2)
    c.matrix(
        left,
        top,
        _values(g, _fmt_short),
        cell_w=cw,
        fills={(k, j): _tint(_id_colour(r), 0.3) for k, r in enumerate(ids_list) for j in range(d)},
        row_labels=[f"G[{k}] (id {r})" for k, r in enumerate(ids_list)],
        title=f"grad_output G  ({n}, {d})",
    )
    fills: dict[tuple[int, int], Any] = {}
    text_colours: dict[tuple[int, int], str] = {}
    for r in range(v):
        for j in range(d):
            if counts[r] and r != pad:
                fills[(r, j)] = _tint(_id_colour(r), 0.3)
            else:
                fills[(r, j)] = _ZERO_FILL
                text_colours[(r, j)] = _FAINT_TEXT
    c.matrix(
        x_g,
        top,
        _values(grad, _fmt_short),
        cell_w=cw,
        fills=fills,
        text_colours=text_colours,
        hatched=[pad] if pad is not None else [],
        row_labels=[f"row {r}" for r in range(v)],
        title=f"weight.grad  ({v}, {d})",
    )
    for r in range(v):
        if r == pad:
            note = "padding_idx: 0"
        elif counts[r] == 0:
            note = "no id: 0"
        elif scale_grad_by_freq and counts[r] > 1:
            note = f"sum / {counts[r]}"
        elif counts[r] > 1:
            note = f"sum of {counts[r]}"
        else:
            note = ""
        if note:
            c.text(x_g + d * cw + 0.08, top + (r + 0.5) * _CELL_H, note, ha="left", fontsize=7.5)
    for k, r in enumerate(ids_list):
        c.arrow(
            (left + d * cw + 0.03, top + (k + 0.5) * _CELL_H),
            (x_g - 0.55, top + (r + 0.5) * _CELL_H),
            _FAINT_TEXT if r == pad else _id_colour(r),
            width=0.8 if r == pad else 1.2,
        )
    options = []
    if padding_idx is not None:
        options.append(f"padding_idx={padding_idx}")
    if scale_grad_by_freq:
        options.append("scale_grad_by_freq")
    name = "grad" + "".join(f"-{o.split('=')[0]}" for o in options)
    return c.svg(name, f"gradient rows of ids {ids_list} added into the table's gradient")


def renorm_figure(
    weight: torch.Tensor | None = None,
    ids: torch.Tensor | None = None,
    max_norm: float = 1.0,
    norm_type: float = 2.0,
) -> str:
    """Row norms before and after ``max_norm``'s in-place renorm (only referenced rows change).

    The renorm is performed by :func:`~embedding_equivalence.lookup_embedding` on a copy.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: ids (default ``[2, 3, 1]``).
        max_norm: the threshold.
        norm_type: the ``p`` of the p-norm.

    Returns:
        An SVG document.
    """
    w, i = _defaults(weight, ids)
    v = w.shape[0]
    _check_drawable("renorm_figure", v)
    after = w.clone()
    lookup_embedding(i, after, max_norm=max_norm, norm_type=norm_type)
    before_n = torch.linalg.vector_norm(w.double(), norm_type, dim=1).tolist()
    after_n = torch.linalg.vector_norm(after.double(), norm_type, dim=1).tolist()
    referenced = {int(x) for x in i.tolist()}
    with mpl.rc_context(_RC):
        fig = Figure(figsize=(6.4, 2.6))
        ax = fig.add_axes((0.1, 0.17, 0.62, 0.7))
    xs = list(range(v))
    ax.bar([x - 0.2 for x in xs], before_n, 0.38, color=_MUTED)
    ax.bar(
        [x + 0.2 for x in xs],
        after_n,
        0.38,
        color=[_id_colour(x) if x in referenced else _MUTED for x in xs],
    )
    ax.axhline(max_norm, color="#d93025", linestyle="--", linewidth=1.0)
    ax.set_xticks(xs, [f"row {x}" + ("*" if x in referenced else "") for x in xs])
    p = "∞" if math.isinf(norm_type) else _fmt_short(norm_type)
    ax.set_ylabel(f"‖weight[v]‖ (p = {p})")
    ax.set_title("max_norm rescales the referenced rows in place", fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    handles = [
        Patch(facecolor=_MUTED, label="before the call"),
        Patch(facecolor=_ID_COLOURS[0], label="after (referenced rows, *)"),
        Line2D([], [], color="#d93025", linestyle="--", label=f"max_norm = {max_norm}"),
    ]
    fig.legend(handles=handles, loc="center right", fontsize=7.5, frameon=False)
    return _svg(fig, "renorm", "row norms before and after the max_norm renorm")


# --------------------------------------------------------------------------------------------
# "Efficiency"
# --------------------------------------------------------------------------------------------


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
        The :class:`Cost`.

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


def work_figure(
    num_ids: int = 8 * 2048, dim: int = 4096, itemsize: int = 2, vocabs: Sequence[int] | None = None
) -> str:
    """Bytes moved and FLOPs of one forward call, lookup vs one-hot matmul, against ``V``.

    Computed with :func:`forward_cost`; log-log axes.

    Args:
        num_ids: ``N`` (default 16,384: a batch of 8 sequences of 2,048 tokens).
        dim: ``D`` (default 4,096).
        itemsize: bytes per value (default 2: bfloat16).
        vocabs: the ``V`` to plot (default 1,024 to 262,144).

    Returns:
        An SVG document.
    """
    vs = list(vocabs) if vocabs is not None else [2**k for k in range(10, 19)]
    forms = ("lookup", "sparse matmul", "dense matmul")
    colours = {"lookup": _ID_COLOURS[2], "sparse matmul": _ID_COLOURS[0], "dense matmul": "#d93025"}
    styles = {
        "lookup": {"linewidth": 4.0, "alpha": 0.6, "marker": None},
        "sparse matmul": {"linewidth": 1.2, "linestyle": "--", "marker": "o", "ms": 3},
        "dense matmul": {"linewidth": 1.2, "marker": "o", "ms": 3},
    }
    with mpl.rc_context(_RC):
        fig = Figure(figsize=(7.2, 2.8))
        axes = fig.subplots(1, 2)
    for form in forms:
        costs = [forward_cost(form, num_ids, v, dim, itemsize) for v in vs]
        style: dict[str, Any] = {"color": colours[form], "label": form, **styles[form]}
        axes[0].plot(vs, [x.bytes_moved for x in costs], **style)
        if form != "lookup":
            axes[1].plot(vs, [x.flops for x in costs], **style)
    axes[0].set_title("bytes moved", fontsize=9)
    axes[1].set_title("floating-point operations (lookup: none)", fontsize=9)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("vocabulary size V")
        ax.grid(True, which="major", color="#e8eaed", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(fontsize=7.5, frameon=False)
    axes[1].legend(fontsize=7.5, frameon=False)
    fig.suptitle(
        f"one forward call, N = {num_ids:,} ids, D = {dim:,}, {itemsize} bytes per value",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.17, top=0.8, wspace=0.3)
    return _svg(fig, "work", "bytes and FLOPs of lookup, sparse and dense matmul against V")


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
    parts: list[str] = []
    machine = payload.get("machine")
    if isinstance(machine, dict):
        desc = "; ".join(f"{k}: {v}" for k, v in machine.items())
        parts.append(f"<p><strong>Machine.</strong> {html.escape(desc)}</p>")
    config = payload.get("config")
    config = config if isinstance(config, dict) else {}
    scalars = {k: v for k, v in config.items() if isinstance(v, str | int | float | bool)}
    if scalars:
        desc = ", ".join(f"{k}={_cell(v)}" for k, v in scalars.items())
        parts.append(f"<p><strong>Configuration.</strong> {html.escape(desc)}</p>")
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
    order = {name: k for k, name in enumerate(_BENCH_PLOTS)}
    plots = sorted(folder.glob("*.svg"), key=lambda p: (order.get(p.stem, len(order)), p.name))
    for svg_path in plots:
        name = "bench-" + re.sub(r"[^A-Za-z0-9_-]", "-", svg_path.stem)
        svg = _inline_svg(svg_path.read_text(encoding="utf-8"), name, svg_path.stem)
        parts.append(f"<figure>{svg}<figcaption>{html.escape(svg_path.name)}</figcaption></figure>")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# "When equivalence breaks"
# --------------------------------------------------------------------------------------------


def _grad_errors(
    form: Callable[..., torch.Tensor],
    counts: Sequence[int],
    dtype: torch.dtype,
    dim: int,
    seed: int,
) -> list[float]:
    """Largest ``|grad - exact| / sum|G|`` of row 0 when id 0 occurs ``k`` times."""
    errors = []
    for k in counts:
        gen = torch.Generator().manual_seed(seed + k)
        g64 = torch.randn(k, dim, generator=gen, dtype=torch.float64).abs()
        g = g64.to(dtype)
        ids = torch.zeros(k, dtype=torch.int64)
        weight = torch.zeros(1, dim, dtype=dtype, requires_grad=True)
        form(ids, weight).backward(g)
        assert weight.grad is not None
        exact, abs_sum, _ = reference_embedding_grad(ids, g, 1)
        err = (weight.grad.double() - exact).abs() / abs_sum
        errors.append(float(err.max()))
    return errors


def error_bound_figure(
    dtypes: Sequence[torch.dtype] = (torch.float16, torch.bfloat16), dim: int = 64, seed: int = 0
) -> str:
    """Measured gradient errors of lookup and matmul against Higham's bound ``gamma_k(u)``.

    For each dtype and each ``k`` (powers of two from 2 while ``k u < 1/2``), id 0 occurs
    ``k`` times with a non-negative upstream gradient (the worst case for the bound); the
    figure plots the
    largest ``|grad - exact| / sum_n |G[n, d]|`` of each form, computed by autograd through
    :func:`~embedding_equivalence.lookup_embedding` and
    :func:`~embedding_equivalence.matmul_embedding` and the float64 oracle.

    Args:
        dtypes: low-precision dtypes, one panel each.
        dim: ``D``.
        seed: seed of the upstream gradients' generator.

    Returns:
        An SVG document.
    """
    with mpl.rc_context(_RC):
        fig = Figure(figsize=(3.6 * len(dtypes), 2.9))
        axes = fig.subplots(1, len(dtypes), squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes, strict=True):
        u = unit_roundoff(dtype)
        counts = [2**j for j in range(1, 12) if 2**j * u < 0.5]
        ax.plot(
            counts,
            [gamma(k, u) for k in counts],
            color="#d93025",
            linestyle="--",
            label="\N{GREEK SMALL LETTER GAMMA}_k(u), the bound",
        )
        ax.axhline(u, color=_FAINT_TEXT, linewidth=0.8, linestyle=":", label="u")
        for form, colour, name in (
            (lookup_embedding, _ID_COLOURS[0], "lookup"),
            (matmul_embedding, _ID_COLOURS[1], "matmul"),
        ):
            errs = _grad_errors(form, counts, dtype, dim, seed)
            shown = [max(e, u / 16) for e in errs]  # an exact result is drawn at u / 16
            ax.plot(counts, shown, marker="o", ms=3, color=colour, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_title(f"{str(dtype).removeprefix('torch.')} (u = 2^{int(math.log2(u))})", fontsize=9)
        ax.set_xlabel("k, occurrences of the id")
        ax.grid(True, which="major", color="#e8eaed", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_ylabel("max |error| / Σ|G|")
    axes[0].legend(fontsize=7, frameon=False, loc="upper left")
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.17, top=0.88, wspace=0.28)
    return _svg(fig, "errorbound", "measured gradient errors stay under the bound gamma_k(u)")


# --------------------------------------------------------------------------------------------
# "EmbeddingBag is a multi-hot matmul"
# --------------------------------------------------------------------------------------------


def bag_figure(
    input: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> str:
    """The ``(B, V)`` bag-count (multi-hot) matrix, the table, and their product (``mode="sum"``).

    The counts are ``matmul_embedding_bag(input, eye(V), offsets, mode="sum")`` (the bag-count
    matrix times the identity is the bag-count matrix), and the product is
    :func:`~embedding_equivalence.lookup_embedding_bag`'s output.

    Args:
        input: 1-D ids (default ``[2, 3, 1, 2, 2]``).
        offsets: start of each bag (default ``[0, 2]``: bags ``[2, 3]`` and ``[1, 2, 2]``).
        weight: ``(V, D)`` table (default: the worked example's).

    Returns:
        An SVG document.
    """
    w, _ = _defaults(weight, None)
    ids = torch.tensor([2, 3, 1, 2, 2]) if input is None else input.detach().cpu()
    offs = torch.tensor([0, 2]) if offsets is None else offsets.detach().cpu()
    v, d = w.shape
    _check_drawable("bag_figure", v, d, offs.numel())
    counts = matmul_embedding_bag(ids, torch.eye(v, dtype=w.dtype), offs, mode="sum")
    out = lookup_embedding_bag(ids, w, offs, mode="sum")
    b = counts.shape[0]
    starts = [int(x) for x in offs.tolist()] + [ids.numel()]
    bags = [[int(x) for x in ids[starts[k] : starts[k + 1]].tolist()] for k in range(b)]
    top = 0.62
    x_m = 1.45
    x_w = x_m + v * _SQUARE + 0.75
    x_out = x_w + d * _CELL_W + 0.75
    c = _Canvas(x_out + d * _CELL_W + 0.2, top + max(b, v) * _CELL_H + 0.25)
    fills = {
        (k, r): _tint(_id_colour(r), min(1.0, 0.35 * counts[k, r].item()))
        for k in range(b)
        for r in range(v)
        if counts[k, r] != 0
    }
    c.matrix(
        x_m,
        top,
        [[_fmt_short(float(x)) for x in row] for row in counts.tolist()],
        cell_w=_SQUARE,
        fills=fills,
        text_colours={(k, r): _FAINT_TEXT for k in range(b) for r in range(v) if counts[k, r] == 0},
        row_labels=[f"bag {k} {bags[k]}" for k in range(b)],
        col_labels=[str(r) for r in range(v)],
        title=f"bag counts M  ({b}, {v})",
    )
    c.matrix(
        x_w,
        top,
        _values(w),
        row_labels=[str(r) for r in range(v)],
        col_labels=[str(j) for j in range(d)],
        title=f"weight  ({v}, {d})",
    )
    c.matrix(
        x_out,
        top,
        _values(out),
        col_labels=[str(j) for j in range(d)],
        title=f"M @ weight = bag sums  ({b}, {d})",
    )
    mid = top + min(b, v) * _CELL_H / 2
    c.text((x_m + v * _SQUARE + x_w) / 2, mid, "@", fontsize=14)
    c.text((x_w + d * _CELL_W + x_out) / 2, mid, "=", fontsize=14)
    return c.svg("bag", f"bags {bags} as a multi-hot matrix times the table")


# --------------------------------------------------------------------------------------------
# "TensorFlow / Keras"
# --------------------------------------------------------------------------------------------


def keras_layout_figure(weights: torch.Tensor | None = None) -> str:
    """Keras ``Embedding`` and ``Dense`` hold one ``(V, D)`` array; torch ``Linear`` its ``.T``.

    Args:
        weights: ``(V, D)`` table (default: seed 004's ``fake_weights``, rows 0.00 to 0.33).

    Returns:
        An SVG document.
    """
    if weights is None:
        w = torch.tensor([[0.11 * r] * 5 for r in range(4)], dtype=torch.float32)
    else:
        w = weights.detach().cpu()
    v, d = w.shape
    _check_drawable("keras_layout_figure", v, d)
    cw = 0.46

    def two(x: float) -> str:
        return f"{x:.2f}"

    top = 0.85
    x1 = 0.35
    x2 = x1 + d * cw + 0.7
    x3 = x2 + d * cw + 0.9
    c = _Canvas(x3 + v * cw + 0.2, top + max(v, d) * _CELL_H + 0.2)
    sel = min(2, v - 1)
    colour = _id_colour(sel)
    rows = {(sel, j): _tint(colour, 0.45) for j in range(d)}
    c.matrix(
        x1,
        top,
        _values(w, two),
        cell_w=cw,
        fills=rows,
        row_labels=[str(r) for r in range(v)],
        title=f"keras Embedding\n(input_dim, output_dim) = ({v}, {d})",
    )
    c.matrix(
        x2,
        top,
        _values(w, two),
        cell_w=cw,
        fills=rows,
        title=f"keras Dense kernel\n(in, out) = ({v}, {d})",
    )
    c.matrix(
        x3,
        top,
        _values(w.t(), two),
        cell_w=cw,
        fills={(j, sel): _tint(colour, 0.45) for j in range(d)},
        title=f"torch nn.Linear weight\n(out, in) = ({d}, {v})",
    )
    mid = top + v * _CELL_H / 2
    c.text((x1 + d * cw + x2) / 2, mid, "=", fontsize=14)
    c.text((x2 + d * cw + x3) / 2, mid, ".T", fontsize=12)
    return c.svg(
        "keras", "Keras Embedding and Dense share the (V, D) layout; torch Linear is (D, V)"
    )


#: Every figure function, by name; each can be called without arguments.
FIGURES: dict[str, Callable[[], str]] = {
    "lookup_figure": lookup_figure,
    "one_hot_figure": one_hot_figure,
    "matmul_figure": matmul_figure,
    "layout_figure": layout_figure,
    "storage_figure": storage_figure,
    "gradient_figure": gradient_figure,
    "renorm_figure": renorm_figure,
    "work_figure": work_figure,
    "error_bound_figure": error_bound_figure,
    "bag_figure": bag_figure,
    "keras_layout_figure": keras_layout_figure,
}
