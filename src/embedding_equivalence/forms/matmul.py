"""Matmul forms: the embedding as a product with a one-hot matrix, ``one_hot(ids, V) @ W``.

None of these calls an embedding kernel. ``padding_idx`` and ``scale_grad_by_freq`` become a
mask and a per-row division of the weight's gradient, which is the same as masking and scaling
the columns of the one-hot in ``one_hot^T @ G``; the upstream gradient of a padding position is
also zeroed before the product sees it
([`stop_padding_grad`][embedding_equivalence.forms.renorm.stop_padding_grad]), so that a non-finite
value there reaches no row (``0 * nan = nan``), as in ``F.embedding``. ``max_norm`` rescales the
referenced rows in place before the product, outside autograd (forward mode included), as
``F.embedding`` does.

Every autograd mode of ``F.embedding`` works: reverse and forward mode, double backward, and
``torch.func.grad``, ``jvp``, ``jacrev``, ``jacfwd`` and ``vmap`` (over a batch of tables).
The sparse product has no forward-mode formula in torch (``_sparse_addmm``), so
[`sparse_matmul_embedding`][] multiplies through [`SparseProduct`][], which has one.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F

from .renorm import prepare_product_call


def dense_one_hot(ids: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """Build the ``(N, V)`` one-hot of 1-D ``ids`` directly in ``dtype``.

    ``F.one_hot`` returns int64 (8 bytes per entry) and needs a cast (another ``N * V``
    entries) before a floating matmul; this builds the matrix once, in the weight's dtype, by a
    scatter into zeros. The ids are not checked here.

    Args:
        ids: 1-D int64 ids in ``[0, num_classes)``.
        num_classes: ``V``.
        dtype: floating dtype of the result.

    Returns:
        ``(N, V)`` tensor with a single 1 per row, on ``ids.device``.
    """
    out = torch.zeros((ids.shape[0], num_classes), dtype=dtype, device=ids.device)
    return out.scatter_(1, ids.unsqueeze(1), 1)


def sparse_one_hot(ids: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """Build the ``(N, V)`` one-hot of 1-D ``ids`` as a coalesced sparse COO tensor.

    It stores ``N`` values and ``2N`` indices, whatever ``V`` is.

    Args:
        ids: 1-D int64 ids in ``[0, num_classes)``.
        num_classes: ``V``.
        dtype: floating dtype of the values.

    Returns:
        Sparse ``(N, V)`` COO tensor with a single 1 per row.
    """
    n = ids.shape[0]
    rows = torch.arange(n, device=ids.device)
    with warnings.catch_warnings():
        # Some CUDA builds warn that the invariant checks are off although they were opted out.
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        return torch.sparse_coo_tensor(
            torch.stack([rows, ids]),
            torch.ones(n, dtype=dtype, device=ids.device),
            (n, num_classes),
            is_coalesced=True,  # rows are 0..N-1, one entry each: sorted and unique
            check_invariants=False,  # ids were range-checked by the caller
        )


class SparseProduct(torch.autograd.Function):
    """``torch.sparse.mm(matrix, dense)`` for a constant sparse ``matrix``, in every autograd mode.

    ``torch.sparse.mm`` has a backward but no forward-mode formula (``_sparse_addmm``) and no
    batching rule, so ``jvp``, ``jacfwd`` and ``vmap`` of it fail or fall back to a loop. The
    product is linear in ``dense``, so every derivative is again a sparse product:

    - backward: ``grad_dense = matrix^T @ grad`` (dense, ``O(nnz * D)``), itself a
      ``SparseProduct``, so double backward works;
    - forward mode: ``tangent_out = matrix @ tangent_dense``;
    - vmap over ``dense`` (a batch of tables, or the batched gradients and tangents of
      ``jacrev``/``jacfwd``): the batch is moved into the columns, ``(K, B * D)``, and
      multiplied once, which computes every entry exactly as the unbatched product does.

    The forward is ``torch.sparse.mm`` itself: same values, same cost.
    """

    @staticmethod
    def forward(matrix: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        """``matrix @ dense`` (``(N, K)`` sparse COO times ``(K, D)`` strided).

        CUDA's sparse product has no float16 or bfloat16 kernel ("addmm_sparse_cuda" not
        implemented): there both operands go to float32 and the product is rounded once to
        ``dense``'s dtype. A one-hot row selects a value exactly, so the forward is unchanged;
        a gradient row sums its duplicates in float32, more accurately than in its own dtype.
        """
        if dense.is_cuda and dense.dtype in (torch.float16, torch.bfloat16):
            wide = torch.sparse.mm(matrix.to(torch.float32), dense.to(torch.float32))
            return wide.to(dense.dtype)
        return torch.sparse.mm(matrix, dense)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        """Keep the sparse matrix for the backward and forward-mode passes."""
        matrix, _ = inputs
        ctx.save_for_backward(matrix)
        ctx.save_for_forward(matrix)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[None, torch.Tensor]:
        """``matrix^T @ grad``, a sparse product again (differentiable: double backward)."""
        (grad,) = grad_outputs
        (matrix,) = ctx.saved_tensors
        return None, SparseProduct.apply(matrix.t(), grad)

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> torch.Tensor:
        """``matrix @ tangent``: the product is linear in ``dense``."""
        (matrix,) = ctx.saved_tensors
        return SparseProduct.apply(matrix, tangents[1])

    @staticmethod
    def vmap(info: Any, in_dims: tuple[int | None, ...], *args: Any) -> tuple[torch.Tensor, int]:
        """A batch of ``dense`` as the columns of one product; the sparse matrix is shared.

        Raises:
            NotImplementedError: ``matrix`` is batched (vmap over the ids of a sparse
                product): a sparse COO tensor has no batch dimension in ``torch.func``.
        """
        matrix, dense = args
        matrix_dim, dense_dim = in_dims
        if matrix_dim is not None or dense_dim is None:
            raise NotImplementedError(
                "SparseProduct: vmap over the sparse matrix (the ids of sparse_matmul_embedding) "
                "is not supported; vmap over the table, or use matmul_embedding or "
                "lookup_embedding"
            )
        batched = dense.movedim(dense_dim, 1)  # (K, B, *rest)
        out = SparseProduct.apply(matrix, batched.flatten(1))
        return out.reshape(matrix.shape[0], *batched.shape[1:]), 1


def matmul_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Embed by a dense matrix product: ``one_hot(input, V) @ weight``.

    The one-hot is built in ``weight``'s dtype (not ``F.one_hot``'s int64), and its size,
    ``N * V * itemsize`` bytes, is checked against the memory available before anything is
    allocated. For finite weights the result equals [`lookup_embedding`][] bit for bit: each
    output entry is ``1 * W[id, d]`` plus exact zeros. A non-finite entry anywhere in ``W``
    breaks this (``0 * inf = nan``), and ``-0.0`` comes back as ``+0.0``.

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, each in ``[0, V)``.
        weight: ``(V, D)`` floating table, contiguous or strided, on the ids' device.
        padding_idx: row that receives no gradient; negative values count from the end. A
            padding position passes no gradient at all, not even a non-finite one.
        max_norm: if given, rows referenced by ``input`` with a larger ``norm_type``-norm are
            rescaled **in place** to norm ``max_norm`` before the product (as ``F.embedding``).
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide the gradient of each row by its id's frequency in ``input``.

    Returns:
        ``(*batch, D)`` tensor of ``weight``'s dtype and device.

    Raises:
        OneHotTooLargeError: the dense one-hot would not fit in memory.
        TypeError: see [`lookup_embedding`][]; every form raises the same errors.
        ValueError: see [`lookup_embedding`][].
        IndexError: see [`lookup_embedding`][].

    Examples:
        >>> import torch
        >>> from embedding_equivalence import matmul_embedding
        >>> weight = torch.arange(8.0).reshape(4, 2)
        >>> matmul_embedding(torch.tensor([2, 0]), weight)
        tensor([[4., 5.],
                [0., 1.]])
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    call = prepare_product_call(input, weight, options, "matmul_embedding", dense_one_hot=True)
    one_hot = dense_one_hot(call.flat, weight.shape[0], weight.dtype)
    return call.output(one_hot @ call.weight, input.shape)


def linear_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Embed with a bias-free linear layer on the one-hot: ``F.linear(one_hot, weight.T)``.

    This is the seed notebooks' form: ``nn.Linear(V, D, bias=False)`` stores its weight as
    ``(out_features, in_features) = (D, V)``, the transpose of the embedding table, and computes
    ``x @ linear.weight.T``. Here ``weight`` is the ``(V, D)`` table, so the linear weight is
    ``weight.T`` (a view, no copy). Same guarantees and errors as [`matmul_embedding`][].

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, each in ``[0, V)``.
        weight: ``(V, D)`` floating table (not the ``(D, V)`` linear weight).
        padding_idx: row that receives no gradient; negative values count from the end.
        max_norm: as for [`matmul_embedding`][] (in place, before the product).
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide the gradient of each row by its id's frequency in ``input``.

    Returns:
        ``(*batch, D)`` tensor of ``weight``'s dtype and device.

    Raises:
        OneHotTooLargeError: the dense one-hot would not fit in memory.
        TypeError: see [`lookup_embedding`][].
        ValueError: see [`lookup_embedding`][].
        IndexError: see [`lookup_embedding`][].
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    call = prepare_product_call(input, weight, options, "linear_embedding", dense_one_hot=True)
    one_hot = dense_one_hot(call.flat, weight.shape[0], weight.dtype)
    return call.output(F.linear(one_hot, call.weight.t()), input.shape)


def sparse_matmul_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Embed by a sparse-dense product: ``torch.sparse.mm(sparse_one_hot(input, V), weight)``.

    The one-hot is a sparse COO matrix with ``N`` stored ones, so the product costs what a
    lookup costs (``O(N * D)``), whatever ``V`` is; nothing of size ``N * V`` is built.
    The gradient of ``weight`` is dense (``one_hot^T @ G``); forward mode, double backward and
    the ``torch.func`` transforms work through `SparseProduct`, whose derivatives are
    sparse products too. Same forward guarantees and errors as [`matmul_embedding`][],
    without the memory refusal.

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, each in ``[0, V)``.
        weight: ``(V, D)`` floating table, contiguous or strided, on the ids' device.
        padding_idx: row that receives no gradient; negative values count from the end.
        max_norm: as for [`matmul_embedding`][] (in place, before the product).
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide the gradient of each row by its id's frequency in ``input``.

    Returns:
        ``(*batch, D)`` tensor of ``weight``'s dtype and device.

    Raises:
        TypeError: see [`lookup_embedding`][].
        ValueError: see [`lookup_embedding`][].
        IndexError: see [`lookup_embedding`][].
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    call = prepare_product_call(input, weight, options, "sparse_matmul_embedding")
    one_hot = sparse_one_hot(call.flat, weight.shape[0], weight.dtype)
    return call.output(SparseProduct.apply(one_hot, call.weight), input.shape)
