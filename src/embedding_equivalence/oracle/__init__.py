"""The exact float64 references and the error bounds that every candidate is held to.

``bounds.py`` derives every tolerance from the dtype's unit roundoff and the summation length;
``embedding.py`` and ``bag.py`` hold the references of ``F.embedding`` and ``F.embedding_bag``
(written from the definitions with exactly rounded sums, never calling an embedding kernel);
``max_ties.py`` resolves ties in ``max`` bags; ``expected.py`` is the seam through which the
engine asks any oracle for its answers.
"""

from .bag import (
    BagGradients,
    BagOracle,
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    reference_embedding_bag,
    reference_embedding_bag_grad,
)
from .bounds import gamma, renorm_error_bound, unit_roundoff
from .embedding import (
    EmbeddingOracle,
    gradient_error_bound,
    reference_embedding,
    reference_embedding_grad,
)
from .expected import ExpectedRows, Oracle
from .max_ties import MAX_TIE_SEARCH

__all__ = [
    "MAX_TIE_SEARCH",
    "BagGradients",
    "BagOracle",
    "EmbeddingOracle",
    "ExpectedRows",
    "Oracle",
    "embedding_bag_error_bound",
    "embedding_bag_gradient_error_bound",
    "gamma",
    "gradient_error_bound",
    "reference_embedding",
    "reference_embedding_bag",
    "reference_embedding_bag_grad",
    "reference_embedding_grad",
    "renorm_error_bound",
    "unit_roundoff",
]
