"""The package's shape: no import circle, no source file over 800 lines, at most 10,000 code lines.

Imports are read from the source (every ``import`` statement, also those inside functions: a
lazy import is still an edge), so a circle is found before it bites at run time.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' package_size, as the page uses it
import package_size  # noqa: E402

PACKAGE = ROOT / "src" / "embedding_equivalence"
NAME = "embedding_equivalence"
MAX_LINES = 800


def _modules(package: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of ``package``."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules(PACKAGE)


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _resolve(modules: dict[str, Path], module: str, node: ast.ImportFrom) -> list[str]:
    """The package modules an ``from X import a, b`` statement loads."""
    if node.level:
        is_package = modules[module].name == "__init__.py"
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    # `from . import bench` loads bench; the package it names is the importer's own ancestor.
    targets = [] if node.module is None else [base]
    targets += [f"{base}.{alias.name}" for alias in node.names]
    return [t for t in targets if t in modules]


def _imports(modules: dict[str, Path], module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(modules[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            found |= set(_resolve(modules, module, node))
    # Importing a.b.c runs a/__init__ and a/b/__init__ first, unless the importer lives there.
    own = set(_ancestors(module))
    for target in list(found):
        found |= {p for p in _ancestors(target) if p not in own and p in modules}
    found.discard(module)
    return found


def _cycle(modules: dict[str, Path]) -> list[str] | None:
    graph = {m: _imports(modules, m) for m in modules}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_import_graph_is_read() -> None:
    assert "embedding_equivalence._engine.check" in _imports(
        MODULES, "embedding_equivalence._engine.verify"
    )
    assert "embedding_equivalence.forms" in _imports(MODULES, "embedding_equivalence.oracle.bag")


def test_a_lazy_import_circle_is_found(tmp_path: Path) -> None:
    """The circle that bench and cli once made: a module-level import one way, a lazy one back."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("def main():\n    from . import bench\n")
    (package / "bench.py").write_text("from .cli import main\n")
    assert _cycle(_modules(package)) in (
        ["pkg.bench", "pkg.cli", "pkg.bench"],
        ["pkg.cli", "pkg.bench", "pkg.cli"],
    )


def test_no_import_circle() -> None:
    cycle = _cycle(MODULES)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_source_file_over_800_lines(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(PACKAGE)} has {lines} lines"


#: The layers, lowest first, and the ones each must not import: a lower layer never reaches
#: up (the drawing layer knows nothing of the engine, the engine nothing of the console).
LAYER_RULES = {
    "forms": ("oracle", "_draw", "_engine", "_cli", "distributed", "strategies", "testing"),
    "oracle": ("_engine", "_cli", "distributed", "strategies", "testing"),
    "_draw": ("_engine", "_cli", "distributed", "testing"),
    "_engine": ("_cli", "distributed"),
    "distributed": ("_cli",),
}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("layer", sorted(LAYER_RULES))
def test_a_layer_never_imports_a_layer_above_it(layer: str) -> None:
    forbidden = {f"{NAME}.{name}" for name in LAYER_RULES[layer]}
    found = sorted(
        f"{module} imports {target}"
        for module in MODULES
        if _layer(module) == layer
        for target in _imports(MODULES, module)
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    )
    assert not found, found


def test_the_package_holds_at_most_10_000_code_lines() -> None:
    total = sum(package_size.by_folder(PACKAGE).values(), package_size.Lines())
    assert total.code <= package_size.CODE_LINES_GOAL, package_size.table(PACKAGE)


SAMPLE = '''"""Module docstring,

two paragraphs."""

# a comment
x = 1  # code with a comment
y = """a string,

not a docstring"""


def f():
    """One line."""
    return x
'''


def test_code_lines_are_told_from_docstrings_comments_and_blanks() -> None:
    lines = package_size.count(SAMPLE)
    assert (lines.code, lines.docstring, lines.comment, lines.blank) == (6, 4, 1, 3)
    assert lines.total == SAMPLE.count("\n")
