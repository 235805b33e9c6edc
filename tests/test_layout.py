"""The package's shape: no import circle, layers in a strict order, no source file over 800
lines, at most 10,000 code lines.

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
        MODULES, "embedding_equivalence.testing"
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


#: The layers, lowest first. A module imports from its own layer or lower ones only: the
#: forms know nothing of the oracle, the drawing layer nothing of the engine, the engine
#: nothing of the console.
LAYERS = ("forms", "oracle", "_draw", "_engine", "distributed", "_cli")
#: The layer above all of them: the public modules (``strategies``, ``testing``,
#: ``pytest_plugin``), the package's ``__init__`` and ``__main__``, and any other module at the
#: top of the package. They may import every layer; no layer imports them.
TOP = "public"


def _layer(module: str) -> str:
    """The layer of a package module: its subpackage's, or [`TOP`][] for a top-level one."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else TOP


def _rank(layer: str) -> int:
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge of ``graph`` (module -> the modules it imports) that reaches up a layer."""
    found = []
    for module in sorted(graph):
        own = _layer(module)
        for target in sorted(graph[module]):
            theirs = _layer(target)
            if _rank(theirs) > _rank(own):
                what = "the public top" if theirs == TOP else f"layer {theirs}"
                found.append(
                    f"{module} (layer {own}) imports {target} ({what}), above its own layer; "
                    f"the order is {' < '.join((*LAYERS, TOP))}"
                )
    return found


def test_every_subpackage_is_a_layer() -> None:
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 2}
    assert packages <= set(LAYERS), f"place {sorted(packages - set(LAYERS))} in LAYERS"


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_itself_and_the_layers_below(layer: str) -> None:
    graph = {m: _imports(MODULES, m) for m in MODULES if _layer(m) == layer}
    found = _upward_imports(graph)
    assert not found, "\n".join(found)


def test_an_upward_import_is_refused() -> None:
    """The checker fails when it should: fake edges, the source files untouched."""
    oracle_to_draw = {
        f"{NAME}.oracle.bag": {f"{NAME}.oracle.bounds", f"{NAME}._draw.cases", f"{NAME}.forms"}
    }
    assert _upward_imports(oracle_to_draw) == [
        f"{NAME}.oracle.bag (layer oracle) imports {NAME}._draw.cases (layer _draw), above its "
        f"own layer; the order is forms < oracle < _draw < _engine < distributed < _cli < public"
    ]
    draw_to_public = {f"{NAME}._draw.sizes": {f"{NAME}.strategies"}}
    (message,) = _upward_imports(draw_to_public)
    assert f"{NAME}._draw.sizes (layer _draw) imports {NAME}.strategies (the public top)" in message
    cli_to_root = {f"{NAME}._cli.main": {NAME}}  # `import embedding_equivalence as ee`
    assert len(_upward_imports(cli_to_root)) == 1
    # The public modules, __init__ and __main__ may import any layer, and each other.
    downward = {
        NAME: {f"{NAME}._cli", f"{NAME}._engine.verify"},
        f"{NAME}.__main__": {f"{NAME}._cli.main"},
        f"{NAME}.pytest_plugin": {f"{NAME}.strategies", f"{NAME}._draw.tensors"},
        f"{NAME}._cli.main": {f"{NAME}.distributed", f"{NAME}._cli.usage", f"{NAME}.forms"},
    }
    assert _upward_imports(downward) == []


def test_the_upward_import_check_reads_lazy_imports(tmp_path: Path) -> None:
    """An import inside a function is an edge too: a lower layer's lazy import is refused."""
    package = tmp_path / NAME
    (package / "oracle").mkdir(parents=True)
    (package / "_draw").mkdir()
    for init in (package, package / "oracle", package / "_draw"):
        (init / "__init__.py").write_text("")
    (package / "_draw" / "cases.py").write_text("")
    (package / "oracle" / "bag.py").write_text("def f():\n    from .._draw import cases\n")
    modules = _modules(package)
    graph = {m: _imports(modules, m) for m in modules}
    assert graph[f"{NAME}.oracle.bag"] == {f"{NAME}._draw", f"{NAME}._draw.cases"}
    assert len(_upward_imports(graph)) == 2


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
