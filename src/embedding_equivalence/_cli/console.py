"""What every command prints through: one rule for rich output or plain lines.

The rule, [`uses_rich`][embedding_equivalence._cli.console.uses_rich]: a stream gets rich's output
when ``rich`` is installed (the ``cli`` extra) and the stream is a terminal
([`is_terminal`][embedding_equivalence._cli.console.is_terminal]: a TTY, with the environment
variable ``CI`` unset or empty). There [`Progress`][embedding_equivalence._cli.console.Progress]
draws a progress bar and [`print_table`][embedding_equivalence._cli.console.print_table] a rich
table. Anywhere else (a pipe, a file, a CI log, or any stream without ``rich``) every step of
the progress is one plain line, and a table is aligned plain text, one line a row, with no ANSI
escape code: the same information either way. Results go to stdout and progress to
stderr, so that ``--json`` keeps stdout to the JSON alone
([`write_json`][embedding_equivalence._cli.console.write_json]).

A ``verify`` run is a table of cells, each named ``IMPLEMENTATION/OPTIONS/DEVICE/DTYPE``
([`cell_name`][embedding_equivalence._cli.console.cell_name]). The run has one seed, drawn at
random unless given; each cell verifies under its own seed,
[`cell_seed`][embedding_equivalence._cli.console.cell_seed]: the first 4 bytes, read big-endian,
of the SHA-256 of ``"RUN_SEED/CELL"``. So the cells of a run draw different examples, the same
run seed gives the same cell seeds on any machine, and ``verify --seed RUN_SEED --only CELL``
replays one cell ([`replay_command`][embedding_equivalence._cli.console.replay_command]).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pathlib
import shlex
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import torch

from .._engine.report import JSON_SCHEMA, VerificationReport, render_text, report_fields
from .usage import UsageError, csv_list

if TYPE_CHECKING:
    import argparse

    import rich.console
    import rich.progress

#: The console script's name, as a replay command writes it.
PROGRAM = "embedding-equivalence"


#: Whether ``rich`` is installed (the "cli" extra, imported where it draws); without it every
#: stream gets the plain lines.
HAS_RICH = importlib.util.find_spec("rich") is not None


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal: a TTY, and ``CI`` unset or empty.

    Args:
        stream: where the output goes, e.g. ``sys.stderr``.

    Returns:
        True for a terminal, False for a pipe, a file or a CI log.
    """
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and not os.environ.get("CI")


def uses_rich(stream: TextIO) -> bool:
    """Whether ``stream`` gets rich's output: ``rich`` is installed and it is a terminal.

    Args:
        stream: where the output goes, e.g. ``sys.stderr``.

    Returns:
        True for a progress bar and rich tables, False for plain lines.
    """
    return HAS_RICH and is_terminal(stream)


def _rich_console(stream: TextIO) -> rich.console.Console:
    import rich.console

    # No markup or highlighting: the text printed (ids, options in brackets, repro code) is
    # shown as it is, styled only where a style is given.
    return rich.console.Console(
        file=stream, force_terminal=True, markup=False, highlight=False, emoji=False
    )


def write_title(stream: TextIO, text: str) -> None:
    """Write a line of ``text``, in bold where [`uses_rich`][].

    Args:
        stream: where it goes.
        text: the line, without its newline.
    """
    if uses_rich(stream):
        _rich_console(stream).print(text, style="bold")
    else:
        stream.write(text + "\n")


