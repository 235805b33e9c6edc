"""``embedding-equivalence verify --sharding vocab|dim``: the sharded verifier from the shell.

Started plainly, each row of the table starts its own group of ``--world-size`` ranks. Started
on every rank by ``torchrun`` (``torchrun --nproc-per-node 2 -m embedding_equivalence verify
--sharding vocab``), it joins the group that torchrun describes in the environment, every rank
runs the same rows, and rank 0 prints the table (and the JSON of ``--json``); every rank exits
with the same status. When ranks are lost (a node and its launcher vanish), every surviving
rank stops after the row that found it, the other ranks write the failure that names the lost
ranks on stderr, and every survivor exits 1 at once. The output follows
[`console`][embedding_equivalence._cli.console]'s rule, as ``verify`` does without
``--sharding``.

A row is a cell ``IMPLEMENTATION/OPTIONS/DEVICE/DTYPES`` (``DTYPES`` comma-separated, or
``all`` when ``--dtypes`` is not given) and verifies under its own seed, derived from the
run's as ``verify`` derives it ([`cell_seed`][embedding_equivalence._cli.console.cell_seed]).
Under torchrun, rank 0 draws the run's seed when none is given and sends it to every rank.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TextIO

import torch
import torch.distributed as dist

from .._engine.arguments import draw_seed
from .._engine.report import VerificationReport
from ..distributed._group import (
    DEFAULT_STARTUP_TIMEOUT,
    DEFAULT_TIMEOUT,
    gpus_short,
    narrow_timeout,
)
from ..distributed._torchrun import broken_group
from ..distributed._verify import verify_sharded_embedding
from ..distributed.forms import SHARDED_FORMS
from ..forms.dtypes import dtype_name
from ..forms.options import SHARDED_OPTIONS
from .console import ParsedCell, Progress, cell_name, cell_seed, emit_results, result_row
from .parser import budget_flags, replay_flags, size_knobs
from .usage import UsageError


def _launched() -> bool:
    """Whether torchrun started this process: it describes the group in the environment."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def _join_torchrun_group(device: str) -> bool:
    """Join the group torchrun describes in the environment; whether this process is in one."""
    if dist.is_initialized():
        return True
    if not _launched():
        return False
    backend = "nccl" if device == "cuda" else "gloo"
    # Joining waits for every rank to start (the start-up timeout); the seed's broadcast and
    # the closing barrier on the default group then get a call's.
    dist.init_process_group(backend, timeout=timedelta(seconds=DEFAULT_STARTUP_TIMEOUT))
    narrow_timeout(None, DEFAULT_TIMEOUT * 3)
    return True


