"""Input checks shared by every implementation, so that each raises the same error.

Every public function of the package calls [`check_embedding_args`][] (or the bag
variant) first. Nothing here clamps, casts or repairs an input: a bad input is refused
with a message that names the value and shows the correct call. The dtypes they accept are
listed in ``dtypes.py``; the memory that a dense one-hot would take is checked in
``memory.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .dtypes import INDEX_DTYPES, INTEGER_TABLE_DTYPES
from .options import BAG_MODES, option_applies, option_excluded


def _shape_str(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def normalize_padding_idx(padding_idx: int | None, num_embeddings: int, fn: str) -> int | None:
    """Check ``padding_idx`` against ``[-V, V)`` and map a negative value to ``V + padding_idx``.

    Args:
        padding_idx: ``None`` or an integer row of the table; negative counts from the end.
        num_embeddings: ``V``, the number of rows of the weight.
        fn: name of the calling function, for the message.

    Returns:
        ``None`` or the non-negative row index.

    Raises:
        TypeError: ``padding_idx`` is not an integer.
        ValueError: ``padding_idx`` lies outside ``[-V, V)``.
    """
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, int):
        raise TypeError(
            f"{fn}: padding_idx must be an int or None, got {padding_idx!r} "
            f"({type(padding_idx).__name__})"
        )
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"{fn}: padding_idx={padding_idx} is outside [-{num_embeddings}, {num_embeddings}) "
            f"for a weight with {num_embeddings} rows; pass a row of the table, e.g. "
            f"padding_idx=0 or padding_idx=-1 (the last row)"
        )
    return padding_row(padding_idx, num_embeddings)


def padding_row(padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` as a row of the table: a negative value counts from the end.

    The one mapping of a negative ``padding_idx`` to ``V + padding_idx``:
    [`normalize_padding_idx`][] checks the value first; the oracles and the engine map the
    ``padding_idx`` of a call with it.

    Args:
        padding_idx: ``None`` or a row in ``[-V, V)``.
        num_embeddings: ``V``.

    Returns:
        ``None`` or the row in ``[0, V)``.
    """
    if padding_idx is None:
        return None
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def check_ids_in_range(input: torch.Tensor, num_embeddings: int, fn: str) -> None:
    """Refuse ids outside ``[0, V)``, naming the first offending id and its position.

    The check reads the ids (a device synchronisation on CUDA); on the ``meta`` device there
    are no values and nothing is checked.

    Args:
        input: integer ids of any shape.
        num_embeddings: ``V``, the number of rows of the weight.
        fn: name of the calling function, for the message.

    Raises:
        IndexError: an id is negative or ``>= V``.
    """
    if input.numel() == 0 or input.device.type == "meta":
        return
    lo, hi = torch.aminmax(input)  # one kernel (and one sync) on the fast path
    if int(lo) >= 0 and int(hi) < num_embeddings:
        return
    bad = (input < 0) | (input >= num_embeddings)
    first = bad.nonzero()[0].tolist() if input.dim() > 0 else []
    value = int(input[tuple(first)].item()) if first else int(input.item())
    where = f"input{first}" if first else "input (0-d)"  # a list prints as [i, j]
    if value < 0:
        hint = "negative ids are not accepted (they do not count from the end)"
    else:
        hint = f"pass ids < {num_embeddings}, or a weight with at least {value + 1} rows"
    raise IndexError(
        f"{fn}: {where} = {value} is out of range for a weight with {num_embeddings} rows; "
        f"ids must lie in [0, {num_embeddings - 1}]: {hint}"
    )


