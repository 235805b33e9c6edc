"""A Triton embedding: a blocked gather forward, an atomic-add backward, and padding_idx.

On a GPU the kernels compile; on the CPU they run under Triton's interpreter, which must be
switched on (``TRITON_INTERPRET=1``) before this module is imported: ``@triton.jit`` decides
when it decorates a kernel whether the kernel is compiled or interpreted.

``triton_embedding`` is the kernel. ``one_block_embedding`` is the same kernel launched with a
classic mistake: one program covers a whole row of up to 1,024 columns. ``same_dtype_embedding``
adds half-precision gradients up in their own dtype, with atomics in bfloat16, which a GPU runs
and the interpreter does not. ``racy_embedding`` adds gradients without atomics, one program
per id: a race on a GPU, which the interpreter, running one program at a time, cannot show.
"""

import torch
import triton
import triton.language as tl

#: Ids x columns that one program moves. Large blocks mean few programs: on a GPU that is
#: fewer, fuller launches; under the interpreter, which runs programs one after another at
#: a nearly fixed cost each, it is what keeps a run fast.
BLOCK_ELEMENTS = 4096
#: Columns of one program; wider rows take several programs along the grid's second axis.
MAX_BLOCK_D = 256


@triton.jit
def gather_rows(
    ids_ptr, weight_ptr, out_ptr, n, dim, stride_row, stride_col,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """out[i, :] = weight[ids[i], :] for a block of BLOCK_N ids and BLOCK_D columns."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    # Offsets in int64: id * stride wraps in int32 once a table holds 2**31 elements.
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = in_rows[:, None] & in_cols[None, :]
    src = weight_ptr + ids[:, None] * stride_row + cols[None, :].to(tl.int64) * stride_col
    values = tl.load(src, mask=mask)
    dst = out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :]
    tl.store(dst, values, mask=mask)


@triton.jit
def scatter_add_rows(
    ids_ptr, grad_out_ptr, grad_weight_ptr, n, dim, padding_idx,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """grad_weight[ids[i], :] += grad_out[i, :], except where ids[i] == padding_idx."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    # The padding row learns nothing: its ids add nothing (not even a NaN of grad_out).
    mask = (in_rows & (ids != padding_idx))[:, None] & in_cols[None, :]
    grad = tl.load(grad_out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :], mask=mask)
    dst = grad_weight_ptr + ids[:, None] * dim + cols[None, :]
    # A repeated id adds up its rows: other programs (and this one) may hit the same row.
    tl.atomic_add(dst, grad.to(grad_weight_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_rows_unsafely(
    ids_ptr, grad_out_ptr, grad_weight_ptr, n, dim, padding_idx,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """grad_weight[ids[i], :] = grad_weight[ids[i], :] + grad_out[i, :]: a load and a store,
    not an atomic. Two programs that read the same row before either writes lose a gradient."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    in_rows, in_cols = rows < n, cols < dim
    ids = tl.load(ids_ptr + rows, mask=in_rows, other=0).to(tl.int64)
    mask = (in_rows & (ids != padding_idx))[:, None] & in_cols[None, :]
    grad = tl.load(grad_out_ptr + rows[:, None].to(tl.int64) * dim + cols[None, :], mask=mask)
    dst = grad_weight_ptr + ids[:, None] * dim + cols[None, :]
    total = tl.load(dst, mask=mask) + grad.to(grad_weight_ptr.dtype.element_ty)
    tl.store(dst, total, mask=mask)


def blocks(n: int, dim: int) -> tuple[tuple[int, int], int, int]:
    """The launch: a 2-D grid over blocks of ids and blocks of columns, and the block sizes."""
    block_d = min(triton.next_power_of_2(dim), MAX_BLOCK_D)
    block_n = max(BLOCK_ELEMENTS // block_d, 1)
    return (triton.cdiv(n, block_n), triton.cdiv(dim, block_d)), block_n, block_d


def one_block_per_row(n: int, dim: int) -> tuple[tuple[int, int], int, int]:
    """The bug: one program covers a whole row of up to 1,024 columns; past that, nothing."""
    block_d = min(triton.next_power_of_2(dim), 1024)
    block_n = max(BLOCK_ELEMENTS // block_d, 1)
    return (triton.cdiv(n, block_n), 1), block_n, block_d


def one_id_per_program(n: int, dim: int) -> tuple[tuple[int, int], int, int]:
    """One program per id (and per block of columns): repeated ids meet in different
    programs only."""
    block_d = min(triton.next_power_of_2(dim), MAX_BLOCK_D)
    return (n, triton.cdiv(dim, block_d)), 1, block_d


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weight, padding_idx, launch, scatter, wide):
        n, dim = ids.numel(), weight.shape[1]
        out = torch.empty((n, dim), dtype=weight.dtype, device=weight.device)
        grid, block_n, block_d = launch(n, dim)
        if n and dim:
            gather_rows[grid](
                ids, weight, out, n, dim, weight.stride(0), weight.stride(1),
                BLOCK_N=block_n, BLOCK_D=block_d,
            )  # fmt: skip
        ctx.save_for_backward(ids)
        ctx.shape, ctx.padding_idx = weight.shape, padding_idx
        ctx.launch, ctx.scatter, ctx.wide = launch, scatter, wide
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (ids,) = ctx.saved_tensors
        rows, dim = ctx.shape
        # Half-precision gradients add up in float32 (more exact, and not every GPU, nor
        # Triton's interpreter, has atomics in bfloat16), then round once.
        half = grad_out.dtype in (torch.float16, torch.bfloat16)
        acc = torch.float32 if half and ctx.wide else grad_out.dtype
        grad_weight = torch.zeros((rows, dim), dtype=acc, device=ids.device)
        n = ids.numel()
        grid, block_n, block_d = ctx.launch(n, dim)
        if n and dim:
            ctx.scatter[grid](
                ids, grad_out.contiguous(), grad_weight, n, dim, ctx.padding_idx,
                BLOCK_N=block_n, BLOCK_D=block_d,
            )  # fmt: skip
        return None, grad_weight.to(grad_out.dtype), None, None, None, None


def embedding(input, weight, padding_idx=None, *, launch=blocks, scatter=scatter_add_rows,
              wide=True):  # fmt: skip
    """The host side: check the call, launch the kernels (``launch`` chooses the grid)."""
    if input.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be int64 or int32, not {input.dtype}")
    rows = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1  # matches no id
    elif not -rows <= padding_idx < rows:
        raise ValueError(f"padding_idx must be within [-{rows}, {rows}), got {padding_idx}")
    elif padding_idx < 0:
        padding_idx += rows
    # The kernels read any address they are given: bad ids are refused before the launch.
    if input.numel() and (int(input.min()) < 0 or int(input.max()) >= rows):
        raise IndexError(f"ids must lie in [0, {rows})")
    ids = input.reshape(-1).contiguous()
    out = _Embedding.apply(ids, weight, padding_idx, launch, scatter, wide)
    return out.reshape(*input.shape, weight.shape[1])


def triton_embedding(input, weight, padding_idx=None):
    """F.embedding's lookup and gradient, in Triton."""
    return embedding(input, weight, padding_idx)


def one_block_embedding(input, weight, padding_idx=None):
    """The same kernels, launched with one program per block of ids covering whole rows."""
    return embedding(input, weight, padding_idx, launch=one_block_per_row)


def same_dtype_embedding(input, weight, padding_idx=None):
    """The same kernels, the gradient added up in its own dtype (bfloat16 atomics too)."""
    return embedding(input, weight, padding_idx, wide=False)


def racy_embedding(input, weight, padding_idx=None):
    """One program per id, and a backward that adds with a load and a store: a race between
    programs on a GPU."""
    return embedding(
        input, weight, padding_idx, launch=one_id_per_program, scatter=add_rows_unsafely
    )
