"""Kernels that fail on one rank, for ``benchmarks/sharded_speed.py`` (imported by the workers)."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from embedding_equivalence.distributed import vocab_parallel_embedding


def raises_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1 raises while rank 0 waits in the all-reduce."""
    if dist.get_rank() == 1:
        raise ValueError("rank 1 refuses")
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]


def hangs_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1 never reaches the all-reduce."""
    if dist.get_rank() == 1:
        time.sleep(3600)
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]


def dies_on_rank_1(input: torch.Tensor, weight: DTensor, **options: object) -> torch.Tensor:
    """Rank 1's process exits during the call."""
    if dist.get_rank() == 1:
        os._exit(3)
    return vocab_parallel_embedding(input, weight, **options)  # type: ignore[arg-type]
