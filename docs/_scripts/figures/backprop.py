"""The figure of the derivation in "How gradients flow back": ``dL/dW = one_hot(ids)^T @ G``.

The backward pass of ``out = one_hot(ids) @ W`` is itself a product, drawn here in Falk's
scheme like the forward product of "Lookup is a matmul": the upstream gradient
``G = dL/d out`` above, the transposed one-hot ``O^T`` left of the result, and the table's
gradient below ``G``, so that ``dL/dW[v, d]`` sits in row ``v`` of ``O^T`` and column ``d`` of
``G``. Row ``v`` of ``O^T`` holds a 1 at each position of id ``v``, which is why a repeated id
sums its rows of ``G``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from embedding_equivalence import matmul_embedding

from ._canvas import (
    CELL_H,
    CELL_W,
    SQUARE,
    Canvas,
    check_drawable,
    desktop_and_phone,
    values,
)
from ._style import FAINT_TEXT, ZERO_FILL, fmt, fmt_short, id_colour, screens_of, tint

__all__ = ["backprop_figure"]

# Room above a matrix for its title and column labels, between G and the result below it
# (the result's title), and between O^T and the result, in inches.
_HEAD = 0.55
_GAP_Y = 0.42
_GAP_X = 0.45
# The left edge of O^T: room for its row labels and for those of G above it.
_LEFT = 1.3
# On a phone: the width of a cell of integral values (up to five characters, "1001"), and of a
# character of a row label (BODY size, sans-serif, on average), in inches.
_SHORT_CELL = 0.45
_LABEL_CHAR = 0.07


def _default_grad_output(n: int, d: int) -> torch.Tensor:
    """Rows of 1, 10, 100, ...: each sum of rows can be read off (as in ``gradient_figure``)."""
    scale = torch.tensor([10.0**k for k in range(n)])
    return scale[:, None].expand(n, d).clone()


def _sum_note(positions: list[int]) -> str:
    """What row ``v`` of the gradient is, given the positions ``n`` with ``ids[n] == v``."""
    if not positions:
        return "no id: 0"
    return " + ".join(f"G[{n}]" for n in positions)


def backprop_figure(
    ids: torch.Tensor | None = None,
    grad_output: torch.Tensor | None = None,
    num_embeddings: int = 4,
) -> str:
    """``O^T @ G = dL/dW``: the table's gradient as the product of the transposed one-hot and G.

    The gradient is computed by autograd through
    [`matmul_embedding`][embedding_equivalence.matmul_embedding] (``out = one_hot(ids) @ W``)
    with ``grad_output`` as ``dL/d out``; ``O^T`` is ``F.one_hot(ids, V).T``. Each row of the
    result is labelled with the rows of ``G`` it sums.

    Args:
        ids: 1-D ids (default ``[2, 3, 1, 2]``: id 2 twice).
        grad_output: ``(N, D)`` upstream gradient ``G`` (default rows of 1, 10, 100, 1000).
        num_embeddings: ``V``.

    Returns:
        An SVG document.

    Raises:
        ValueError: ``V``, ``D`` or ``N`` is too long to draw cell by cell.
    """
    i = (torch.tensor([2, 3, 1, 2]) if ids is None else ids).detach().cpu().reshape(-1).long()
    n = i.numel()
    d = 5 if grad_output is None else grad_output.shape[-1]
    g = _default_grad_output(n, d) if grad_output is None else grad_output.detach().cpu()
    g = g.reshape(n, d)
    v = num_embeddings
    check_drawable("backprop_figure", v, d, n)
    weight = torch.zeros(v, d, dtype=g.dtype, requires_grad=True)
    matmul_embedding(i, weight).backward(g)
    assert weight.grad is not None
    label = f"the table's gradient as the transposed one-hot of ids {i.tolist()} times G"
    return desktop_and_phone(
        _draw_backprop, "backprop", label, g=g, grad=weight.grad, one_hot_t=F.one_hot(i, v).T
    )


def _draw_backprop(
    g: torch.Tensor, grad: torch.Tensor, one_hot_t: torch.Tensor, *, phone: bool
) -> Canvas:
    """Falk's scheme on a desktop; on a phone ``one_hot.T``, ``@ G`` and ``= dL/dW`` stacked."""
    n, d = g.shape
    v = grad.shape[0]
    ids_list = [int(x) for x in one_hot_t.argmax(dim=0).tolist()]
    positions = [[k for k, r in enumerate(ids_list) if r == row] for row in range(v)]
    exact = not g.is_floating_point() or bool((g == g.round()).all())
    to_text = fmt_short if exact else fmt
    cw = _SHORT_CELL if exact and phone else CELL_W
    g_labels = [f"G[{k}] (id {r})" for k, r in enumerate(ids_list)]
    if phone:  # each row of the result labelled with the rows of G it sums
        sums = [f"row {r}: {_sum_note(positions[r])}" for r in range(v)]
        x_oh = x_g = 0.15 + _LABEL_CHAR * max(map(len, g_labels + sums))
        y_oh = _HEAD
        y_g = y_oh + v * CELL_H + 0.2 + _HEAD
        y_result = y_g + n * CELL_H + _GAP_Y
        right = x_g + d * cw
        bottom = y_result + v * CELL_H
        c = Canvas(right + 0.15, bottom + 0.15, screens_of(True))
    else:
        sums = [f"row {r}" for r in range(v)]
        x_oh, x_g = _LEFT, _LEFT + n * SQUARE + _GAP_X  # the left edge of G and of the result
        y_g = _HEAD
        y_oh = y_result = _HEAD + n * CELL_H + _GAP_Y  # the top of O^T and of the result
        right = x_g + d * cw
        bottom = y_result + v * CELL_H
        c = Canvas(right + 1.35, bottom + 0.45, screens_of(False))
    c.matrix(
        x_g,
        y_g,
        values(g, to_text),
        cell_w=cw,
        fills={(k, j): tint(id_colour(r), 0.3) for k, r in enumerate(ids_list) for j in range(d)},
        row_labels=g_labels,
        col_labels=[str(j) for j in range(d)],
        title=f"{'@ ' if phone else ''}G = dL/d out  ({n}, {d})",
    )
    c.matrix(
        x_oh,
        y_oh,
        values(one_hot_t, fmt_short),
        cell_w=SQUARE,
        fills={(r, k): tint(id_colour(r), 0.45) for k, r in enumerate(ids_list)},
        text_colours={(r, k): FAINT_TEXT for r in range(v) for k in range(n) if ids_list[k] != r},
        row_labels=[f"row {r}" for r in range(v)],
        col_labels=[str(k) for k in range(n)],
        title=f"one_hot.T  ({v}, {n})" if phone else None,
    )
    if not phone:  # its title goes below: above it are the row labels of G
        c.text(x_oh + n * SQUARE / 2, bottom + 0.1, f"one_hot.T  ({v}, {n})", va="top")
    c.matrix(
        x_g,
        y_result,
        values(grad, to_text),
        cell_w=cw,
        fills={
            (r, j): tint(id_colour(r), 0.3) if positions[r] else ZERO_FILL
            for r in range(v)
            for j in range(d)
        },
        text_colours={(r, j): FAINT_TEXT for r in range(v) if not positions[r] for j in range(d)},
        row_labels=sums if phone else None,
        title=f"= dL/dW  ({v}, {d})" if phone else f"dL/dW = one_hot.T @ G  ({v}, {d})",
    )
    if not phone:
        for r in range(v):
            c.text(right + 0.08, y_result + (r + 0.5) * CELL_H, _sum_note(positions[r]), ha="left")
    return c