def check_embedding_args(
    input: object,
    weight: object,
    padding_idx: int | None,
    max_norm: float | None,
    norm_type: float,
    fn: str,
    *,
    integer_table: bool = False,
) -> int | None:
    """Validate the arguments of an embedding call in a fixed order, without the range check.

    Order: types of ``input`` and ``weight``, the weight's rank and dtype, devices,
    ``padding_idx``, ``max_norm`` and ``norm_type``. The range check of the ids
    ([`check_ids_in_range`][]) is separate so that a matmul form can refuse an oversized
    one-hot first, before reading any id.

    Args:
        input: the ids; must be an int64 or int32 tensor of any shape.
        weight: the table; must be a floating tensor of shape ``(V, D)``.
        padding_idx: ``None`` or a row in ``[-V, V)``.
        max_norm: ``None`` or a non-negative finite float.
        norm_type: the ``p`` of the p-norm used by ``max_norm``; must be positive.
        fn: name of the calling function, for the messages.
        integer_table: accept an integer table (a lookup, forward only, as torch's
            ``nn.Embedding.from_pretrained`` does); ``max_norm`` still needs floating point.

    Returns:
        ``padding_idx`` mapped into ``[0, V)`` (or ``None``).

    Raises:
        TypeError: ``input`` or ``weight`` is not a tensor, the ids are not integers, or
            the weight is not floating point.
        ValueError: the weight is not 2-D, the tensors are on different devices, or
            ``padding_idx``/``max_norm``/``norm_type`` is invalid.
    """
    if not isinstance(input, torch.Tensor):
        raise TypeError(
            f"{fn}: input must be a torch.Tensor of int64 or int32 ids, got "
            f"{type(input).__name__}; call {fn}(torch.as_tensor(ids), weight)"
        )
    if not isinstance(weight, torch.Tensor):
        raise TypeError(
            f"{fn}: weight must be a torch.Tensor of shape (num_embeddings, embedding_dim), "
            f"got {type(weight).__name__}"
        )
    if input.dtype not in INDEX_DTYPES:
        floating = " (floating ids are refused rather than truncated)"
        raise TypeError(
            f"{fn}: input must hold integer ids of dtype torch.int64 or torch.int32, got "
            f"{input.dtype}; convert them with {fn}(input.long(), weight)"
            f"{floating if input.dtype.is_floating_point else ''}"
        )
    if weight.dim() != 2:
        hint = ""
        if weight.dim() == 1:
            hint = f"; for a single row pass weight.unsqueeze(0) of shape (1, {weight.shape[0]})"
        raise ValueError(
            f"{fn}: weight must be 2-D of shape (num_embeddings, embedding_dim), got shape "
            f"{_shape_str(weight.shape)}{hint}"
        )
    integer = weight.dtype in INTEGER_TABLE_DTYPES
    if integer and integer_table:
        if max_norm is not None:
            raise TypeError(
                f"{fn}: max_norm needs a floating table (the norm of an integer row is not "
                f"defined), got weight of dtype {weight.dtype}; drop max_norm, or call "
                f"{fn}(input, weight.float(), max_norm=...)"
            )
    elif not weight.dtype.is_floating_point:
        hint = (
            "; an integer table can be looked up, forward only, as "
            "nn.Embedding.from_pretrained allows: lookup_embedding(input, weight). A product "
            "form multiplies the table, which needs floating point"
            if integer
            else ""
        )
        raise TypeError(
            f"{fn}: weight must be floating point (float16, bfloat16, float32 or float64), got "
            f"{weight.dtype}; call {fn}(input, weight.float()){hint}"
        )
    if input.device != weight.device:
        raise ValueError(
            f"{fn}: input is on {input.device} but weight is on {weight.device}; move the ids "
            f"to the weight's device: {fn}(input.to({str(weight.device)!r}), weight)"
        )
    padding = normalize_padding_idx(padding_idx, weight.shape[0], fn)
    if max_norm is not None:
        if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)):
            raise TypeError(f"{fn}: max_norm must be a float or None, got {max_norm!r}")
        if not (math.isfinite(max_norm) and max_norm >= 0):
            raise ValueError(
                f"{fn}: max_norm={max_norm!r} must be a finite non-negative float (rows whose "
                f"norm exceeds it are rescaled to it), e.g. max_norm=1.0"
            )
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"{fn}: norm_type must be a float, got {norm_type!r}")
    if not norm_type > 0:
        raise ValueError(
            f"{fn}: norm_type={norm_type!r} must be positive (the p of the p-norm), "
            f"e.g. norm_type=2.0 or norm_type=float('inf')"
        )
    return padding


# --- EmbeddingBag ---------------------------------------------------------------------------


