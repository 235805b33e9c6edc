"""The console without ``rich``: plain lines and plain tables, the same information.

``rich`` is the ``cli`` extra, not a core dependency. Where it is missing, a terminal gets what
a pipe gets: every progress step as one line and each table as aligned plain text. One test
switches rich off in this process (``_console.HAS_RICH``); one runs the console script in a
child process in which ``import rich`` fails, on streams that say they are terminals.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
from pathlib import Path

import pytest

from embedding_equivalence._cli import console as _console
from forked import run_python

ROOT = Path(__file__).resolve().parents[1]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _table() -> _console.Table:
    table = _console.Table(["name", "n"], right=[1])
    table.add_row("lookup_embedding", "3", style="bold red")
    table.add_row("matmul_embedding", "12")
    return table


@pytest.fixture
def without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(_console, "HAS_RICH", False)


@pytest.mark.usefixtures("without_rich")
def test_a_terminal_without_rich_gets_the_plain_table() -> None:
    terminal, pipe = FakeTerminal(), io.StringIO()
    assert _console.is_terminal(terminal)
    assert not _console.uses_rich(terminal)
    _console.print_table(terminal, _table())
    _console.print_table(pipe, _table())
    assert terminal.getvalue() == pipe.getvalue() == _table().plain() + "\n"
    assert "\x1b[" not in terminal.getvalue()


@pytest.mark.usefixtures("without_rich")
def test_a_terminal_without_rich_gets_a_line_per_step_and_plain_titles() -> None:
    terminal = FakeTerminal()
    with _console.Progress("verify", 2, terminal) as progress:
        progress.step("first cell")
        progress.step("second cell")
    _console.write_title(terminal, "FAILED a/b/c/d")
    lines = terminal.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:3]] == [
        ["verify", "[1/2]"],
        ["verify", "[2/2]"],
        ["verify", "[2/2]"],
    ]
    assert lines[0].endswith("first cell")
    assert lines[1].endswith("second cell")
    assert lines[2].endswith("done")
    assert lines[3] == "FAILED a/b/c/d"
    assert "\x1b[" not in terminal.getvalue()


def test_a_terminal_with_rich_gets_rich_output(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("COLUMNS", "100")  # rich's width where the stream has no size
    terminal = FakeTerminal()
    assert _console.HAS_RICH
    assert _console.uses_rich(terminal)
    _console.print_table(terminal, _table())
    assert "┃" in terminal.getvalue()  # rich's table: a heavy header rule between the columns


_WITHOUT_RICH = textwrap.dedent(
    """
    import io, json, sys

    for name in ("rich", "rich.console", "rich.progress", "rich.table"):
        sys.modules[name] = None  # import rich raises ImportError, as if it were not installed


    class Terminal(io.StringIO):
        def isatty(self):
            return True


    from embedding_equivalence._cli import console as _console


    from embedding_equivalence._cli import main as cli

    out, err = Terminal(), Terminal()
    sys.stdout, sys.stderr = out, err
    try:
        code = cli.main(sys.argv[1:])
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    print(json.dumps({"code": code, "rich": _console.HAS_RICH, "out": out.getvalue(),
                      "err": err.getvalue()}))
    """
)


@pytest.mark.slow  # a fresh interpreter; test_cli runs the script in one too, fast
def test_the_console_script_runs_without_rich() -> None:
    argv = ["verify", "--only", "lookup_embedding/-/cpu/float32", "--max-examples", "3"]
    argv += ["--seed", "0", "--no-boundaries"]
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    done = run_python(
        ["-c", _WITHOUT_RICH, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rich"] is False
    assert result["code"] == 0, result
    out, err = result["out"], result["err"]
    header = out.splitlines()[0].split()
    assert header[:5] == ["result", "implementation", "options", "device", "dtype"]
    assert "pass    lookup_embedding" in out
    assert "1 passed, 0 failed" in out
    assert err.splitlines()[0].startswith("verify [1/1]")
    assert err.splitlines()[-1].endswith("done")
    assert "\x1b[" not in out + err


def test_rich_is_the_cli_extra_not_a_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [d.split(">")[0].split("[")[0].strip() for d in project["dependencies"]]
    assert "rich" not in names
    extras = project["optional-dependencies"]
    assert any(d.startswith("rich") for d in extras["cli"])
    assert any("cli" in d for d in extras["dev"] if d.startswith("embedding-equivalence["))
