"""The README, as a new user on another machine reads it: every command it shows is run.

[`COMMANDS`][] names, for each command of the README (each line of its shell blocks, each part
of a ``&&`` chain, each inline command), what runs it: a test of this file, a line of CI's
script ``.ci/run`` (its release step installs the wheel and the clone in a fresh environment,
as the Install section says), another test, or, for the few that cannot run here, why. A
command added to the README without an entry fails the first test, and an entry whose line left
``.ci/run`` fails the second. The README's Python examples run too, with a ``mypkg.kernels``
that holds ``F.embedding``.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import embedding_equivalence as ee
from embedding_equivalence._cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTALL_PAGE = ROOT / "docs" / "install.md"
CI_SCRIPT = ROOT / ".ci" / "run"
CI_WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
CUDA_RESULTS = ROOT / "docs" / "cuda-results.json"
SITE = "https://embedding-equivalence.github.io/embedding-equivalence/"
WHEEL = f"embedding_equivalence-{ee.__version__}-py3-none-any.whl"

# What runs each command: ("here", a test of this file), ("ci", a line of .ci/run that runs
# it, where CI's environment differs the line says how), ("workflow", a line of ci.yml),
# ("test", a test elsewhere: file and name), ("gpu", a command of the recorded GPU run),
# ("release", what the first release brings), ("not run", why).
COMMANDS: dict[str, tuple[str, str]] = {
    # The Quickstart, CI's own first step (and its second, the fast tier).
    "python3 -m venv .venv": ("ci", "python3 -m venv --clear .venv"),
    ".venv/bin/pip install torch==2.13.0": ("ci", ".venv/bin/pip install --quiet torch==2.13.0"),
    # CI installs the environment it tests with uv, and resolves this command with pip.
    '.venv/bin/pip install -e ".[dev]"': (
        "ci",
        '"$fresh/bin/pip" install --quiet --dry-run -e ".[dev]"',
    ),
    # At a small budget: the default one takes minutes.
    ".venv/bin/embedding-equivalence verify": (
        "ci",
        '"$fresh/bin/embedding-equivalence" verify --dtypes float32 --max-examples 5',
    ),
    ".venv/bin/python -m pytest": ("ci", ".venv/bin/python -m pytest"),
    # Install: CI's environment points pip at torch's CPU index (PIP_INDEX_URL in ci.yml).
    "pip install torch --index-url https://download.pytorch.org/whl/cpu": (
        "ci",
        '"$fresh/bin/pip" install --quiet --no-compile torch==2.13.0',
    ),
    "pip install .": ("ci", '"$fresh/bin/pip" install --quiet --no-compile --force-reinstall'),
    # build comes with the dev extra there.
    "pip install build": ("ci", ".venv/bin/uv pip install --quiet --python .venv/bin/python"),
    "python -m build": ("ci", ".venv/bin/python -m build"),
    f"pip install dist/{WHEEL}": ("ci", '"$fresh/bin/pip" install --quiet --no-compile "${wheel'),
    # The dev extra holds cli: the syntax of an extra, installed.
    'pip install ".[cli]"': ("ci", ".venv/bin/uv pip install --quiet --python .venv/bin/python"),
    "pip install embedding-equivalence": ("release", "on PyPI after the first release"),
    "pip install torch": ("not run", "named as what not to do: it brings the CUDA build"),
    # The console script and the plugin.
    "embedding-equivalence verify | demo | bench": ("here", "test_the_subcommands_exist"),
    "embedding-equivalence verify --candidate mypkg.kernels:my_embedding": (
        "here",
        "test_the_readme_verify_command_passes_f_embedding",
    ),
    "pytest --embedding-max-examples 500": ("here", "test_the_readme_pytest_example_runs"),
    # The documentation.
    ".venv/bin/mkdocs build --strict": ("ci", ".venv/bin/mkdocs build --strict --site-dir"),
    "mkdocs build --strict --site-dir build/site": (
        "ci",
        ".venv/bin/mkdocs build --strict --site-dir build/site",
    ),
    ".venv/bin/python -m http.server --directory site": (
        "here",
        "test_the_readme_serves_a_built_site",
    ),
    # Contributing.
    ".venv/bin/ruff check .": ("here", "test_the_readme_ruff_commands_pass"),
    ".venv/bin/ruff format --check .": ("here", "test_the_readme_ruff_commands_pass"),
    ".venv/bin/pyright --pythonpath .venv/bin/python": (
        "ci",
        ".venv/bin/pyright --pythonpath .venv/bin/python",
    ),
    ".venv/bin/python -m pytest -m slow": ("ci", "run_pytest -m slow"),
    "bash .ci/run": ("workflow", "run: bash .ci/run"),
    "EMBEDDING_TEST_DEVICES=cpu,cuda .venv/bin/python -m pytest": (
        "gpu",
        "EMBEDDING_TEST_DEVICES=cpu,cuda python -m pytest",
    ),
}

# An inline command: a program's name, then an argument (a lone `python` names the program).
_INLINE = re.compile(
    r"^(?:[A-Z_]+=\S+ )*(?:pip|python3?|\.venv/bin/\S+|embedding-equivalence|pytest|bash|mkdocs"
    r"|ruff|pyright|git) \S"
)


def _fences(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of a Markdown text: (language, body)."""
    return re.findall(r"^```(\w*)[^\n]*\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def _shell_commands(text: str, inline: bool = True) -> list[str]:
    """Each command of the shell blocks (a trailing comment dropped, ``&&`` chains split) and
    (``inline``) each inline command of the prose, in order, once."""
    found = []
    for language, body in _fences(text):
        if language in ("bash", "sh", "shell", "console"):
            for line in body.splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                found += [part.strip() for part in line.split(" && ") if part.strip()]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    for span in re.findall(r"`([^`\n]+)`", prose) if inline else []:
        if _INLINE.match(span):
            found += [part.strip() for part in span.split(" && ")]
    return list(dict.fromkeys(found))


def _python_blocks(text: str) -> list[str]:
    return [body for language, body in _fences(text) if language == "python"]


def test_every_readme_command_says_what_runs_it() -> None:
    commands = _shell_commands(README.read_text(encoding="utf-8"))
    assert [c for c in commands if c not in COMMANDS] == [], "README commands without an entry"
    assert [c for c in COMMANDS if c not in commands] == [], "entries the README no longer has"


def test_what_runs_each_command_is_there() -> None:
    ci = CI_SCRIPT.read_text(encoding="utf-8")
    workflow = CI_WORKFLOW.read_text(encoding="utf-8")
    gpu = CUDA_RESULTS.read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    for command, (kind, what) in COMMANDS.items():
        if kind == "ci":
            assert what in ci, f"{command!r}: .ci/run no longer runs {what!r}"
        elif kind == "workflow":
            assert what in workflow, f"{command!r}: ci.yml no longer runs {what!r}"
        elif kind == "here":
            assert callable(globals().get(what)), f"{command!r}: no test {what}"
        elif kind == "gpu":
            assert what in gpu, f"{command!r}: the GPU run's record has no {what!r}"
        elif kind == "release":
            # Said as what the first release brings, never as what works today.
            sentence = next(s for s in re.split(r"\.\s", readme) if f"`{command}`" in s)
            assert "first release" in sentence, sentence
        else:
            assert kind == "not run", kind


def test_the_install_page_shows_the_readme_commands() -> None:
    page = _shell_commands(INSTALL_PAGE.read_text(encoding="utf-8"), inline=False)
    readme = _shell_commands(README.read_text(encoding="utf-8"))
    assert [c for c in page if c not in readme] == []
    assert f"pip install dist/{WHEEL}" in page


def test_the_readme_names_the_versions_ci_tests() -> None:
    readme = README.read_text(encoding="utf-8")
    ci_python = re.search(r'python-version: "([\d.]+)"', CI_WORKFLOW.read_text(encoding="utf-8"))
    ci_torch = re.search(r"pip install --quiet torch==(\S+)", CI_SCRIPT.read_text(encoding="utf-8"))
    assert ci_python
    assert ci_torch
    assert f"Python {ci_python.group(1)} with torch {ci_torch.group(1)}" in readme
    assert f".venv/bin/pip install torch=={ci_torch.group(1)}" in readme  # the Quickstart's


def test_the_readme_links_only_to_what_exists_today() -> None:
    readme = README.read_text(encoding="utf-8")
    # No Markdown link, relative (dead on PyPI) or to a site not published yet; the site's
    # address only as what the first release publishes.
    assert re.findall(r"\]\(([^)]+)\)", readme) == []
    prose = re.sub(r"^```.*?^```", "", readme, flags=re.DOTALL | re.MULTILINE)
    assert re.findall(r"https?://\S+", re.sub(r"`[^`\n]+`", "", prose)) == []
    at = readme.index(SITE)
    assert "first release" in readme[at - 200 : at]


def test_the_changelog_starts_with_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "[Keep a Changelog](https://keepachangelog.com/en/1.1.0/)" in changelog
    versions = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    assert versions[0] == ee.__version__, versions


def test_the_version_is_written_once() -> None:
    import importlib.metadata

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r"^version\s*=", pyproject, flags=re.MULTILINE) is None
    assert 'dynamic = ["version"]' in pyproject
    assert 'path = "src/embedding_equivalence/__init__.py"' in pyproject
    # The installed metadata says what __init__ says (an editable install reads it at install).
    assert importlib.metadata.version("embedding-equivalence") == ee.__version__


