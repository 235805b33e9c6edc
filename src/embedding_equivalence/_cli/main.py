"""The console script ``embedding-equivalence``: ``verify``, ``demo`` and ``bench``.

Exit codes: 0 when everything passed, 1 when a verification failed (the runnable repro is
printed), 2 on a usage error (one line on stderr, no traceback).

Results go to stdout and progress to stderr, through
[`console`][embedding_equivalence._cli.console]: a progress bar and a rich table on a terminal,
plain lines in a pipe, a file or under ``CI``. A bare ``--json`` puts the JSON alone on stdout.

``verify`` runs a table of cells, one per implementation x options x device x dtype, each
named ``IMPLEMENTATION/OPTIONS/DEVICE/DTYPE``. The run has one seed (``--seed``, or drawn at
random), printed with the summary and in the JSON; each cell verifies under its own seed,
[`cell_seed`][embedding_equivalence._cli.console.cell_seed] of the run's seed and the cell's name
(the first 4 bytes of ``sha256("RUN_SEED/CELL")``, big-endian), so that the cells draw
different examples and ``verify --seed RUN_SEED --only CELL`` replays one of them: a failing
cell prints that command. ``--no-boundaries`` turns off the verifiers' boundary phase.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TextIO

import torch
from hypothesis.errors import InvalidArgument

from .._draw.strategies import QUANTIZED_SCALE_DTYPES
from .._draw.tensors import available_devices, device_problem, dtypes_on, float_dtypes
from .._engine.arguments import draw_seed, phase_rows
from .._engine.bench import bench_embedding
from .._engine.check import EquivalenceError
from .._engine.names import import_reference, importable_from
from .._engine.probe import check_candidate
from .._engine.report import VerificationReport, report_fields
from .._engine.triton import switch_interpreter_on
from .._engine.verify import verify_embedding, verify_embedding_bag, verify_quantized_embedding
from ..forms.dtypes import FLOAT_DTYPE_NAMES, dtype_name
from ..forms.lookup import lookup_embedding
from ..forms.matmul import matmul_embedding
from ..forms.options import BAG_OPTIONS, EMBEDDING_OPTIONS
from ..forms.quantized import SCHEMES, lookup_quantized_embedding
from ..forms.registry import forms
from .console import (
    ParsedCell,
    Progress,
    cell_name,
    cell_seed,
    emit_results,
    parse_cell,
    result_row,
    write_json,
    write_title,
)
from .parser import budget_flags, build_parser, flag_value, replay_flags, size_knobs
from .usage import UsageError, csv_list

#: The version of ``bench --json``'s fields.
BENCH_SCHEMA = "embedding-equivalence-bench/1"

#: The columns of the results table after "result" (see ``emit_results``).
_COLUMNS = (
    "implementation", "options", "device", "dtype", "phases", "examples#", "worst/bound#",
    "seconds#",
)  # fmt: skip


@dataclass(frozen=True)
class _Target:
    name: str
    fn: Callable[..., Any]
    options: tuple[str, ...]
    bag: bool


@dataclass(frozen=True)
class _Cell:
    """A row of the table: one verification of ``target``."""

    target: _Target
    options: tuple[str, ...]
    device: str
    dtypes: tuple[torch.dtype, ...]
    max_examples: int
    boundaries: bool


def _cells(cell: _Cell) -> list[_Cell]:
    """The rows of ``cell``'s target with its options on its device ([`phase_rows`][]).

    [`phase_rows`]: embedding_equivalence._engine.arguments.phase_rows
    """
    rows = phase_rows(cell.dtypes, cell.boundaries, cell.max_examples)
    return [replace(cell, dtypes=d, boundaries=b, max_examples=n) for d, b, n in rows]


@contextlib.contextmanager
def _refused(prefix: str = "", kind: type[Exception] = InvalidArgument) -> Iterator[None]:
    """Report an exception of ``kind`` as a usage error: its message, after ``prefix``."""
    try:
        yield
    except kind as exc:
        raise UsageError(f"{prefix}{exc}") from None


def _verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    only = _only(args)
    with _refused():
        dtypes = list(float_dtypes(args.dtypes, "--dtypes")) if args.dtypes else None
    if args.sharding is None and args.world_size is not None:
        raise UsageError("--world-size goes with --sharding (the ranks of a sharded table)")
    devices = args.devices or available_devices()
    _check_shared_flags(args, "--devices", devices)
    if args.sharding is not None:
        from .sharded import run_sharded_verify

        if args.bag:
            raise UsageError("--sharding: sharded embedding bags are not supported; drop --bag")
        if len(devices) != 1:
            raise UsageError(f"--sharding: give one device with --devices, got {','.join(devices)}")
        if args.candidate:
            _candidate(args, devices)
        # Like python -m: modules in the working directory import (the workers inherit it).
        with importable_from(os.getcwd()):
            return run_sharded_verify(args, dtypes, devices[0], only, out, err)
    if args.scheme is None and args.symmetric:
        raise UsageError("--symmetric goes with --scheme int8")
    if args.scheme is not None:
        _check_quantized_args(args)
    allowed = BAG_OPTIONS if args.bag else EMBEDDING_OPTIONS
    if args.options is not None and (only is None or args.candidate):  # else: _only_job
        unknown = [o for o in args.options if o not in allowed]
        if unknown:
            raise UsageError(
                f"--options: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}"
            )

    if args.candidate:
        fn = _candidate(args, devices)
        targets = [_Target(args.candidate, fn, tuple(args.options or ()), args.bag)]
    elif args.scheme is not None:
        lookup = functools.partial(lookup_quantized_embedding, scheme=args.scheme)
        targets = [_Target(f"lookup_quantized_embedding[{args.scheme}]", lookup, (), False)]
    else:  # the package's public forms, each with every option it takes
        targets = [
            _Target(f.name, f.fn, f.options, f.kind == "bag")
            for f in forms("bag" if args.bag else None, public=True)
        ]

    boundaries = not args.no_boundaries
    # The package's forms get a row without options, then one with the options chosen.
    plain = [()] if not args.candidate and args.scheme is None else []
    default_dtypes = QUANTIZED_SCALE_DTYPES if args.scheme else None
    if only is not None:
        jobs = [_only_job(only, targets, args)]
    else:
        jobs = []
        for t in targets:
            chosen = tuple(o for o in (args.options or t.options) if o in t.options)
            for opts in dict.fromkeys([*plain, chosen]):
                for dev in devices:
                    dts = dtypes_on(dev, dtypes or default_dtypes)
                    jobs += _cells(_Cell(t, opts, dev, dts, args.max_examples, boundaries))
    run_seed = args.seed if args.seed is not None else draw_seed()
    flags = replay_flags(args)
    results: list[dict[str, Any]] = []
    reports: list[VerificationReport] = []
    with Progress("verify", len(jobs), err) as progress:
        for job in jobs:
            dtype_text = ",".join(dtype_name(dt) for dt in job.dtypes)
            progress.step(
                f"{job.target.name} [{','.join(job.options) or '-'}] {job.device}-{dtype_text}"
            )
            cell = cell_name(job.target.name, job.options, job.device, dtype_text)
            verify: Callable[..., VerificationReport] = verify_quantized_embedding
            keywords: dict[str, Any] = {"scheme": args.scheme, "symmetric": args.symmetric}
            if args.scheme is None:  # else a quantized table: no options, forward only
                verify = verify_embedding_bag if job.target.bag else verify_embedding
                keywords = {"options": job.options, "backward": not args.forward_only}
            with _refused():  # a size that does not fit, refused before drawing
                report = verify(
                    job.target.fn,
                    **keywords,
                    dtypes=list(job.dtypes),
                    devices=[job.device],
                    max_examples=job.max_examples,
                    seed=cell_seed(run_seed, cell),
                    boundaries=job.boundaries,
                    deterministic=args.deterministic,
                    **size_knobs(args),
                )
            # The flags that give ``--only`` this cell's budget and phases, after the run's.
            cell_flags = [*flags, *budget_flags(job.max_examples, job.boundaries)]
            results.append(result_row(
                report, cell, run_seed, cell_flags, implementation=job.target.name,
                options=list(job.options), device=job.device, dtype=dtype_text,
            ))  # fmt: skip
            reports.append(report)

    checked = "outputs only: --forward-only" if args.forward_only else "outputs and gradients"
    notes = [f"worst/bound: the worst error ({checked}) as a fraction of its bound"]
    if any(len(job.dtypes) > 1 for job in jobs):
        notes.append(
            "a row of several dtypes runs the boundary examples once for them (the dtypes take "
            "turns) and one random example;\nthe rows of one dtype after it run their random "
            "examples"
        )
    emit_results(
        args, results, reports, run_seed=run_seed, columns=_COLUMNS, notes=notes, out=out, err=err
    )
    return 0 if all(r.passed for r in reports) else 1


def _only(args: argparse.Namespace) -> ParsedCell | None:
    """``--only``'s cell, read and checked; ``None`` without it.

    The cell's options, device and dtype take the place of ``--options``, ``--devices`` and
    ``--dtypes`` (which it refuses beside it), so that they are checked as those are.
    """
    if args.only is None:
        return None
    for flag in ("--options", "--devices", "--dtypes"):
        if flag_value(args, flag) is not None:
            raise UsageError(f"--only names the cell's options, device and dtype; drop {flag}")
    implementation, opts, device, dtype = parse_cell(args.only)
    # A cell may draw from several dtypes, comma-separated; a sharded row from all of them.
    names = [] if args.sharding is not None and dtype == "all" else csv_list(dtype)
    if any(d not in FLOAT_DTYPE_NAMES for d in names) or (args.sharding is None and not names):
        choices = [*FLOAT_DTYPE_NAMES, *(["all"] if args.sharding is not None else [])]
        raise UsageError(f"--only: unknown dtype {dtype!r}; choose from {', '.join(choices)}")
    args.options, args.devices, args.dtypes = list(opts), [device], names or None
    return implementation, opts, device, dtype


def _only_job(only: ParsedCell, targets: Sequence[_Target], args: argparse.Namespace) -> _Cell:
    """The one job of ``--only``: its implementation among ``targets``, with its options."""
    implementation, opts, device, dtype_text = only
    by_name = {t.name: t for t in targets}
    if implementation not in by_name:
        raise UsageError(
            f"--only: no implementation {implementation!r} in this run; choose from "
            f"{', '.join(by_name)}"
        )
    target = by_name[implementation]
    if refused := [] if args.candidate else [o for o in opts if o not in target.options]:
        raise UsageError(
            f"--only: {implementation} takes no {', '.join(refused)}; its options are "
            f"{', '.join(target.options) or 'none'}"
        )
    dtypes = tuple(FLOAT_DTYPE_NAMES[d] for d in csv_list(dtype_text))
    if unsupported := [dtype_name(d) for d in dtypes if d not in dtypes_on(device)]:
        raise UsageError(f"--only: {', '.join(unsupported)} not supported on {device}")
    return _Cell(target, opts, device, dtypes, args.max_examples, not args.no_boundaries)


def _check_quantized_args(args: argparse.Namespace) -> None:
    """Refuse what a quantized verification cannot take."""
    if args.scheme not in SCHEMES:
        raise UsageError(f"--scheme: unknown {args.scheme!r}; choose from {', '.join(SCHEMES)}")
    if args.symmetric and args.scheme != "int8":
        raise UsageError(f"--symmetric applies to --scheme int8 only, not {args.scheme}")
    for flag in ("--bag", "--options"):
        if flag_value(args, flag):
            raise UsageError(f"--scheme: a quantized lookup takes no {flag}; drop {flag}")


def _check_shared_flags(args: argparse.Namespace, device_flag: str, devices: list[str]) -> None:
    """Check the flags ``verify`` and ``bench`` share, before the candidate is imported.

    ``--triton-interpret`` is switched on here (refused without ``--candidate``, or where
    triton was imported without it), ``--json``'s file is checked ([`_check_writable`][]), and
    ``devices``, which ``device_flag`` gave, must be present.
    """
    if args.triton_interpret:  # before the candidate's module (and triton) is imported
        if not args.candidate:
            raise UsageError("--triton-interpret goes with --candidate (a Triton kernel)")
        with _refused("--triton-interpret: ", RuntimeError):
            switch_interpreter_on()
    if args.json not in (None, "-"):
        _check_writable(args.json)
    for d in devices:
        if (problem := device_problem(d)) is not None:
            raise UsageError(f"{device_flag}: {d!r} {problem}")


def _check_writable(path: str) -> None:
    """Refuse a ``--json`` path that cannot be written, before the run rather than after it."""
    if os.path.isdir(path):
        raise UsageError(f"--json {path!r} is a directory; give a file name, e.g. {path}/out.json")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--json {path!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--json {path!r}: the folder {folder!r} is not writable")


def _candidate(args: argparse.Namespace, devices: list[str]) -> Callable[..., Any]:
    """``--candidate``, imported; refused, before any cell runs, if it cannot take this run's calls.

    The engine's check (``_engine.probe``), which every verifier makes again: a kernel of
    another kind (an embedding kernel with ``--bag`` or ``--scheme``), an option it does not
    take, swapped arguments, a Triton kernel without ``--triton-interpret`` on a machine
    without a GPU. A usage mistake, not a finding.
    """
    spec = args.candidate
    with importable_from(os.getcwd()), _refused(f"--candidate {spec!r}: ", ValueError):
        fn = import_reference(spec)
    if not callable(fn):
        raise UsageError(f"--candidate {spec!r}: {spec.partition(':')[2]!r} is not callable")
    kind = "sharded_" if args.sharding else "quantized_" if args.scheme else ""
    kind += "embedding_bag" if args.bag else "embedding"
    with _refused(f"--candidate {spec!r}: "):
        check_candidate(f"verify_{kind}", fn, args.options or (), devices, args.scheme)
    return fn


def _bench(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``bench``: verify ``--candidate``, then time it beside ``F.embedding`` (1: it failed)."""
    with _refused():
        (dtype,) = float_dtypes([args.dtype], "--dtype")
    _check_shared_flags(args, "--device", [args.device])
    fn = _candidate(args, [args.device])
    err.write(f"bench: verifying {args.candidate} on {args.dtype}, {args.device}, then timing\n")
    try:
        report = bench_embedding(
            fn, **size_knobs(args), dtype=dtype, device=args.device,
            backward=not args.forward_only, seed=args.seed, min_run_time=args.min_run_time,
        )  # fmt: skip
    except EquivalenceError as exc:
        out.write(f"FAIL {args.candidate}: {exc.message}\n\nRepro:\n{exc.repro}\n")
        out.write("Not timed: a kernel that fails verification has no speed.\n")
        return 1
    if args.json != "-":
        out.write(f"{report}\n")
    if args.json is not None:  # the verification as a row of verify --json holds it
        verification = report_fields(report.verification)
        payload = {"schema": BENCH_SCHEMA, **asdict(report), "verification": verification}
        write_json(payload, args.json, out)
    return 0


