"""fbgemm-gpu-cpu's DenseTableBatchedEmbeddingBagsCodegen, through ``verify_embedding_bag``."""

from __future__ import annotations

from typing import Any

import torch
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    DenseTableBatchedEmbeddingBagsCodegen,
)

from ._adapt import check_bag_call, no_counterpart, offsets_with_end
from ._common import Probe, entry_result


def fbgemm_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """F.embedding_bag's signature, computed by one table of fbgemm's dense TBE on the CPU."""
    no_counterpart(
        "DenseTableBatchedEmbeddingBagsCodegen", max_norm=max_norm,
        scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, padding_idx=padding_idx,
    )  # fmt: skip
    precision = SparseType.from_dtype(weight.dtype)
    tbe = DenseTableBatchedEmbeddingBagsCodegen(
        [tuple(weight.shape)],  # one table: (rows, dim)
        weights_precision=precision,
        pooling_mode=PoolingMode.from_str(mode),
        use_cpu=True,
        output_dtype=precision,
    )
    indices, offsets = offsets_with_end(input, offsets, include_last_offset)
    if per_sample_weights is not None:
        per_sample_weights = per_sample_weights.reshape(-1)
    # The table as the module's parameter (flat, contiguous, in its dtype), as loading it into
    # the module would make it; the gradient that fbgemm computes for it reaches `weight`.
    table = weight.to(tbe.weights.dtype).contiguous().view(-1)
    return torch.func.functional_call(
        tbe, {"weights": table}, (indices, offsets, per_sample_weights)
    )


def checked_fbgemm_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The same call, after the package's checks of the ids, offsets and options."""
    check_bag_call(
        "checked_fbgemm_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return fbgemm_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


OPTIONS = (
    "padding_idx", "max_norm", "scale_grad_by_freq", "sparse", "per_sample_weights",
    "include_last_offset",
)  # fmt: skip


def verify() -> dict[str, Any]:
    """Probe fbgemm's TBE; the entry's JSON."""
    probe = Probe(
        "verify_embedding_bag",
        f"{__name__}:fbgemm_embedding_bag",
        OPTIONS,
        checked=f"{__name__}:checked_fbgemm_embedding_bag",
        modes=("sum", "mean", "max"),
    )
    return entry_result("fbgemm_tbe", probe.run(), probe.notes)
