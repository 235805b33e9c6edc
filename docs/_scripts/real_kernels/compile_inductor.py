"""torch.compile (inductor, CPU) of F.embedding, through ``verify_embedding``."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ._common import Probe, entry_result
from ._reports import Defect

# F.embedding compiled by inductor is the candidate itself: the verifier runs it as compiled
# code on every example (recompile limit raised) and counts the examples that fell back to eager.
compiled_embedding = torch.compile(F.embedding, backend="inductor")

OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")

#: The findings that are torch's own: inductor fails to compile the backward of a table of one
#: column (checked: torch.compile of F.embedding itself, nothing of the package in the call).
DEFECTS = (Defect("as it is, defaults", "torch.compile (inductor)"),)

#: What the failure is, and where it depends on the machine.
NOTE = (
    "the backward of a table of one column fails to compile on more than one thread: "
    "inductor's C++ code for the gradient's scatter-add takes its vectorised atomic_add "
    "store, which asserts that the destination index is a vector (torch/_inductor/codegen/"
    "cpp.py), where for one column it is a scalar; with one thread (OMP_NUM_THREADS=1) the "
    "plain store is taken and the same call passes. pytorch/pytorch#185325 describes this "
    "assertion and its fix (pytorch/pytorch#160391)"
)


def verify() -> dict[str, Any]:
    """Probe the compiled F.embedding; the entry's JSON."""
    probe = Probe("verify_embedding", f"{__name__}:compiled_embedding", OPTIONS, budget=40)
    return entry_result("compile_inductor", probe.run(), [NOTE, *probe.notes], DEFECTS)
