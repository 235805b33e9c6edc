"""Run by tests/test_distributed.py under torchrun: every rank calls the verifier.

Usage: torchrun --standalone --nproc-per-node 2 torchrun_verify.py CANDIDATE SHARDING EXAMPLES OUT
[TIMEOUT]

Each rank writes its line of the report to ``OUT/rank<r>.txt``.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from embedding_equivalence.distributed import verify_sharded_embedding

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
candidate, sharding, examples, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 20.0
report = verify_sharded_embedding(
    candidate, sharding=sharding, max_examples=examples, seed=0, timeout=timeout
)
first_line = (report.failure or "").splitlines()[0] if report.failure else ""
(out / f"rank{dist.get_rank()}.txt").write_text(
    f"rank {dist.get_rank()} of {dist.get_world_size()}: passed={report.passed} "
    f"examples={report.examples} (boundaries {report.boundary_examples}) "
    f"world={report.world_size} failure={first_line}"
)
dist.destroy_process_group()
