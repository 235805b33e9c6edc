"""The console script ``embedding-equivalence``: ``verify``, ``demo`` and ``bench``.

Exit codes: 0 when everything passed, 1 when a verification failed (the runnable repro is
printed), 2 on a usage error (one line on stderr, no traceback).

Results go to stdout and progress to stderr, through
[`_console`][embedding_equivalence._console]: a progress bar and a rich table on a terminal,
plain lines in a pipe, a file or under ``CI``. A bare ``--json`` puts the JSON alone on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO

import torch
from hypothesis.errors import InvalidArgument

from ._console import Progress, Table, print_table, write_json, write_title
from ._usage import UsageError, int_at_least
from .forms.options import BAG_OPTIONS, EMBEDDING_OPTIONS
from .forms.registry import forms

__all__ = ["UsageError", "main"]

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
#: Examples per row of the default ``verify`` table (implementation x options x device x dtype).
DEFAULT_CLI_EXAMPLES = 25
_RESULT_COLUMNS = (
    "result",
    "implementation",
    "options",
    "device",
    "dtype",
    "examples",
    "worst/bound",
    "seconds",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


@dataclass(frozen=True)
class _Target:
    name: str
    fn: Callable[..., Any]
    options: tuple[str, ...]
    bag: bool


def _package_targets(bag_only: bool) -> list[_Target]:
    """The package's public forms, from the registry, each with every option it takes."""
    kinds = ("bag",) if bag_only else ("embedding", "bag")
    return [
        _Target(f.name, f.fn, f.options, f.kind == "bag")
        for f in forms(public=True)
        if f.kind in kinds
    ]


@contextlib.contextmanager
def _working_directory_importable() -> Iterator[None]:
    """Like ``python -m``: modules in the working directory import (workers inherit it)."""
    sys.path.insert(0, os.getcwd())
    try:
        yield
    finally:
        sys.path.remove(os.getcwd())


