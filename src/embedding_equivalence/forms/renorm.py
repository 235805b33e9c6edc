"""Pieces shared by the lookup and matmul forms: option handling outside the product itself.

``F.embedding`` implements two of its options inside its backward kernel (``padding_idx``
and ``scale_grad_by_freq``) and one as an in-place side effect before the lookup
(``max_norm``). The hand-written forms in this package express the first two as a mask and a
per-row division applied to a gradient ([`GradRowScale`][]: on the weight's rows with
[`grad_row_scale`][], on the output's rows with [`stop_padding_grad`][]), and the third as
[`renorm_rows_`][], an in-place rescaling of the referenced rows that reproduces
``torch.embedding_renorm_`` bit for bit on the CPU.

Every autograd mode that ``F.embedding`` supports works here too: [`GradRowScale`][] has a
``setup_context``, a ``jvp`` and a generated vmap rule (so ``torch.func.grad``, ``jvp``,
``jacrev``, ``jacfwd`` and ``vmap`` accept it), its backward is made of differentiable
operations (double backward), and the renorm writes through ``weight.detach()`` with tensor
operations only, as ``F.embedding`` does: the tangent of a dual table is not rescaled, and a
batch of tables under ``vmap`` is renormalized table by table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from .memory import check_dense_fits
from .validation import check_embedding_args, check_ids_in_range


def renorm_rows_(
    weight: torch.Tensor, ids: torch.Tensor, max_norm: float, norm_type: float
) -> None:
    """Rescale in place each row referenced by ``ids`` whose norm exceeds ``max_norm``.

    Each referenced row ``r`` with ``||r||_p > max_norm`` becomes
    ``r * (max_norm / (||r||_p + 1e-7))``, exactly as ``torch.embedding_renorm_`` does
    (``F.embedding`` calls it when ``max_norm`` is given). As in ``F.embedding`` the change is
    made through ``weight.detach()``: it is not part of the autograd graph (neither backward
    nor forward mode: the tangent of a dual table is not rescaled), and the caller's ``weight``
    is modified, which is the documented side effect of ``max_norm``.

    On the CPU the norm of each row is taken row by row and the scale is rounded to the
    weight's dtype before the product, which is what torch's CPU kernel does (``row *= scale``
    with a double ``scale``), so the result is identical bit for bit. On other devices the
    norms are taken all at once and the scale is applied as in [`scale_rows_`][]. Only tensor
    operations touch the values (no ``.item()``), so a batch of tables under
    ``torch.func.vmap`` is renormalized table by table.

    Args:
        weight: ``(V, D)`` floating table, modified in place.
        ids: integer ids of any shape, all in ``[0, V)``.
        max_norm: the largest norm a referenced row may keep.
        norm_type: ``p`` of the p-norm.
    """
    if weight.device.type == "meta" or ids.numel() == 0:
        return
    table = weight.detach()
    with torch.no_grad():
        unique = torch.unique(ids.reshape(-1))
        if table.device.type == "cpu":
            norms = [torch.linalg.vector_norm(table[i], norm_type) for i in unique.tolist()]
            scale_rows_(table, unique, torch.stack(norms), max_norm, table.dtype)
            return
        norms = torch.linalg.vector_norm(table.index_select(0, unique), norm_type, dim=1)
    scale_rows_(table, unique, norms, max_norm)


def scale_rows_(
    weight: torch.Tensor,
    rows: torch.Tensor,
    norms: torch.Tensor,
    max_norm: float,
    scale_dtype: torch.dtype | None = None,
) -> None:
    """Rescale in place the rows ``rows`` whose norm (given) exceeds ``max_norm``.

    Row ``r`` becomes ``r * (max_norm / (norm + 1e-7))``: the scale is formed in float64,
    rounded to ``scale_dtype`` (default float32, float64 for a float64 table), and multiplied
    in float32 (float64 for a float64 table); the product is rounded once to the table's dtype.
    The norms are given so that a caller holding a block of columns can pass the whole row's
    norm, reduced over ranks. The write goes through ``weight.detach()`` (outside autograd,
    forward mode included), with ``index_put_`` (not ``index_copy_``) so that ``vmap`` has a
    batching rule for it.

    Args:
        weight: ``(V, D)`` floating table, modified in place (outside autograd).
        rows: 1-D int64 unique row indices.
        norms: ``(len(rows),)`` norms of those rows.
        max_norm: the largest norm a row may keep.
        scale_dtype: the dtype the scale is rounded to before the product; [`renorm_rows_`][]
            rounds it to the table's dtype on the CPU, as torch's CPU kernel does.
    """
    table = weight.detach()
    with torch.no_grad():
        norms = norms.to(torch.float64)
        # A true division (``max_norm / tensor`` would be a reciprocal times max_norm: two
        # roundings), so that the scale is torch's ``max_norm / (norm + 1e-7)`` in double.
        quotient = torch.full_like(norms, max_norm) / (norms + 1e-7)
        scale = torch.where(norms > max_norm, quotient, torch.ones_like(norms))
        opmath = torch.float64 if table.dtype == torch.float64 else torch.float32
        selected = table.index_select(0, rows).to(opmath)
        scaled = selected * scale.to(scale_dtype or opmath).to(opmath)[:, None]
        table.index_put_((rows,), scaled.to(table.dtype))


class GradRowScale(torch.autograd.Function):
    """Identity in the forward pass; divides row ``k`` of the gradient by ``counts[k]``.

    Rows where ``keep`` is False get an exact zero (``where``, not a multiplication, so that a
    non-finite gradient cannot leak ``0 * inf = nan`` into a masked row). ``counts`` (float64)
    or ``keep`` may be ``None``. Applied to a table the rows are the table's rows; applied to
    an output ``(N, D)`` they are the positions.

    Forward mode: the identity's tangent is the input's tangent, unscaled and unmasked (as
    ``F.embedding``'s, whose options touch only the gradient). The backward is made of
    differentiable operations (double backward works: its derivative divides and masks the
    same rows), and ``setup_context`` plus a generated vmap rule make the function usable
    under ``torch.func.grad``, ``jvp``, ``jacrev``, ``jacfwd`` and ``vmap``.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(
        rows: torch.Tensor, counts: torch.Tensor | None, keep: torch.Tensor | None
    ) -> torch.Tensor:
        """Return ``rows`` unchanged (as a view)."""
        return rows.view_as(rows)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        """Remember the counts and the mask for the backward pass."""
        _, counts, keep = inputs
        ctx.save_for_backward(counts, keep)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Divide and mask the rows of the gradient."""
        (grad,) = grad_outputs
        counts, keep = ctx.saved_tensors
        if counts is not None:
            # A division (not a product with 1 / count): in float64 its double backward is
            # the correctly rounded T / count, the exact answer.
            grad = (grad.to(torch.float64) / counts[:, None]).to(grad.dtype)
        if keep is not None:
            grad = torch.where(keep[:, None], grad, torch.zeros_like(grad))
        return grad, None, None

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> torch.Tensor:
        """The identity's tangent: the input's tangent (as a view, like the output)."""
        return tangents[0].view_as(tangents[0])


def grad_row_scale(
    weight: torch.Tensor, flat_ids: torch.Tensor, padding_idx: int | None, scale_grad_by_freq: bool
) -> torch.Tensor:
    """Apply ``padding_idx`` and ``scale_grad_by_freq`` to the gradient of ``weight``.

    With neither option this returns ``weight`` itself. Otherwise it returns a view whose
    gradient is divided per row: by ``count(v)`` with ``scale_grad_by_freq`` (``count(v)`` is
    how often ``v`` occurs in ``flat_ids``), and set to ``0`` for the padding row. Forward
    values and forward-mode tangents are untouched.

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
    counts = keep = None
    if scale_grad_by_freq:
        # Clamped: rows that do not occur have a zero gradient anyway.
        counts = torch.bincount(flat_ids, minlength=num_embeddings).to(torch.float64).clamp(min=1.0)
    if padding_idx is not None:
        keep = torch.ones(num_embeddings, dtype=torch.bool, device=weight.device)
        keep[padding_idx] = False
    return GradRowScale.apply(weight, counts, keep)


def position_counts(flat_ids: torch.Tensor, num_embeddings: int) -> torch.Tensor:
    """``(N,)`` float64: how often the id of each position occurs in ``flat_ids``.

    ``scale_grad_by_freq`` as ``F.embedding`` applies it: each occurrence's upstream gradient
    divided by its id's count *before* the occurrences of a row are summed. Dividing the
    row's sum instead overflows where the terms do not (two float16 gradients of 49,152
    sum past 65,504; their halves do not).
    """
    return torch.bincount(flat_ids, minlength=num_embeddings).to(torch.float64)[flat_ids]


def stop_padding_grad(
    out: torch.Tensor,
    flat_ids: torch.Tensor,
    padding: int | None,
    counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Identity forward; zeroes the upstream gradient of the positions whose id is ``padding``.

    ``F.embedding`` gives a padding position no gradient at all. A product form computes the
    table's gradient as ``one_hot^T @ G``, where a non-finite ``G[n]`` at a padding position
    would reach every row through ``0 * nan = nan``; masking the rows of ``G`` (a ``where``)
    before the product sees them keeps it out, as in torch. Forward values and tangents are
    untouched.

    Args:
        out: ``(N, D)`` output rows, one per position of ``flat_ids``.
        flat_ids: ``(N,)`` int64 ids.
        padding: the padding row, non-negative (as [`prepare_product_call`][] returns it),
            or ``None``.
        counts: ``scale_grad_by_freq``'s ``(N,)`` [`position_counts`][], or ``None``: the
            gradient of each position is divided by its count.

    Returns:
        ``out``, or a view of it whose gradient is zero at the padding positions (and divided
        by the counts).
    """
    if counts is None:
        return out if padding is None else stop_grad_where(out, flat_ids != padding)
    if not out.requires_grad or out.device.type == "meta" or out.numel() == 0:
        return out
    return GradRowScale.apply(out, counts, None if padding is None else flat_ids != padding)


def stop_grad_where(out: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Identity forward; zeroes the upstream gradient of the rows where ``keep`` is False.

    The mask of [`stop_padding_grad`][] (padding positions) and of the bag forms (bags with no
    counted id): a ``where`` on the rows of ``G``, so that no non-finite value there reaches
    the table through the product.

    Args:
        out: ``(R, D)`` rows.
        keep: ``(R,)`` bool, the rows whose gradient passes.

    Returns:
        ``out``, or a view of it with the gradient rule attached (none without a gradient, or
        on the ``meta`` device).
    """
    if not out.requires_grad or out.device.type == "meta":
        return out
    return GradRowScale.apply(out, None, keep)


class PreparedCall(NamedTuple):
    """A validated call of a hand-written form, its options applied outside the product."""

    flat: torch.Tensor
    """The ids as a 1-D int64 tensor."""
    weight: torch.Tensor
    """The table to multiply or index: ``weight`` itself, or a view carrying the gradient rule
    of ``padding_idx`` ([`grad_row_scale`][])."""
    padding: int | None
    """``padding_idx`` mapped into ``[0, V)``, or ``None``."""
    counts: torch.Tensor | None = None
    """``scale_grad_by_freq``'s [`position_counts`][], for [`stop_padding_grad`][], or ``None``."""

    def output(self, rows: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        """The form's output ``(*shape, D)`` from its ``(N, D)`` ``rows``: [`stop_padding_grad`][].

        Args:
            rows: one row per id of ``flat``, computed from ``weight``.
            shape: the ids' shape.
        """
        out = stop_padding_grad(rows, self.flat, self.padding, self.counts)
        return out.reshape(*shape, self.weight.shape[1])


def prepare_product_call(
    input: torch.Tensor,
    weight: torch.Tensor,
    options: tuple[int | None, float | None, float, bool],
    fn: str,
    *,
    dense_one_hot: bool = False,
) -> PreparedCall:
    """Validate a call of a hand-written form and apply its options outside the product.

    The checks every form shares (in order: arguments, the dense one-hot's size when there is
    one, the ids' range), then ``max_norm``'s in-place renorm, then the gradient rule of
    ``padding_idx`` and ``scale_grad_by_freq`` on the table's rows. A product form also passes
    its output through [`stop_padding_grad`][] with the returned ``padding``.

    Args:
        input: the ids.
        weight: the ``(V, D)`` table.
        options: ``(padding_idx, max_norm, norm_type, scale_grad_by_freq)`` as passed.
        fn: the form's name, for the messages.
        dense_one_hot: the form builds an ``(N, V)`` one-hot: refuse it if it would not fit.

    Returns:
        The [`PreparedCall`][].
    """
    padding_idx, max_norm, norm_type, scale_grad_by_freq = options
    padding = check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    if dense_one_hot:
        check_dense_fits(input.numel(), "ids", weight.shape[0], weight.dtype, weight.device, fn)
    check_ids_in_range(input, weight.shape[0], fn)
    flat = input.reshape(-1).long()
    if max_norm is not None:
        renorm_rows_(weight, flat, max_norm, norm_type)
    counts = position_counts(flat, weight.shape[0]) if scale_grad_by_freq else None
    return PreparedCall(flat, grad_row_scale(weight, flat, padding, False), padding, counts)
