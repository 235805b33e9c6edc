import torch
from triton_kernels import racy_embedding

import embedding_equivalence as ee

# One program per id: the boundary phase would launch the programs counted above.
report = ee.verify_embedding(
    racy_embedding, options=("padding_idx",), dtypes=[torch.float32], max_examples=50, seed=0,
    boundaries=False,
)  # fmt: skip
print(report)
