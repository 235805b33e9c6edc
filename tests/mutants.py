"""A catalogue of buggy embedding kernels that :func:`verify_embedding` must reject.

Each mutant has ``F.embedding``'s signature and plants exactly one realistic bug, the kind
that a hand-written kernel (a CUDA extension, a Triton kernel, a "faster" one-hot trick, a
refactor of a model's input pipeline) really ships with. Apart from that one bug every mutant
behaves like ``F.embedding``: it refuses the bad input that ``F.embedding`` refuses (through
:func:`_refuse_bad_input`) and honours the options it does not break. That way each mutant is
caught by the check that it is meant to exercise, not by an unrelated one, and the catalogue
shows that each check of the verifier has teeth.

:data:`MUTANTS` lists them with the options that ``verify_embedding`` must exercise for the
bug to be reachable (a kernel that ignores ``padding_idx`` can only be caught when
``padding_idx`` is drawn). Nothing here uses a global RNG: the kernels are deterministic.

Bugs that are *not* bugs are left out on purpose: a float32 round trip of float16/bfloat16
values is exact, ids cast to float32 and back are exact for every vocabulary below ``2**24``,
and renorming without the ``1e-7`` or with ``>=`` instead of ``>`` stays within the renorm
bound, so none of these can (or should) be caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

__all__ = [
    "LARGE_TABLE_MUTANTS",
    "MUTANTS",
    "Mutant",
    "blocked_embedding",
    "compiled_mutants",
    "row_offsets_int32",
]

_INDEX_DTYPES = (torch.int64, torch.int32)

GradRule = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


@dataclass(frozen=True)
class Mutant:
    """A buggy kernel and what ``verify_embedding`` must exercise to catch it.

    Attributes:
        name: short id, used as the pytest id.
        fn: the kernel, with ``F.embedding``'s signature.
        options: the ``verify_embedding`` options that make the bug reachable.
        backward: whether the gradient must be checked (``False`` for forward-only bugs,
            which also exercises the verifier's forward-only path).
        large_table: the bug lives only in tables of more than ``2**31`` elements, which a
            default run never builds: such a mutant is listed in
            :data:`LARGE_TABLE_MUTANTS`, not in :data:`MUTANTS`, and is for the large-table
            runs (``vocab_sizes`` and ``dims`` past ``2**31`` elements).
    """

    name: str
    fn: Callable[..., torch.Tensor]
    options: tuple[str, ...]
    backward: bool = True
    large_table: bool = False


# --------------------------------------------------------------------------------------------
# Shared, correct pieces: the input checks of F.embedding and a lookup with a custom backward.
# --------------------------------------------------------------------------------------------


def _refuse_bad_input(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    *,
    lower: bool = True,
    upper: bool = True,
) -> None:
    """Raise where ``F.embedding`` raises (``lower``/``upper``: check that side of the range)."""
    if input.dtype not in _INDEX_DTYPES:
        raise TypeError(f"ids must be int64 or int32, got {input.dtype}")
    num_embeddings = weight.shape[0]
    if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"padding_idx={padding_idx} outside [-{num_embeddings}, {num_embeddings})")
    if lower and bool((input < 0).any()):
        raise IndexError("negative id")
    if upper and bool((input >= num_embeddings).any()):
        raise IndexError(f"id >= {num_embeddings}")


def _rows(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``weight[ids]`` as a new tensor: indexing with a 0-d tensor gives a view of the table,
    which the verifiers refuse (the output must own its memory), so that each mutant is caught
    for its own bug."""
    return weight[ids.reshape(-1)].reshape(*ids.shape, weight.shape[1])


def _positive_padding(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None or padding_idx >= 0:
        return padding_idx
    return padding_idx + num_embeddings


def _renorm_(weight: torch.Tensor, ids: torch.Tensor, max_norm: float | None, p: float) -> None:
    """The in-place renorm of ``F.embedding`` (correct)."""
    if max_norm is not None:
        with torch.no_grad():
            torch.embedding_renorm_(weight, ids.reshape(-1).contiguous(), max_norm, p)


class _LookupWithGradRule(torch.autograd.Function):
    """``weight[flat]`` in the forward; the weight's gradient comes from ``rule``."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, flat: torch.Tensor, rule: GradRule) -> torch.Tensor:
        ctx.save_for_backward(flat)
        ctx.rule = rule
        ctx.num_embeddings = weight.shape[0]
        return weight[flat]

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (flat,) = ctx.saved_tensors
        (grad,) = grads
        return ctx.rule(flat, grad, ctx.num_embeddings), None, None


def _custom_lookup(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None,
    max_norm: float | None,
    norm_type: float,
    rule: GradRule,
) -> torch.Tensor:
    """A hand-written lookup whose backward is ``rule``, with the padding row zeroed after it."""
    _refuse_bad_input(input, weight, padding_idx)
    flat = input.reshape(-1).long()
    _renorm_(weight, flat, max_norm, norm_type)
    padding = _positive_padding(padding_idx, weight.shape[0])

    def rule_with_padding(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        grad_weight = rule(ids, grad, rows)
        if padding is not None:
            grad_weight[padding] = 0
        return grad_weight

    out = _LookupWithGradRule.apply(weight, flat, rule_with_padding)
    assert isinstance(out, torch.Tensor)
    return out.reshape(*input.shape, weight.shape[1])


def _accumulate(
    ids: torch.Tensor, grad: torch.Tensor, rows: int, buffer: torch.dtype | None = None
) -> torch.Tensor:
    """The correct backward: ``index_add`` of the upstream rows (in a ``buffer`` of another
    dtype, then rounded back, for a mutant whose accumulator is narrower)."""
    dtype = buffer or grad.dtype
    zeros = torch.zeros(rows, grad.shape[-1], dtype=dtype, device=grad.device)
    return zeros.index_add_(0, ids, grad.to(dtype)).to(grad.dtype)


def _counts(ids: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.bincount(ids, minlength=rows).clamp(min=1)


# --------------------------------------------------------------------------------------------
# Forward values, shape and dtype.
# --------------------------------------------------------------------------------------------


def off_by_one_row(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Looks up row ``id - 1``: the table was built for 1-based ids (a vocab file whose line
    numbers start at 1, or a reserved ``<unk>`` row shifted away) and the ids were not.
    ``weight[-1]`` silently wraps to the last row, so nothing raises."""
    _refuse_bad_input(input, weight, padding_idx)
    return _rows(weight, input.long() - 1)


def last_column_dropped(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Returns ``D - 1`` columns: ``weight[:, : D - 1]`` written by someone who read ``D - 1`` as
    an inclusive end (the last column's index), the classic slice off-by-one."""
    _refuse_bad_input(input, weight, padding_idx)
    dim = weight.shape[1]
    return weight[:, : dim - 1][input]


def output_cast_to_float32(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Returns float32 whatever the table's dtype: a ``.float()`` added to "be safe" in a
    mixed-precision model, which doubles the activation memory of half-precision tables and
    silently changes the dtype downstream."""
    return F.embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    ).float()


def table_read_in_float16(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Gathers from a float16 copy of the table and casts back: a "memory-saving" half-precision
    shadow of a float32/float64 table. Unlike a float32 round trip of float16 or bfloat16
    values, this one rounds: float32 rows come back with 11-bit mantissas."""
    _refuse_bad_input(input, weight, padding_idx)
    return weight.half()[input].to(weight.dtype)


def ids_cast_to_weight_dtype(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Casts the ids to the table's dtype before indexing: ``batch.to(model.dtype)`` applied to
    every tensor of the batch, ids included. Exact for float32/float64, but float16 holds
    integers exactly only up to 2048 and bfloat16 only up to 256, so large vocabularies
    look up the wrong rows (or overflow to ``inf``)."""
    _refuse_bad_input(input, weight, padding_idx)
    return _rows(weight, input.to(weight.dtype).long())


def batch_flattened(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Returns ``(N, D)`` instead of ``(*batch, D)``: the kernel flattens the ids for its 1-D
    gather and forgets to restore the batch shape (right for 1-D ids, which is all the
    author tested)."""
    _refuse_bad_input(input, weight, padding_idx)
    return weight[input.reshape(-1)]


def scalar_id_promoted(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Returns ``(1, D)`` for a 0-d id instead of ``(D,)``: the kernel promotes a scalar id to a
    batch of one (``if input.dim() == 0: input = input.unsqueeze(0)``) and never squeezes the
    result back."""
    _refuse_bad_input(input, weight, padding_idx)
    if input.dim() == 0:
        input = input.unsqueeze(0)
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


def assumes_contiguous_table(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Reads the table as if it were contiguous and row-major (strides ``(D, 1)``), like a C++ or
    Triton kernel that indexes ``data_ptr() + id * D + d`` without calling ``.contiguous()``:
    wrong for a transposed table (a tied ``lm_head.weight.T``) or a column slice."""
    _refuse_bad_input(input, weight, padding_idx)
    num_embeddings, dim = weight.shape
    return _rows(torch.as_strided(weight, (num_embeddings, dim), (dim, 1)), input)


def padding_row_zeroed_in_forward(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Returns zeros for the padding id: the common belief that ``padding_idx`` means "padding
    embeds to zero". ``nn.Embedding`` only *initialises* that row to zero; the lookup returns
    whatever the row holds (a loaded checkpoint may hold anything there)."""
    _refuse_bad_input(input, weight, padding_idx)
    out = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    padding = _positive_padding(padding_idx, weight.shape[0])
    if padding is None:
        return out
    return out.masked_fill((input == padding).unsqueeze(-1), 0)


# --------------------------------------------------------------------------------------------
# Input handling: index dtypes, layouts, empty and bad input.
# --------------------------------------------------------------------------------------------


def one_hot_requires_int64(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """The seed notebook's ``F.one_hot(ids, V).to(W.dtype) @ W``: correct values and gradients,
    but ``F.one_hot`` only takes int64, so int32 ids (what many tokenizers and data loaders
    produce, and what ``F.embedding`` accepts) raise."""
    _refuse_bad_input(input, weight, padding_idx)
    return F.one_hot(input, weight.shape[0]).to(weight.dtype) @ weight


def ids_viewed_as_contiguous(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Flattens the ids with ``.view(-1)`` instead of ``.reshape(-1)``: fine for contiguous ids,
    a RuntimeError for a transposed or broadcast (expanded) batch of ids."""
    _refuse_bad_input(input, weight, padding_idx)
    return weight[input.view(-1)].view(*input.shape, weight.shape[1])


def range_check_breaks_on_empty(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Validates the ids with ``input.min()`` and ``input.max()``, which raise on an empty
    tensor: an empty batch (the last, partial batch of a loader; a bucket with no sequences)
    crashes instead of giving a ``(0, D)`` result."""
    num_embeddings = weight.shape[0]
    if input.min() < 0 or input.max() >= num_embeddings:
        raise IndexError("id out of range")
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


def out_of_range_ids_clamped(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Clamps ids into ``[0, V)`` "to avoid CUDA device-side asserts": a tokenizer/table size
    mismatch then trains on the wrong rows instead of failing loudly."""
    _refuse_bad_input(input, weight, padding_idx, lower=False, upper=False)
    return _rows(weight, input.clamp(0, weight.shape[0] - 1))


def negative_ids_wrap_around(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Checks only ``id < V`` and indexes with ``weight[input]``, so Python-style negative
    indexing turns id ``-1`` (a common "ignore" label) into the last row."""
    _refuse_bad_input(input, weight, padding_idx, lower=False)
    return _rows(weight, input)


def table_detached(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Gathers from ``weight.detach()`` (or ``weight.data``, or inside ``torch.no_grad()`` left
    over from an inference path): the values are right, but the table never trains."""
    _refuse_bad_input(input, weight, padding_idx)
    return _rows(weight.detach(), input)


# --------------------------------------------------------------------------------------------
# Backward: accumulation, precision, padding_idx, scale_grad_by_freq, sparse.
# --------------------------------------------------------------------------------------------


def duplicate_ids_overwrite_grad(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Backward assigns ``grad_weight[ids] = grad_output`` (``index_put_`` without
    ``accumulate=True``, or a CUDA kernel with a plain store instead of ``atomicAdd``): when an
    id occurs twice, one occurrence's gradient is lost."""

    def overwrite(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        grad_weight = torch.zeros(rows, grad.shape[-1], dtype=grad.dtype, device=grad.device)
        grad_weight[ids] = grad
        return grad_weight

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, overwrite)


def grad_accumulated_in_float16(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Accumulates the gradient in a float16 buffer whatever the table's dtype (a memory-saving
    "mixed-precision" backward): float32 and float64 tables get gradients rounded to 11 bits,
    far outside their error bound."""

    def half_accumulate(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        return _accumulate(ids, grad, rows, torch.float16)

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, half_accumulate)


def padding_idx_ignored_in_backward(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Validates ``padding_idx`` but never passes it on: the padding row keeps learning from
    every padded position (a wrapper that forwards only the "important" arguments)."""
    _refuse_bad_input(input, weight, padding_idx)
    return F.embedding(input, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)


def negative_padding_idx_ignored(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Masks the padding row only when ``padding_idx >= 0`` (``if padding_idx is not None and
    padding_idx >= 0``), forgetting that ``padding_idx=-1`` means the last row."""
    _refuse_bad_input(input, weight, padding_idx)
    padding = padding_idx if padding_idx is not None and padding_idx >= 0 else None
    return F.embedding(input, weight, padding, max_norm, norm_type, scale_grad_by_freq, sparse)


def freq_scale_divides_by_batch_size(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """``scale_grad_by_freq`` divides every row by the number of ids ``N`` (a "mean over the
    batch") instead of by how often that row's id occurs."""

    def rule(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        if scale_grad_by_freq:
            grad = grad / max(ids.numel(), 1)
        return _accumulate(ids, grad, rows)

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, rule)


def freq_scale_divides_by_unique_count(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """``scale_grad_by_freq`` divides by the number of *distinct* ids in the batch (the length
    of ``torch.unique(ids)``, mistaken for the per-id counts of
    ``torch.unique(ids, return_counts=True)``)."""

    def rule(ids: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
        grad_weight = _accumulate(ids, grad, rows)
        if scale_grad_by_freq:
            grad_weight = grad_weight / max(torch.unique(ids).numel(), 1)
        return grad_weight

    return _custom_lookup(input, weight, padding_idx, max_norm, norm_type, rule)


def sparse_flag_ignored(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Accepts ``sparse=True`` and returns a dense gradient anyway: a ``(V, D)`` gradient per step
    for a 262k-row table, and a ``SparseAdam`` optimizer that then refuses it."""
    _refuse_bad_input(input, weight, padding_idx)
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, False)


# --------------------------------------------------------------------------------------------
# max_norm: which rows, which norm, in place.
# --------------------------------------------------------------------------------------------


def max_norm_ignored(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Drops ``max_norm``: a fused kernel that implements the lookup and forgets the renorm that
    ``F.embedding`` does before it."""
    _refuse_bad_input(input, weight, padding_idx)
    return F.embedding(input, weight, padding_idx, None, norm_type, scale_grad_by_freq, sparse)


def max_norm_renorms_every_row(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Renorms the whole table instead of the rows the batch references (``weight.renorm_`` or a
    vectorised "clip all rows"): rows that were never looked up change too."""
    _refuse_bad_input(input, weight, padding_idx)
    if max_norm is not None:
        every_row = torch.arange(weight.shape[0], device=weight.device)
        _renorm_(weight, every_row, max_norm, norm_type)
    return F.embedding(input, weight, padding_idx, None, norm_type, scale_grad_by_freq, sparse)


def max_norm_renorms_a_copy(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Renorms a copy of the table (a "functional", side-effect-free rewrite): the output is
    right, but the parameter itself is never renormalised, so it is not what ``F.embedding``
    leaves behind and the norms keep growing across steps."""
    _refuse_bad_input(input, weight, padding_idx)
    table = weight.clone()
    _renorm_(table, input, max_norm, norm_type)
    return F.embedding(input, table, padding_idx, None, norm_type, scale_grad_by_freq, sparse)


def max_norm_ignores_norm_type(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """Renorms with the Euclidean norm whatever ``norm_type`` says (``row.norm()`` with its
    default ``p=2`` in a hand-written renorm)."""
    _refuse_bad_input(input, weight, padding_idx)
    return F.embedding(input, weight, padding_idx, max_norm, 2.0, scale_grad_by_freq, sparse)


# --------------------------------------------------------------------------------------------
# Sizes: launch grids, column vectors, dispatch limits, narrow integers, int32 offsets.
#
# These are one kernel, :func:`blocked_embedding`, written as a Triton or CUDA kernel is: a
# forward launched as a grid of programs over blocks of ids, each copying a row in vectors of
# columns; a backward that accumulates blocks of ids into a zeroed gradient, with per-row
# counters for ``scale_grad_by_freq``. Without a bug it is ``F.embedding`` with every option
# (``tests/test_mutants.py`` checks that control). Each mutant below plants one bug that only
# shows past a size: small random examples pass, and only an example past the boundary (a
# number of ids, a width, a repeat count, a vocabulary) catches it.
# --------------------------------------------------------------------------------------------

#: Ids per program of the forward's launch grid.
_BLOCK_IDS = 256
#: Columns per vector of the forward's column loop.
_VECTOR = 128
#: The widest row of the forward's specialisations (a row staged in a buffer of this size).
_MAX_WIDTH = 1024
#: Ids per program of the backward's accumulation.
_BACKWARD_BLOCK = 128
#: Inputs up to this many ids take the backward's per-feature path, longer ones the sorted
#: segment path (the split of torch's CUDA backward that pytorch#28716 was about).
_FEATURE_PATH_IDS = 768


def row_offsets_int32(ids: torch.Tensor, row_stride: int) -> torch.Tensor:
    """``id * row_stride`` as a kernel computes it in int32: it wraps past ``2**31 - 1``."""
    return ids.to(torch.int32) * row_stride


def _read_rows_int32(weight: torch.Tensor, ids: torch.Tensor, cols: range) -> torch.Tensor:
    """``weight[ids][:, cols]`` read through element offsets into the storage, the way a kernel
    reads ``weight_ptr + id * stride_v + col * stride_d``, the offsets computed in int32.

    The storage is viewed in place (no copy of the table): below ``2**31`` elements the offsets
    are exact and this is ``weight[ids][:, cols]``; past it they wrap, to another row or to a
    negative offset, which reads from the end of the storage as a wild pointer reads memory it
    does not own.
    """
    size = weight.untyped_storage().nbytes() // weight.element_size()
    storage = weight.detach().as_strided((size,), (1,), 0)
    stride_v, stride_d = weight.stride()
    columns = torch.tensor(cols, dtype=torch.int32, device=ids.device) * stride_d
    offsets = row_offsets_int32(ids, stride_v)[:, None] + columns[None, :]
    return storage[(offsets + int(weight.storage_offset())).long()]


def _gather_kernel(weight: torch.Tensor, flat: torch.Tensor, bug: str | None) -> torch.Tensor:
    """The forward: a grid of programs over blocks of ids, each copying vectors of columns."""
    n, dim = flat.shape[0], weight.shape[1]
    out = weight.new_zeros((n, dim))  # the wrapper zero-fills the output it launches into
    if bug == "zero_rows_wider_than_1024" and dim > _MAX_WIDTH:
        return out  # no specialisation for wider rows: nothing is launched
    ids = flat
    if bug == "ids_packed_in_int16":
        ids = flat.to(torch.int16).long()  # the ids' host-to-device copy, halved
    programs = math.ceil(n / _BLOCK_IDS)
    if bug == "grid_drops_partial_block" and n > _BLOCK_IDS:
        programs = n // _BLOCK_IDS  # one program per *full* block; a short batch gets one
    vectors = math.ceil(dim / _VECTOR)
    if bug == "width_tail_dropped" and dim > _VECTOR:
        vectors = dim // _VECTOR  # a row wider than one vector: full vectors only
    with torch.no_grad():
        for program in range(programs):
            block = slice(program * _BLOCK_IDS, (program + 1) * _BLOCK_IDS)
            for vector in range(vectors):
                cols = range(vector * _VECTOR, min((vector + 1) * _VECTOR, dim))
                if bug == "row_offset_in_int32":
                    out[block, cols.start : cols.stop] = _read_rows_int32(weight, ids[block], cols)
                else:
                    out[block, cols.start : cols.stop] = weight[ids[block], cols.start : cols.stop]
    return out


def _accumulate_kernel(
    flat: torch.Tensor,
    grad: torch.Tensor,
    rows: int,
    padding: int | None,
    scale_grad_by_freq: bool,
    sparse: bool,
    bug: str | None,
) -> torch.Tensor:
    """The backward: blocks of ids accumulated into a zeroed gradient (float32 for half
    dtypes), the padding row skipped, rows divided by their counts."""
    n, dim = grad.shape
    if bug == "padding_learns_past_768_ids" and n > _FEATURE_PATH_IDS:
        padding = None  # the sorted segment path, written without the padding mask
    keep = None if padding is None else flat != padding
    if sparse:
        ids, values = (flat, grad) if keep is None else (flat[keep], grad[keep])
        if scale_grad_by_freq:
            counts = torch.bincount(flat, minlength=rows).clamp(min=1)
            values = (values.double() / counts[ids][:, None]).to(grad.dtype)
        return torch.sparse_coo_tensor(ids[None], values, (rows, dim), check_invariants=False)
    accumulator = grad.dtype if grad.dtype in (torch.float32, torch.float64) else torch.float32
    grad_weight = torch.zeros((rows, dim), dtype=accumulator, device=grad.device)
    blocks = math.ceil(n / _BACKWARD_BLOCK)
    if bug == "backward_drops_partial_block":
        blocks = max(n // _BACKWARD_BLOCK, 1)  # full blocks; a short input is one block
    for b in range(blocks):
        block = slice(b * _BACKWARD_BLOCK, (b + 1) * _BACKWARD_BLOCK)
        ids, values = flat[block], grad[block]
        if keep is not None:
            ids, values = ids[keep[block]], values[keep[block]]  # a nan at padding reaches nothing
        grad_weight.index_add_(0, ids, values.to(accumulator))
    if scale_grad_by_freq:
        counter = torch.uint8 if bug == "freq_counter_in_uint8" else torch.int32
        counts = torch.zeros(rows, dtype=counter, device=flat.device)
        counts.index_add_(0, flat, torch.ones_like(flat, dtype=counter))
        divisor = counts.to(torch.float64).clamp(min=1)[:, None]
        grad_weight = grad_weight.double() / divisor
    return grad_weight.to(grad.dtype)


class _BlockedLookup(torch.autograd.Function):
    """The kernel's forward and backward, as one autograd function."""

    @staticmethod
    def forward(
        ctx: Any,
        weight: torch.Tensor,
        flat: torch.Tensor,
        padding: int | None,
        scale_grad_by_freq: bool,
        sparse: bool,
        bug: str | None,
    ) -> torch.Tensor:
        ctx.save_for_backward(flat)
        ctx.rows = weight.shape[0]
        ctx.settings = (padding, scale_grad_by_freq, sparse, bug)
        return _gather_kernel(weight, flat, bug)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (flat,) = ctx.saved_tensors
        (grad,) = grads
        grad_weight = _accumulate_kernel(flat, grad, ctx.rows, *ctx.settings)
        return grad_weight, None, None, None, None, None


def blocked_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
    *,
    bug: str | None = None,
) -> torch.Tensor:
    """``F.embedding`` as a blocked kernel; ``bug`` names the size bug to plant (or ``None``)."""
    _refuse_bad_input(input, weight, padding_idx)
    flat = input.reshape(-1).long()
    _renorm_(weight, flat, max_norm, norm_type)
    padding = _positive_padding(padding_idx, weight.shape[0])
    out = _BlockedLookup.apply(weight, flat, padding, scale_grad_by_freq, sparse, bug)
    assert isinstance(out, torch.Tensor)
    return out.reshape(*input.shape, weight.shape[1])


def _blocked_with(bug: str, doc: str) -> Callable[..., torch.Tensor]:
    """[`blocked_embedding`][] with one size bug, as a module-level kernel named ``bug``."""

    def kernel(
        input,
        weight,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
    ):
        return blocked_embedding(
            input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, bug=bug
        )

    kernel.__name__ = kernel.__qualname__ = bug
    kernel.__doc__ = doc
    return kernel


grid_drops_partial_block = _blocked_with(
    "grid_drops_partial_block",
    """Launches ``numel // 256`` programs of 256 ids (``grid = (n // BLOCK,)`` where
    ``triton.cdiv`` was meant), with one program for a batch shorter than a block: the ids of
    the last partial block are never looked up and their rows stay zero. Symptom: zero rows at
    the end of the output from ``N = 257`` on, whenever ``N`` is not a multiple of 256.""",
)


width_tail_dropped = _blocked_with(
    "width_tail_dropped",
    """Copies a row in vectors of 128 columns, ``range(D // 128)`` of them once a row is
    wider than one vector (a narrower row is one masked vector): the last ``D % 128`` columns
    are never written. Symptom: zero columns at the end of every row for ``D > 128`` not a
    multiple of 128 (``D = 129`` first).""",
)


zero_rows_wider_than_1024 = _blocked_with(
    "zero_rows_wider_than_1024",
    """Dispatches on the width to kernels specialised up to ``D = 1024`` (a row staged in a
    buffer of 1,024 elements) and launches nothing for wider rows, leaving the zero-filled
    output as it was (torchrec#3673: lookups zero for ``embedding_dim > 1024``). Symptom: every
    value zero from ``D = 1,025`` on.""",
)


ids_packed_in_int16 = _blocked_with(
    "ids_packed_in_int16",
    """Copies the ids to the kernel as int16 ("a vocabulary fits in 16 bits") after checking
    them: ids from 32,768 on wrap to negative values, which index from the end of the table.
    Symptom: wrong rows for ids >= 32,768, so only with ``V > 32,768`` (``V = 32,769``
    first).""",
)


padding_learns_past_768_ids = _blocked_with(
    "padding_learns_past_768_ids",
    """The backward has two paths, per-feature accumulation for up to 768 ids and a sorted
    segment sum for longer inputs, and only the first skips the padding row (pytorch#28716:
    the padding row received gradient for inputs longer than 768). Symptom: a nonzero
    gradient in the padding row from ``N = 769`` on, when the padding id occurs.""",
)


freq_counter_in_uint8 = _blocked_with(
    "freq_counter_in_uint8",
    """Keeps the per-row occurrence counters of ``scale_grad_by_freq`` in one byte per row
    (a 10-million-row table's counters in 10 MB): a count of 256 wraps to 0 (then 1, as rows
    that never occur do) and 257 to 1. Symptom: the gradient of a row whose id occurs 256
    times or more is divided by the wrapped count (256 times too large at 256 repeats).""",
)


backward_drops_partial_block = _blocked_with(
    "backward_drops_partial_block",
    """Accumulates the gradient in ``max(N // 128, 1)`` blocks of 128 ids, so the ids of the
    last partial block of a long input add nothing. Symptom: forward right, but the rows
    whose ids occur only in the last ``N % 128`` positions get too little gradient, from
    ``N = 129`` on whenever ``N`` is not a multiple of 128.""",
)


row_offset_in_int32 = _blocked_with(
    "row_offset_in_int32",
    """Computes each row's element offset ``id * stride`` in int32, as the Triton embeddings of
    Liger-Kernel and FlagGems do: exact while ``V * D <= 2**31``, wrapped to another row (or a
    negative offset) past it. Symptom: wrong rows for ids with ``id * D >= 2**31``, only in
    tables of more than ``2**31`` elements (``V = 2**21 + 1`` rows of ``D = 1024``).""",
)


# --------------------------------------------------------------------------------------------
# A size bug in compiled code.
# --------------------------------------------------------------------------------------------

#: Columns per vector of :func:`vector_tail_masked`.
_COMPILED_VECTOR = 64


def vector_tail_masked(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """A lookup written for ``torch.compile`` that keeps the columns its vectors of 64 cover:
    all of a row up to 64 wide, ``64 * (D // 64)`` of a wider one, the rest masked to zero.
    Symptom: zero trailing columns (and no gradient there) for ``D > 64`` not a multiple of
    64, ``D = 65`` first; the default draws stop at ``D = 64``. It leaves bad input to
    ``F.embedding``'s own checks (a check of its own would break the graph)."""
    out = F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    dim = weight.shape[1]
    covered = dim if dim <= _COMPILED_VECTOR else dim - dim % _COMPILED_VECTOR
    columns = torch.arange(dim, device=weight.device)
    return torch.where(columns < covered, out, torch.zeros_like(out))


def compiled_mutants(backend: str = "aot_eager") -> list[Mutant]:
    """Mutants compiled with ``torch.compile`` (built on demand: compiling is not free).

    ``aot_eager`` traces and guards as inductor does, without generating code; the verifier
    runs every example compiled. The repro rebuilds ``torch.compile(vector_tail_masked)``.
    """
    compiled = torch.compile(vector_tail_masked, backend=backend)
    return [Mutant("compiled_vector_tail_masked", compiled, ())]


MUTANTS: list[Mutant] = [
    Mutant("off_by_one_row", off_by_one_row, (), backward=False),
    Mutant("last_column_dropped", last_column_dropped, (), backward=False),
    Mutant("output_cast_to_float32", output_cast_to_float32, ()),
    Mutant("table_read_in_float16", table_read_in_float16, ()),
    Mutant("ids_cast_to_weight_dtype", ids_cast_to_weight_dtype, (), backward=False),
    Mutant("batch_flattened", batch_flattened, (), backward=False),
    Mutant("scalar_id_promoted", scalar_id_promoted, ()),
    Mutant("assumes_contiguous_table", assumes_contiguous_table, (), backward=False),
    Mutant("padding_row_zeroed_in_forward", padding_row_zeroed_in_forward, ("padding_idx",)),
    Mutant("one_hot_requires_int64", one_hot_requires_int64, ()),
    Mutant("ids_viewed_as_contiguous", ids_viewed_as_contiguous, (), backward=False),
    Mutant("range_check_breaks_on_empty", range_check_breaks_on_empty, ()),
    Mutant("out_of_range_ids_clamped", out_of_range_ids_clamped, (), backward=False),
    Mutant("negative_ids_wrap_around", negative_ids_wrap_around, (), backward=False),
    Mutant("table_detached", table_detached, ()),
    Mutant("duplicate_ids_overwrite_grad", duplicate_ids_overwrite_grad, ()),
    Mutant("grad_accumulated_in_float16", grad_accumulated_in_float16, ()),
    Mutant("padding_idx_ignored_in_backward", padding_idx_ignored_in_backward, ("padding_idx",)),
    Mutant("negative_padding_idx_ignored", negative_padding_idx_ignored, ("padding_idx",)),
    Mutant(
        "freq_scale_divides_by_batch_size",
        freq_scale_divides_by_batch_size,
        ("scale_grad_by_freq",),
    ),
    Mutant(
        "freq_scale_divides_by_unique_count",
        freq_scale_divides_by_unique_count,
        ("scale_grad_by_freq",),
    ),
    Mutant("sparse_flag_ignored", sparse_flag_ignored, ("sparse",)),
    Mutant("max_norm_ignored", max_norm_ignored, ("max_norm",)),
    Mutant("max_norm_renorms_every_row", max_norm_renorms_every_row, ("max_norm",)),
    Mutant("max_norm_renorms_a_copy", max_norm_renorms_a_copy, ("max_norm",)),
    Mutant("max_norm_ignores_norm_type", max_norm_ignores_norm_type, ("max_norm",)),
    Mutant("grid_drops_partial_block", grid_drops_partial_block, ()),
    Mutant("width_tail_dropped", width_tail_dropped, ()),
    Mutant("zero_rows_wider_than_1024", zero_rows_wider_than_1024, ()),
    Mutant("ids_packed_in_int16", ids_packed_in_int16, ()),
    Mutant("padding_learns_past_768_ids", padding_learns_past_768_ids, ("padding_idx",)),
    Mutant("freq_counter_in_uint8", freq_counter_in_uint8, ("scale_grad_by_freq",)),
    Mutant("backward_drops_partial_block", backward_drops_partial_block, ()),
]

#: Mutants whose bug lives only in tables of more than ``2**31`` elements (``id * D`` past
#: int32): left out of :data:`MUTANTS`, for the large-table runs.
LARGE_TABLE_MUTANTS: list[Mutant] = [
    Mutant("row_offset_in_int32", row_offset_in_int32, (), backward=False, large_table=True),
]
