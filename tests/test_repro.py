"""The one naming rule of the repro snippets: import the candidate only if that gives it back.

A nested or wrapped candidate must never be replayed as a different, importable function that
happens to share its ``__name__`` (the snippet would then pass where the candidate fails).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import embedding_equivalence as ee
from embedding_equivalence._engine.repro import candidate_source
from mutants import MUTANTS, Mutant

CANNOT = "cannot be imported by its qualified name"


def lookup_embedding(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """A module-level candidate: importable by its qualified name."""
    return F.embedding(input, weight, **kwargs)


class Kernels:
    """A module-level class whose static method is a candidate."""

    @staticmethod
    def shifted(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return F.embedding((input + 1) % weight.shape[0], weight, **kwargs)


def _nested_with_a_public_name() -> Any:
    def lookup_embedding(input: torch.Tensor, weight: torch.Tensor, **_: Any) -> torch.Tensor:
        return weight[input] * 2  # shares __name__ with ee.lookup_embedding, but is wrong

    return lookup_embedding


def _wraps_f_embedding() -> Any:
    @functools.wraps(F.embedding)
    def fast_embedding(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kw: Any) -> Any:
        return F.embedding(input, weight, *args, **kw) + 1  # the wrapper is the bug

    return fast_embedding


def _resolve(snippet: str) -> object:
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)  # the snippet is plain Python
    return namespace["candidate"]


def test_a_module_level_function_is_imported_as_itself() -> None:
    src = candidate_source(lookup_embedding)
    assert src == f"from {__name__} import lookup_embedding as candidate"
    assert _resolve(src) is lookup_embedding


def test_a_package_function_is_imported_as_itself() -> None:
    assert _resolve(candidate_source(ee.matmul_embedding)) is ee.matmul_embedding


def test_a_nested_qualified_name_is_resolved_through_its_class() -> None:
    src = candidate_source(Kernels.shifted)
    assert src.splitlines() == [f"from {__name__} import Kernels", "candidate = Kernels.shifted"]
    assert _resolve(src) is Kernels.shifted


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(_nested_with_a_public_name, "defined inside a function", id="nested"),
        pytest.param(lambda: lambda input, weight: weight[input], "lambda", id="lambda"),
        pytest.param(_wraps_f_embedding, "gives a different object", id="functools.wraps"),
        pytest.param(
            lambda: functools.partial(F.embedding, padding_idx=None), "no __module__", id="partial"
        ),
    ],
)
def test_what_cannot_be_imported_is_said_so(make: Any, reason: str) -> None:
    src = candidate_source(make())
    assert CANNOT in src
    assert reason in src
    # No import of some other object: only a comment and a line to fill in.
    assert not any(line.startswith(("from ", "import ")) for line in src.splitlines())
    assert _resolve(src) is Ellipsis


def test_a_wrapped_candidate_fails_and_its_repro_does_not_import_the_wrapped_function() -> None:
    candidate = _wraps_f_embedding()
    report = ee.verify_embedding(candidate, max_examples=10, seed=0, dtypes=[torch.float32])
    assert not report.passed
    assert report.counterexample is not None
    assert "from torch.nn.functional import" not in report.counterexample
    assert CANNOT in report.counterexample
    # The tensors are still rebuilt: with the candidate filled in, the snippet reproduces.
    snippet = report.counterexample.replace(
        "candidate = ...  # the function under test", "candidate = fill_in"
    )
    namespace: dict[str, Any] = {"fill_in": candidate}
    with pytest.raises(AssertionError):  # the repro's exact check fails: the bug is there
        exec(snippet, namespace)
    # The check runs first; the tensors it rebuilt show the bug.
    input, weight = namespace["input"], namespace["weight"].detach()
    assert not torch.equal(candidate(input, weight), F.embedding(input, weight))


def test_a_nested_candidate_with_a_package_name_is_not_replayed_as_the_package_function() -> None:
    candidate = _nested_with_a_public_name()
    report = ee.verify_embedding(candidate, max_examples=10, seed=0, backward=False)
    assert not report.passed
    assert report.counterexample is not None
    assert "import lookup_embedding" not in report.counterexample
    assert CANNOT in report.counterexample


def test_bag_verifier_uses_the_same_rule() -> None:
    def lookup_embedding_bag(input: torch.Tensor, weight: torch.Tensor, *a: Any, **kw: Any) -> Any:
        return F.embedding_bag(input, weight, *a, **kw) * 2

    # Poses as the package's function: same module and qualified name, another object.
    lookup_embedding_bag.__module__ = "embedding_equivalence"
    lookup_embedding_bag.__qualname__ = "lookup_embedding_bag"
    report = ee.verify_embedding_bag(lookup_embedding_bag, modes=("sum",), max_examples=20, seed=0)
    assert not report.passed
    assert report.counterexample is not None
    assert "import lookup_embedding_bag" not in report.counterexample
    assert CANNOT in report.counterexample


def _replay(snippet: str) -> None:
    exec(compile(snippet, "<repro>", "exec"), {})  # the repro is plain Python


@pytest.mark.parametrize(
    "mutant",
    [m for m in MUTANTS if m.name in ("off_by_one_row", "padding_row_zeroed_in_forward")],
    ids=lambda m: m.name,
)
def test_a_repro_asserts_while_the_bug_is_present_and_passes_once_it_is_fixed(
    mutant: Mutant,
) -> None:
    report = ee.verify_embedding(
        mutant.fn, options=mutant.options, backward=mutant.backward, seed=0, max_examples=50
    )
    assert report.counterexample is not None
    with pytest.raises(AssertionError):
        _replay(report.counterexample)
    fixed = re.sub(
        r"^from mutants import \w+ as candidate$",
        "from embedding_equivalence import lookup_embedding as candidate",
        report.counterexample,
        flags=re.M,
    )
    assert fixed != report.counterexample
    _replay(fixed)  # the same call on a correct kernel: no error


def test_the_repro_of_a_bad_call_that_was_accepted_asserts() -> None:
    wraps = lambda input, weight: weight[input].clone()  # noqa: E731
    report = ee.verify_embedding(wraps, max_examples=1, seed=0)
    assert report.counterexample is not None
    assert "the call must raise" in report.counterexample
    snippet = report.counterexample.replace(
        "candidate = ...  # the function under test", "candidate = lambda i, w: w[i].clone()"
    )
    with pytest.raises(AssertionError, match="the call must raise"):
        _replay(snippet)
