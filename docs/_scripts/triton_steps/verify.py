import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import torch
import triton
from triton_kernels import triton_embedding

import embedding_equivalence as ee

print(f"triton {triton.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs")
report = ee.verify_embedding(triton_embedding, options=("padding_idx",), seed=0)
print(report.passed, report.interpreter_limit)  # bfloat16: the interpreter's limit
print(report.failure.split("\n\n")[-1])  # the paragraph that names it
dtypes = [torch.float32, torch.float64, torch.float16]
print(ee.verify_embedding(triton_embedding, options=("padding_idx",), dtypes=dtypes, seed=0))
