"""The benchmark's additions to the package's [`console`][embedding_equivalence._cli.console].

The benchmark's tables have a title and sections ([`SectionedTable`][], printed by
[`print_table`][]), and its progress can say what a step is doing without counting a step
([`Progress.note`][]). The same rule holds: rich's output on a terminal, plain lines elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from embedding_equivalence._cli import console
from embedding_equivalence._cli.console import Table


@dataclass
class SectionedTable(Table):
    """A [`Table`][embedding_equivalence._cli.console.Table] with a title and sections.

    Attributes:
        title: a line printed above the table, or ``None``.

    An empty ``cells`` in ``rows`` starts a new section.
    """

    title: str | None = None

    def add_section(self) -> None:
        """End a section: a blank line in plain text, a rule on a terminal."""
        if self.rows and self.rows[-1][0]:
            self.rows.append(((), None))

    def plain(self) -> str:
        """The table as aligned plain text: the title, the header, a rule, one line a row.

        Returns:
            The text, without a trailing newline; a section ends with a blank line.
        """
        rows = [row for row in self.rows if row[0]]
        header, rule, *lines = Table(self.columns, self.right, rows).plain().split("\n")
        body = iter(lines)
        text = [header, rule, *(next(body) if cells else "" for cells, _ in self.rows)]
        return "\n".join(text if self.title is None else [self.title, *text])


def print_table(stream: TextIO, table: Table) -> None:
    """Print ``table``: a [`SectionedTable`][] with its title and sections, on a terminal too.

    As [`console.print_table`][embedding_equivalence._cli.console.print_table] does, and a
    [`SectionedTable`][] on a terminal gets its title above it and a rule between sections.

    Args:
        stream: where it goes, e.g. ``sys.stdout``.
        table: the table.
    """
    if not isinstance(table, SectionedTable) or not console.uses_rich(stream):
        console.print_table(stream, table)
        return
    import rich.table

    shown_on = console._rich_console(stream)
    if table.title is not None:
        shown_on.print(table.title)
    shown = rich.table.Table()
    for i, header in enumerate(table.columns):
        justify = "right" if i in table.right else "left"
        shown.add_column(header, justify=justify, overflow="fold")  # a narrow terminal wraps
    for i, (cells, style) in enumerate(table.rows):
        if cells:
            end = i + 1 < len(table.rows) and not table.rows[i + 1][0]
            shown.add_row(*cells, style=style, end_section=end)
    shown_on.print(shown)


class Progress(console.Progress):
    """[`console.Progress`][embedding_equivalence._cli.console.Progress], with [`note`][]."""

    def __enter__(self) -> Progress:
        super().__enter__()
        return self

    def note(self, what: str) -> None:
        """Say what the current step is doing, without counting a step.

        Args:
            what: one line on what it does.
        """
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, what=what)
        elif self.enabled:
            self._line(self.begun, what)
