"""The ``bench`` command line: ``main(argv)``, its options, the sweep and ``--compare``.

``python benchmarks/efficiency.py ARGS`` calls [`main`][]. A bad command line raises
[`UsageError`][embedding_equivalence._cli.usage.UsageError] inside and ends as one line on stderr
with exit status 2. The report goes to stdout and the progress to stderr, through
[`console`][embedding_equivalence._cli.console]; a bare ``--json`` puts the results as JSON alone
on stdout.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn, TextIO

import torch

from embedding_equivalence._cli.console import Progress, write_json
from embedding_equivalence._cli.usage import UsageError, int_at_least

from .compare import (
    IMPLEMENTATIONS,
    RATIO_NOTE,
    comparison_table,
    evaluate_targets,
    format_targets,
    run_benchmark,
)
from .console import print_table
from .machine import format_machine, load_average, machine_info
from .plots import require_matplotlib
from .report import format_calibration, headline_table, ratio_summary, sweep_table, write_outputs
from .sweep import SweepSizes, run_sweep
from .timing import CLOCKS, DTYPES, MODES, Clock, Timing, dtype_name

__all__ = ["main"]

SWEEP_DEFAULTS: dict[str, Any] = {
    "n": 1024,
    "d": 256,
    "vocab": (1024, 4096, 16384, 50257, 262144),
    "dims": (64, 256, 768),
    "ns": (256, 1024, 4096),
    "base_vocab": 50257,
    "min_run_time": 0.25,
}
#: ``--quick``: small sizes and short timing, well under a minute on two cores.
SWEEP_QUICK: dict[str, Any] = {
    "n": 256,
    "d": 64,
    "vocab": (1024, 8192, 50257),
    "dims": (128,),
    "ns": (1024,),
    "base_vocab": 8192,
    "min_run_time": 0.03,
}
#: Defaults and ``--quick`` sizes of ``--compare`` (the form-vs-raw comparison).
DEFAULT_VOCABS = (1024, 8192, 50257)
QUICK = {"n": 256, "d": 64, "vocab": (128, 1024, 8192), "min_run_time": 0.06}

_PROG = "python benchmarks/efficiency.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


_positive_int = int_at_least(1)


def _positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not x > 0 or not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{value!r} must be a positive number")
    return x


def _int_list(value: str) -> list[int]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{value!r} holds no size; e.g. 1024,8192")
    return [_positive_int(p) for p in parts]


def _flatten(values: Sequence[Sequence[int]] | None) -> list[int] | None:
    if not values:
        return None
    return list(dict.fromkeys(v for group in values for v in group))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=_PROG,
        description=(
            "Time and peak memory of the lookup, the dense one-hot matmul, the linear layer and "
            "the sparse matmul, forward and forward+backward, over sweeps of V, D and N, beside "
            "a roofline model calibrated on this machine; writes JSON, CSV and plots. "
            "--compare instead times each form beside the raw torch call it wraps. The report "
            "goes to stdout, the progress to stderr: a progress bar and tables on a terminal, "
            "plain lines elsewhere or when the environment variable CI is set."
        ),
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="the form-vs-raw-torch comparison and its three targets instead of the sweep",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and short timing, well under a minute (sweep: N=256, D=64, "
        "V=1024,8192,50257, D=64,128, N=256,1024; compare: N=256, D=64, V=128,1024,8192)",
    )
    p.add_argument(
        "--n", type=_positive_int, help="base number of ids N (default 1024; compare 2048)"
    )
    p.add_argument(
        "--d", type=_positive_int, help="base embedding dim D (default 256; compare 768)"
    )
    p.add_argument(
        "--vocab",
        action="append",
        type=_int_list,
        metavar="V[,V...]",
        help="the V sweep, at the base N and D; repeatable (default 1024,4096,16384,50257,"
        "262144; compare 1024,8192,50257)",
    )
    p.add_argument(
        "--dims",
        action="append",
        type=_int_list,
        metavar="D[,D...]",
        help="the D sweep, at V=--base-vocab (default 64,256,768)",
    )
    p.add_argument(
        "--ns",
        action="append",
        type=_int_list,
        metavar="N[,N...]",
        help="the N sweep, at V=--base-vocab (default 256,1024,4096)",
    )
    p.add_argument(
        "--base-vocab", type=_positive_int, help="V of the D and N sweeps (default 50257)"
    )
    p.add_argument("--dtype", choices=list(DTYPES), default="float32", help="weight dtype")
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda or cuda:K (default: cuda when present, else cpu)",
    )
    p.add_argument(
        "--threads", type=_positive_int, default=1, help="torch intra-op threads (default 1)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the input generator")
    p.add_argument(
        "--min-run-time",
        type=_positive_float,
        help="seconds of measurement per case (sweep default 0.25, 0.03 with --quick; "
        "compare 0.5, 0.06 with --quick)",
    )
    p.add_argument(
        "--rounds",
        type=_positive_int,
        help="interleaved rounds over the forms of a point (sweep default 1, compare 3)",
    )
    p.add_argument(
        "--clock",
        choices=["auto", *CLOCKS],
        default="auto",
        help="wall: elapsed time; cpu: process CPU time, which ignores the time spent "
        "waiting for a core on a loaded machine (one thread only). auto: cpu for the sweep "
        "with one CPU thread, else wall",
    )
    p.add_argument(
        "--out",
        default="bench-results",
        metavar="DIR",
        help="folder for bench.json, bench.csv and the plots (default bench-results/)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")
    p.add_argument("--no-plots", action="store_true", help="skip the plots (no matplotlib)")
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="the results as JSON (the sweep: bench.json's content; --compare: the machine, "
        "the settings, the measurements and the targets): alone on stdout, with the sweep's "
        "files still written to DIR; or written to PATH (- is stdout) beside the printed report",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"--device: {name!r} is not a device name, e.g. cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device: CUDA is not available here; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"--device: {name!r} is not supported; use cpu or cuda")
    return device


def _compare_main(args: argparse.Namespace, device: torch.device, out: TextIO, err: TextIO) -> int:
    quick: bool = args.quick
    num_ids: int = args.n if args.n is not None else (int(QUICK["n"]) if quick else 2048)
    dim: int = args.d if args.d is not None else (int(QUICK["d"]) if quick else 768)
    vocabs = _flatten(args.vocab) or list(QUICK["vocab"] if quick else DEFAULT_VOCABS)
    min_run_time: float = (
        args.min_run_time
        if args.min_run_time is not None
        else (float(QUICK["min_run_time"]) if quick else 0.5)
    )
    dtype = DTYPES[args.dtype]
    threads: int = args.threads
    rounds: int = args.rounds or 3
    clock: Clock = "wall" if args.clock == "auto" else args.clock
    torch.set_num_threads(threads)

    info = machine_info(torch.get_num_threads(), dtype, device, clock)
    printed = args.json != "-"  # the printed report, unless stdout holds the JSON alone
    if printed:
        out.write(
            f"{format_machine(info)}\n"
            f"N={num_ids} ids, D={dim}, V in {vocabs}, seed {args.seed}; median ms of "
            f"torch.utils.benchmark.Timer.blocked_autorange ({clock} clock), {rounds} "
            f"interleaved rounds of min_run_time={min_run_time / rounds:.3g} s per "
            "implementation\n"
        )
        out.flush()
    groups = len({i.form for i in IMPLEMENTATIONS}) * len(MODES)
    with Progress("bench", groups, err, enabled=not args.quiet) as progress:
        measurements = run_benchmark(
            num_ids=num_ids,
            dim=dim,
            vocabs=vocabs,
            dtype=dtype,
            seed=args.seed,
            timing=Timing(threads, clock, min_run_time, rounds),
            progress=progress.step,
            device=device,
        )
    targets = evaluate_targets(measurements)
    load_after = load_average()
    if printed:
        table, errors = comparison_table(measurements)
        out.write("\n")
        print_table(out, table)
        out.write(f"\n{RATIO_NOTE}\n")
        out.writelines(f"error: {e}\n" for e in errors)
        out.write(f"\n{format_targets(targets)}\n")
        out.write(f"load average after the run: {load_after}\n")
    if args.json is not None:
        payload = {
            "machine": info,
            "config": {
                "num_ids": num_ids,
                "dim": dim,
                "vocabs": vocabs,
                "dtype": dtype_name(dtype),
                "threads": threads,
                "seed": args.seed,
                "min_run_time": min_run_time,
                "rounds": rounds,
                "clock": clock,
            },
            "load_after": load_after,
            "measurements": [asdict(m) for m in measurements],
            "targets": [asdict(t) for t in targets],
        }
        write_json(payload, args.json, out)
    return 0


def _sweep_main(args: argparse.Namespace, device: torch.device, out: TextIO, err: TextIO) -> int:
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out: {str(folder)!r} exists and is not a folder")
    plots = not args.no_plots
    if plots:
        require_matplotlib()
    preset = SWEEP_QUICK if args.quick else SWEEP_DEFAULTS
    sizes = SweepSizes(
        num_ids=args.n or preset["n"],
        dim=args.d or preset["d"],
        vocabs=tuple(_flatten(args.vocab) or preset["vocab"]),
        dims=tuple(_flatten(args.dims) or preset["dims"]),
        ns=tuple(_flatten(args.ns) or preset["ns"]),
        base_vocab=args.base_vocab or preset["base_vocab"],
    )
    min_run_time: float = args.min_run_time or preset["min_run_time"]
    dtype = DTYPES[args.dtype]
    threads: int = args.threads
    if args.clock == "auto":
        clock: Clock = "cpu" if device.type == "cpu" and threads == 1 else "wall"
    else:
        clock = args.clock
    if device.type == "cuda" and clock == "cpu":
        raise UsageError("--clock cpu cannot time CUDA kernels; use --clock wall")
    torch.set_num_threads(threads)
    report = run_sweep(
        sizes,
        dtype=dtype,
        device=device,
        seed=args.seed,
        timing=Timing(threads, clock, min_run_time, args.rounds or 1),
        memory=not args.no_memory,
        progress=not args.quiet,
    )
    report.config["quick"] = args.quick
    if args.json == "-":  # stdout holds the JSON alone; the note goes with the progress
        paths = write_outputs(report, folder, plots=plots)
        write_json(report.to_json(), "-", out)
        if not args.quiet:
            err.write(_wrote(paths, report.seconds) + "\n")
        return 0
    out.write(f"{format_machine(report.machine)} | clock: {report.config['clock']}\n")
    out.write(f"{format_calibration(report.calibration)}\n\n")
    print_table(out, headline_table(report))
    out.write("\n")
    print_table(out, sweep_table(report))
    out.write(f"\n{ratio_summary(report)}\n")
    if report.notes:
        out.write("\nnotes:\n")
        out.write("".join(f"  {note}\n" for note in report.notes))
    paths = write_outputs(report, folder, plots=plots)
    if args.json is not None:
        write_json(report.to_json(), args.json, out)
        paths.append(Path(args.json))
    out.write(f"\n{_wrote(paths, report.seconds)}\n")
    return 0


def _wrote(paths: Sequence[Path], seconds: float) -> str:
    return f"wrote {', '.join(str(p) for p in paths)} ({seconds:.0f} s)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line (``python benchmarks/efficiency.py ARGS``).

    Args:
        argv: the arguments (without the program name); ``None`` reads ``sys.argv``.

    Returns:
        The exit status: 0, or 2 on a usage error (one line on stderr). A performance target
        that does not hold, or a ratio outside the model's band, is reported, not an error.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    threads_before = torch.get_num_threads()
    try:
        args = _parser().parse_args(args_list)
        device = _resolve_device(args.device)
        if args.compare:
            return _compare_main(args, device, sys.stdout, sys.stderr)
        return _sweep_main(args, device, sys.stdout, sys.stderr)
    except UsageError as exc:
        sys.stderr.write(f"{_PROG}: error: {exc}\n")
        return 2
    finally:
        torch.set_num_threads(threads_before)
