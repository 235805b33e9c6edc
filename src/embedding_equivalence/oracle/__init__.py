"""The exact float64 references and the error bounds that every candidate is held to.

``bounds.py`` derives every tolerance from the dtype's unit roundoff and the summation length;
``embedding.py`` and ``bag.py`` hold the references of ``F.embedding`` and ``F.embedding_bag``
(written from the definitions with exactly rounded sums, never calling an embedding kernel);
``max_ties.py`` resolves ties in ``max`` bags; ``expected.py`` is the seam through which the
engine asks any oracle for its answers.
"""

from .bag import BagOracle
from .embedding import EmbeddingOracle
from .expected import ExpectedRows, Oracle

__all__ = ["BagOracle", "EmbeddingOracle", "ExpectedRows", "Oracle"]
