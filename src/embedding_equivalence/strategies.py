"""Hypothesis strategies for embedding tables, token ids and whole embedding (bag) calls.

Shaped like ``hypothesis.extra.numpy``: plural nouns, arguments that take a value or a
strategy, keyword-only ``min_*``/``max_*`` bounds where ``None`` means a sensible default, and
`InvalidArgument` raised before anything is drawn.

Every tensor is built from drawn values only: ids are drawn one by one, and a table is drawn
as a seed for a ``torch.Generator`` plus drawn structure (shape, dtype, layout, special
entries). A failure therefore replays exactly and shrinks toward small ``V``, ``D`` and ``N``,
float32, the CPU, contiguous layouts and no options. [`embedding_bag_cases`][] does the same
for ``F.embedding_bag`` calls: bags, offsets, modes and per-sample weights.

Examples:
    ```python
    from hypothesis import given
    import embedding_equivalence as ee
    from embedding_equivalence import strategies as ees, testing as eet

    @given(ees.embedding_cases(options=("padding_idx", "scale_grad_by_freq")))
    def test_my_kernel(case):
        eet.assert_case_equivalent(my_embedding, case)
    ```
"""

from ._draw.bags import BAG_INVALID_KINDS, CRASHING_BAG_INVALID_KINDS
from ._draw.cases import BagTensors, EmbeddingBagCase, EmbeddingCase
from ._draw.quantized import QuantizedEmbeddingCase, QuantizedTableRecipe
from ._draw.recipes import IDS_LAYOUTS, WEIGHT_LAYOUTS, IdsRecipe, WeightRecipe
from ._draw.strategies import (
    QUANTIZED_SCALE_DTYPES,
    REAL_VOCAB_SIZES,
    devices,
    embedding_bag_cases,
    embedding_cases,
    embedding_dims,
    embedding_weights,
    float_dtypes,
    index_dtypes,
    quantized_embedding_cases,
    token_ids,
    vocab_sizes,
)
from ._draw.tensors import available_devices, supported_float_dtypes
from .forms.options import BAG_MODES, BAG_OPTIONS, EMBEDDING_OPTIONS

__all__ = [
    "BAG_INVALID_KINDS",
    "BAG_MODES",
    "BAG_OPTIONS",
    "BagTensors",
    "CRASHING_BAG_INVALID_KINDS",
    "EMBEDDING_OPTIONS",
    "EmbeddingBagCase",
    "EmbeddingCase",
    "IDS_LAYOUTS",
    "IdsRecipe",
    "QUANTIZED_SCALE_DTYPES",
    "QuantizedEmbeddingCase",
    "QuantizedTableRecipe",
    "REAL_VOCAB_SIZES",
    "WEIGHT_LAYOUTS",
    "WeightRecipe",
    "available_devices",
    "devices",
    "embedding_bag_cases",
    "embedding_cases",
    "embedding_dims",
    "embedding_weights",
    "float_dtypes",
    "index_dtypes",
    "quantized_embedding_cases",
    "supported_float_dtypes",
    "token_ids",
    "vocab_sizes",
]
