"""Embedding lookup and one-hot matmul are the same function, forward and backward.

The lookup ``W[ids]`` and the product ``one_hot(ids, V) @ W`` give the same values and the
same gradients for every option of ``nn.Embedding``. This package implements both forms,
states the equivalence precisely, and verifies it, for its own forms and for yours.

Examples:
    >>> import torch
    >>> import embedding_equivalence as ee
    >>> weight = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    >>> ids = torch.tensor([[2, 3], [1, 2]])
    >>> torch.equal(ee.lookup_embedding(ids, weight), ee.matmul_embedding(ids, weight))
    True
    >>> ee.matmul_embedding(ids, weight).shape
    torch.Size([2, 2, 4])
"""

from ._draw.sizes import large_table_sizes
from ._engine.bench import BenchReport, BenchTiming, bench_embedding
from ._engine.check import EquivalenceError
from ._engine.report import BagRun, CompiledRun, QuantizedRun, ShardedRun, VerificationReport
from ._engine.verify import verify_embedding, verify_embedding_bag, verify_quantized_embedding
from .forms.bag import lookup_embedding_bag, matmul_embedding_bag
from .forms.lookup import lookup_embedding
from .forms.matmul import linear_embedding, matmul_embedding, sparse_matmul_embedding
from .forms.memory import OneHotTooLargeError
from .forms.modules import MatmulEmbedding, embedding_to_linear, linear_to_embedding
from .forms.quantized import (
    SCHEMES,
    QuantizedTable,
    dequantize_rowwise,
    lookup_quantized_embedding,
    quantize_rowwise,
)

__all__ = [
    "BagRun",
    "BenchReport",
    "BenchTiming",
    "CompiledRun",
    "EquivalenceError",
    "MatmulEmbedding",
    "OneHotTooLargeError",
    "QuantizedRun",
    "QuantizedTable",
    "SCHEMES",
    "ShardedRun",
    "VerificationReport",
    "bench_embedding",
    "dequantize_rowwise",
    "embedding_to_linear",
    "large_table_sizes",
    "linear_embedding",
    "linear_to_embedding",
    "lookup_embedding",
    "lookup_embedding_bag",
    "lookup_quantized_embedding",
    "matmul_embedding",
    "matmul_embedding_bag",
    "quantize_rowwise",
    "sparse_matmul_embedding",
    "verify_embedding",
    "verify_embedding_bag",
    "verify_quantized_embedding",
]

__version__ = "0.1.0"
