"""A user's test file for a Triton kernel; the fixtures come from embedding-equivalence's plugin."""

import os

import torch
from triton_kernels import triton_embedding

# Under Triton's interpreter (conftest.py) bfloat16 is left to a GPU job: the interpreter
# casts its subnormals wrong, a limit the verifier names. On a GPU, every dtype.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DTYPES = [torch.float32, torch.float64, torch.float16] if INTERPRETED else None


def test_triton_embedding(embedding_verify):
    embedding_verify(triton_embedding, options=("padding_idx",), dtypes=DTYPES, seed=0)