def _demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    torch.set_printoptions(precision=4, sci_mode=False)

    def show(title: str, value: object) -> None:
        out.write("\n")
        write_title(out, title)
        out.write(f"{value}\n")

    idx = torch.tensor([2, 3, 1])
    with torch.random.fork_rng():
        torch.manual_seed(123)
        weight = torch.nn.Embedding(4, 5).weight
    out.write("torch.manual_seed(123); embedding = torch.nn.Embedding(4, 5)\n")
    show("embedding.weight  (V=4 rows, D=5 columns)", weight.detach())
    show("ids", idx)
    looked_up = lookup_embedding(idx, weight)
    show("lookup: embedding.weight[ids]  (rows 2, 3, 1)", looked_up.detach())
    show("one_hot(ids, 4)", torch.nn.functional.one_hot(idx, 4))
    product = matmul_embedding(idx, weight)
    show("one_hot(ids, 4).float() @ embedding.weight", product.detach())
    out.write(f"\nidentical bit for bit: {torch.equal(looked_up, product)}\n")
    grad_output = torch.tensor([[1.0] * 5, [10.0] * 5, [100.0] * 5])
    show("upstream gradient G  (one row per id)", grad_output)
    product.backward(grad_output)
    show(
        "weight.grad = one_hot^T @ G: row 2 gets G[0], row 3 gets G[1], row 1 gets G[2], "
        "row 0 nothing",
        weight.grad,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 a failed verification, 2 a usage error.
    """
    try:
        args = build_parser().parse_args(argv)  # None: sys.argv[1:]
        command = {"verify": _verify, "demo": _demo, "bench": _bench}[args.command]
        return command(args, sys.stdout, sys.stderr)
    except UsageError as exc:
        sys.stderr.write(f"embedding-equivalence: error: {exc}\n")
        return 2
