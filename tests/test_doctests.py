"""Every example in the package's docstrings runs, as a doctest, and shows what it says.

A user copies a docstring's example first: it must not contradict itself. The examples that
run a verification (a boundary phase and random examples) or start processes are in the slow
tier; the rest run in the fast one.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from types import ModuleType

import pytest

import embedding_equivalence

#: Modules whose examples verify a kernel or start process groups: seconds to minutes each.
SLOW = {"embedding_equivalence._engine.verify", "embedding_equivalence.distributed._verify"}
#: Modules that need an optional extra.
EXTRAS = {"embedding_equivalence.keras_interop": "keras"}


def _modules() -> list[str]:
    prefix = embedding_equivalence.__name__ + "."
    names = [embedding_equivalence.__name__]
    names += [m.name for m in pkgutil.walk_packages(embedding_equivalence.__path__, prefix)]
    return sorted(n for n in names if not n.endswith("__main__"))


def _with_examples(name: str) -> bool:
    extra = EXTRAS.get(name)
    if extra is not None and importlib.util.find_spec(extra) is None:
        return False
    module = importlib.import_module(name)
    return any(t.examples for t in doctest.DocTestFinder().find(module, name))


MODULES = [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
    for n in _modules()
    if _with_examples(n)
]


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
