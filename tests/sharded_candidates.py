"""Sharded candidates that the workers import by name: torch's DTensor embedding, and kernels
that raise, hang or die on one rank (the failure modes of sharded code)."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from embedding_equivalence.distributed import vocab_parallel_embedding
from embedding_equivalence.forms.validation import check_embedding_args, check_ids_in_range


def _replicated(input: torch.Tensor, weight: DTensor) -> DTensor:
    return DTensor.from_local(input, weight.device_mesh, [Replicate()], run_check=False)


def dtensor_embedding(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """torch's own: ``F.embedding`` on a sharded DTensor table, with replicated ids."""
    return F.embedding(_replicated(input, weight), weight, **options)  # type: ignore[arg-type]


def _check(input: torch.Tensor, weight: DTensor, padding_idx: object) -> None:
    """The package's input checks: torch's vocab-sharded embedding does not refuse bad ids."""
    stand_in = torch.empty((1, 1), dtype=weight.dtype).expand(weight.shape)
    check_embedding_args(input, stand_in, padding_idx, None, 2.0, "checked")  # type: ignore[arg-type]
    check_ids_in_range(input, weight.shape[0], "checked")


def checked_dtensor_embedding(
    input: torch.Tensor, weight: DTensor, **options: object
) -> torch.Tensor:
    """:func:`dtensor_embedding` behind the package's input checks."""
    _check(input, weight, options.get("padding_idx"))
    return dtensor_embedding(input, weight, **options)


def _parallel_module(
    style: object, input: torch.Tensor, weight: DTensor, options: dict
) -> torch.Tensor:
    """An ``nn.Embedding`` parallelized by ``style``, called with ``weight`` as its table."""
    module = nn.Embedding(*weight.shape, device="meta", **options)  # type: ignore[arg-type]
    parallelize_module(module, weight.device_mesh, style)  # type: ignore[arg-type]
    return torch.func.functional_call(module, {"weight": weight}, (input,))


def checked_rowwise_parallel(
    input: torch.Tensor, weight: DTensor, **options: object
) -> torch.Tensor:
    """``RowwiseParallel(input_layouts=Replicate())`` on ``nn.Embedding``, input checked."""
    _check(input, weight, options.get("padding_idx"))
    return _parallel_module(RowwiseParallel(input_layouts=Replicate()), input, weight, options)


def rowwise_parallel_default_layouts(
    input: torch.Tensor, weight: DTensor, **options: object
) -> torch.Tensor:
    """``RowwiseParallel()`` with its defaults, which expect sharded ids (the trap)."""
    return _parallel_module(RowwiseParallel(), input, weight, options)


def colwise_parallel(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """``ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())``."""
    style = ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    return _parallel_module(style, input, weight, options)


def raises_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1 raises before the all-reduce that the other ranks wait in."""
    if dist.get_rank() == 1:
        raise ValueError("rank 1 refuses")
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]


def hangs_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1 never reaches the all-reduce."""
    if dist.get_rank() == 1:
        time.sleep(3600)
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]


def dies_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1's process exits in the middle of the call."""
    if dist.get_rank() == 1:
        os._exit(3)
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]
