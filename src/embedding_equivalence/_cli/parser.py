"""The console script's command line: its parser, the argument types and the defaults.

[`build_parser`][] is the one description of ``embedding-equivalence``'s flags; a bad command
line raises [`UsageError`][embedding_equivalence._cli.usage.UsageError] (exit status 2)
instead of printing argparse's usage. [`replay_flags`][] and [`budget_flags`][] write a run's
flags back, for the command that replays one of its cells.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any, NoReturn

import torch

from .. import __version__
from .._engine.bench import DEFAULT_BENCH_SIZES
from .usage import UsageError, csv_list, int_at_least

#: Examples per row of the default ``verify`` table (implementation x options x device x dtype).
DEFAULT_CLI_EXAMPLES = 25

#: The size knobs' flags, in the order of the verifiers' keywords (see [`size_knobs`][]).
SIZE_FLAGS = ("--vocab-sizes", "--embedding-dims", "--num-ids")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _size(value: str) -> int | tuple[int, int]:
    """``N`` or an inclusive ``LO:HI`` range of positive ints."""
    lo, sep, hi = value.partition(":")
    try:
        bounds = (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not N or LO:HI, e.g. 50257 or 1000:4000"
        ) from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"{value!r} must satisfy 1 <= LO <= HI")
    return bounds if sep else bounds[0]


def build_parser() -> _Parser:
    """The parser of ``embedding-equivalence``: its subcommands ``verify``, ``demo``, ``bench``."""
    parser = _Parser(
        prog="embedding-equivalence",
        description="An embedding lookup and a one-hot matmul are the same function: "
        "verify it, see it, measure it.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} (torch {torch.__version__})"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser(
        "verify",
        help="verify the package's implementations, or your kernel, against the float64 oracle",
        description="Verify the package's implementations, or your kernel, against the float64 "
        "oracle: a table of cells, one per implementation x options x device x dtype.",
        epilog="Seeds: a run has one seed (--seed, or drawn at random), printed with the "
        "summary and in the JSON. Each cell verifies under its own seed: the first 4 bytes, "
        "big-endian, of sha256('RUN_SEED/CELL'), CELL written as --only takes it; the JSON "
        "records it as the row's seed. A failing cell prints the command that replays it: "
        "embedding-equivalence verify --seed RUN_SEED --only CELL, with the run's other flags. "
        "Boundaries: every verification begins with fixed boundary examples (the same under "
        "every seed). With several dtypes, a first row of each implementation x options x "
        "device runs them once for all its dtypes (they take turns) with one random example, "
        "and the rows of one dtype run the random examples.",
    )
    helps = {
        "--candidate": "check this function (F.embedding's signature; F.embedding_bag's with "
        "--bag); the module may be a file, as in path/to/kernels.py:embed",
        "--triton-interpret": "run --candidate's Triton kernels on the CPU under Triton's "
        "interpreter: sets TRITON_INTERPRET=1 before the candidate's module is imported "
        "(refused if triton was imported without it)",
        "sizes": "{what}: a value or a range (default: drawn)",
        "--seed": "the run's seed, to replay a run (default: drawn at random; printed either "
        "way); each cell verifies under its own seed, derived from it",
        "--forward-only": "skip the gradient checks",
        "--json": "the results as JSON: alone on stdout (progress stays on stderr), or written "
        "to PATH (- is stdout) beside the table",
    }
    _shared_flags(v, helps, type=_size, metavar="N|LO:HI")
    switch = functools.partial(v.add_argument, action="store_true")
    switch("--bag", help="embedding-bag implementations")
    v.add_argument(
        "--sharding",
        choices=("vocab", "dim"),
        help="verify sharded embeddings over torch.distributed: the package's forms or "
        "--candidate, with the table split by rows (vocab) or columns (dim)",
    )
    positive = functools.partial(v.add_argument, type=int_at_least(1))
    positive(
        "--world-size",
        help="ranks to start with --sharding (default 2; under torchrun, torchrun's)",
    )
    v.add_argument(
        "--scheme",
        help="verify a quantized lookup (int8, uint4, float8_e4m3fn, float8_e5m2): the "
        "package's, or --candidate with the signature (input, qweight, scale, zero_point)",
    )
    switch("--symmetric", help="with --scheme int8: tables without zero points")
    comma_separated = functools.partial(v.add_argument, type=csv_list)
    comma_separated("--options", help="comma-separated options to exercise")
    comma_separated("--dtypes", help="comma-separated: float32,float64,float16,bfloat16")
    comma_separated("--devices", help="comma-separated devices (default: all present)")
    positive(
        "--max-examples",
        default=DEFAULT_CLI_EXAMPLES,
        help=f"examples per table cell (default {DEFAULT_CLI_EXAMPLES})",
    )
    v.add_argument(
        "--only",
        metavar="IMPL/OPTIONS/DEVICE/DTYPE",
        help="verify one cell (row) of the table, e.g. lookup_embedding/padding_idx/cpu/float32 "
        "(OPTIONS and DTYPE comma-separated, - for no options; with --sharding, DTYPE may be "
        "all); with the run's --seed it replays that cell: a failing cell prints the command",
    )
    switch(
        "--deterministic",
        help="run each example once more: the two runs' outputs and gradients must agree bit "
        "for bit",
    )
    switch(
        "--no-boundaries",
        help="skip the boundary phase (the fixed examples at sizes around powers of two, edge "
        "shapes and bad input that run before the random ones)",
    )
    sub.add_parser("demo", help="the worked example: seed 123, a 4x5 table, ids [2, 3, 1]")
    _bench_parser(sub)
    return parser


def _sizes(value: str) -> list[int]:
    """Comma-separated positive ints: ``1000,50257``."""
    return [int_at_least(1)(v) for v in csv_list(value)]


def _bench_parser(sub: Any) -> None:
    b = sub.add_parser(
        "bench",
        help="time a kernel that passes verification against F.embedding, at your sizes",
        description="Verify --candidate (as verify --candidate does, on one dtype and device), "
        "then time it beside F.embedding with torch.utils.benchmark, forward and forward+"
        "backward, at every combination of the sizes given. A kernel that fails verification "
        "is not timed (exit status 1): a fast wrong kernel has no speed.",
    )
    helps = {
        "--candidate": "the kernel, with F.embedding's signature (the module may be a file)",
        "--triton-interpret": "run --candidate's Triton kernels under Triton's interpreter "
        "(CPU speed)",
        "sizes": "{what} to time, comma-separated (default {default:,})",
        "--seed": "verification seed (default 0)",
        "--forward-only": "time the forward pass alone",
        "--json": "the timings as JSON: alone on stdout, or written to PATH beside the table",
    }
    _shared_flags(b, helps, required=True, type=_sizes, metavar="N[,N...]")
    b.add_argument("--dtype", default="float32", help="the table's dtype (default float32)")
    b.add_argument("--device", default="cpu", help="where to run (default cpu)")
    b.add_argument(
        "--min-run-time", type=float, default=0.2, metavar="SECONDS",
        help="seconds each of a size's four measurements runs at least (default 0.2)",
    )  # fmt: skip
    # The seed's default (verify's is drawn), and what --candidate's check reads, for a kernel
    # of F.embedding's kind.
    b.set_defaults(seed=0, sharding=None, scheme=None, bag=False, options=None)


def _shared_flags(
    parser: argparse.ArgumentParser, helps: dict[str, str], *, required: bool = False, **sizes: Any
) -> None:
    """Add the flags ``verify`` and ``bench`` share, each with the command's help text.

    Args:
        parser: the command's parser.
        helps: the help texts, by flag; ``"sizes"``'s, the size flags' ([`SIZE_FLAGS`][]), is
            formatted with ``what`` (the size) and ``default`` (its default in ``bench``).
        required: whether the command needs ``--candidate``.
        **sizes: how a size flag is read: its ``type`` and ``metavar``.
    """
    add = parser.add_argument
    switch = functools.partial(add, action="store_true")
    add("--candidate", metavar="MODULE:FUNCTION", required=required, help=helps["--candidate"])
    switch("--triton-interpret", help=helps["--triton-interpret"])
    whats, defaults = ("V", "D", "N, ids a call"), DEFAULT_BENCH_SIZES.values()
    for flag, what, default in zip(SIZE_FLAGS, whats, defaults, strict=True):
        add(flag, **sizes, help=helps["sizes"].format(what=what, default=default[0]))
    add("--seed", type=int_at_least(0), help=helps["--seed"])
    switch("--forward-only", help=helps["--forward-only"])
    add("--json", nargs="?", const="-", metavar="PATH", help=helps["--json"])


def _dest(flag: str) -> str:
    """The attribute argparse keeps ``flag`` in: ``--forward-only`` is ``forward_only``."""
    return flag.removeprefix("--").replace("-", "_")


def flag_value(args: argparse.Namespace, flag: str) -> Any:
    """The value the command line gave ``flag`` (``None``, or False for a switch, without it)."""
    return getattr(args, _dest(flag))


def size_knobs(args: argparse.Namespace) -> dict[str, Any]:
    """The size knobs of the command line, as the verifiers' keywords (their flags' names)."""
    return {_dest(flag): flag_value(args, flag) for flag in SIZE_FLAGS}


def _flag_text(value: str | int | tuple[int, int]) -> str:
    return f"{value[0]}:{value[1]}" if isinstance(value, tuple) else str(value)


def replay_flags(args: argparse.Namespace) -> list[str]:
    """The flags of this run that shape every cell, for the command that replays one.

    ``--max-examples`` and ``--no-boundaries`` are the cell's own ([`budget_flags`][]).
    """
    values = {flag: flag_value(args, flag) for flag in ("--candidate", "--scheme", *SIZE_FLAGS)}
    flags = [word for flag, v in values.items() if v is not None for word in (flag, _flag_text(v))]
    switches = ("--bag", "--symmetric", "--forward-only", "--deterministic", "--triton-interpret")
    return flags + [flag for flag in switches if flag_value(args, flag)]


def budget_flags(max_examples: int, boundaries: bool) -> list[str]:
    """``--max-examples`` (unless the default) and ``--no-boundaries`` (when off)."""
    flags = ["--max-examples", str(max_examples)] if max_examples != DEFAULT_CLI_EXAMPLES else []
    return flags + ([] if boundaries else ["--no-boundaries"])
