"""The installed package's size, as the Architecture page and `tests/test_layout.py` count it.

A line of a source file is exactly one of:

- a **docstring** line: inside the docstring of the module, a class or a function;
- a **comment** line: holds nothing but a ``#`` comment;
- a **blank** line;
- a **code** line: everything else (a statement, or part of one, string literals included).

The package's size goal (at most about 10,000 lines) counts code lines, as ``cloc`` does
(``cloc`` also counts Python docstrings as comments): docstrings and comments are what a size
goal must never be met by cutting, so they are counted apart, and reported beside it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

#: The installed package's sources.
PACKAGE = Path(__file__).resolve().parents[2] / "src" / "embedding_equivalence"
#: The goal, in code lines.
CODE_LINES_GOAL = 10_000


@dataclass(frozen=True)
class Lines:
    """Lines of one file, or a sum of files, by kind."""

    files: int = 0
    code: int = 0
    docstring: int = 0
    comment: int = 0
    blank: int = 0

    @property
    def total(self) -> int:
        """Every line, as ``wc -l`` counts them."""
        return self.code + self.docstring + self.comment + self.blank

    def __add__(self, other: Lines) -> Lines:
        return Lines(
            self.files + other.files,
            self.code + other.code,
            self.docstring + other.docstring,
            self.comment + other.comment,
            self.blank + other.blank,
        )


def count(source: str) -> Lines:
    """Count the lines of one Python source by kind (see the module's docstring)."""
    lines = source.splitlines()
    docstring: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
            ):
                docstring.update(range(first.lineno, first.end_lineno + 1))
    code: set[int] = set()
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    skip = {
        tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
        tokenize.ENDMARKER,
    }  # fmt: skip
    for token in tokens:
        if token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    code -= docstring
    blank = sum(
        1
        for n, line in enumerate(lines, 1)
        if not line.strip() and n not in docstring and n not in code
    )
    comment = len(lines) - len(code) - len(docstring) - blank
    return Lines(1, len(code), len(docstring), comment, blank)


def by_folder(package: Path = PACKAGE) -> dict[str, Lines]:
    """Lines of every ``.py`` file of ``package``, summed by top-level folder (``.`` for files)."""
    sums: dict[str, Lines] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).parts
        key = f"{parts[0]}/" if len(parts) > 1 else "."
        sums[key] = sums.get(key, Lines()) + count(path.read_text(encoding="utf-8"))
    return sums


def table(package: Path = PACKAGE) -> str:
    """A Markdown table of the package's lines by folder, with the total and the goal."""
    sums = by_folder(package)
    total = sum(sums.values(), Lines())
    rows = [
        "| folder | files | code | docstrings | comments | blank | all lines |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for name, n in [*sorted(sums.items()), ("**the package**", total)]:
        label = name if name.startswith("*") else f"`{name}`"
        rows.append(
            f"| {label} | {n.files} | {n.code:,} | {n.docstring:,} | {n.comment:,} | "
            f"{n.blank:,} | {n.total:,} |"
        )
    return "\n".join(rows)