def _check_offsets(
    input: torch.Tensor, offsets: object, include_last_offset: bool, fn: str
) -> None:
    """Check the type, rank, dtype, device and values of the ``offsets`` of a 1-D input."""
    n = input.shape[0]
    if offsets is None:
        raise ValueError(
            f"{fn}: a 1-D input needs offsets, the start of each bag in input: "
            f"{fn}(input, weight, offsets=torch.tensor([0, 2])) makes bags input[0:2] and "
            f"input[2:]; for a single bag pass offsets=torch.tensor([0]), or pass a 2-D input "
            f"(B, L) of B bags of L ids each without offsets"
        )
    if not isinstance(offsets, torch.Tensor):
        raise TypeError(
            f"{fn}: offsets must be a 1-D torch.Tensor of int64 or int32, got "
            f"{type(offsets).__name__}; call {fn}(input, weight, torch.as_tensor(offsets))"
        )
    if offsets.dim() != 1:
        raise ValueError(
            f"{fn}: offsets must be 1-D (the start of each bag in input), got shape "
            f"{_shape_str(offsets.shape)}; pass offsets.reshape(-1)"
        )
    if offsets.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"{fn}: offsets must have dtype torch.int64 or torch.int32, got {offsets.dtype}; "
            f"call {fn}(input, weight, offsets.long())"
        )
    if offsets.device != input.device:
        raise ValueError(
            f"{fn}: offsets are on {offsets.device} but input is on {input.device}; move them: "
            f"{fn}(input, weight, offsets.to({str(input.device)!r}))"
        )
    if include_last_offset and offsets.shape[0] == 0:
        raise ValueError(
            f"{fn}: include_last_offset=True needs at least one offset (the end of the last "
            f"bag), got an empty offsets tensor; for zero bags pass offsets=torch.tensor([0]), "
            f"for one bag offsets=torch.tensor([0, {n}])"
        )
    if offsets.device.type == "meta":
        return
    if offsets.shape[0] == 0:
        if n > 0:
            raise ValueError(
                f"{fn}: offsets is empty, so there are no bags, but input holds {n} ids that "
                f"would belong to none; for a single bag pass offsets=torch.tensor([0])"
            )
        return
    # One device synchronisation for all three checks; the details are read only on failure.
    decreasing = offsets[1:] < offsets[:-1]
    past_end = offsets > n
    flags = torch.stack([offsets[0] != 0, decreasing.any(), past_end.any()]).tolist()
    bad_start, any_decreasing, any_past_end = flags
    if bad_start:
        raise ValueError(
            f"{fn}: offsets[0] = {int(offsets[0].item())}, but the first bag must start at "
            f"position 0 of input (as F.embedding_bag requires); to skip the first k ids pass "
            f"{fn}(input[k:], weight, offsets - k)"
        )
    if any_decreasing:
        i = int(decreasing.nonzero()[0].item()) + 1
        raise ValueError(
            f"{fn}: offsets[{i}] = {int(offsets[i].item())} is smaller than offsets[{i - 1}] = "
            f"{int(offsets[i - 1].item())}; offsets must be non-decreasing (bag b holds "
            f"input[offsets[b]:offsets[b + 1]]); an empty bag repeats the previous offset, "
            f"e.g. offsets=torch.tensor([0, 2, 2, 5])"
        )
    if any_past_end:
        i = int(past_end.nonzero()[0].item())
        hint = ""
        if include_last_offset:
            hint = " (with include_last_offset=True the last offset is the end of the last bag, "
            hint += f"usually {n})"
        raise ValueError(
            f"{fn}: offsets[{i}] = {int(offsets[i].item())} is past the end of input, which "
            f"holds {n} ids; every offset must lie in [0, {n}]{hint}"
        )


