"""Usage mistakes are usage errors, before any example: never reported as a kernel's failure.

``InvalidArgument`` from the API, exit status 2 and one line from the command line, for:
a ``--candidate`` that cannot be imported (missing, raising while it is imported), a file
path (``path/to/file.py:function``, accepted as pytest's node ids taught users), an option
the candidate's signature lacks, swapped ``(weight, input)`` arguments that a probe shows, an
``F.embedding`` kernel given a quantized table, and a Triton kernel run without Triton's
interpreter on a machine without a GPU. The other direction too: right kernels (with
``**kwargs``, without a readable signature, compiled) are never refused, and a kernel that
fails the probe for another reason is judged by the examples, as a finding.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
import embedding_equivalence.strategies as ees
from embedding_equivalence._cli.main import main
from embedding_equivalence._engine.arguments import resolve_arguments
from embedding_equivalence._engine.names import import_reference
from embedding_equivalence.forms.quantized import SCHEMES
from forked import run_python
from quantized_mutants import QUANTIZED_MUTANTS

ROOT = Path(__file__).resolve().parents[1]
FAST = [
    "--dtypes", "float32", "--devices", "cpu", "--max-examples", "5", "--seed", "0",
    "--no-boundaries",
]  # fmt: skip
SMALL: dict[str, Any] = {"devices": ["cpu"], "dtypes": [torch.float32], "boundaries": False}
GOOD = """\
import torch.nn.functional as F
from helper import check  # a neighbour of this file: imported as a script's would be

def good(input, weight, padding_idx=None):
    check(input, weight)
    return F.embedding(input, weight, padding_idx)
"""
HELPER = """\
def check(input, weight):
    if input.numel() and (input.min() < 0 or input.max() >= weight.shape[0]):
        raise IndexError("id out of range")
"""


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder: ``sub/kernels_by_path.py`` (and its helper), and modules that fail."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kernels_by_path.py").write_text(GOOD, encoding="utf-8")
    (tmp_path / "sub" / "helper.py").write_text(HELPER, encoding="utf-8")
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("kernels_by_path", "helper", "raises_on_import"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def swapped(weight: torch.Tensor, input: torch.Tensor, **options: Any) -> torch.Tensor:
    """``F.embedding`` with its arguments the other way round."""
    return ee.lookup_embedding(input, weight, **options)


def swapped_bag(
    weight: torch.Tensor, input: torch.Tensor, offsets: Any = None, **options: Any
) -> torch.Tensor:
    """``F.embedding_bag`` with its first two arguments the other way round."""
    return ee.lookup_embedding_bag(input, weight, offsets, **options)


def broken(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A wrong kernel that raises on every call: a finding, not a usage error."""
    raise RuntimeError("an index computed wrong")


class NoSignature:
    """A kernel whose signature cannot be read (as a C function's)."""

    @property
    def __signature__(self) -> Any:
        """Unreadable."""
        raise ValueError("no signature")

    def __call__(self, input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """The lookup, without options."""
        return ee.lookup_embedding(input, weight)


# --- the command line: exit 2, one line, before any example -----------------------------------


def test_a_file_path_candidate_is_imported_as_a_module(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--candidate", "sub/kernels_by_path.py:good", *FAST]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out
    fn = import_reference("sub/kernels_by_path.py:good")
    assert sys.modules["kernels_by_path"].good is fn  # under its stem, as `python file.py`
    assert pickle.loads(pickle.dumps(fn)) is fn  # the workers' and repros' way back to it
    assert import_reference(f"{files}/sub/kernels_by_path.py:good") is fn  # imported once


def test_a_file_whose_stem_is_taken_is_refused(files: Path) -> None:
    import_reference("sub/kernels_by_path.py:good")
    (files / "kernels_by_path.py").write_text(GOOD, encoding="utf-8")
    with pytest.raises(ValueError, match="'kernels_by_path' is imported already, from"):
        import_reference("kernels_by_path.py:good")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--candidate", "raises_on_import:good"],
            "cannot import module 'raises_on_import' (RuntimeError: boom)",
            id="raises-on-import",
        ),
        pytest.param(
            ["--candidate", "raises_on_import.py:good"],
            "cannot import module 'raises_on_import.py' (RuntimeError: boom)",
            id="file-raises-on-import",
        ),
        pytest.param(
            ["--candidate", "sub/missing.py:good"],
            "(FileNotFoundError: no Python file ",
            id="missing-file",
        ),
        pytest.param(
            ["--candidate", "sub/kernels_by_path.py:missing"], "has no 'missing'", id="no-name"
        ),
        pytest.param(
            ["--candidate", "sub/kernels_by_path.py:good", "--options", "padding_idx,sparse"],
            "takes no sparse",
            id="option-the-kernel-lacks",
        ),
        pytest.param(
            ["--candidate", "torch:embedding"],
            "takes (weight, input): called as F.embedding's (input, weight, **options) it raised",
            id="swapped-arguments",
        ),
        pytest.param(
            ["--candidate", "torch.nn.functional:embedding", "--scheme", "int8"],
            "looks a float table up",
            id="embedding-kernel-with-scheme",
        ),
        pytest.param(
            [
                "--candidate",
                "sub/kernels_by_path.py:good",
                "--sharding",
                "vocab",
                "--options",
                "max_norm",
            ],
            "takes no max_norm, norm_type",
            id="sharded-option-the-kernel-lacks",
        ),
    ],
)
def test_usage_mistakes_exit_2_in_one_line(
    files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["verify", *argv, *FAST]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"embedding-equivalence: error: --candidate {argv[1]!r}: ")
    assert message in lines[0]


