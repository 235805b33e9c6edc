"""A user's test file for a Triton kernel; the fixtures come from embedding-equivalence's plugin."""

import pytest
from triton_kernels import triton_embedding

import embedding_equivalence as ee


def test_triton_embedding(embedding_device_dtype, embedding_max_examples):
    device, dtype = embedding_device_dtype
    report = ee.verify_embedding(
        triton_embedding,
        options=("padding_idx",),
        dtypes=[dtype],
        devices=[device],
        max_examples=embedding_max_examples,
        seed=0,
    )
    if report.interpreter_limit:  # Triton's interpreter cannot run it here: not a pass
        pytest.skip(f"Triton's interpreter cannot run this call ({report.interpreter_limit})")
    report.raise_for_failure()