def check_embedding_bag_args(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: object,
    mode: object,
    per_sample_weights: object,
    include_last_offset: bool,
    scale_grad_by_freq: bool,
    fn: str,
) -> None:
    """Validate the arguments that ``F.embedding_bag`` adds to ``F.embedding``.

    Call it after [`check_embedding_args`][] (which checks ``input``, ``weight``,
    ``padding_idx``, ``max_norm`` and ``norm_type``) and before the range check of the ids.
    Order: the input's rank, ``mode``, ``scale_grad_by_freq`` with ``mode="max"``,
    ``per_sample_weights``, then ``offsets`` (type, rank, dtype, device, values).

    The values of ``offsets`` are read (one device synchronisation): ``offsets[0]`` must be 0,
    they must be non-decreasing and none may exceed ``len(input)``. ``F.embedding_bag`` checks
    only the first and the last of these on the CPU and none on CUDA; a decreasing offset makes
    it fail with an unrelated message or return garbage.

    Args:
        input: int64 or int32 ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without.
        weight: the ``(V, D)`` table (already checked).
        offsets: ``None`` for a 2-D input, else a 1-D int64/int32 tensor of bag starts
            (plus the end of the last bag when ``include_last_offset``).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        per_sample_weights: ``None`` or a tensor of ``input``'s shape and ``weight``'s dtype
            and device; only with ``mode="sum"``.
        include_last_offset: whether ``offsets`` ends with the end of the last bag.
        scale_grad_by_freq: refused with ``mode="max"``, as ``F.embedding_bag`` does.
        fn: name of the calling function, for the messages.

    Raises:
        TypeError: ``offsets`` or ``per_sample_weights`` is not a tensor or has a wrong dtype.
        ValueError: any other invalid combination; the message shows a correct call.
    """
    if input.is_nested:
        raise ValueError(
            f"{fn}: nested (jagged) input is not supported; pass its flat ids and offsets: "
            f"{fn}(input.values(), weight, input.offsets(), include_last_offset=True)"
        )
    if input.dim() not in (1, 2):
        hint = "flatten it: input.reshape(-1, input.shape[-1])"
        if input.dim() == 0:
            hint = "for a single bag pass input.reshape(1, -1)"
        raise ValueError(
            f"{fn}: input must be 1-D (N,) with offsets, or 2-D (B, L) (B bags of L ids) "
            f"without offsets, got shape {_shape_str(input.shape)}; {hint}"
        )
    if not isinstance(mode, str) or mode not in BAG_MODES:
        raise ValueError(
            f"{fn}: mode must be one of 'sum', 'mean' or 'max', got {mode!r}; "
            f"e.g. {fn}(input, weight, offsets, mode='sum')"
        )
    if scale_grad_by_freq and not option_applies("scale_grad_by_freq", mode):
        raise ValueError(
            f"{fn}: scale_grad_by_freq=True is not supported with mode='max' (as in "
            f"F.embedding_bag); use mode='sum' or mode='mean', or scale_grad_by_freq=False"
        )
    if per_sample_weights is not None:
        if not option_applies("per_sample_weights", mode):
            mean = " (for a weighted mean, divide w by the sum of the weights in each bag first)"
            raise ValueError(
                f"{fn}: per_sample_weights is only supported with mode='sum', got "
                f"mode={mode!r}; call {fn}(input, weight, offsets, mode='sum', "
                f"per_sample_weights=w){mean if mode == 'mean' else ''}"
            )
        if not isinstance(per_sample_weights, torch.Tensor):
            raise TypeError(
                f"{fn}: per_sample_weights must be a torch.Tensor of input's shape "
                f"{_shape_str(input.shape)} and weight's dtype, got "
                f"{type(per_sample_weights).__name__}"
            )
        if per_sample_weights.dtype != weight.dtype:
            raise TypeError(
                f"{fn}: per_sample_weights must have weight's dtype {weight.dtype}, got "
                f"{per_sample_weights.dtype}; pass per_sample_weights.to(weight.dtype)"
            )
        if per_sample_weights.shape != input.shape:
            raise ValueError(
                f"{fn}: per_sample_weights must have input's shape "
                f"{_shape_str(input.shape)} (one weight per id), got "
                f"{_shape_str(per_sample_weights.shape)}"
            )
        if per_sample_weights.device != weight.device:
            raise ValueError(
                f"{fn}: per_sample_weights is on {per_sample_weights.device} but weight is on "
                f"{weight.device}; pass per_sample_weights.to({str(weight.device)!r})"
            )
    if input.dim() == 2:
        if offsets is not None:
            b, length = input.shape
            raise ValueError(
                f"{fn}: a 2-D input (B, L) = {_shape_str(input.shape)} is already B bags of L "
                f"ids, so offsets must be None; call {fn}(input, weight), or pass the flat "
                f"ids with offsets: {fn}(input.reshape(-1), weight, offsets) (the 2-D form "
                f"equals offsets=torch.arange({b}) * {length})"
            )
        return
    _check_offsets(input, offsets, include_last_offset, fn)


def check_bag_sparse(sparse: bool, mode: str, scale_grad_by_freq: bool, fn: str) -> None:
    """Refuse the combinations with ``sparse=True`` that ``F.embedding_bag`` cannot differentiate.

    ``mode="max"`` with ``sparse=True`` is refused by ``F.embedding_bag`` itself;
    ``scale_grad_by_freq=True`` with ``sparse=True`` only fails in the backward pass
    (``embedding_backward: scale_grad_by_freq not supported with sparse gradients``), so it is
    refused here, at the call.

    Args:
        sparse: whether a sparse gradient was asked for.
        mode: the (already checked) reduction.
        scale_grad_by_freq: whether the gradient is scaled by frequency.
        fn: name of the calling function, for the message.

    Raises:
        ValueError: ``sparse=True`` with ``mode="max"`` or with ``scale_grad_by_freq=True``.
    """
    if not sparse:
        return
    if not option_applies("sparse", mode):
        raise ValueError(
            f"{fn}: sparse=True is not supported with mode='max' (as in F.embedding_bag); "
            f"use mode='sum' or mode='mean', or sparse=False"
        )
    if option_excluded("sparse", {"scale_grad_by_freq": scale_grad_by_freq}):
        raise ValueError(
            f"{fn}: sparse=True cannot be combined with scale_grad_by_freq=True (torch's "
            f"sparse backward does not implement it and would fail at backward()); pass "
            f"sparse=False"
        )
