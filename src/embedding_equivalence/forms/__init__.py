"""The implementations: the embedding as a lookup and as a matrix product, bags, and modules.

``lookup.py`` indexes the table, ``matmul.py`` multiplies a one-hot with it, ``bag.py`` does
both for ``F.embedding_bag``, ``modules.py`` wraps them as ``nn.Module``s; ``validation.py``
gives every form the same errors, ``renorm.py`` applies ``max_norm``, ``padding_idx`` and
``scale_grad_by_freq`` outside the product, and ``options.py`` states which option applies to
which bag mode. :data:`FORMS` (``registry.py``) lists them all.
"""

from .bag import bag_count_matrix, lookup_embedding_bag, matmul_embedding_bag
from .lookup import index_select_embedding, indexing_embedding, lookup_embedding
from .matmul import (
    dense_one_hot,
    linear_embedding,
    matmul_embedding,
    sparse_matmul_embedding,
    sparse_one_hot,
)
from .modules import MatmulEmbedding, embedding_to_linear, linear_to_embedding
from .options import BAG_MODES, BAG_OPTIONS, EMBEDDING_OPTIONS, OPTION_MODES, option_applies
from .registry import FORMS, Form, form, forms
from .validation import OneHotTooLargeError

__all__ = [
    "BAG_MODES",
    "BAG_OPTIONS",
    "EMBEDDING_OPTIONS",
    "FORMS",
    "OPTION_MODES",
    "Form",
    "MatmulEmbedding",
    "OneHotTooLargeError",
    "bag_count_matrix",
    "dense_one_hot",
    "embedding_to_linear",
    "form",
    "forms",
    "index_select_embedding",
    "indexing_embedding",
    "linear_embedding",
    "linear_to_embedding",
    "lookup_embedding",
    "lookup_embedding_bag",
    "matmul_embedding",
    "matmul_embedding_bag",
    "option_applies",
    "sparse_matmul_embedding",
    "sparse_one_hot",
]
