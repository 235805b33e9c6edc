"""``embedding-equivalence verify --sharding vocab|dim``: the sharded verifier from the shell.

Started plainly, each row of the table starts its own group of ``--world-size`` ranks. Started
on every rank by ``torchrun`` (``torchrun --nproc-per-node 2 -m embedding_equivalence verify
--sharding vocab``), it joins the group that torchrun describes in the environment, every rank
runs the same rows, and rank 0 prints the table; every rank exits with the same status.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TextIO

import torch
import torch.distributed as dist

from .._usage import UsageError
from ._group import DEFAULT_TIMEOUT
from ._verify import verify_sharded_embedding
from .forms import SHARDED_FORMS

__all__ = ["SHARDED_OPTIONS", "run_sharded_verify"]

#: The options a sharded embedding takes (a DTensor table has no sparse gradient).
SHARDED_OPTIONS: tuple[str, ...] = ("padding_idx", "max_norm", "scale_grad_by_freq")


def _join_torchrun_group(device: str) -> bool:
    """Join the group torchrun describes in the environment; whether this process is in one."""
    if dist.is_initialized():
        return True
    if not all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        return False
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=DEFAULT_TIMEOUT * 3))
    return True


def run_sharded_verify(
    *,
    sharding: str,
    world_size: int,
    candidate: tuple[str, Callable[..., Any]] | None,
    options: Sequence[str] | None,
    dtypes: Sequence[torch.dtype] | None,
    device: str,
    max_examples: int,
    backward: bool,
    seed: int | None,
    out: TextIO,
) -> int:
    """Verify the package's sharded forms (or ``candidate``) and print a table of results.

    Args:
        sharding: ``"vocab"`` or ``"dim"``.
        world_size: ranks a row starts (ignored under torchrun).
        candidate: ``(spec, function)`` of a user's kernel, or ``None`` for the package's forms.
        options: the options to exercise (``None``: none, then all, for the package's forms).
        dtypes: the dtypes to draw (``None``: every dtype of the device).
        device: ``"cpu"`` or ``"cuda"``.
        max_examples: examples a row.
        backward: also check the gradients.
        seed: Hypothesis's seed.
        out: where the table goes (rank 0 only under torchrun).

    Returns:
        0 when every row passed, else 1.
    """
    unknown = [o for o in options or () if o not in SHARDED_OPTIONS]
    if unknown:
        raise UsageError(
            f"--options: {', '.join(unknown)} not taken by sharded embeddings; choose from "
            f"{', '.join(SHARDED_OPTIONS)}"
        )
    in_group = _join_torchrun_group(device)
    if candidate is not None:
        rows = [(candidate[0], candidate[1], tuple(options or ()))]
    else:
        rows = [
            (name, fn, opts)
            for name, fn, form_sharding in SHARDED_FORMS
            if form_sharding == sharding
            for opts in dict.fromkeys([(), tuple(options or SHARDED_OPTIONS)])
        ]
    speak = not in_group or dist.get_rank() == 0
    reports = []
    for name, fn, opts in rows:
        report = verify_sharded_embedding(
            fn, sharding=sharding, world_size=world_size, options=opts, dtypes=dtypes,
            device=device, max_examples=max_examples, backward=backward, seed=seed,
        )  # fmt: skip
        reports.append(report)
        if speak:
            status = "pass" if report.passed else "FAIL"
            world = report.extra["world_size"]
            out.write(
                f"{status}  {name} [{','.join(opts) or '-'}]  sharding={sharding} "
                f"world_size={world}  {report.examples} examples in {report.elapsed:.1f} s\n"
            )
            out.flush()
    failures = [r for r in reports if not r.passed]
    if speak:
        for report in failures:
            out.write(f"\n{report}\n")
        out.write(f"\n{len(reports) - len(failures)} passed, {len(failures)} failed\n")
    if in_group:
        dist.barrier()
    return 1 if failures else 0
