"""torch DTensor: a plain F.embedding on a Shard(0) or Shard(1) table, through
``verify_sharded_embedding``."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate

from ._adapt import check_sharded_call
from ._common import Probe, Run, entry_result, execute


def dtensor_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False
):
    """F.embedding on the verifier's DTensor table; the ids, the same on every rank, replicated."""
    ids = DTensor.from_local(input, weight.device_mesh, [Replicate()])
    return F.embedding(ids, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)


def checked_dtensor_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False
):
    """The same call, after the package's checks of the ids and options."""
    check_sharded_call("checked_dtensor_embedding", input, weight, padding_idx, max_norm, norm_type)
    return dtensor_embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)


OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq")


def verify() -> dict[str, Any]:
    """Probe DTensor's sharded F.embedding under both shardings; the entry's JSON."""
    records, notes = [], []
    for sharding, placement in (("vocab", "Shard(0)"), ("dim", "Shard(1)")):
        probe = Probe(
            "verify_sharded_embedding",
            f"{__name__}:dtensor_embedding",
            OPTIONS,
            checked=f"{__name__}:checked_dtensor_embedding",
            fixed={"sharding": sharding, "world_size": 2},
            prefix=placement,
        )
        records += probe.run()
        notes += probe.notes
    # Three ranks: tables of V = 4 or fewer rows leave the last rank without rows.
    three = {"sharding": "vocab", "world_size": 3, "max_examples": 100, "seed": 0}
    records.append(
        execute(Run("Shard(0), 3 ranks: defaults (input checked first)",
                    "verify_sharded_embedding", f"{__name__}:checked_dtensor_embedding", three))
    )  # fmt: skip
    return entry_result("dtensor_embedding", records, notes)
