"""``embedding-equivalence verify --sharding vocab|dim``: the sharded verifier from the shell.

Started plainly, each row of the table starts its own group of ``--world-size`` ranks. Started
on every rank by ``torchrun`` (``torchrun --nproc-per-node 2 -m embedding_equivalence verify
--sharding vocab``), it joins the group that torchrun describes in the environment, every rank
runs the same rows, and rank 0 prints the table (and the JSON of ``--json``); every rank exits
with the same status. The output follows [`_console`][embedding_equivalence._console]'s rule,
as ``verify`` does without ``--sharding``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TextIO

import torch
import torch.distributed as dist

from .._console import Progress, Table, print_table, write_json
from .._usage import UsageError
from .._verify import VerificationReport
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
    json_path: str | None,
    out: TextIO,
    err: TextIO,
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
        json_path: ``--json``: ``"-"`` writes the results as JSON on ``out`` instead of the
            table, a file name writes them there beside the table; ``None``, no JSON.
        out: where the table goes (rank 0 only under torchrun).
        err: where the progress goes (rank 0 only under torchrun).

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
    reports: list[VerificationReport] = []
    with Progress("verify", len(rows), err, enabled=speak) as progress:
        for name, fn, opts in rows:
            progress.step(f"{name} [{','.join(opts) or '-'}] sharding={sharding}")
            report = verify_sharded_embedding(
                fn, sharding=sharding, world_size=world_size, options=opts, dtypes=dtypes,
                device=device, max_examples=max_examples, backward=backward, seed=seed,
            )  # fmt: skip
            reports.append(report)
    failures = [r for r in reports if not r.passed]
    if speak:
        _print_results(rows, reports, sharding, device, max_examples, json_path, out, err)
    if in_group:
        dist.barrier()
    return 1 if failures else 0


def _print_results(
    rows: Sequence[tuple[str, Callable[..., Any], tuple[str, ...]]],
    reports: Sequence[VerificationReport],
    sharding: str,
    device: str,
    max_examples: int,
    json_path: str | None,
    out: TextIO,
    err: TextIO,
) -> None:
    failures = [r for r in reports if not r.passed]
    summary = f"{len(reports) - len(failures)} passed, {len(failures)} failed"
    if json_path is not None:
        results = [
            {
                "implementation": name,
                "options": list(opts),
                "sharding": sharding,
                "world_size": report.extra["world_size"],
                "device": device,
                "passed": report.passed,
                "examples": report.examples,
                "worst_error": report.worst_error if math.isfinite(report.worst_error) else None,
                "seed": report.seed,
                "seconds": round(report.elapsed, 3),
                "failure": report.failure,
                "counterexample": report.counterexample,
            }
            for (name, _, opts), report in zip(rows, reports, strict=True)
        ]
        payload = {
            "schema": "embedding-equivalence/verify-sharded/1",
            "torch": torch.__version__,
            "max_examples": max_examples,
            "passed": not failures,
            "results": results,
        }
        write_json(payload, json_path, out)
        if json_path == "-":  # stdout holds the JSON alone; the summary goes with the progress
            err.write(summary + "\n")
            return
    columns = ("result", "implementation", "options", "sharding", "world size", "examples")
    table = Table((*columns, "seconds"), right=(4, 5, 6))
    for (name, _, opts), report in zip(rows, reports, strict=True):
        table.add_row(
            "pass" if report.passed else "FAIL",
            name,
            ",".join(opts) or "-",
            sharding,
            str(report.extra["world_size"]),
            str(report.examples),
            f"{report.elapsed:.1f}",
            style=None if report.passed else "bold red",
        )
    print_table(out, table)
    for report in failures:
        out.write(f"\n{report}\n")
    out.write(f"\n{summary}\n")
