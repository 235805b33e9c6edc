"""The public surface: sorted __all__, every public name documented in the API reference."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import embedding_equivalence
from embedding_equivalence import distributed, strategies, testing

DOCS = Path(__file__).resolve().parents[1] / "docs" / "api"
MODULES = {
    "embedding_equivalence": (embedding_equivalence, DOCS / "embedding_equivalence.md"),
    "strategies": (strategies, DOCS / "strategies.md"),
    "testing": (testing, DOCS / "testing.md"),
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
    blocks = re.findall(rf"^::: {re.escape(module.__name__)}\.(\w+)$", text, flags=re.M)
    # One `::: module.name` block per name, or one `::: module` block with a members list.
    members = re.findall(r"^\s+- (\w+)$", text, flags=re.M)
    documented = set(blocks) if blocks else set(members)
    assert set(module.__all__) == documented


def _source_position(obj: object) -> tuple[str, int]:
    return inspect.getsourcefile(obj) or "", inspect.getsourcelines(obj)[1]  # type: ignore[arg-type]


def test_strategies_page_lists_each_category_in_source_order() -> None:
    # The page groups the names under headings; within a heading, functions and classes
    # appear in the order of their definitions (file by file), as a reader of the source
    # meets them.
    text = (DOCS / "strategies.md").read_text(encoding="utf-8")
    sections = re.split(r"^## .*$", text, flags=re.M)[1:]
    assert len(sections) >= 4
    for section in sections:
        names = re.findall(r"^::: embedding_equivalence\.strategies\.(\w+)$", section, re.M)
        objects = [getattr(strategies, n) for n in names]
        ordered = [o for o in objects if inspect.isfunction(o) or inspect.isclass(o)]
        by_file: dict[str, list[int]] = {}
        for o in ordered:
            path, line = _source_position(o)
            by_file.setdefault(path, []).append(line)
        for lines in by_file.values():
            assert lines == sorted(lines), names
        files = [_source_position(o)[0] for o in ordered]
        runs = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
        assert len(runs) == len(set(runs)), f"one file's names are split: {names}"
