"""Megatron-core's VocabParallelEmbedding, through ``verify_sharded_embedding``.

On the CPU it needs: a process group (the verifier's gloo ranks), Megatron's tensor-parallel
group over them (``parallel_state.initialize_model_parallel``), and
``ModelParallelConfig(use_cpu_initialization=True)`` (without it the layer allocates its
weight on ``torch.cuda.current_device()``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.tensor_parallel import VocabParallelEmbedding

from ._adapt import check_sharded_call, no_counterpart
from ._common import Probe, entry_result


def _layer(num_embeddings, embedding_dim, dtype):
    """A VocabParallelEmbedding over all ranks, on the CPU."""
    if not parallel_state.model_parallel_is_initialized():  # once per rank
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=dist.get_world_size())
    config = ModelParallelConfig(
        tensor_model_parallel_size=dist.get_world_size(),
        use_cpu_initialization=True,
        perform_initialization=False,
        params_dtype=dtype,
    )
    return VocabParallelEmbedding(
        num_embeddings, embedding_dim, init_method=torch.nn.init.zeros_, config=config,
        tp_group=parallel_state.get_tensor_model_parallel_group(),
    )  # fmt: skip


def megatron_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False
):
    """VocabParallelEmbedding with the verifier's Shard(0) table: each rank's block is the
    layer's partition (torch's chunking, ceil(V / world) rows a rank)."""
    no_counterpart(
        "VocabParallelEmbedding", padding_idx=padding_idx, max_norm=max_norm,
        scale_grad_by_freq=scale_grad_by_freq,
    )  # fmt: skip
    layer = _layer(*weight.shape, weight.dtype)
    block = weight.to_local().to(layer.weight.dtype)  # gradients reach the DTensor `weight`
    return torch.func.functional_call(layer, {"weight": block}, (input,))


def padded_megatron_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False
):
    """The same, with the vocab padded to a multiple of the world size, as Megatron-LM's
    training does (--make-vocab-size-divisible-by): zero rows after each rank's block."""
    no_counterpart(
        "VocabParallelEmbedding", padding_idx=padding_idx, max_norm=max_norm,
        scale_grad_by_freq=scale_grad_by_freq,
    )  # fmt: skip
    world = dist.get_world_size()
    rows = -(-weight.shape[0] // world)  # torch's chunk: ceil(V / world) rows a rank
    layer = _layer(rows * world, weight.shape[1], weight.dtype)
    block = weight.to_local()
    padding = block.new_zeros(rows - block.shape[0], block.shape[1])
    padded = torch.cat([block, padding]).to(layer.weight.dtype)
    return torch.func.functional_call(layer, {"weight": padded}, (input,))


def checked_padded_megatron_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False
):
    """The padded layer, after the package's checks of the ids and options."""
    check_sharded_call(
        "checked_padded_megatron_embedding", input, weight, padding_idx, max_norm, norm_type
    )
    return padded_megatron_embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq
    )


OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq")


def verify() -> dict[str, Any]:
    """Probe the layer as it is, then with the vocab padded; the entry's JSON."""
    fixed = {"sharding": "vocab", "world_size": 2}
    as_is = Probe(
        "verify_sharded_embedding", f"{__name__}:megatron_embedding", OPTIONS, fixed=fixed,
        prefix="layer", explore=False,
    )  # fmt: skip
    padded = Probe(
        "verify_sharded_embedding", f"{__name__}:padded_megatron_embedding", OPTIONS,
        checked=f"{__name__}:checked_padded_megatron_embedding", fixed=fixed,
        prefix="layer, vocab padded",
    )  # fmt: skip
    records = as_is.run() + padded.run()
    return entry_result("megatron_vocab_parallel", records, as_is.notes + padded.notes)
