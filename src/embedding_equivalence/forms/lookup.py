"""Lookup forms: the embedding as indexing, ``W[ids]``.

[`lookup_embedding`][] is ``F.embedding`` behind the package's shared validation, so that
it refuses bad input with the same errors as the matmul forms. The test suite adds two further
lookups, built from ``index_select`` and advanced indexing (``tests/registry.py``), and checks
all three against each other and against the float64 oracle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .options import option_excluded
from .renorm import position_counts, renorm_rows_, stop_padding_grad
from .validation import check_embedding_args, check_ids_in_range


def lookup_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    """Look up rows of ``weight``: ``weight[input]``, with every option of ``F.embedding``.

    The arguments, their order and their meaning are those of
    `torch.nn.functional.embedding`, so this is a drop-in replacement that validates its
    input first (the errors it raises are listed under *Raises* below).

    Args:
        input: int64 or int32 ids of any shape ``(*batch)``, each in ``[0, V)``.
        weight: ``(V, D)`` floating table, contiguous or strided, on the ids' device; or an
            integer table (uint8, int8, int16, int32, int64), looked up forward only, as
            ``nn.Embedding.from_pretrained`` allows (not with ``max_norm``).
        padding_idx: row that receives no gradient; negative values count from the end
            (``-1`` is row ``V - 1``). Its forward value is whatever the row holds.
        max_norm: if given, every row referenced by ``input`` whose ``norm_type``-norm exceeds
            ``max_norm`` is rescaled **in place** to norm ``max_norm`` before the lookup. The
            caller's ``weight`` is modified. Off the CPU the rows are renormalized by the
            matmul forms' ``renorm_rows_``, not by torch's CUDA kernel, which (torch 2.11)
            ignores ``norm_type=inf`` and misreads strided tables.
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide the gradient of each row by how often its id occurs in
            ``input``.
        sparse: give ``weight`` a sparse COO gradient instead of a dense one (not together
            with ``scale_grad_by_freq``, which torch's sparse backward does not support).

    Returns:
        ``(*batch, D)`` tensor of ``weight``'s dtype and device; ``out[b] == weight[input[b]]``.

    Raises:
        TypeError: ids not int64/int32 (floating ids are refused, not truncated), or a
            non-floating weight.
        ValueError: weight not 2-D, ids and weight on different devices, ``padding_idx``
            outside ``[-V, V)``, invalid ``max_norm``/``norm_type``, or ``sparse`` together
            with ``scale_grad_by_freq``.
        IndexError: an id outside ``[0, V)``; the message names the id, its position and ``V``.

    Examples:
        >>> import torch
        >>> from embedding_equivalence import lookup_embedding
        >>> weight = torch.arange(8.0).reshape(4, 2)
        >>> lookup_embedding(torch.tensor([2, 0]), weight)
        tensor([[4., 5.],
                [0., 1.]])
    """
    fn = "lookup_embedding"
    padding = check_embedding_args(
        input, weight, padding_idx, max_norm, norm_type, fn, integer_table=True
    )
    if sparse and option_excluded("sparse", {"scale_grad_by_freq": scale_grad_by_freq}):
        raise ValueError(
            f"{fn}: scale_grad_by_freq=True cannot be combined with sparse=True (torch's sparse "
            f"embedding backward does not scale by frequency); pass sparse=False for a dense "
            f"scaled gradient, or scale_grad_by_freq=False"
        )
    check_ids_in_range(input, weight.shape[0], fn)
    if max_norm is not None and (weight.device.type != "cpu" or scale_grad_by_freq):
        # torch 2.11 on CUDA: embedding_renorm_ leaves rows unchanged with norm_type=inf and
        # takes the norm of the wrong elements of a strided table (benchmarks/
        # cuda_renorm_probe.py); the matmul forms' renorm has neither defect. With
        # scale_grad_by_freq the renorm comes first, here: it writes the table in place, which
        # the view with a gradient rule below may not take.
        renorm_rows_(weight, input.reshape(-1).long(), max_norm, norm_type)
        max_norm = None
    if scale_grad_by_freq:
        # torch <= 2.13: F.embedding's double backward ignores scale_grad_by_freq. The same
        # scale as a differentiable rule on each position's gradient (before the sum, as
        # torch's own backward divides) has the right one.
        flat = input.reshape(-1).long()
        out = lookup_embedding(input, weight, padding, None, norm_type, False, sparse)
        rows = out.reshape(-1, weight.shape[1])
        scaled = stop_padding_grad(rows, flat, None, position_counts(flat, weight.shape[0]))
        return scaled.reshape(out.shape)
    if input.numel() == 0 and not sparse:
        # torch <= 2.13: the double backward of F.embedding fails on empty ids ("cannot
        # reshape tensor of 0 elements into shape [0, -1]"); an empty slice of the table is
        # the same function with a working double backward.
        return weight[:0].reshape(*input.shape, weight.shape[1])
    if input.dim() == 0:
        # torch <= 2.13: the sparse backward with padding_idx fails on 0-d ids ("too many
        # indices for tensor of dimension 0"); a 1-element view sidesteps it (scale_grad_by_freq
        # is off here: the branch above handles it).
        return F.embedding(input.reshape(1), weight, padding, max_norm, norm_type, False, sparse)[0]
    return F.embedding(input, weight, padding, max_norm, norm_type, scale_grad_by_freq, sparse)