def run_sharded_verify(
    args: argparse.Namespace,
    dtypes: Sequence[torch.dtype] | None,
    device: str,
    only: ParsedCell | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Verify the package's sharded forms (or ``--candidate``) and print a table of results.

    Args:
        args: the command line, read here: ``--sharding`` (``vocab`` or ``dim``),
            ``--world-size`` (ranks a row starts, default 2; ignored under torchrun),
            ``--candidate`` (``module:function`` or ``file.py:function``, which the ranks
            import by that reference; without it, the package's forms), ``--options`` (the
            options to exercise; without it, none, then all, for the package's forms),
            ``--max-examples`` (examples a row), ``--forward-only``, ``--seed`` (the run's;
            drawn at random without it; each row verifies under its own, derived from it),
            ``--json`` (``-`` writes the results as JSON on ``out`` instead of the table, a
            file name writes them there beside the table), ``--no-boundaries`` and the size
            knobs of every row. The flags that shape a row are written into the command that
            replays it, after ``--sharding`` and ``--world-size``.
        dtypes: the dtypes to draw (``None``: every dtype of the device).
        device: ``"cpu"`` or ``"cuda"``.
        only: ``--only``'s cell: verify the row of its implementation, with ``--options`` as
            given.
        out: where the table goes (rank 0 only under torchrun).
        err: where the progress goes (rank 0 only under torchrun).

    Returns:
        0 when every row passed, else 1.
    """
    sharding, world_size, options = args.sharding, args.world_size or 2, args.options
    boundaries = not args.no_boundaries
    if unknown := [o for o in options or () if o not in SHARDED_OPTIONS]:
        raise UsageError(
            f"--options: {', '.join(unknown)} not taken by sharded embeddings; choose from "
            f"{', '.join(SHARDED_OPTIONS)}"
        )
    if args.candidate is not None:
        rows = [(args.candidate, args.candidate, tuple(options or ()))]
    else:
        rows = [
            (name, fn, opts)
            for name, fn, form_sharding in SHARDED_FORMS
            if form_sharding == sharding
            for opts in dict.fromkeys([(), tuple(options or SHARDED_OPTIONS)])
        ]
    if only is not None:
        names = [name for name, _, _ in rows]
        if only[0] not in names:
            raise UsageError(
                f"--only: no implementation {only[0]!r} with --sharding {sharding}; choose from "
                f"{', '.join(dict.fromkeys(names))}"
            )
        rows = [next((name, fn, tuple(options or ())) for name, fn, _ in rows if name == only[0])]
    if not _launched() and (short := gpus_short(world_size, device, None, "--world-size ")):
        raise UsageError(short)
    in_group = _join_torchrun_group(device)
    run_seed = _run_seed(args.seed, in_group)
    dtype_names = ",".join(dtype_name(d) for d in dtypes or ()) or "all"
    cells = [cell_name(name, opts, device, dtype_names) for name, _, opts in rows]
    speak = not in_group or dist.get_rank() == 0
    reports: list[VerificationReport] = []
    with Progress("verify", len(rows), err, enabled=speak) as progress:
        for (name, fn, opts), cell in zip(rows, cells, strict=True):
            progress.step(f"{name} [{','.join(opts) or '-'}] sharding={sharding}")
            report = verify_sharded_embedding(
                fn, sharding=sharding, world_size=world_size, options=opts, dtypes=dtypes,
                devices=[device], max_examples=args.max_examples, backward=not args.forward_only,
                seed=cell_seed(run_seed, cell), boundaries=boundaries,
                deterministic=args.deterministic, **size_knobs(args),
            )  # fmt: skip
            reports.append(report)
            if in_group and broken_group() is not None:
                break  # ranks were lost: no later row can run on this group
    broken = broken_group() if in_group else None
    if broken is not None and dist.get_rank() != 0:
        err.write(f"rank {dist.get_rank()}: {broken}\n")
    if speak:
        flags = [*replay_flags(args), *budget_flags(args.max_examples, boundaries)]
        results: list[dict[str, Any]] = []
        for (name, _, opts), cell, report in zip(rows, cells, reports, strict=False):
            # A row's fields, for the table and ``--json`` (the group is the report's ``sharded``).
            world = report.sharded.world_size if report.sharded is not None else 0
            group = ["--sharding", sharding, "--world-size", str(world), *flags]
            fields = {"implementation": name, "options": list(opts), "device": device}
            results.append(result_row(report, cell, run_seed, group, **fields))
        emit_results(args, results, reports, run_seed=run_seed, columns=_COLUMNS, out=out, err=err)
    if in_group and broken is None:
        dist.barrier()
    return 0 if all(r.passed for r in reports) else 1


def _run_seed(seed: int | None, in_group: bool) -> int:
    """The run's seed: ``seed``, or drawn at random (under torchrun, by rank 0 for all)."""
    if seed is not None:
        return seed
    drawn = [draw_seed()]
    if in_group:
        dist.broadcast_object_list(drawn, src=0)
    return drawn[0]


#: The columns of the sharded results table after "result" (see ``emit_results``).
_COLUMNS = ("implementation", "options", "sharding", "world size#", "examples#", "seconds#")
