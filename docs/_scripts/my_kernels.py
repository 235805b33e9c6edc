"""Hand-written embedding kernels with F.embedding's signature: correct, and with classic bugs."""

import torch


def _check(input, weight):
    if input.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"ids must be int64 or int32, not {input.dtype}")
    if input.numel() and (input.min() < 0 or input.max() >= weight.shape[0]):
        raise IndexError(f"ids must lie in [0, {weight.shape[0]})")


def gather_embedding(input, weight, padding_idx=None):
    """Gather rows with index_select; padding_idx masks the gradient, as in F.embedding."""
    _check(input, weight)
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise ValueError("padding_idx out of range")
        keep = torch.ones(weight.shape[0], 1, dtype=weight.dtype, device=weight.device)
        keep[padding_idx] = 0
        weight = weight * keep + (weight * (1 - keep)).detach()
    rows = weight.index_select(0, input.reshape(-1))
    return rows.reshape(*input.shape, weight.shape[1])


class _Gather(torch.autograd.Function):
    """Rows forward; a hand-written backward with a classic mistake."""

    @staticmethod
    def forward(ctx, weight, ids):
        ctx.save_for_backward(ids)
        ctx.num_rows = weight.shape[0]
        return weight[ids]

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        grad_weight = grad.new_zeros(ctx.num_rows, grad.shape[-1])
        grad_weight[ids] = grad  # the bug: a repeated id overwrites instead of adding up
        return grad_weight, None


def overwriting_embedding(input, weight):
    """Correct forward; the backward loses all but one gradient row of a repeated id."""
    _check(input, weight)
    rows = _Gather.apply(weight, input.reshape(-1))
    return rows.reshape(*input.shape, weight.shape[1])


def blocked_embedding(input, weight):
    """Rows copied in column blocks of 128, as a vectorised kernel does; the tail is lost."""
    _check(input, weight)
    rows = weight.index_select(0, input.reshape(-1))
    width = weight.shape[1]
    full = width // 128 * 128
    if full and full < width:  # the bug: the last partial block of columns is never copied
        rows = torch.cat([rows[:, :full], torch.zeros_like(rows[:, full:])], dim=1)
    return rows.reshape(*input.shape, width)


_OUTPUTS = {}


class _IntoBuffer(torch.autograd.Function):
    """Rows written into one buffer per shape and dtype, and that buffer returned."""

    @staticmethod
    def forward(ctx, weight, ids):
        ctx.save_for_backward(ids)
        ctx.num_rows = weight.shape[0]
        key = (ids.numel(), weight.shape[1], weight.dtype)
        if key not in _OUTPUTS:
            _OUTPUTS[key] = weight.new_empty(ids.numel(), weight.shape[1])
        return torch.index_select(weight, 0, ids, out=_OUTPUTS[key])

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        return grad.new_zeros(ctx.num_rows, grad.shape[-1]).index_add_(0, ids, grad), None


def buffered_embedding(input, weight):
    """Right rows and gradient, written into one output buffer that every call of the same
    shape reuses (a static output, as a captured graph has): the next call overwrites the
    caller's last result."""
    _check(input, weight)
    rows = _IntoBuffer.apply(weight, input.reshape(-1))
    return rows.reshape(*input.shape, weight.shape[1])
