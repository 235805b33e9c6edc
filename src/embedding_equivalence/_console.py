"""What every command prints through: one rule for rich output or plain lines.

The rule, [`is_terminal`][embedding_equivalence._console.is_terminal]: a stream gets rich's
output when it is a TTY and the environment variable ``CI`` is unset or empty. There
[`Progress`][embedding_equivalence._console.Progress] draws a progress bar and
[`print_table`][embedding_equivalence._console.print_table] a rich table. Anywhere else (a
pipe, a file, a CI log) every step of the progress is one plain line, and a table is aligned
plain text, one line a row, with no ANSI escape code. Results go to stdout and progress to
stderr, so that ``--json`` keeps stdout to the JSON alone
([`write_json`][embedding_equivalence._console.write_json]).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TextIO

import rich.console
import rich.progress
import rich.table

__all__ = ["Progress", "Table", "is_terminal", "print_table", "write_json", "write_title"]


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` gets rich's output: a TTY, and ``CI`` unset or empty.

    Args:
        stream: where the output goes, e.g. ``sys.stderr``.

    Returns:
        True for a progress bar and rich tables, False for plain lines.
    """
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and not os.environ.get("CI")


def _rich_console(stream: TextIO) -> rich.console.Console:
    # No markup or highlighting: the text printed (ids, options in brackets, repro code) is
    # shown as it is, styled only where a style is given.
    return rich.console.Console(
        file=stream, force_terminal=True, markup=False, highlight=False, emoji=False
    )


def write_title(stream: TextIO, text: str) -> None:
    """Write a line of ``text``, in bold on a terminal.

    Args:
        stream: where it goes.
        text: the line, without its newline.
    """
    if is_terminal(stream):
        _rich_console(stream).print(text, style="bold")
    else:
        stream.write(text + "\n")


@dataclass
class Table:
    """A table of text cells, for [`print_table`][embedding_equivalence._console.print_table].

    Attributes:
        columns: the column headers.
        right: the indices of the columns aligned right (numbers); the others align left.
        title: a line printed above the table, or ``None``.
        rows: ``(cells, style)`` per row, ``style`` a rich style for the whole row on a
            terminal (e.g. ``"bold red"``) or ``None``; an empty ``cells`` starts a new section.
    """

    columns: Sequence[str]
    right: Collection[int] = ()
    title: str | None = None
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

    def add_section(self) -> None:
        """End a section: a blank line in plain text, a rule on a terminal."""
        if self.rows and self.rows[-1][0]:
            self.rows.append(((), None))

    def plain(self) -> str:
        """The table as aligned plain text: the title, the header, a rule, one line a row.

        Returns:
            The text, without a trailing newline.
        """
        cells = [c for c, _ in self.rows if c]
        widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(self.columns)]

        def line(row: Sequence[str]) -> str:
            return "  ".join(
                c.rjust(w) if i in self.right else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()

        lines = [] if self.title is None else [self.title]
        lines += [line(self.columns), "  ".join("-" * w for w in widths)]
        lines += [line(c) if c else "" for c, _ in self.rows]
        return "\n".join(lines)


def print_table(stream: TextIO, table: Table) -> None:
    """Print ``table`` on ``stream``: a rich table on a terminal, else [`Table.plain`][].

    Args:
        stream: where it goes, e.g. ``sys.stdout``.
        table: the table.
    """
    if not is_terminal(stream):
        stream.write(table.plain() + "\n")
        return
    console = _rich_console(stream)
    if table.title is not None:
        console.print(table.title)
    shown = rich.table.Table()
    for i, header in enumerate(table.columns):
        justify = "right" if i in table.right else "left"
        shown.add_column(header, justify=justify, overflow="fold")  # a narrow terminal wraps
    for i, (cells, style) in enumerate(table.rows):
        if cells:
            end = i + 1 < len(table.rows) and not table.rows[i + 1][0]
            shown.add_row(*cells, style=style, end_section=end)
    console.print(shown)


class Progress:
    """The steps of a long run on ``stream``: rich's progress bar on a terminal, else lines.

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
        self.start = time.perf_counter()
        if self.enabled and is_terminal(self.stream):
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    def note(self, what: str) -> None:
        """Say what the current step is doing, without counting a step.

        Args:
            what: one line on what it does.
        """
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, what=what)
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
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
