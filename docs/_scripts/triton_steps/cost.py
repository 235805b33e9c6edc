import math
import time

import torch
from triton_kernels import blocks, gather_rows, one_id_per_program

from embedding_equivalence._draw.boundaries import embedding_boundaries

# What one program costs here: the gather of 64 blocks of 4,096 elements, timed.
n, dim = 64 * 1024, 4
weight, ids = torch.randn(n, dim), torch.arange(n)
out = torch.empty(n, dim)
grid, block_n, block_d = blocks(n, dim)
start = time.perf_counter()
gather_rows[grid](ids, weight, out, n, dim, dim, 1, BLOCK_N=block_n, BLOCK_D=block_d)
per_program = (time.perf_counter() - start) / math.prod(grid)
assert torch.equal(out, weight[ids])

# The programs of the boundary phase above: a forward and a backward launch per valid call.
dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
calls = [b.case for b in embedding_boundaries(("padding_idx",), dtypes, ["cpu"])]
sizes = [(math.prod(c.ids.shape), c.embedding_dim) for c in calls if c.invalid is None]
blocked = sum(2 * math.prod(blocks(n, d)[0]) for n, d in sizes if n)
one_per_id = sum(2 * math.prod(one_id_per_program(n, d)[0]) for n, d in sizes)
print(
    f"one program: {per_program * 1e3:.2f} ms ({math.prod(grid)} programs of "
    f"{block_n} ids x {block_d} columns)"
)
print(f"boundary phase, {len(sizes)} valid calls, {sum(n for n, _ in sizes):,} ids in all:")
print(
    f"  blocks of {block_n * block_d:,} elements: {blocked:,} programs, "
    f"about {blocked * per_program:.0f} s"
)
print(
    f"  one program per id:        {one_per_id:,} programs, "
    f"about {one_per_id * per_program / 60:.0f} min"
)
