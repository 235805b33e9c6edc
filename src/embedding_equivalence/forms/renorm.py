"""Pieces shared by the lookup and matmul forms: option handling outside the product itself.

``F.embedding`` implements two of its options inside its backward kernel (``padding_idx``
and ``scale_grad_by_freq``) and one as an in-place side effect before the lookup
(``max_norm``). The hand-written forms in this package express the first two as a mask and a
per-row scale applied to the gradient of the weight (:class:`GradRowScale`), and the third
as :func:`renorm_rows_`, an in-place rescaling of the referenced rows that reproduces
``torch.embedding_renorm_`` bit for bit on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from .validation import check_embedding_args, check_ids_in_range, check_one_hot_fits

__all__ = ["GradRowScale", "grad_row_scale", "prepare_call", "renorm_rows_", "scale_rows_"]


def renorm_rows_(
    weight: torch.Tensor, ids: torch.Tensor, max_norm: float, norm_type: float
) -> None:
    """Rescale in place each row referenced by ``ids`` whose norm exceeds ``max_norm``.

    Each referenced row ``r`` with ``||r||_p > max_norm`` becomes
    ``r * (max_norm / (||r||_p + 1e-7))``, exactly as ``torch.embedding_renorm_`` does
    (``F.embedding`` calls it when ``max_norm`` is given). The change is made under
    ``torch.no_grad()``: it is not part of the autograd graph, and the caller's ``weight``
    is modified, which is the documented side effect of ``max_norm``.

    On the CPU the rows are processed one by one with the norm rounded to the weight's dtype
    and the scale applied as a scalar, which is what torch's CPU kernel does, so the result is
    identical bit for bit. On other devices the same formula is applied to all rows at once.

    Args:
        weight: ``(V, D)`` floating table, modified in place.
        ids: integer ids of any shape, all in ``[0, V)``.
        max_norm: the largest norm a referenced row may keep.
        norm_type: ``p`` of the p-norm.
    """
    if weight.device.type == "meta" or ids.numel() == 0:
        return
    with torch.no_grad():
        unique = torch.unique(ids.reshape(-1))
        if weight.device.type == "cpu":
            for i in unique.tolist():
                row = weight[i]
                norm = torch.linalg.vector_norm(row, norm_type).item()
                if norm > max_norm:
                    torch.ops.aten.mul_.Scalar(row, max_norm / (norm + 1e-7))
            return
        norms = torch.linalg.vector_norm(weight.index_select(0, unique), norm_type, dim=1)
        scale_rows_(weight, unique, norms, max_norm)


def scale_rows_(
    weight: torch.Tensor, rows: torch.Tensor, norms: torch.Tensor, max_norm: float
) -> None:
    """Rescale in place the rows ``rows`` whose norm (given) exceeds ``max_norm``.

    Row ``r`` becomes ``r * (max_norm / (norm + 1e-7))``, computed in float32 (float64 for a
    float64 table) and rounded once to the table's dtype. The norms are given so that a caller
    holding a block of columns can pass the whole row's norm, reduced over ranks.

    Args:
        weight: ``(V, D)`` floating table, modified in place (outside autograd).
        rows: 1-D int64 unique row indices.
        norms: ``(len(rows),)`` norms of those rows.
        max_norm: the largest norm a row may keep.
    """
    with torch.no_grad():
        norms = norms.to(torch.float64)
        scale = torch.where(norms > max_norm, max_norm / (norms + 1e-7), torch.ones_like(norms))
        opmath = torch.float64 if weight.dtype == torch.float64 else torch.float32
        selected = weight.index_select(0, rows).to(opmath)
        weight.index_copy_(0, rows, (selected * scale.to(opmath)[:, None]).to(weight.dtype))


class GradRowScale(torch.autograd.Function):
    """Identity in the forward pass; multiplies row ``v`` of the incoming gradient by ``scale[v]``.

    Rows where ``keep`` is False get an exact zero (``where``, not a multiplication, so that a
    non-finite gradient cannot leak ``0 * inf = nan`` into a padding row). The backward is made of
    differentiable operations, so double backward works.
    """

    @staticmethod
    def forward(
        ctx: Any, weight: torch.Tensor, scale: torch.Tensor | None, keep: torch.Tensor | None
    ) -> torch.Tensor:
        """Return ``weight`` unchanged (as a view) and remember the scale and mask."""
        ctx.scale = scale
        ctx.keep = keep
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Scale and mask the rows of the weight's gradient."""
        (grad,) = grad_outputs
        if ctx.scale is not None:
            grad = (grad.to(torch.float64) * ctx.scale[:, None]).to(grad.dtype)
        if ctx.keep is not None:
            grad = torch.where(ctx.keep[:, None], grad, torch.zeros_like(grad))
        return grad, None, None


