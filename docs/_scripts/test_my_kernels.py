"""A user's test file: the fixtures come from embedding-equivalence's pytest plugin."""

from my_kernels import gather_embedding


def test_gather_embedding(embedding_verify):
    # A cpu-boundaries row runs the boundary phase once for every dtype; a row per dtype
    # runs its random examples. It raises EquivalenceError on a failure.
    embedding_verify(gather_embedding, options=("padding_idx",), seed=0)