def _load_candidate(spec: str) -> Callable[..., Any]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"--candidate {spec!r}: expected MODULE:FUNCTION, e.g. mypkg.kernels:embed"
        )
    with _working_directory_importable():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UsageError(
                f"--candidate {spec!r}: cannot import module {module_name!r} ({exc})"
            ) from None
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise UsageError(f"--candidate {spec!r}: module {module_name!r} has no {attr!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise UsageError(f"--candidate {spec!r}: {attr!r} is not callable")
    return fn


def _size(value: str) -> int | tuple[int, int]:
    """``N`` or an inclusive ``LO:HI`` range of positive ints."""
    lo, sep, hi = value.partition(":")
    try:
        bounds = (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise UsageError(f"{value!r} is not N or LO:HI, e.g. 50257 or 1000:4000") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise UsageError(f"{value!r} must satisfy 1 <= LO <= HI")
    return bounds if sep else bounds[0]


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


_positive_int = int_at_least(1)
_nonnegative_int = int_at_least(0)


def _verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import embedding_equivalence as ee
    from embedding_equivalence import strategies as ees

    try:
        dtypes = [_DTYPES[d] for d in args.dtypes] if args.dtypes else None
    except KeyError as exc:
        raise UsageError(
            f"--dtypes: unknown dtype {exc.args[0]!r}; choose from {', '.join(_DTYPES)}"
        ) from None
    devices = args.devices or ees.available_devices()
    for d in devices:
        try:
            kind = torch.device(d).type
        except RuntimeError:
            raise UsageError(f"--devices: {d!r} is not a device name") from None
        if kind not in ees.available_devices():
            raise UsageError(
                f"--devices: {d!r} is not available here (available: "
                f"{', '.join(ees.available_devices())})"
            )
    if args.sharding is not None:
        return _verify_sharded(args, dtypes, devices, out, err)
    if args.scheme is None and args.symmetric:
        raise UsageError("--symmetric goes with --scheme int8")
    if args.scheme is not None:
        _check_quantized_args(args)
    if args.bag and args.num_ids is not None:
        raise UsageError("--num-ids: the bag verifier draws its own bags; drop --num-ids")
    allowed = BAG_OPTIONS if args.bag else EMBEDDING_OPTIONS
    if args.options is not None:
        unknown = [o for o in args.options if o not in allowed]
        if unknown:
            raise UsageError(
                f"--options: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}"
            )

    if args.candidate:
        fn = _load_candidate(args.candidate)
        targets = [_Target(args.candidate, fn, tuple(args.options or ()), args.bag)]
        option_sets = {args.candidate: [tuple(args.options or ())]}
    elif args.scheme is not None:
        lookup = functools.partial(ee.lookup_quantized_embedding, scheme=args.scheme)
        targets = [_Target(f"lookup_quantized_embedding[{args.scheme}]", lookup, (), False)]
        option_sets = {targets[0].name: [()]}
    else:
        targets = _package_targets(bag_only=args.bag)
        option_sets = {
            t.name: [(), tuple(o for o in (args.options or t.options) if o in t.options)]
            for t in targets
        }

    columns: list[tuple[str, torch.dtype]] = []
    for dev in devices:
        supported = ees.supported_float_dtypes(dev)
        default = ees.QUANTIZED_SCALE_DTYPES if args.scheme else supported
        for dt in dtypes or default:
            if dt in supported:
                columns.append((dev, dt))
    jobs = [
        (t, opts, dev, dt)
        for t in targets
        for opts in dict.fromkeys(option_sets[t.name])
        for dev, dt in columns
    ]
    results: list[dict[str, Any]] = []
    failures: list[ee.VerificationReport] = []
    with Progress("verify", len(jobs), err) as progress:
        for target, opts, dev, dt in jobs:
            progress.step(f"{target.name} [{','.join(opts) or '-'}] {dev}-{_dtype_name(dt)}")
            sizes: dict[str, Any] = {"vocab_sizes": args.vocab_sizes, "dims": args.dims}
            if not target.bag:
                sizes["num_ids"] = args.num_ids
            if args.scheme is not None:  # a quantized table: no options, forward only
                verify: Callable[..., ee.VerificationReport] = functools.partial(
                    ee.verify_quantized_embedding, scheme=args.scheme, symmetric=args.symmetric
                )
            else:
                verify = functools.partial(
                    ee.verify_embedding_bag if target.bag else ee.verify_embedding,
                    options=opts,
                    backward=not args.forward_only,
                )
            try:
                report = verify(
                    target.fn,
                    dtypes=[dt],
                    devices=[dev],
                    max_examples=args.max_examples,
                    seed=args.seed,
                    **sizes,
                )
            except InvalidArgument as exc:  # a size that does not fit, refused before drawing
                raise UsageError(str(exc)) from None
            results.append(
                {
                    "implementation": target.name,
                    "options": list(opts),
                    "device": dev,
                    "dtype": _dtype_name(dt),
                    "passed": report.passed,
                    "examples": report.examples,
                    "worst_error": (
                        report.worst_error if math.isfinite(report.worst_error) else None
                    ),
                    "seed": report.seed,
                    "seconds": round(report.elapsed, 3),
                    "failure": report.failure,
                    "counterexample": report.counterexample,
                }
            )
            if not report.passed:
                failures.append(report)

    total = sum(r["examples"] for r in results)
    seconds = sum(r["seconds"] for r in results)
    summary = (
        f"{len(results) - len(failures)} passed, {len(failures)} failed "
        f"({total} examples in {seconds:.1f} s)"
    )
    if args.json is not None:
        payload = {
            "schema": "embedding-equivalence/verify/1",
            "torch": torch.__version__,
            "max_examples": args.max_examples,
            "passed": not failures,
            "results": results,
        }
        write_json(payload, args.json, out)
    if args.json == "-":  # stdout holds the JSON alone; the summary goes with the progress
        err.write(summary + "\n")
        return 1 if failures else 0
    table = Table(_RESULT_COLUMNS, right=(5, 6, 7))
    for r in results:
        worst = "-" if r["worst_error"] is None or not r["passed"] else f"{r['worst_error']:.2f}"
        table.add_row(
            "pass" if r["passed"] else "FAIL",
            r["implementation"],
            ",".join(r["options"]) or "-",
            r["device"],
            r["dtype"],
            str(r["examples"]),
            worst,
            f"{r['seconds']:.1f}",
            style=None if r["passed"] else "bold red",
        )
    print_table(out, table)
    judged = "output" if args.scheme else "gradient"
    out.write(f"\nworst/bound: the worst {judged} error as a fraction of its derived bound\n")
    for report in failures:
        out.write(f"\n{report}\n")
    out.write(f"\n{summary}\n")
    return 1 if failures else 0


def _check_quantized_args(args: argparse.Namespace) -> None:
    """Refuse what a quantized verification cannot take."""
    from .forms.quantized import SCHEMES

    if args.scheme not in SCHEMES:
        raise UsageError(f"--scheme: unknown {args.scheme!r}; choose from {', '.join(SCHEMES)}")
    if args.symmetric and args.scheme != "int8":
        raise UsageError(f"--symmetric applies to --scheme int8 only, not {args.scheme}")
    for flag, given in (("--bag", args.bag), ("--options", args.options)):
        if given:
            raise UsageError(f"--scheme: a quantized lookup takes no {flag}; drop {flag}")


def _verify_sharded(
    args: argparse.Namespace,
    dtypes: list[torch.dtype] | None,
    devices: list[str],
    out: TextIO,
    err: TextIO,
) -> int:
    from .distributed._cli import run_sharded_verify

    if args.bag:
        raise UsageError("--sharding: sharded embedding bags are not supported; drop --bag")
    if len(devices) != 1:
        raise UsageError(f"--sharding: give one device with --devices, got {','.join(devices)}")
    candidate = (args.candidate, _load_candidate(args.candidate)) if args.candidate else None
    with _working_directory_importable():  # the workers import the candidate by name too
        return run_sharded_verify(
            sharding=args.sharding, world_size=args.world_size, candidate=candidate,
            options=args.options, dtypes=dtypes, device=devices[0],
            max_examples=args.max_examples, backward=not args.forward_only, seed=args.seed,
            json_path=args.json, out=out, err=err,
        )  # fmt: skip


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import embedding_equivalence as ee

    torch.set_printoptions(precision=4, sci_mode=False)

    def show(title: str, value: object) -> None:
        out.write("\n")
        write_title(out, title)
        out.write(f"{value}\n")

    idx = torch.tensor([2, 3, 1])
    with torch.random.fork_rng():
        torch.manual_seed(123)
        embedding = torch.nn.Embedding(4, 5)
    weight = embedding.weight
    out.write("torch.manual_seed(123); embedding = torch.nn.Embedding(4, 5)\n")
    show("embedding.weight  (V=4 rows, D=5 columns)", weight.detach())
    show("ids", idx)
    looked_up = ee.lookup_embedding(idx, weight)
    show("lookup: embedding.weight[ids]  (rows 2, 3, 1)", looked_up.detach())
    one_hot = torch.nn.functional.one_hot(idx, 4)
    show("one_hot(ids, 4)", one_hot)
    product = ee.matmul_embedding(idx, weight)
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


def _bench(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from . import bench

    return bench.main(list(rest))


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="embedding-equivalence",
        description="An embedding lookup and a one-hot matmul are the same function: "
        "verify it, see it, measure it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser(
        "verify",
        help="verify the package's implementations, or your kernel, against the float64 oracle",
    )
    v.add_argument(
        "--candidate",
        metavar="MODULE:FUNCTION",
        help="check this function (F.embedding's signature; F.embedding_bag's with --bag)",
    )
    v.add_argument("--bag", action="store_true", help="embedding-bag implementations")
    v.add_argument(
        "--sharding",
        choices=("vocab", "dim"),
        help="verify sharded embeddings over torch.distributed: the package's forms or "
        "--candidate, with the table split by rows (vocab) or columns (dim)",
    )
    v.add_argument(
        "--world-size",
        type=_positive_int,
        default=2,
        help="ranks to start with --sharding (default 2; under torchrun, torchrun's)",
    )
    v.add_argument(
        "--scheme",
        metavar="SCHEME",
        help="verify a quantized lookup (int8, uint4, float8_e4m3fn, float8_e5m2): the "
        "package's, or --candidate with the signature (input, qweight, scale, zero_point)",
    )
    v.add_argument(
        "--symmetric", action="store_true", help="with --scheme int8: tables without zero points"
    )
    v.add_argument("--options", type=_csv, help="comma-separated options to exercise")
    v.add_argument("--dtypes", type=_csv, help="comma-separated: float32,float64,float16,bfloat16")
    v.add_argument("--devices", type=_csv, help="comma-separated devices (default: all present)")
    v.add_argument(
        "--max-examples",
        type=_positive_int,
        default=DEFAULT_CLI_EXAMPLES,
        help=f"examples per table cell (default {DEFAULT_CLI_EXAMPLES})",
    )
    for flag, what in [("--vocab-sizes", "V"), ("--dims", "D"), ("--num-ids", "N, ids a call")]:
        v.add_argument(
            flag, type=_size, metavar="N|LO:HI", help=f"{what}: a value or a range (default: drawn)"
        )
    v.add_argument("--seed", type=_nonnegative_int, help="fix Hypothesis's seed to replay a run")
    v.add_argument("--forward-only", action="store_true", help="skip the gradient checks")
    v.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="the results as JSON: alone on stdout (progress stays on stderr), or written to "
        "PATH (- is stdout) beside the table",
    )
    sub.add_parser("demo", help="the worked example: seed 123, a 4x5 table, ids [2, 3, 1]")
    sub.add_parser(
        "bench",
        help="time and memory of lookup vs one-hot matmul (options: bench --help)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 a failed verification, 2 a usage error.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    try:
        if args_list[:1] == ["bench"]:
            return _bench(argparse.Namespace(), args_list[1:])
        args = parser.parse_args(args_list)
        if args.command == "verify":
            return _verify(args, sys.stdout, sys.stderr)
        if args.command == "demo":
            return _demo(args, sys.stdout, sys.stderr)
    except UsageError as exc:
        sys.stderr.write(f"embedding-equivalence: error: {exc}\n")
        return 2
    raise AssertionError("unreachable")  # pragma: no cover