def grad_row_scale(
    weight: torch.Tensor, flat_ids: torch.Tensor, padding_idx: int | None, scale_grad_by_freq: bool
) -> torch.Tensor:
    """Apply ``padding_idx`` and ``scale_grad_by_freq`` to the gradient of ``weight``.

    With neither option this returns ``weight`` itself. Otherwise it returns a view whose
    gradient is scaled per row: ``1 / count(v)`` with ``scale_grad_by_freq`` (``count(v)`` is
    how often ``v`` occurs in ``flat_ids``) and ``0`` for the padding row. Forward values are
    untouched.

    Args:
        weight: ``(V, D)`` table.
        flat_ids: 1-D int64 ids in ``[0, V)``.
        padding_idx: non-negative padding row or ``None``.
        scale_grad_by_freq: divide each row's gradient by its id's frequency.

    Returns:
        ``weight`` or a view of it with the gradient rule attached.
    """
    if padding_idx is None and not scale_grad_by_freq:
        return weight
    if not weight.requires_grad or weight.device.type == "meta":
        return weight  # no gradient to shape (meta tensors carry no values)
    num_embeddings = weight.shape[0]
    scale = None
    keep = None
    if scale_grad_by_freq:
        counts = torch.bincount(flat_ids, minlength=num_embeddings).to(torch.float64)
        scale = 1.0 / counts.clamp(min=1.0)  # rows that do not occur have a zero gradient
    if padding_idx is not None:
        keep = torch.ones(num_embeddings, dtype=torch.bool, device=weight.device)
        keep[padding_idx] = False
    out = GradRowScale.apply(weight, scale, keep)
    assert isinstance(out, torch.Tensor)
    return out


def prepare_call(
    input: torch.Tensor,
    weight: torch.Tensor,
    options: tuple[int | None, float | None, float, bool],
    fn: str,
    *,
    dense_one_hot: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a call of a hand-written form and apply its options outside the product.

    The checks every form shares (in order: arguments, the dense one-hot's size when there is
    one, the ids' range), then ``max_norm``'s in-place renorm, then the gradient rule of
    ``padding_idx`` and ``scale_grad_by_freq``.

    Args:
        input: the ids.
        weight: the ``(V, D)`` table.
        options: ``(padding_idx, max_norm, norm_type, scale_grad_by_freq)`` as passed.
        fn: the form's name, for the messages.
        dense_one_hot: the form builds an ``(N, V)`` one-hot: refuse it if it would not fit.

    Returns:
        ``(flat_ids, weight)``: the ids as a 1-D int64 tensor, and the table to multiply or
        index (``weight`` itself, or a view of it carrying the gradient rule).
    """
    padding_idx, max_norm, norm_type, scale_grad_by_freq = options
    padding = check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    if dense_one_hot:
        check_one_hot_fits(input.numel(), weight.shape[0], weight.dtype, weight.device, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    flat = input.reshape(-1).long()
    if max_norm is not None:
        renorm_rows_(weight, flat, max_norm, norm_type)
    return flat, grad_row_scale(weight, flat, padding, scale_grad_by_freq)
