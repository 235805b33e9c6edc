"""The figure of "When equivalence breaks": measured gradient errors against their bound."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from embedding_equivalence import lookup_embedding, matmul_embedding
from embedding_equivalence.oracle.bounds import gamma, unit_roundoff
from embedding_equivalence.oracle.embedding import reference_embedding_grad

from ._style import (
    BOUND,
    FAINT_TEXT,
    FORM_COLOURS,
    figure_style,
    log_tick_labels,
    new_figure,
    render_svg,
    screens_of,
    tidy_axes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["error_bound_figure"]

#: gamma_k as a reader sees it, the k a subscript (DejaVu Sans, matplotlib's font, has the glyph).
GAMMA_K = "\N{GREEK SMALL LETTER GAMMA}\N{LATIN SUBSCRIPT SMALL LETTER K}"


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
    figure plots the largest ``|grad - exact| / sum_n |G[n, d]|`` of each form, computed by
    autograd through [`lookup_embedding`][embedding_equivalence.lookup_embedding] and
    [`matmul_embedding`][embedding_equivalence.matmul_embedding] (the one-hot matmul) and the
    float64 oracle. The panels stand side by side on a desktop, one above the other on a
    phone.

    Args:
        dtypes: low-precision dtypes, one panel each.
        dim: ``D``.
        seed: seed of the upstream gradients' generator.

    Returns:
        An SVG document.
    """
    measured = []
    for dtype in dtypes:
        u = unit_roundoff(dtype)
        counts = [2**j for j in range(1, 12) if 2**j * u < 0.5]
        errors = {
            form: _grad_errors(f, counts, dtype, dim, seed)
            for form, f in (("lookup", lookup_embedding), ("one-hot matmul", matmul_embedding))
        }
        measured.append((dtype, u, counts, errors))
    return render_svg(
        _draw_errors(measured, phone=False),
        "errorbound",
        "measured gradient errors stay under the bound gamma_k(u)",
        phone=_draw_errors(measured, phone=True),
    )


def _draw_errors(
    measured: Sequence[tuple[torch.dtype, float, list[int], dict[str, list[float]]]],
    *,
    phone: bool,
) -> Figure:
    """One panel per dtype: side by side on a desktop, one above the other on a phone."""
    count = len(measured)
    width, height = (3.7, 2.6 * count + 0.6) if phone else (3.6 * count, 2.9)
    screens = screens_of(phone)
    with figure_style(width, screens):
        fig, axes = new_figure(
            width, height, ncols=1 if phone else count, nrows=count if phone else 1, screens=screens
        )
        for ax, (dtype, u, counts, errors) in zip(axes, measured, strict=True):
            ax.plot(
                counts,
                [gamma(k, u) for k in counts],
                color=BOUND,
                linestyle="--",
                label=f"{GAMMA_K}(u), the bound",
            )
            ax.axhline(u, color=FAINT_TEXT, linewidth=0.8, linestyle=":", label="u")
            for form, errs in errors.items():
                shown = [max(e, u / 16) for e in errs]  # an exact result is drawn at u / 16
                ax.plot(counts, shown, marker="o", ms=3, color=FORM_COLOURS[form], label=form)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            log_tick_labels(ax.xaxis, 2, powers=False)
            log_tick_labels(ax.yaxis, 2)
            ax.set_title(f"{str(dtype).removeprefix('torch.')} (u = 2^{int(math.log2(u))})")
            ax.set_xlabel("k, occurrences of the id")
            tidy_axes(ax)
            if phone:
                ax.set_ylabel("max |error| / Σ|G|")
        if phone:
            fig.legend(
                *axes[0].get_legend_handles_labels(),
                loc="outside lower center",
                ncols=2,
                frameon=False,
            )
            fig.set_layout_engine("constrained")
        else:
            axes[0].set_ylabel("max |error| / Σ|G|")
            axes[0].legend(frameon=False, loc="upper left")
            fig.subplots_adjust(left=0.1, right=0.98, bottom=0.17, top=0.88, wspace=0.28)
    return fig
