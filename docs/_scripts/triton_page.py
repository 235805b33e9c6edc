"""The page "Verify a Triton kernel without a GPU": its steps, shown and run at build time.

Each step is a file of ``docs/_scripts/triton_steps/``: [`step`][] returns it as a Python code
block and, below it, what it printed when it ran, under Triton's interpreter. The interpreter is
switched on for the steps only (``TRITON_INTERPRET=1``, restored after each), so that the pages
built after this one see the environment they would see without it; the worked kernels are
imported (or imported again) while it is on. Without triton or numpy, the page says so in
place of each result instead of failing.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

from shared_results import shared
from verify_page import WIDTH, wrap

HERE = Path(__file__).resolve().parent
STEPS = HERE / "triton_steps"
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def missing() -> str | None:
    """Why the steps cannot run here, or ``None``."""
    needs = {"triton": "triton is not installed", "numpy": "numpy is not installed"}
    for module, why in needs.items():
        if importlib.util.find_spec(module) is None:
            return why
    return None


def _not_run(why: str) -> str:
    return (
        f'!!! warning "Not run: {why}"\n'
        f"    The site was built without the `triton` extra, so this result is missing. "
        f"`pip install 'embedding-equivalence[triton]'` and build again to see it.\n"
    )


@contextlib.contextmanager
def interpreter() -> Iterator[None]:
    """``TRITON_INTERPRET=1`` while the block runs, and the worked kernels interpreted."""
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        from triton.runtime.interpreter import InterpretedFunction

        kernels = importlib.import_module("triton_kernels")
        if not isinstance(kernels.gather_rows, InterpretedFunction):
            importlib.reload(kernels)  # imported before without the interpreter
        yield
    finally:
        if before is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = before


def step(name: str) -> str:
    """Markdown: the step's code, then what it printed (or why it did not run)."""
    source = (STEPS / f"{name}.py").read_text(encoding="utf-8")
    shown = f'```python title="{name}.py"\n{source.rstrip()}\n```\n\n'
    why = missing()
    if why is not None:
        return shown + _not_run(why)

    def run() -> str:
        out = io.StringIO()
        # The step runs as the module triton_steps.<name>, found by that name while it runs:
        # the verifier imports a candidate's module to tell a script's function from one
        # importable by name, and importing the file again would run the whole step twice.
        module = types.ModuleType(f"triton_steps.{name}")
        sys.modules[module.__name__] = module
        try:
            with interpreter(), contextlib.redirect_stdout(out):
                exec(compile(source, f"{name}.py", "exec"), vars(module))
        finally:
            del sys.modules[module.__name__]
        return out.getvalue()

    printed = shared("triton-step", run, name)
    return shown + f"```text\n{wrap(printed.rstrip())}\n```\n"


def _demo_files() -> dict[str, str]:
    """The user's project of the pytest demo: its conftest and its test file."""
    return {
        "conftest.py": (HERE / "triton_conftest.py").read_text(encoding="utf-8"),
        "test_triton_kernels.py": (HERE / "test_triton_kernels.py").read_text(encoding="utf-8"),
    }


