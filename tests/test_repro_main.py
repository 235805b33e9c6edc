"""Repros of a kernel defined in a user's script: the repro carries the kernel's source.

The README's own pattern is a kernel written in a script and verified there, so its repro cannot
import the kernel by name (``__main__``). The repro writes the kernel's source into itself, with
what it uses from the script (modules, helper functions and classes, simple constants), and is a
test: it fails with an AssertionError while the bug is there and passes once the pasted source is
fixed. What cannot be written out is named, with where to paste it.

The fast tier loads the script by path, under a module name that no import gives back (the same
rule as ``__main__``); the slow tier runs real scripts and their repros in fresh interpreters.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import embedding_equivalence as ee
from embedding_equivalence._engine.names import compiled_original, is_compiled
from embedding_equivalence._engine.repro import candidate_source
from forked import run_python

WRITTEN = "its source, and what it uses from there"
CANNOT = "cannot be imported by its qualified name"

# A wrong row (ids shifted by SHIFT) through a helper, a module alias and a constant.
HELPER_KERNEL = """
import torch
import torch.nn.functional as F

SHIFT = 1


def _rows(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (input + SHIFT) % weight.shape[0]


def my_kernel(input: torch.Tensor, weight: torch.Tensor, **kwargs: object) -> torch.Tensor:
    return F.embedding(_rows(input, weight), weight)
"""

# A scale read from a tensor of the script: a global that cannot be written out.
TENSOR_KERNEL = """
import torch
import torch.nn.functional as F

W_SCALE = torch.tensor(2.0)


def scaled(input, weight):
    return F.embedding(input, weight) * W_SCALE
"""

CANNOT_WRITE = """
import torch
import torch.nn.functional as F


def make_kernel(scale):
    def closure(input, weight):
        return F.embedding(input, weight) * scale

    return closure


class Lookup:
    def forward(self, input, weight):
        return F.embedding(input, weight) * 2


closure = make_kernel(2)
method = Lookup().forward
lam = lambda input, weight: weight[input] * 2  # noqa: E731
"""

COMPILED = """
import torch
import torch.nn.functional as F


def raw(input, weight):
    return F.embedding(input, weight) + 1


compiled = torch.compile(raw, backend="aot_eager")


@torch.compile(backend="aot_eager")
def decorated(input, weight):
    return F.embedding(input, weight) + 1
"""


def _load(tmp_path: Path, source: str) -> types.ModuleType:
    """``source`` run from a file, as a module that cannot be imported by its name."""
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"not_importable_{tmp_path.name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replay(snippet: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "<repro>", "exec"), namespace)  # the repro is plain Python
    return namespace


def _counterexample(candidate: Any) -> str:
    report = ee.verify_embedding(
        candidate, max_examples=20, seed=0, boundaries=False, dtypes=[torch.float32]
    )
    assert report.counterexample is not None
    return report.counterexample


def test_a_script_kernel_is_written_with_its_helper_its_module_alias_and_its_constant(
    tmp_path: Path,
) -> None:
    script = _load(tmp_path, HELPER_KERNEL)
    repro = _counterexample(script.my_kernel)
    assert WRITTEN in repro
    for line in ("import torch.nn.functional as F", "SHIFT = 1", "candidate = my_kernel"):
        assert line in repro.splitlines()
    # The helper comes before the kernel that calls it, each once.
    assert repro.index("def _rows(") < repro.index("def my_kernel(")
    assert repro.count("def _rows(") == 1
    assert CANNOT not in repro
    with pytest.raises(AssertionError):  # the bug is there
        _replay(repro)
    fixed = repro.replace("SHIFT = 1", "SHIFT = 0")
    _replay(fixed)  # fixed in the pasted source: the same call passes


def test_a_global_that_cannot_be_written_is_named_with_where_to_paste_it(tmp_path: Path) -> None:
    script = _load(tmp_path, TENSOR_KERNEL)
    repro = _counterexample(script.scaled)
    paste = "# Paste the definitions of W_SCALE here"
    assert paste in repro
    assert "W_SCALE is a torch.Tensor" in repro
    assert "candidate = scaled" in repro  # the kernel is still written by its source
    # Not pasted yet: the repro's check (its first call) says which name is missing.
    with pytest.raises(AssertionError, match="NameError: name 'W_SCALE' is not defined"):
        _replay(repro)
    pasted = [line for line in repro.splitlines() if line.startswith(paste)]
    with pytest.raises(AssertionError):
        _replay(repro.replace(pasted[0], "W_SCALE = torch.tensor(2.0)"))
    _replay(repro.replace(pasted[0], "W_SCALE = torch.tensor(1.0)"))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        pytest.param(
            "closure",
            [
                "it is a closure over scale",
                "paste the definition of make_kernel above this line and replace the `...` below "
                "with the call of make_kernel that made the candidate",
            ],
            id="closure",
        ),
        pytest.param(
            "method",
            ["paste the class Lookup (", "replace the `...` below with that object's .forward"],
            id="method",
        ),
        pytest.param(
            "lam",
            ["it is a lambda", "replace the `...` below with the lambda (", "user_script.py"],
            id="lambda",
        ),
    ],
)
def test_what_cannot_be_written_says_what_to_paste_and_where(
    tmp_path: Path, name: str, says: list[str]
) -> None:
    source = candidate_source(getattr(_load(tmp_path, CANNOT_WRITE), name))
    assert CANNOT in source
    for text in says:
        assert text in source
    assert source.splitlines()[-1] == "candidate = ...  # the function under test"
    assert _replay(source)["candidate"] is Ellipsis


def test_a_kernel_without_a_source_file_says_to_paste_its_definition() -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec("def typed_in(input, weight):\n    return weight[input]\n", namespace)
    source = candidate_source(namespace["typed_in"])
    assert "the source of typed_in is not available" in source
    assert "paste the definition of typed_in" in source
    assert _replay(source)["candidate"] is Ellipsis


def test_a_compiled_script_kernel_is_rebuilt_from_its_source(tmp_path: Path) -> None:
    script = _load(tmp_path, COMPILED)
    # torch.compile(raw) by a call: raw's source, compiled again with the defaults.
    by_call = candidate_source(script.compiled)
    assert "def raw(input, weight):" in by_call
    assert by_call.endswith("original = raw\ncandidate = torch.compile(original)")
    candidate = _replay("import torch\n" + by_call)["candidate"]  # as the repro starts
    assert is_compiled(candidate)
    assert compiled_original(candidate).__code__.co_name == "raw"
    # A decorated kernel: its decorator is in its source, with the compile options.
    decorated = candidate_source(script.decorated)
    assert '@torch.compile(backend="aot_eager")\ndef decorated(' in decorated
    assert decorated.endswith("candidate = decorated")
    assert "compile options are not recorded" not in decorated
    assert is_compiled(_replay(decorated)["candidate"])


# Three kernels of one script, verified in the script; the repros are what the script prints.
SCRIPT = """
import json
import sys

import torch
import torch.nn.functional as F

import embedding_equivalence as ee

SHIFT = 1
W_SCALE = torch.tensor(2.0)


class Rows:
    def __init__(self, shift):
        self.shift = shift

    def of(self, input, weight):
        return (input + self.shift) % weight.shape[0]


def _rows(input, weight):
    return Rows(SHIFT).of(input, weight)


def shifted(input, weight, **kwargs):
    return F.embedding(_rows(input, weight), weight)


def scaled(input, weight):
    return F.embedding(input, weight) * W_SCALE


@torch.compile(backend="aot_eager")
def compiled(input, weight):
    return F.embedding(input, weight) + 1


repros = {}
for kernel in (shifted, scaled, compiled):
    report = ee.verify_embedding(
        kernel, max_examples=20, seed=0, boundaries=False, dtypes=[torch.float32], backward=False
    )
    repros[kernel.__name__] = report.counterexample
json.dump(repros, sys.stdout)
"""

# Runs a repro file: exit 17 on an AssertionError (the bug is there), 0 when it passes.
RUN_REPRO = (
    "import runpy, sys\n"
    "try:\n"
    "    runpy.run_path(sys.argv[1], run_name='__main__')\n"
    "except AssertionError as error:\n"
    "    print(error, file=sys.stderr)\n"
    "    sys.exit(17)\n"
)


@pytest.fixture(scope="module")
def script_repros(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("script")
    (folder / "kernels.py").write_text(SCRIPT)
    done = run_python(["kernels.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _run_repro(tmp_path: Path, repro: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "repro.py"
    path.write_text(repro)
    return run_python(
        ["-c", RUN_REPRO, str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kernel", "bug", "fix"),
    [
        pytest.param("shifted", "SHIFT = 1", "SHIFT = 0", id="helper-class-alias-constant"),
        pytest.param(
            "compiled",
            "return F.embedding(input, weight) + 1",
            "return F.embedding(input, weight)",
            id="torch.compile",
        ),
    ],
)
def test_the_repro_of_a_script_kernel_fails_while_the_bug_is_there_and_passes_once_fixed(
    script_repros: dict[str, str], tmp_path: Path, kernel: str, bug: str, fix: str
) -> None:
    repro = script_repros[kernel]
    assert "defined in the script being run (__main__)" in repro
    assert f"candidate = {kernel}" in repro
    failing = _run_repro(tmp_path, repro)
    assert failing.returncode == 17, failing.stderr  # an AssertionError: the bug is there
    assert bug in repro
    passing = _run_repro(tmp_path, repro.replace(bug, fix))
    assert passing.returncode == 0, passing.stderr


@pytest.mark.slow
def test_the_repro_of_a_script_kernel_names_what_it_could_not_write(
    script_repros: dict[str, str], tmp_path: Path
) -> None:
    repro = script_repros["scaled"]
    assert "# Paste the definitions of W_SCALE here" in repro
    missing = _run_repro(tmp_path, repro)  # the check, the script's first call, says why
    assert missing.returncode == 17
    assert "NameError: name 'W_SCALE' is not defined" in missing.stderr
    pasted = repro.replace("# Paste the definitions of W_SCALE", "W_SCALE = torch.tensor(2.0)  #")
    assert _run_repro(tmp_path, pasted).returncode == 17