@pytest.mark.slow  # it starts a process group
def test_the_ranks_import_a_file_path_candidate(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (files / "sub" / "sharded_by_path.py").write_text(
        "from embedding_equivalence.distributed import vocab_parallel_embedding as good\n",
        encoding="utf-8",
    )
    argv = ["verify", "--sharding", "vocab", "--world-size", "1", "--candidate"]
    assert main([*argv, "sub/sharded_by_path.py:good", *FAST]) == 0, capsys.readouterr()


# --- the API: InvalidArgument naming the option, the parameters, the right call ---------------


def test_an_option_the_signature_lacks_is_named_with_the_parameters() -> None:
    def kernel(input: torch.Tensor, weight: torch.Tensor, padding_idx: Any = None) -> Any:
        return F.embedding(input, weight, padding_idx)

    with pytest.raises(InvalidArgument) as info:
        ee.verify_embedding(kernel, options=["padding_idx", "max_norm"], **SMALL)
    assert "takes no max_norm, norm_type" in str(info.value)
    assert "kernel(input, weight, padding_idx=None) takes no" in str(info.value)


def test_a_bag_option_the_signature_lacks_is_refused() -> None:
    def kernel(input: Any, weight: Any, offsets: Any = None, mode: str = "mean") -> Any:
        return ee.lookup_embedding_bag(input, weight, offsets, mode=mode)

    with pytest.raises(InvalidArgument, match="takes no per_sample_weights"):
        ee.verify_embedding_bag(kernel, options=["per_sample_weights"], **SMALL)


def test_an_embedding_kernel_is_refused_by_the_bag_verifier() -> None:
    with pytest.raises(InvalidArgument, match=r"cannot be called as F\.embedding_bag's"):
        ee.verify_embedding_bag(ee.lookup_embedding, **SMALL)


@pytest.mark.parametrize(
    ("verify", "kernel", "wrap"),
    [
        pytest.param(
            ee.verify_embedding, swapped,
            "lambda input, weight, **kw: swapped(weight, input, **kw)", id="embedding",
        ),
        pytest.param(
            ee.verify_embedding_bag, swapped_bag,
            "lambda input, weight, *args, **kw: swapped_bag(weight, input, *args, **kw)", id="bag",
        ),
    ],
)  # fmt: skip
def test_swapped_arguments_are_told_apart_with_the_wrapper_to_use(
    verify: Callable[..., ee.VerificationReport], kernel: Callable[..., Any], wrap: str
) -> None:
    with pytest.raises(InvalidArgument, match="takes \\(weight, input\\)") as info:
        verify(kernel, **SMALL)
    assert f"wrap it: {wrap}" in str(info.value)
    wrapped = eval(wrap, {kernel.__name__: kernel})  # the wrapper the message gives passes
    assert verify(wrapped, max_examples=20, seed=0, **SMALL).passed


def test_the_wrapped_torch_embedding_passes() -> None:
    """``torch.embedding`` takes ``(weight, indices)``: no readable signature; the probe tells."""
    with pytest.raises(InvalidArgument, match="lambda input, weight, \\*\\*kw: embedding"):
        ee.verify_embedding(torch.embedding, **SMALL)
    report = ee.verify_embedding(
        lambda input, weight, **kw: torch.embedding(weight, input, **kw), max_examples=20, **SMALL
    )
    assert report.passed, report.failure


#: Compiled in the test, not at collection: every pytest-xdist worker collects this module, and
#: ``torch.compile`` imports torch._dynamo (seconds).
COMPILED = "torch.compile(F.embedding)"


@pytest.mark.parametrize(
    ("verify", "kernel", "options"),
    [
        pytest.param(ee.verify_embedding, F.embedding, ees.EMBEDDING_OPTIONS, id="F.embedding"),
        pytest.param(ee.verify_embedding, ee.matmul_embedding, (), id="matmul"),
        pytest.param(
            ee.verify_embedding, lambda input, weight, **kw: F.embedding(input, weight, **kw),
            ees.EMBEDDING_OPTIONS, id="kwargs",
        ),
        pytest.param(ee.verify_embedding, NoSignature(), (), id="no-signature"),
        pytest.param(ee.verify_embedding, COMPILED, (), id="compiled"),
        pytest.param(ee.verify_embedding_bag, F.embedding_bag, ees.BAG_OPTIONS, id="F.bag"),
        pytest.param(ee.verify_embedding_bag, ee.lookup_embedding_bag, (), id="lookup-bag"),
    ],
)  # fmt: skip
def test_right_kernels_are_not_refused(
    verify: Callable[..., Any], kernel: Callable[..., Any] | str, options: tuple[str, ...]
) -> None:
    kernel = torch.compile(F.embedding) if kernel == COMPILED else kernel
    name = "verify_embedding_bag" if verify is ee.verify_embedding_bag else "verify_embedding"
    resolve_arguments(name, kernel, options=options, devices=["cpu"])  # no InvalidArgument


def test_an_unreadable_signature_is_accepted_and_its_calls_judged() -> None:
    # The boundary phase's option examples pass max_norm under every seed.
    small = {**SMALL, "boundaries": True}
    report = ee.verify_embedding(NoSignature(), options=["max_norm"], max_examples=1, **small)
    assert not report.passed  # the option reached it, and it refused the keyword: a finding
    assert "max_norm" in (report.failure or "")


def test_a_kernel_that_fails_the_probe_otherwise_is_a_finding() -> None:
    report = ee.verify_embedding(broken, max_examples=3, **SMALL)
    assert not report.passed
    assert "an index computed wrong" in (report.failure or "")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_quantized_kernels_are_not_refused(scheme: str) -> None:
    right = functools.partial(ee.lookup_quantized_embedding, scheme=scheme)
    resolve_arguments("verify_quantized_embedding", right, devices=["cpu"], scheme=scheme)
    for mutant in QUANTIZED_MUTANTS:  # wrong kernels are findings, never usage errors
        resolve_arguments(
            "verify_quantized_embedding", mutant.fn, devices=["cpu"], scheme=mutant.scheme
        )


def stored_values(input: Any, weight: Any, padding_idx: Any = None, max_norm: Any = None) -> Any:
    """An embedding kernel that, given a quantized table, returns its stored values."""
    return weight[input]


@pytest.mark.parametrize(
    ("kernel", "what"),
    [
        pytest.param(F.embedding, "it raised RuntimeError", id="raises"),
        pytest.param(stored_values, "it returned torch.int8", id="returns-the-stored-values"),
    ],
)
def test_an_embedding_kernel_given_a_quantized_table_is_refused(
    kernel: Callable[..., Any], what: str
) -> None:
    with pytest.raises(InvalidArgument, match="looks a float table up") as info:
        resolve_arguments("verify_quantized_embedding", kernel, devices=["cpu"], scheme="int8")
    assert what in str(info.value)
    assert "verify it with verify_embedding (on the command line: drop --scheme)" in str(info.value)


# --- Triton: a compiled kernel without a GPU and without the interpreter -----------------------

_TRITON_SCRIPT = """\
import sys
from hypothesis.errors import InvalidArgument
import embedding_equivalence as ee
import embedding_equivalence.strategies as ees
import triton_kernels
from embedding_equivalence._cli.main import main

for kernel in (triton_kernels.triton_embedding, triton_kernels.gather_rows):
    try:
        ee.verify_embedding(kernel, max_examples=1, devices=["cpu"], boundaries=False)
    except InvalidArgument as error:
        print("refused:", error)
sys.exit(main(["verify", "--candidate", "triton_kernels:triton_embedding", *sys.argv[1:]]))
"""


@pytest.mark.slow  # a fresh interpreter imports torch and triton
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs compiled Triton kernels")
def test_a_triton_kernel_without_the_interpreter_is_a_usage_error() -> None:
    # A process of its own: triton imported without the interpreter stays so for the process.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = run_python(
        ["-c", _TRITON_SCRIPT, *FAST],
        cwd=ROOT / "docs" / "_scripts", env=env, capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    refused = [line for line in proc.stdout.splitlines() if line.startswith("refused:")]
    assert len(refused) == 2, proc.stdout
    assert "launches a compiled Triton kernel" in refused[0]
    assert "TRITON_INTERPRET=1" in refused[0]
    assert "is a @triton.jit kernel" in refused[1]
    error = proc.stderr.strip().splitlines()
    assert len(error) == 1, proc.stderr
    assert "--triton-interpret" in error[0]
    assert "0 active drivers" in error[0]  # what triton said