_CANDIDATE = ["--candidate", "triton_kernels:triton_embedding", "--options", "padding_idx"]
_BUDGET = ["--max-examples", "10", "--seed", "0"]
#: The dtypes the interpreter casts right (bfloat16 subnormals it does not: a named limit).
_DTYPES = ["--dtypes", "float32,float64,float16"]
#: The page's commands, by name: ``(args, with the pytest demo's files, pick)``.
DEMOS: dict[str, tuple[list[str], bool, str]] = {
    "pytest": (
        ["python", "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "--embedding-max-examples", "10", "test_triton_kernels.py"],
        True, "",
    ),
    "cli": (["embedding-equivalence", "verify", "--triton-interpret", *_CANDIDATE, *_DTYPES,
             *_BUDGET], False, ""),
    "cli without the switch": (
        ["embedding-equivalence", "verify", *_CANDIDATE, "--dtypes", "float32",
         "--no-boundaries", *_BUDGET],
        False, "",
    ),
    "bench": (
        ["embedding-equivalence", "bench", "--candidate", "triton_kernels:triton_embedding",
         "--triton-interpret", "--vocab-sizes", "1024", "--embedding-dims", "64",
         "--num-ids", "256", "--min-run-time", "0.1"],
        False, "",
    ),
}  # fmt: skip


def demo(name: str) -> str:
    """Markdown: the page's command ``name`` of [`DEMOS`][], run as [`command`][] runs it."""
    args, with_files, pick = DEMOS[name]
    return command(args, _demo_files() if with_files else None, pick)


def command(args: list[str], files: dict[str, str] | None = None, pick: str = "") -> str:
    """Markdown: ``$ args`` run in a fresh process (in ``docs/_scripts``, or in a folder with
    ``files`` and the worked kernels), its output and its exit status. With ``pick``, the
    output is cut to its first three lines (the table) and the first line holding ``pick``."""
    # A long command goes on after a backslash, as a shell reads it.
    shown = "$ " + " \\\n    ".join(textwrap.wrap(" ".join(args), 80, break_on_hyphens=False))
    why = missing()
    if why is not None:
        return f"```text\n{shown}\n```\n\n" + _not_run(why)
    stdout, returncode = shared("triton-command", lambda: _run(args, files), args, files)
    output = stdout.rstrip()
    if pick:
        lines = output.splitlines()
        picked = [line for line in lines if pick in line][:1]
        output = "\n".join([*lines[:3], "[...]", *picked, "[...]"])
    return f"```text\n{shown}\n{wrap(output)}\n$ echo $?\n{returncode}\n```\n"


def _run(args: list[str], files: dict[str, str] | None) -> tuple[str, int]:
    """Run ``args`` as [`command`][] describes; its stdout (or stderr) and exit status."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["COLUMNS"] = "100"
    with contextlib.ExitStack() as stack:
        cwd = HERE
        if files is not None:
            import tempfile

            cwd = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="triton-page-")))
            (cwd / "triton_kernels.py").write_text(
                (HERE / "triton_kernels.py").read_text(encoding="utf-8"), encoding="utf-8"
            )
            for file, text in files.items():
                (cwd / file).write_text(text, encoding="utf-8")
        executable = [sys.executable, *args[1:]] if args[0] == "python" else args
        if args[0] == "embedding-equivalence":
            executable = [sys.executable, "-m", "embedding_equivalence", *args[1:]]
        done = subprocess.run(
            executable, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
    # A usage error (exit 2) is one line on stderr and nothing on stdout.
    return done.stdout or done.stderr, done.returncode


def short_names(line: str) -> str:
    """``line`` with a candidate's qualified name (``__main__._checks.<locals>.liger``) cut to
    its own name (``liger``)."""
    return re.sub(r"[\w.]*<locals>\.(\w+)", r"\1", line)


def gpu_results(
    path: Path = ROOT / "docs" / "triton-cuda.json", built: dict[str, str] | None = None
) -> str:
    """Markdown: the last run of ``benchmarks/triton_cuda_check.py`` (on a GPU, compiled),
    with the machine and the versions it ran with beside this build's (``built``: torch and
    triton versions; by default the installed ones), each check's lines wrapped to the page."""
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    built = _installed() if built is None else built
    site = ", ".join(f"{name} {built.get(key, 'not installed')}" for key, name in _NAMES.items())
    recorded = f"torch {data['torch']}, Triton {data['triton']}"
    same = all(built.get(key) == data[key] for key in _NAMES)
    note = (
        f'!!! note "Recorded on {data["device"]}, not by this build"\n'
        f"    Recorded on {data['device']} with {recorded}, compiled (no interpreter); this "
        f"site was built {'with the same versions' if same else 'with ' + site}, without a "
        f"GPU.\n\n"
    )
    lines = []
    for result in data["results"]:
        lines.append(f"[{result['check']}] {result['seconds']} s")
        for line in result["lines"]:
            if line:
                lines += [f"  {part}" for part in wrap(short_names(line), WIDTH - 2).split("\n")]
    return note + "```text\n" + "\n".join(lines) + "\n```\n"


_NAMES = {"torch": "torch", "triton": "Triton"}


def _installed() -> dict[str, str]:
    """The torch and triton versions installed where the site is built."""
    import importlib.metadata

    found = {}
    for key in _NAMES:
        try:
            found[key] = importlib.metadata.version(key)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found
