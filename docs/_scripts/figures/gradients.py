"""Figures of "How gradients flow back": the ``index_add`` of the gradient, and ``max_norm``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from embedding_equivalence import lookup_embedding

from ._canvas import (
    CELL_H,
    HEAD,
    Canvas,
    check_drawable,
    defaults,
    desktop_and_phone,
    values,
)
from ._style import (
    BOUND,
    DARK_GREY,
    FAINT_TEXT,
    GRID,
    MUTED,
    SMALL,
    ZERO_FILL,
    figure_style,
    fmt_short,
    id_colour,
    new_figure,
    render_svg,
    screens_of,
    tidy_axes,
    tint,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["gradient_figure", "renorm_figure"]

# The colours of the norms after the renorm: of the rows it changed, and of the others.
_AFTER = DARK_GREY
_AFTER_KEPT = GRID


def _default_grad_output(n: int, d: int) -> torch.Tensor:
    scale = torch.tensor([10.0**k for k in range(n)])
    return scale[:, None].expand(n, d).clone()


def _row_note(r: int, count: int, pad: int | None, scale_grad_by_freq: bool) -> str:
    """What happens to gradient row ``r``, referenced ``count`` times (empty: a plain copy)."""
    if r == pad:
        return "padding_idx: 0"
    if count == 0:
        return "no id: 0"
    if count > 1:
        return f"sum / {count}" if scale_grad_by_freq else f"sum of {count}"
    return ""


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
    [`lookup_embedding`][embedding_equivalence.lookup_embedding] with the given options: each row
    ``G[n]`` is added into row ``ids[n]``; duplicates accumulate, rows that no id references stay
    zero, the ``padding_idx`` row (hatched) gets nothing, and ``scale_grad_by_freq`` divides each
    row by its id's count.

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
    check_drawable("gradient_figure", v, d, n)
    weight = torch.zeros(v, d, requires_grad=True)
    lookup_embedding(
        i, weight, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq
    ).backward(g)
    assert weight.grad is not None
    ids_list = [int(x) for x in i.tolist()]
    options = []
    if padding_idx is not None:
        options.append("padding_idx")
    if scale_grad_by_freq:
        options.append("scale_grad_by_freq")
    name = "grad" + "".join(f"-{o}" for o in options)
    return desktop_and_phone(
        _draw_gradient,
        name,
        f"gradient rows of ids {ids_list} added into the table's gradient",
        g=g,
        grad=weight.grad,
        ids=ids_list,
        pad=None if padding_idx is None else padding_idx % v,
        scale_grad_by_freq=scale_grad_by_freq,
    )


# The width of a cell of the gradient figure: values of up to five characters ("500.5").
_GRAD_CELL = 0.45
# The width of a character of a row label, in inches (BODY size, sans-serif, on average).
_LABEL_CHAR = 0.07


def _draw_gradient(
    g: torch.Tensor,
    grad: torch.Tensor,
    ids: list[int],
    pad: int | None,
    scale_grad_by_freq: bool,
    *,
    phone: bool,
) -> Canvas:
    n, d = g.shape
    v = grad.shape[0]
    counts = [ids.count(r) for r in range(v)]
    notes = [_row_note(r, counts[r], pad, scale_grad_by_freq) for r in range(v)]
    cw = _GRAD_CELL
    g_labels = [f"G[{k}] (id {r})" for k, r in enumerate(ids)]
    top = HEAD
    if phone:  # weight.grad below G, each row's note in its label, the arrows right of both
        grad_labels = [f"row {r}" + (f" ({note})" if note else "") for r, note in enumerate(notes)]
        left = 0.15 + _LABEL_CHAR * max(map(len, g_labels + grad_labels))
        x_g, y_g = left, top + n * CELL_H + HEAD + 0.15
        c = Canvas(left + d * cw + 0.5, y_g + v * CELL_H + 0.15, screens_of(True))
    else:
        grad_labels = [f"row {r}" for r in range(v)]
        left = 0.95
        x_g, y_g = left + d * cw + 1.15, top  # the arrows, and the row labels of the gradient
        c = Canvas(x_g + d * cw + 1.15, top + max(n, v) * CELL_H + 0.2, screens_of(False))
    c.matrix(
        left,
        top,
        values(g, fmt_short),
        cell_w=cw,
        fills={(k, j): tint(id_colour(r), 0.3) for k, r in enumerate(ids) for j in range(d)},
        row_labels=g_labels,
        title=f"grad_output G  ({n}, {d})",
    )
    live = [bool(counts[r]) and r != pad for r in range(v)]
    c.matrix(
        x_g,
        y_g,
        values(grad, fmt_short),
        cell_w=cw,
        fills={
            (r, j): tint(id_colour(r), 0.3) if live[r] else ZERO_FILL
            for r in range(v)
            for j in range(d)
        },
        text_colours={(r, j): FAINT_TEXT for r in range(v) if not live[r] for j in range(d)},
        hatched=[pad] if pad is not None else [],
        row_labels=grad_labels,
        title=f"weight.grad  ({v}, {d})",
    )
    if not phone:
        for r, note in enumerate(notes):
            if note:
                c.text(
                    x_g + d * cw + 0.08, top + (r + 0.5) * CELL_H, note, ha="left", fontsize=SMALL
                )
    for k, r in enumerate(ids):
        colour = FAINT_TEXT if r == pad else id_colour(r)
        start = (left + d * cw + 0.03, top + (k + 0.5) * CELL_H)
        if phone:
            c.lane_arrow(start, y_g + (r + 0.5) * CELL_H, colour)
        else:
            c.arrow(
                start,
                (x_g - 0.5, y_g + (r + 0.5) * CELL_H),
                colour,
                width=0.8 if r == pad else 1.2,
            )
    return c


def renorm_figure(
    weight: torch.Tensor | None = None,
    ids: torch.Tensor | None = None,
    max_norm: float = 1.0,
    norm_type: float = 2.0,
) -> str:
    """Row norms before and after ``max_norm``'s in-place renorm (only referenced rows change).

    The renorm is performed by [`lookup_embedding`][embedding_equivalence.lookup_embedding] on a
    copy.

    Args:
        weight: ``(V, D)`` table (default: the worked example's).
        ids: ids (default ``[2, 3, 1]``).
        max_norm: the threshold.
        norm_type: the ``p`` of the p-norm.

    Returns:
        An SVG document.
    """
    w, i = defaults(weight, ids)
    v = w.shape[0]
    check_drawable("renorm_figure", v)
    after = w.clone()
    lookup_embedding(i, after, max_norm=max_norm, norm_type=norm_type)
    before_n = torch.linalg.vector_norm(w.double(), norm_type, dim=1).tolist()
    after_n = torch.linalg.vector_norm(after.double(), norm_type, dim=1).tolist()
    referenced = {int(x) for x in i.tolist()}
    p = "∞" if math.isinf(norm_type) else fmt_short(norm_type)
    args = (before_n, after_n, referenced, max_norm, p)
    return render_svg(
        _draw_renorm(*args, phone=False),
        "renorm",
        "row norms before and after the max_norm renorm",
        phone=_draw_renorm(*args, phone=True),
    )


def _draw_renorm(
    before_n: list[float],
    after_n: list[float],
    referenced: set[int],
    max_norm: float,
    p: str,
    *,
    phone: bool,
) -> Figure:
    """The bars of the norms; the legend right of them on a desktop, below them on a phone."""
    width, height = (3.7, 3.6) if phone else (7.0, 2.6)
    rect = (0.17, 0.36, 0.78, 0.52) if phone else (0.09, 0.17, 0.57, 0.7)
    screens = screens_of(phone)
    with figure_style(width, screens):
        fig, (ax,) = new_figure(width, height, rect=rect, screens=screens)
        xs = list(range(len(before_n)))
        changed = [x for x in xs if x in referenced]
        kept = [x for x in xs if x not in referenced]
        # One colour per series, and the legend made from the series themselves: an entry
        # cannot show a colour that its bars do not have. The rows are not told apart by
        # colour (that would read as ids): a norm after the call is grey, darker where the
        # call changed it.
        series: list[Any] = [
            ax.bar([x - 0.2 for x in xs], before_n, 0.38, color=MUTED, label="before the call")
        ]
        for rows, colour, label in (
            (changed, _AFTER, "after (referenced rows, *)"),
            (kept, _AFTER_KEPT, "after (other rows, unchanged)"),
        ):
            if rows:
                heights = [after_n[x] for x in rows]
                series.append(
                    ax.bar([x + 0.2 for x in rows], heights, 0.38, color=colour, label=label)
                )
        series.append(
            ax.axhline(
                max_norm, color=BOUND, linestyle="--", linewidth=1.0, label=f"max_norm = {max_norm}"
            )
        )
        ax.set_xticks(xs, [f"row {x}" + ("*" if x in referenced else "") for x in xs])
        ax.set_ylabel(f"‖weight[v]‖ (p = {p})")
        ax.set_title(
            "max_norm rescales the\nreferenced rows in place"
            if phone
            else "max_norm rescales the referenced rows in place"
        )
        tidy_axes(ax, grid=False)
        if phone:
            fig.legend(handles=series, loc="lower center", frameon=False, ncols=1)
        else:
            fig.legend(handles=series, loc="center right", frameon=False)
    return fig
