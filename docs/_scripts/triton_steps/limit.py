import torch
from triton_kernels import same_dtype_embedding

import embedding_equivalence as ee

report = ee.verify_embedding(same_dtype_embedding, dtypes=[torch.bfloat16], seed=0)
print(f"passed={report.passed}, interpreter_limit={report.interpreter_limit!r}")
print(report.failure)
where_it_runs = ee.verify_embedding(
    same_dtype_embedding, dtypes=[torch.float32, torch.float16], max_examples=25, seed=0
)
print(where_it_runs)
