"""The public surface: sorted __all__, every public name documented in the API reference."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

import embedding_equivalence
from embedding_equivalence import distributed, keras_interop, strategies, testing

DOCS = Path(__file__).resolve().parents[1] / "docs" / "api"
MODULES = {
    "embedding_equivalence": (embedding_equivalence, DOCS / "embedding_equivalence.md"),
    "strategies": (strategies, DOCS / "strategies.md"),
    "testing": (testing, DOCS / "testing.md"),
    "keras_interop": (keras_interop, DOCS / "keras_interop.md"),
    "distributed": (distributed, DOCS / "distributed.md"),
}


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module, _ = MODULES[name]
    names = module.__all__
    assert list(names) == sorted(names)
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and not isinstance(v, ModuleType)
        and n not in {"annotations"}
        and getattr(v, "__module__", module.__name__).startswith("embedding_equivalence")
    }
    assert public <= set(names) | {"T"}, public - set(names)
    for n in names:
        assert hasattr(module, n), n


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_is_in_the_api_reference(name: str) -> None:
    module, page = MODULES[name]
    text = page.read_text(encoding="utf-8")
    if module is embedding_equivalence:
        documented = set(re.findall(r"^::: embedding_equivalence\.(\w+)$", text, flags=re.M))
    else:  # one `::: module` block with an explicit members list
        documented = set(re.findall(r"^\s+- (\w+)$", text, flags=re.M))
    assert set(module.__all__) == documented