@dataclass
class Table:
    """A table of text cells, for [`print_table`][embedding_equivalence._cli.console.print_table].

    Attributes:
        columns: the column headers.
        right: the indices of the columns aligned right (numbers); the others align left.
        rows: ``(cells, style)`` per row, ``style`` a rich style for the whole row on a
            terminal (e.g. ``"bold red"``) or ``None``.
    """

    columns: Sequence[str]
    right: Collection[int] = ()
    rows: list[tuple[tuple[str, ...], str | None]] = field(default_factory=list)

    def add_row(self, *cells: str, style: str | None = None) -> None:
        """Append a row of one cell per column.

        Args:
            *cells: the cells, as text.
            style: a rich style for the row on a terminal.

        Raises:
            ValueError: when there is not one cell per column.
        """
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append((cells, style))

    def plain(self) -> str:
        """The table as aligned plain text: the header, a rule, one line a row.

        Returns:
            The text, without a trailing newline.
        """
        cells = [c for c, _ in self.rows]
        widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(self.columns)]

        def line(row: Sequence[str]) -> str:
            return "  ".join(
                c.rjust(w) if i in self.right else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()

        lines = [line(self.columns), "  ".join("-" * w for w in widths)]
        return "\n".join([*lines, *map(line, cells)])


def print_table(stream: TextIO, table: Table) -> None:
    """Print ``table`` on ``stream``: a rich table where [`uses_rich`][], else [`Table.plain`][].

    Args:
        stream: where it goes, e.g. ``sys.stdout``.
        table: the table.
    """
    if not uses_rich(stream):
        stream.write(table.plain() + "\n")
        return
    import rich.table

    shown = rich.table.Table()
    for i, header in enumerate(table.columns):  # overflow="fold": a narrow terminal wraps
        shown.add_column(header, justify="right" if i in table.right else "left", overflow="fold")
    for cells, style in table.rows:
        shown.add_row(*cells, style=style)
    _rich_console(stream).print(shown)


class Progress:
    """The steps of a long run on ``stream``: rich's progress bar where [`uses_rich`][], else lines.

    A plain line reads ``LABEL [k/total] seconds  what`` and is written when step ``k`` begins;
    on a terminal the bar counts the steps finished and shows what runs now. Use it as a
    context manager: leaving it ends the bar (a plain run ends with a ``done`` line).

    Args:
        label: the command, the first word of every line (e.g. ``"verify"``).
        total: the number of steps.
        stream: where it goes, normally ``sys.stderr``.
        enabled: False shows nothing (``--quiet``).
    """

    def __init__(self, label: str, total: int, stream: TextIO, *, enabled: bool = True) -> None:
        self.label = label
        self.total = total
        self.stream = stream
        self.begun = 0
        self.enabled = enabled
        self.start = time.perf_counter()
        self._bar: rich.progress.Progress | None = None
        self._task: rich.progress.TaskID | None = None

    def __enter__(self) -> Progress:
        if self.enabled and uses_rich(self.stream):
            import rich.progress

            self._bar = rich.progress.Progress(
                rich.progress.TextColumn("{task.description}"),
                rich.progress.BarColumn(),
                rich.progress.MofNCompleteColumn(),
                rich.progress.TimeElapsedColumn(),
                rich.progress.TextColumn("{task.fields[what]}"),
                console=_rich_console(self.stream),
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task(self.label, total=self.total, what="")
            self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.enabled and exc_type is None:
            self._line(self.total, "done")

    def step(self, what: str) -> None:
        """Announce that the next step begins.

        Args:
            what: one line on what it does.
        """
        self.begun += 1
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.begun - 1, what=what)
        elif self.enabled:
            self._line(self.begun, what)

    def _line(self, k: int, what: str) -> None:
        elapsed = time.perf_counter() - self.start
        width = len(str(self.total))
        self.stream.write(f"{self.label} [{k:>{width}}/{self.total}] {elapsed:6.1f}s  {what}\n")
        self.stream.flush()


def write_json(payload: Any, path: str, out: TextIO) -> None:
    """Write ``payload`` as indented JSON to the file ``path``, or to ``out`` when it is ``-``.

    Args:
        payload: the JSON-serialisable results.
        path: a file name, or ``"-"`` for ``out``.
        out: the standard output.
    """
    text = json.dumps(payload, indent=2) + "\n"
    if path == "-":
        out.write(text)
        out.flush()
    else:
        pathlib.Path(path).write_text(text, encoding="utf-8")


def cell_name(implementation: str, options: Sequence[str], device: str, dtype: str) -> str:
    """The name of a cell (a row of ``verify``'s table), as ``--only`` takes it.

    Args:
        implementation: the implementation's name (or the ``--candidate`` spec).
        options: the options exercised; none is written ``-``.
        device: the device, e.g. ``"cpu"``.
        dtype: the dtype's name, e.g. ``"float32"`` (for a sharded row, its dtypes).

    Returns:
        ``IMPLEMENTATION/OPTIONS/DEVICE/DTYPE``, e.g. ``lookup_embedding/padding_idx/cpu/float32``.
    """
    return f"{implementation}/{','.join(options) or '-'}/{device}/{dtype}"


#: A cell's name read back by [`parse_cell`][]: implementation, options, device and dtype.
ParsedCell = tuple[str, tuple[str, ...], str, str]


def parse_cell(text: str) -> ParsedCell:
    """Read a cell's name back (the inverse of [`cell_name`][]).

    Args:
        text: ``IMPLEMENTATION/OPTIONS/DEVICE/DTYPE``.

    Returns:
        ``(implementation, options, device, dtype)``.

    Raises:
        UsageError: when ``text`` is not four parts separated by ``/``.
    """
    parts = text.rsplit("/", 3)
    if len(parts) != 4 or not all(p.strip() for p in parts):
        raise UsageError(
            f"--only {text!r}: expected IMPLEMENTATION/OPTIONS/DEVICE/DTYPE, e.g. "
            "lookup_embedding/padding_idx/cpu/float32 (- for no options)"
        )
    implementation, options, device, dtype = (p.strip() for p in parts)
    opts = () if options == "-" else tuple(csv_list(options))
    return implementation, opts, device, dtype


def cell_seed(run_seed: int, cell: str) -> int:
    """The seed a cell verifies under: stable, and different from cell to cell.

    Args:
        run_seed: the run's seed (``--seed``).
        cell: the cell's name, from [`cell_name`][].

    Returns:
        The first 4 bytes of ``sha256(f"{run_seed}/{cell}")``, big-endian: in ``[0, 2**32)``.
    """
    return int.from_bytes(hashlib.sha256(f"{run_seed}/{cell}".encode()).digest()[:4], "big")


def replay_command(run_seed: int, cell: str, flags: Sequence[str]) -> str:
    """The shell command that verifies one cell of a run again, under the same seed.

    Args:
        run_seed: the run's seed.
        cell: the cell's name.
        flags: the run's other flags that shape a cell (``--candidate``, sizes, ...).

    Returns:
        ``embedding-equivalence verify --seed RUN_SEED --only CELL FLAGS``, quoted for a shell.
    """
    return shlex.join([PROGRAM, "verify", "--seed", str(run_seed), "--only", cell, *flags])


def result_row(
    report: VerificationReport, cell: str, run_seed: int, flags: Sequence[str], **columns: Any
) -> dict[str, Any]:
    """A row of a ``verify`` run, as ``--json`` holds it: its columns, outcome and replay.

    Args:
        report: the cell's report.
        cell: the cell's name.
        run_seed: the run's seed.
        flags: the run's flags that shape the cell, for [`replay_command`][].
        **columns: the row's own fields, first (``implementation``, ``options``, ...).

    Returns:
        ``columns``, then the report's fields
        ([`report_fields`][embedding_equivalence._engine.report.report_fields]: the verdict,
        the counts, the seed, the failure, the records of the kind of run), with ``seed`` the
        cell's, then ``cell`` and ``replay`` (the command that replays the cell).
    """
    replay = replay_command(run_seed, cell, flags)
    return {**columns, **report_fields(report), "cell": cell, "replay": replay}


def write_failure(
    out: TextIO, report: VerificationReport, row: dict[str, Any], *, repro: bool = True
) -> None:
    """Write a failed cell: its name, seed and replay command, then the report.

    Args:
        out: where it goes.
        report: the cell's report (its text names the boundary a failure crossed).
        row: the cell's fields, from [`result_row`][].
        repro: also the minimal counterexample; without it, the failure alone (for a cell
            of the same implementation and options as one written in full above it).
    """
    out.write("\n")
    write_title(out, f"FAILED {row['cell']} (cell seed {row['seed']})")
    out.write(f"Replay this cell: {row['replay']}\n")
    text = render_text(report, repro=repro)
    if not repro:
        text += "\n(The minimal counterexample is like the one above; replay this cell for it.)"
    out.write(f"{text}\n")


def _worst(row: dict[str, Any]) -> str:
    return "-" if row["worst_error"] is None or not row["passed"] else f"{row['worst_error']:.2f}"


#: The columns of the results tables after "result", by heading: how a row's fields give its
#: cell. Headings of numbers end with ``"#"`` to be right-aligned (the ``#`` is not printed).
COLUMNS: dict[str, Callable[[dict[str, Any]], str]] = {
    "implementation": lambda r: r["implementation"],
    "options": lambda r: ",".join(r["options"]) or "-",
    "device": lambda r: r["device"],
    "dtype": lambda r: r["dtype"],
    "phases": lambda r: "boundary+random" if r["boundary_examples"] else "random",
    "sharding": lambda r: r["sharded"]["sharding"],
    "world size#": lambda r: str(r["sharded"]["world_size"]),
    "examples#": lambda r: str(r["examples"]),
    "worst/bound#": _worst,
    "seconds#": lambda r: f"{r['seconds']:.1f}",
}


def emit_results(
    args: argparse.Namespace,
    rows: Sequence[dict[str, Any]],
    reports: Sequence[VerificationReport],
    *,
    run_seed: int,
    columns: Sequence[str],
    notes: Sequence[str] = (),
    out: TextIO,
    err: TextIO,
) -> None:
    """Report a ``verify`` run: the JSON of ``--json``, the table, the failures, the summary.

    The one writer of results, for the plain and the sharded runs: ``--json -`` puts the JSON
    alone on ``out`` and the summary on ``err``; otherwise the table, each ``note``, every
    failure with its replay command, and the summary go to ``out`` (after the JSON file is
    written, for ``--json PATH``).

    Args:
        args: the command line, read here: ``--json`` (``None``: no JSON), and for the JSON
            ``--max-examples`` (the run's budget a row) and ``--no-boundaries``.
        rows: one dict a row (see [`result_row`][]), in the table's order.
        reports: the rows' reports.
        run_seed: the run's seed.
        columns: the table's columns after "result", headings of [`COLUMNS`][]; headings of
            numbers end with ``"#"`` to be right-aligned (the ``#`` is not printed).
        notes: lines printed under the table.
        out: the table's stream.
        err: the progress stream.
    """
    failed = [(report, row) for report, row in zip(reports, rows, strict=True) if not report.passed]
    seconds = sum(r["seconds"] for r in rows)
    summary = (
        f"{len(rows) - len(failed)} passed, {len(failed)} failed "
        f"({sum(r['examples'] for r in rows)} examples in {seconds:.1f} s; run seed {run_seed})"
    )
    if args.json is not None:
        payload = {
            "schema": JSON_SCHEMA,
            "torch": torch.__version__,
            "seed": run_seed,
            "max_examples": args.max_examples,
            "boundaries": not args.no_boundaries,
            "passed": not failed,
            "results": list(rows),
        }
        write_json(payload, args.json, out)
        if args.json == "-":  # stdout holds the JSON alone; the summary goes with the progress
            err.write(summary + "\n")
            return
    headings = ["result", *(name.removesuffix("#") for name in columns)]
    right = tuple(i + 1 for i, name in enumerate(columns) if name.endswith("#"))
    table = Table(headings, right=right)
    for row in rows:
        verdict, style = ("pass", None) if row["passed"] else ("FAIL", "bold red")
        table.add_row(verdict, *(COLUMNS[name](row) for name in columns), style=style)
    print_table(out, table)
    if notes:
        out.write("\n" + "\n".join(notes) + "\n")
    # One full repro for each implementation and options: at its first failure.
    kernels = [(row["implementation"], tuple(row["options"])) for _, row in failed]
    for i, (report, row) in enumerate(failed):
        write_failure(out, report, row, repro=kernels[i] not in kernels[:i])
    out.write(f"\n{summary}\n")
