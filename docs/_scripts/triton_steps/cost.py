import math
import time

import torch
import torch.nn.functional as F
from triton_kernels import blocks, gather_rows, one_id_per_program

import embedding_equivalence as ee

# What one program costs here: the gather of 64 blocks of 4,096 elements, timed.
n, dim = 64 * 1024, 4
weight, ids = torch.randn(n, dim), torch.arange(n)
out = torch.empty(n, dim)
grid, block_n, block_d = blocks(n, dim)
start = time.perf_counter()
gather_rows[grid](ids, weight, out, n, dim, dim, 1, BLOCK_N=block_n, BLOCK_D=block_d)
per_program = (time.perf_counter() - start) / math.prod(grid)
assert torch.equal(out, weight[ids])

# The calls of the verification above (with one random example instead of 100), recorded
# around F.embedding: the size (ids, columns) of each forward call that returns, and of each
# backward pass through its output.
forward, backward = [], []


def recorder(input, weight, padding_idx=None):
    out = F.embedding(input, weight, padding_idx)  # a bad call raises here: nothing launched
    size = (input.numel(), weight.shape[1])
    forward.append(size)
    if out.requires_grad:
        out.register_hook(lambda grad: backward.append(size))
    return out


dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
report = ee.verify_embedding(
    recorder, options=("padding_idx",), dtypes=dtypes, max_examples=1, seed=0
)
report.raise_for_failure()  # every call made: a failure would end the run early


def programs(launch, calls):
    """The programs of a launch per call; a call with no ids (or no columns) launches none."""
    return sum(math.prod(launch(n, d)[0]) for n, d in calls if n and d)


blocked = programs(blocks, forward) + programs(blocks, backward)
one_per_id = programs(one_id_per_program, forward) + programs(one_id_per_program, backward)
total_ids = sum(n for n, _ in forward + backward)
print(
    f"one program: {per_program * 1e3:.2f} ms ({math.prod(grid)} programs of "
    f"{block_n} ids x {block_d} columns)"
)
print(f"the boundary phase and one random example: {len(forward)} forward calls (a probe, then")
print("each valid example twice: the second call checks what a kernel must not do) and")
print(f"{len(backward)} backward passes, {total_ids:,} ids in all:")
print(
    f"  blocks of {block_n * block_d:,} elements: {blocked:,} programs, "
    f"about {blocked * per_program:.0f} s"
)
print(
    f"  one program per id:        {one_per_id:,} programs, "
    f"about {one_per_id * per_program / 60:.0f} min"
)
