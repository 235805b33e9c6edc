"""FlagGems' Triton embedding (``flag_gems.ops.embedding`` and ``embedding_backward``, what
``flag_gems.enable()`` registers for ``aten::embedding``), through ``verify_embedding``.

FlagGems looks for a GPU vendor's tools when it is imported and stops without one, under
Triton's interpreter too: on the CPU the generator records why it does not import, and that is
the entry. On a GPU machine this probe runs the verifier on the devices present.
"""

from __future__ import annotations

from typing import Any

import torch
from flag_gems.ops.embedding import embedding, embedding_backward

from ._adapt import no_counterpart
from ._common import Probe, entry_result


class _FlagGemsEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, input, padding_idx, scale_grad_by_freq):
        ctx.save_for_backward(input)
        ctx.rows, ctx.padding_idx, ctx.scale = weight.shape[0], padding_idx, scale_grad_by_freq
        return embedding(weight, input, padding_idx, scale_grad_by_freq)

    @staticmethod
    def backward(ctx, grad):
        (input,) = ctx.saved_tensors
        grad_weight = embedding_backward(grad, input, ctx.rows, ctx.padding_idx, ctx.scale)
        return grad_weight, None, None, None


def flaggems_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """F.embedding's signature, computed by FlagGems' forward and backward ops (aten's
    convention: padding_idx -1 for none, a negative one counted from the end)."""
    no_counterpart("flag_gems.ops.embedding", max_norm=max_norm, sparse=sparse)
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    return _FlagGemsEmbedding.apply(weight, input, padding_idx, scale_grad_by_freq)


OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")


def verify() -> dict[str, Any]:
    """Probe FlagGems' embedding; the entry's JSON."""
    probe = Probe("verify_embedding", f"{__name__}:flaggems_embedding", OPTIONS)
    return entry_result("flaggems_embedding", probe.run(), probe.notes)
