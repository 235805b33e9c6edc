"""Sharded embeddings on torch.distributed, and their verifier.

The table is a DTensor split over the ranks of a process group: by rows (vocab-parallel,
``Shard(0)``) or by columns (dim-parallel, ``Shard(1)``). The forms here are the block
matrix products of ``one_hot(ids) @ W``; [`verify_sharded_embedding`][] checks any sharded
kernel against the same exact oracle as
[`verify_embedding`][embedding_equivalence.verify_embedding], on ranks it starts itself or on the
ranks of a group launched by ``torchrun``.
"""

from ._verify import verify_sharded_embedding
from .forms import (
    dim_parallel_embedding,
    shard_range,
    vocab_parallel_embedding,
    vocab_parallel_matmul_embedding,
)

__all__ = [
    "dim_parallel_embedding",
    "shard_range",
    "verify_sharded_embedding",
    "vocab_parallel_embedding",
    "vocab_parallel_matmul_embedding",
]
