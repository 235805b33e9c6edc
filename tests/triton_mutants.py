"""Planted bugs in the worked Triton embedding (docs/_scripts/triton_kernels.py), and kernels
that meet the limits of Triton's interpreter.

Each mutant is the worked kernel with one realistic mistake, a module-level function with
F.embedding's signature, so that its repro imports it by name. Import this module only with
``TRITON_INTERPRET=1`` set (tests/test_triton.py's fixture does): its kernels are decorated
when it is imported.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton_kernels import BLOCK_ELEMENTS, MAX_BLOCK_D, blocks, embedding


def _tail_dropping_grid(n: int, dim: int) -> tuple[tuple[int, int], int, int]:
    """``n // BLOCK_N`` programs: the last partial block of ids is never launched."""
    block_d = min(triton.next_power_of_2(dim), MAX_BLOCK_D)
    block_n = max(BLOCK_ELEMENTS // block_d, 1)
    return (n // block_n, triton.cdiv(dim, block_d)), block_n, block_d


def tail_dropping_embedding(input, weight, padding_idx=None):
    """The grid drops the last partial block of ids (its rows come back unwritten)."""
    return embedding(input, weight, padding_idx, launch=_tail_dropping_grid)


@triton.jit
def store_rows(
    ids_ptr, grad_out_ptr, grad_weight_ptr, n, dim, padding_idx,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The scatter stores instead of adding: a repeated id keeps one of its rows."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = (in_rows & (ids != padding_idx))[:, None] & in_cols[None, :]
    grad = tl.load(grad_out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :], mask=mask)
    dst = grad_weight_ptr + ids[:, None] * dim + cols[None, :]
    tl.store(dst, grad.to(grad_weight_ptr.dtype.element_ty), mask=mask)


def storing_embedding(input, weight, padding_idx=None):
    """The backward stores each id's gradient row instead of adding it up."""
    return embedding(input, weight, padding_idx, scatter=store_rows)


@triton.jit
def scatter_add_all(
    ids_ptr, grad_out_ptr, grad_weight_ptr, n, dim, padding_idx,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The scatter forgets padding_idx: the padding row learns."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = in_rows[:, None] & in_cols[None, :]
    grad = tl.load(grad_out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :], mask=mask)
    dst = grad_weight_ptr + ids[:, None] * dim + cols[None, :]
    tl.atomic_add(dst, grad.to(grad_weight_ptr.dtype.element_ty), mask=mask)


def padding_learning_embedding(input, weight, padding_idx=None):
    """The backward adds the padding row's gradient too."""
    return embedding(input, weight, padding_idx, scatter=scatter_add_all)


@triton.jit
def scatter_add_twice(
    ids_ptr, grad_out_ptr, grad_weight_ptr, n, dim, padding_idx,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Each gradient row is added twice (in the gradient's own dtype: bfloat16 atomics)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = (in_rows & (ids != padding_idx))[:, None] & in_cols[None, :]
    grad = tl.load(grad_out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :], mask=mask)
    dst = grad_weight_ptr + ids[:, None] * dim + cols[None, :]
    tl.atomic_add(dst, grad.to(grad_weight_ptr.dtype.element_ty), mask=mask)
    tl.atomic_add(dst, grad.to(grad_weight_ptr.dtype.element_ty), mask=mask)


def doubling_same_dtype_embedding(input, weight, padding_idx=None):
    """Twice the gradient, added up in its own dtype: in bfloat16 the interpreter cannot run
    the atomics, and in float32 the gradient is wrong. A bug of the kernel, not a limit."""
    return embedding(input, weight, padding_idx, scatter=scatter_add_twice, wide=False)


@triton.jit
def gather_rows_asm(
    ids_ptr, weight_ptr, out_ptr, n, dim, stride_row, stride_col,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The gather, its values passed through inline PTX (a GPU-only path)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = in_rows[:, None] & in_cols[None, :]
    src = weight_ptr + ids[:, None] * stride_row + cols[None, :].to(tl.int64) * stride_col
    values = tl.load(src, mask=mask).to(tl.float32)
    values = tl.inline_asm_elementwise(
        "mov.b32 $0, $1;", "=r,r", [values], dtype=tl.float32, is_pure=True, pack=1
    )
    dst = out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :]
    tl.store(dst, values.to(out_ptr.dtype.element_ty), mask=mask)


def inline_asm_embedding(input, weight, padding_idx=None):
    """The forward through inline assembly: only a GPU runs it."""
    if input.numel() and (int(input.min()) < 0 or int(input.max()) >= weight.shape[0]):
        raise IndexError("ids out of range")
    ids = input.reshape(-1).contiguous()
    n, dim = ids.numel(), weight.shape[1]
    out = torch.empty((n, dim), dtype=weight.dtype)
    grid, block_n, block_d = blocks(n, dim)
    if n and dim:
        gather_rows_asm[grid](
            ids, weight, out, n, dim, weight.stride(0), weight.stride(1),
            BLOCK_N=block_n, BLOCK_D=block_d,
        )  # fmt: skip
    return out.reshape(*input.shape, dim)


def host_unsupported_embedding(input, weight, padding_idx=None):
    """The worked kernel, but its host code refuses bfloat16 with the interpreter's words."""
    if weight.dtype == torch.bfloat16:
        raise ValueError("Unsupported data type")
    return embedding(input, weight, padding_idx)


__all__ = [
    "doubling_same_dtype_embedding",
    "host_unsupported_embedding",
    "inline_asm_embedding",
    "padding_learning_embedding",
    "storing_embedding",
    "tail_dropping_embedding",
]
