"""A user's test file: the fixtures come from embedding-equivalence's pytest plugin."""

from my_kernels import gather_embedding

import embedding_equivalence as ee


def test_gather_embedding(embedding_device_dtype, embedding_max_examples):
    device, dtype = embedding_device_dtype
    report = ee.verify_embedding(
        gather_embedding,
        options=("padding_idx",),
        dtypes=[dtype],
        devices=[device],
        max_examples=embedding_max_examples,
        seed=0,
    )
    report.raise_for_failure()
