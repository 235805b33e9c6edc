"""The page "Verify your own embedding": what its hidden blocks run (CI runs its demo early)."""

from __future__ import annotations

import io
import itertools
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared_results import shared

HERE = Path(__file__).resolve().parent
#: The pytest command of the plugin's demo, as the page shows it.
PYTEST_DEMO = ["pytest", "-v", "--no-header", "-rs", "--embedding-max-examples", "3",
               "test_my_kernels.py"]  # fmt: skip


def _run_the_tests() -> str:
    with tempfile.TemporaryDirectory() as project:  # a user's project, outside this repository
        for name in ("my_kernels.py", "test_my_kernels.py"):
            shutil.copy(HERE / name, project)
        run = subprocess.run(
            [sys.executable, "-m", *PYTEST_DEMO, "-p", "no:cacheprovider"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )
    return run.stdout


def pytest_plugin_demo() -> str:
    """``$ pytest ...`` and what it printed after its "collected" line, run in a fresh folder
    holding ``my_kernels.py`` and ``test_my_kernels.py``."""
    stdout = shared("verify-pytest-plugin", _run_the_tests)
    return (
        "$ "
        + " ".join(PYTEST_DEMO)
        + "\n"
        + stdout.split("collected", 1)[-1].split("\n", 1)[-1].rstrip()
    )


def boundary_phase(options: tuple[str, ...] = ("padding_idx",)) -> str:
    """What the boundary phase of ``verify_embedding(options=options)`` holds on the CPU in
    the four float dtypes, read from the package's list: the examples per axis, the largest
    size of each size axis, and the bad inputs by name."""
    from collections import Counter

    import torch

    from embedding_equivalence._draw.boundaries import embedding_boundaries
    from embedding_equivalence._draw.boundary_data import LIMITS

    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    phase = list(embedding_boundaries(options, dtypes, ["cpu"]))
    lines = [f"verify_embedding(options={options!r}): {len(phase)} boundary examples"]
    for axis, count in Counter(b.axis for b in phase).items():
        sizes = [b.value for b in phase if b.axis == axis]
        top = f", up to {axis} = {LIMITS[axis]:,}" if sizes[0] is not None else ""
        lines.append(f"  {axis:10s} {count:3d} examples{top}")
    bad = "; ".join(b.label for b in phase if b.axis == "bad input")
    return "\n".join(lines) + "\n" + wrap("bad input: " + bad)


# --- what the pages print: report lines at the width of the page ------------------------------

#: Characters of a line of output that the pages' code blocks show without scrolling: a code
#: block of the content column shows about 83 at a 1280 px wide window (measured in Chromium,
#: with Material's code font at that width).
WIDTH = 82
#: A line of a report after which the report is Python code: the minimal counterexample.
_CODE_HEADINGS = ("Minimal counterexample:", "Repro:")
#: The rows of a tensor's repr that a one-line message joined with spaces: ``],`` (or ``]],``
#: and so on) then the spaces that stood for the line break and the next row's indent.
_JOINED_ROWS = re.compile(r"(\]+),\s+(?=\[)")


def wrapping(
    print_: Callable[..., None], width: int = WIDTH, code: bool = False
) -> Callable[..., None]:
    """``print_`` that writes what it is given through [`wrap`][] (a page's hidden line
    ``print = wrapping(print)`` makes a block's reports fit the page), or through
    [`wrap_code`][] line by line with ``code=True`` (a block that prints Python)."""

    def print_wrapped(*values: object, sep: str = " ", end: str = "\n", **kwargs: Any) -> None:
        text = sep.join(str(v) for v in values)
        if code:
            text = "\n".join(part for line in text.split("\n") for part in wrap_code(line, width))
        else:
            text = wrap(text, width)
        print_(text, end=end, **kwargs)

    return print_wrapped


def wrap(text: str, width: int = WIDTH) -> str:
    """``text`` as a page shows it, every line at most ``width`` characters where it can be.

    Prose lines are wrapped at spaces, their continuation indented by two; a tensor's repr that
    a one-line message joined (``tensor([[0, 1],         [2, 3]])``) gets its rows back, laid
    out as torch prints them, and is never broken inside; lines whose words are aligned in
    columns (a table, a progress line) and tracebacks stay as they are. After a
    ``Minimal counterexample:`` line the text is Python: a long line is broken inside its
    brackets only (see [`wrap_code`][]), so the code stays the same code.
    """
    out: list[str] = []
    code = traceback = False
    for line in text.split("\n"):
        if code:
            out += wrap_code(line, width)
            continue
        if line.startswith("Traceback ("):
            traceback = True
        elif traceback and line and not line[0].isspace():
            traceback = False  # the exception's line ends the traceback
        out += [line] if traceback else _wrap_line(line, width)
        code = line.strip() in _CODE_HEADINGS
    return "\n".join(out)


def _spans(line: str) -> list[tuple[int, int]]:
    """Where ``tensor(...)`` reprs lie in ``line``: ``(start, end)`` pairs."""
    spans, start = [], line.find("tensor(")
    while start >= 0:
        depth, end = 0, len(line)
        for k in range(start + len("tensor"), len(line)):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(line[k], 0)
            if depth == 0:
                end = k + 1
                break
        spans.append((start, end))
        start = line.find("tensor(", end)
    return spans


def _bracketed(line: str, start: int) -> int:
    """The end of the bracketed group that opens at ``line[start]`` (or ``start + 1``)."""
    depth = 0
    for k in range(start, len(line)):
        depth += {"[": 1, "]": -1}.get(line[k], 0)
        if depth == 0:
            return k + 1
    return start + 1


def _words(line: str) -> list[str]:
    """The words of ``line`` (without its indent): split at spaces outside tensor reprs and
    short lists, each repr with its rows back on lines of their own, indented from the word's
    first column."""
    spans = _spans(line)
    words, word, k = [], "", 0
    while k < len(line):
        span = next(((a, b) for a, b in spans if a == k), None)
        if span is not None:
            word += _rows(line[span[0] : span[1]], column=len(word))
            k = span[1]
        elif line[k] == "[" and _bracketed(line, k) - k <= WIDTH // 2:
            end = _bracketed(line, k)  # a short list stays on one line
            word, k = word + line[k:end], end
        elif line[k] == " ":
            if word:
                words.append(word)
            word, k = "", k + 1
        else:
            word, k = word + line[k], k + 1
    return [*words, word] if word else words


def _rows(tensor: str, column: int) -> str:
    """A joined tensor repr with its rows on lines of their own, as torch prints it when it
    starts ``column`` characters into a word."""

    def row_break(match: re.Match[str]) -> str:
        closed = match.group(1)
        depth = tensor[: match.start()].count("[") - tensor[: match.start()].count("]")
        depth -= len(closed)  # the brackets still open after this row
        indent = " " * (column + len("tensor(") + depth)
        return f"{closed}," + "\n" * len(closed) + indent

    return _JOINED_ROWS.sub(row_break, tensor)


def _wrap_line(line: str, width: int) -> list[str]:
    """One line of prose, wrapped as [`wrap`][] says."""
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    outside = body
    for start, end in reversed(_spans(body)):
        outside = outside[:start] + outside[end:]
    if "  " in outside or (len(line) <= width and not _JOINED_ROWS.search(body)):
        return [line]  # aligned in columns, or short and without a joined repr
    hang = indent + "  "
    lines: list[str] = []
    current = indent
    for word in _words(body):
        parts = word.split("\n")
        start = len(current) + (1 if current.strip() else 0)
        fits = start + max(len(p) for p in parts) <= width
        if current.strip() and not fits:
            lines.append(current)
            current, start = hang, len(hang)
        current += (" " if current.strip() else "") + parts[0]
        for part in parts[1:]:
            lines.append(current)
            current = " " * start + part if part else ""
    return [*lines, current]


def wrap_code(line: str, width: int = WIDTH) -> list[str]:
    """A line of Python at most ``width`` characters where it can be, as the same code.

    A comment is wrapped as a comment; a longer statement is broken inside the first pair of
    brackets whose arguments can be split at their commas (the arguments on lines of their
    own, indented by four, the closing bracket back at the line's indent), then again on what
    is still too long. Python joins the lines inside brackets, so the statement is unchanged.
    """
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    if body.startswith("#"):
        return _fill(body.lstrip("# ").split(" "), indent + "# ", width)
    split = _bracket_split(line)
    if split is None:
        return [line]
    head, arguments, tail = split
    inner = _fill(arguments, indent + "    ", width, joiner=", ")
    return [
        *wrap_code(head, width),
        *[p for part in inner for p in wrap_code(part, width)],
        *wrap_code(indent + tail, width),
    ]


def _fill(words: list[str], prefix: str, width: int, joiner: str = " ") -> list[str]:
    """``words`` joined by ``joiner`` into lines of at most ``width`` after ``prefix`` (a
    longer word on a line of its own); a line that continues ends with ``joiner`` stripped."""
    end = joiner.rstrip()
    lines, current = [], ""
    for word in words:
        joined = f"{current}{joiner}{word}" if current else word
        if current and len(prefix) + len(joined) + len(end) > width:
            lines.append(prefix + current + end)
            joined = word
        current = joined
    return [*lines, prefix + current]


def _bracket_split(line: str) -> tuple[str, list[str], str] | None:
    """``(head ending with an opening bracket, the arguments, tail from the closing one)``
    for the first bracket pair of ``line`` holding a top-level comma, or ``None``."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip(" ") + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    offset = len(line) - len(line.lstrip(" "))
    stack: list[int] = []
    commas: dict[int, list[int]] = {}
    for token in tokens:
        if token.type != tokenize.OP:
            continue
        column = offset + token.start[1]
        if token.string in "([{":
            stack.append(column)
            commas[column] = []
        elif token.string in ")]}" and stack:
            opened = stack.pop()
            if commas[opened] and not stack:
                cuts = [opened, *commas[opened], column]
                arguments = [line[a + 1 : b].strip() for a, b in itertools.pairwise(cuts)]
                return line[: opened + 1], [a for a in arguments if a], line[column:]
        elif token.string == "," and stack:
            commas[stack[-1]].append(column)
    return None
