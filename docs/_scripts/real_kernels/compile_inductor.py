"""torch.compile (inductor, CPU) of F.embedding, through ``verify_embedding``."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ._common import Probe, entry_result

# F.embedding compiled by inductor is the candidate itself: the verifier runs it as compiled
# code on every example (recompile limit raised) and counts the examples that fell back to eager.
compiled_embedding = torch.compile(F.embedding, backend="inductor")

OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")


def verify() -> dict[str, Any]:
    """Probe the compiled F.embedding; the entry's JSON."""
    probe = Probe("verify_embedding", f"{__name__}:compiled_embedding", OPTIONS, budget=40)
    return entry_result("compile_inductor", probe.run(), probe.notes)
