"""Every example in the package's docstrings runs, as a doctest, and shows what it says.

A user copies a docstring's example first: it must not contradict itself. The examples that
run a verification (a boundary phase and random examples) or start processes are in the slow
tier; the rest run in the fast one. The docs' modules whose reference a page renders
(``docs/_scripts/keras_interop.py``, on the TensorFlow / Keras page) are held to the same.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

import embedding_equivalence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' modules

#: Modules whose examples verify a kernel or start process groups: seconds to minutes each.
SLOW = {
    "embedding_equivalence._engine.bench",
    "embedding_equivalence._engine.verify",
    "embedding_equivalence.distributed._verify",
}
#: The docs' modules (in docs/_scripts) rendered by mkdocstrings on a page.
DOCS_MODULES = ["keras_interop"]


def _modules() -> list[str]:
    prefix = embedding_equivalence.__name__ + "."
    names = [embedding_equivalence.__name__]
    names += [m.name for m in pkgutil.walk_packages(embedding_equivalence.__path__, prefix)]
    return sorted(n for n in names if not n.endswith("__main__")) + DOCS_MODULES


def _with_examples(name: str) -> bool:
    module = importlib.import_module(name)
    return any(t.examples for t in doctest.DocTestFinder().find(module, name))


MODULES = [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
    for n in _modules()
    if _with_examples(n)
]


def test_the_docs_modules_have_examples() -> None:
    assert all(name in MODULES for name in DOCS_MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_run(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
