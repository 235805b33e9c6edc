"""torchrec's EmbeddingBagCollection, through ``verify_embedding_bag``."""

from __future__ import annotations

from typing import Any

import torch
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
from torchrec.modules.embedding_configs import PoolingType, dtype_to_data_type

from ._adapt import check_bag_call, no_counterpart, offsets_with_end
from ._common import Probe, entry_result


def torchrec_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """F.embedding_bag's signature, computed by an EmbeddingBagCollection of one table."""
    no_counterpart(
        "EmbeddingBagCollection", max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse, padding_idx=padding_idx,
    )  # fmt: skip
    rows, dim = weight.shape
    table = EmbeddingBagConfig(
        name="t",
        embedding_dim=dim,
        num_embeddings=rows,
        feature_names=["f"],
        pooling=PoolingType[mode.upper()],
        data_type=dtype_to_data_type(weight.dtype),
    )
    ebc = EmbeddingBagCollection(
        tables=[table], is_weighted=per_sample_weights is not None, device=torch.device("meta")
    )
    values, offsets = offsets_with_end(input, offsets, include_last_offset)
    weights = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    features = KeyedJaggedTensor(keys=["f"], values=values, offsets=offsets, weights=weights)
    # The table as the module's parameter, in the module's dtype: gradients reach `weight`.
    name = "embedding_bags.t.weight"
    param = ebc.get_parameter(name)
    pooled = torch.func.functional_call(ebc, {name: weight.to(param.dtype)}, (features,))
    return pooled["f"]


def checked_torchrec_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The same call, after the package's checks of the ids, offsets and options."""
    check_bag_call(
        "checked_torchrec_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return torchrec_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


def nonempty_torchrec_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The checked call, but a batch of zero bags gets its (0, D) result here, not from
    torchrec (which the probe found failing on it)."""
    check_bag_call(
        "nonempty_torchrec_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    if offsets_with_end(input, offsets, include_last_offset)[1].numel() == 1:  # zero bags
        return weight[:0].clone()
    return torchrec_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


OPTIONS = (
    "padding_idx", "max_norm", "scale_grad_by_freq", "sparse", "per_sample_weights",
    "include_last_offset",
)  # fmt: skip


def verify() -> dict[str, Any]:
    """Probe torchrec's EmbeddingBagCollection; the entry's JSON."""
    probe = Probe(
        "verify_embedding_bag",
        f"{__name__}:torchrec_embedding_bag",
        OPTIONS,
        checked=f"{__name__}:checked_torchrec_embedding_bag",
        workaround=f"{__name__}:nonempty_torchrec_embedding_bag",
        workaround_label="input checked first, zero bags answered by the adapter",
        modes=("sum", "mean", "max"),
    )
    return entry_result("torchrec_ebc", probe.run(), probe.notes)