def test_the_subcommands_exist(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("verify", "demo", "bench"):
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        assert f"usage: embedding-equivalence {command}" in capsys.readouterr().out


def test_the_readme_serves_a_built_site(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<title>the site</title>", encoding="utf-8")
    command = shlex.split(".venv/bin/python -m http.server --directory site")
    # This interpreter, on a free port of the loopback, in place of port 8000 on every address.
    argv = [sys.executable, *command[1:], "--bind", "127.0.0.1", "0"]
    with subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            port = re.search(r"port (\d+)", line)
            assert port, line
            url = f"http://127.0.0.1:{port.group(1)}/"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert "<title>the site</title>" in response.read().decode()
        finally:
            server.terminate()


def test_the_readme_ruff_commands_pass() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed (the dev extra)")
    for command in (".venv/bin/ruff check .", ".venv/bin/ruff format --check ."):
        argv = [str(ruff), *shlex.split(command)[1:]]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{command}:\n{done.stdout}{done.stderr}"


@pytest.fixture
def mypkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The README's ``mypkg.kernels.my_embedding``: ``F.embedding``, importable."""
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "kernels.py").write_text(
        "import torch.nn.functional as F\n\n"
        "def my_embedding(input, weight, padding_idx=None):\n"
        "    return F.embedding(input, weight, padding_idx)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mypkg", "mypkg.kernels"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


@pytest.mark.slow
def test_the_readme_python_examples_run(mypkg: Path) -> None:
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    plain = [block for block in blocks if "def test_" not in block]
    assert len(plain) == 2, blocks
    for block in plain:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
        assert "FAILED" not in out.getvalue()


@pytest.mark.slow
def test_the_readme_pytest_example_runs(mypkg: Path, pytester: pytest.Pytester) -> None:
    (block,) = [b for b in _python_blocks(README.read_text(encoding="utf-8")) if "def test_" in b]
    pytester.syspathinsert(mypkg)
    pytester.makepyfile(test_readme_example=block)
    # The README's option, at a budget of 5 (500 is its longer run), and one row run of the
    # rows generated (one per device present and dtype).
    options = shlex.split("pytest --embedding-max-examples 500")[1:-1]
    result = pytester.runpytest("-p", "no:cacheprovider", *options, "5", "-k", "cpu-float32")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1, outcomes
    assert outcomes.get("deselected", 0) >= 3, outcomes
    assert set(outcomes) <= {"passed", "deselected", "warnings"}, outcomes


@pytest.mark.slow
def test_the_readme_verify_command_passes_f_embedding(
    mypkg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = "embedding-equivalence verify --candidate mypkg.kernels:my_embedding"
    small = ["--dtypes", "float32", "--max-examples", "10", "--no-boundaries"]  # the budget
    assert main([*shlex.split(command)[1:], *small]) == 0
    assert re.search(r"^\d+ passed, 0 failed", capsys.readouterr().out, flags=re.MULTILINE)
