"""The documentation site: the nav, the generated figures, and one strict build.

The build test runs ``mkdocs build --strict`` once into a temporary folder (every
``markdown-exec`` block of every page runs then) and reads the built HTML: the worked example
must print the numbers of the seed notebook ``shared/seeds/002_f71e86774d60ee6a.txt``, taken
from ``tests/data/seed_002_tables.txt`` as ``tests/test_seed_example.py`` does.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

# The docs' tools (the "docs" extra): without them there is nothing to test here.
yaml = pytest.importorskip("yaml")
pytest.importorskip("matplotlib")
pytest.importorskip("mkdocs")

from embedding_equivalence import diagrams  # noqa: E402 (needs matplotlib)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SEED_002_TABLES = Path(__file__).parent / "data" / "seed_002_tables.txt"
SEED_002 = ROOT.parent / "shared" / "seeds" / "002_f71e86774d60ee6a.txt"
SEED_004 = ROOT.parent / "shared" / "seeds" / "004_dc4f937eb630750a.txt"
SVG = "{http://www.w3.org/2000/svg}"


# --------------------------------------------------------------------------------------------
# The nav
# --------------------------------------------------------------------------------------------


def _config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def _excluded(path: str, patterns: list[str]) -> bool:
    return any(path.startswith(p.strip("/") + "/") for p in patterns if p.endswith("/"))


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = _config()
    excluded = [line.strip() for line in config.get("exclude_docs", "").splitlines() if line]
    pages = {
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if not _excluded(p.relative_to(DOCS).as_posix(), excluded)
    }
    in_nav = list(_nav_pages(config["nav"]))
    assert len(in_nav) == len(set(in_nav)), "a page appears twice in the nav"
    assert set(in_nav) - pages == set(), "nav entries without a page"
    assert pages - set(in_nav) == set(), "pages missing from the nav"


def test_site_config_stays_offline_and_strict() -> None:
    config = _config()
    assert config["strict"] is True
    assert config["theme"]["font"] is False  # no Google Fonts
    scripts = config["extra_javascript"]
    assert all(not str(s).startswith(("http:", "https:", "//")) for s in scripts)
    for script in scripts:
        assert (DOCS / script).is_file(), script
    extensions = {
        next(iter(e)) if isinstance(e, dict) else e for e in config["markdown_extensions"]
    }
    assert {"pymdownx.arithmatex", "pymdownx.snippets"} <= extensions
    assert "inventories" not in json.dumps(config)


# --------------------------------------------------------------------------------------------
# The figures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def figures() -> dict[str, str]:
    return {name: make() for name, make in diagrams.FIGURES.items()}


@pytest.mark.parametrize("name", list(diagrams.FIGURES))
def test_every_figure_is_a_valid_inline_svg(figures: dict[str, str], name: str) -> None:
    svg = figures[name]
    assert svg.startswith("<svg ")
    assert "<?xml" not in svg
    assert "<!DOCTYPE" not in svg
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox")
    assert root.get("width")
    assert root.get("height")
    assert root.get("role") == "img"
    assert root.get("aria-label")
    assert len(list(root.iter(f"{SVG}text"))) > 0  # text stays text (searchable)
    assert len(svg) < 400_000


def test_figure_ids_are_unique_across_figures(figures: dict[str, str]) -> None:
    # Several figures are inlined in one page: their ids must not collide.
    ids: list[str] = []
    for svg in figures.values():
        ids += [e.get("id", "") for e in ET.fromstring(svg).iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    for name, svg in figures.items():
        for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', svg):
            assert f'id="{ref}"' in svg, (name, ref)


def test_figures_show_the_worked_example(figures: dict[str, str]) -> None:
    lookup = figures["lookup_figure"]
    for value in ("0.3374", "0.6957", "-1.8061", "-2.8400", "0.7953", "ids[0]=2"):
        assert value in lookup
    assert "out[0] = 0·W[0] + 0·W[1] + 1·W[2] + 0·W[3] = W[2]" in figures["matmul_figure"]
    assert "stride (5, 1)" in figures["storage_figure"]
    assert "stride (1, 5)" in figures["storage_figure"]
    assert ">1001<" in figures["gradient_figure"]  # G[0] + G[3] into row 2


def test_figures_accept_other_tensors() -> None:
    weight = torch.arange(12.0).reshape(6, 2)
    ids = torch.tensor([5, 0, 5])
    assert "10.0000" in diagrams.lookup_figure(weight, ids)
    assert "out[2]" in diagrams.matmul_figure(ids, weight, row=2)
    svg = diagrams.gradient_figure(ids, torch.ones(3, 2), 6, padding_idx=-1)
    assert "padding_idx: 0" in svg
    ET.fromstring(diagrams.bag_figure(torch.tensor([1, 1, 0]), torch.tensor([0]), weight))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: diagrams.lookup_figure(torch.zeros(40, 2), torch.tensor([0])), "at most 16"),
        (lambda: diagrams.matmul_figure(row=3), r"row=3 must lie in \[0, 3\)"),
        (lambda: diagrams.forward_cost("gather", 1, 1, 1, 4), "unknown form 'gather'"),
    ],
    ids=["too-large", "bad-row", "unknown-form"],
)
def test_figure_misuse_is_refused(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_worked_example_leaves_the_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    weight, ids = diagrams.worked_example()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert weight.shape == (4, 5)
    assert ids.tolist() == [2, 3, 1]
    assert f"{weight[2, 0].item():.4f}" == "0.6957"


def test_forward_cost_counts() -> None:
    lookup = diagrams.forward_cost("lookup", 3, 4, 5, 4)
    assert (lookup.bytes_moved, lookup.flops, lookup.temporary_bytes) == (3 * 8 + 2 * 60, 0, 0)
    dense = diagrams.forward_cost("dense matmul", 3, 4, 5, 4)
    assert dense.flops == 2 * 3 * 4 * 5
    assert dense.temporary_bytes == 3 * 4 * 4
    assert dense.bytes_moved == 3 * 8 + 2 * 48 + 80 + 60
    sparse = diagrams.forward_cost("sparse matmul", 3, 10**6, 5, 4)
    assert sparse.flops == 2 * 3 * 5  # independent of V
    assert lookup.intensity == 0.0
    assert dense.intensity > 0


# --------------------------------------------------------------------------------------------
# The benchmark section
# --------------------------------------------------------------------------------------------


def test_bench_section_without_results_says_how_to_make_them(tmp_path: Path) -> None:
    text = diagrams.bench_section(tmp_path)
    assert "embedding-equivalence bench --out docs/bench" in text
    assert "<table" not in text


def _measurement(name: str, mode: str, vocab: int, ms: float | None) -> dict[str, Any]:
    return {
        "name": name,
        "form": name,
        "is_form": True,
        "mode": mode,
        "vocab": vocab,
        "num_ids": 8,
        "dim": 4,
        "median_ms": ms,
    }


def test_bench_section_renders_measurements_and_plots(tmp_path: Path) -> None:
    payload = {
        "machine": {"cpu": "test cpu"},
        "measurements": [
            _measurement("lookup_embedding", "fwd", 128, 0.01),
            _measurement("lookup_embedding", "fwd", 1024, 0.02),
            _measurement("matmul_embedding", "fwd", 128, None),
        ],
        "targets": [{"key": "a", "description": "within 10%", "holds": True, "ratio": 1.01}],
    }
    (tmp_path / "bench.json").write_text(json.dumps(payload), encoding="utf-8")
    (tmp_path / "time.svg").write_text(
        '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" '
        'viewBox="0 0 10 10"><defs><path id="p1" d="M0 0"/></defs><use href="#p1"/></svg>',
        encoding="utf-8",
    )
    text = diagrams.bench_section(tmp_path)
    assert "test cpu" in text
    assert "<th>V=128 (ms)</th>" in text
    assert "<th>V=1,024 (ms)</th>" in text
    assert "<td>error</td>" in text  # a failed measurement is shown, not dropped
    assert "within 10%" in text
    assert 'id="bench-time-p1"' in text
    assert 'href="#bench-time-p1"' in text


def test_bench_section_renders_a_headline_table(tmp_path: Path) -> None:
    headline = [{"form": "lookup", "V": 1024, "ms": 0.5}, {"form": "matmul", "V": 1024, "ms": 9.0}]
    (tmp_path / "bench.json").write_text(json.dumps({"headline": headline}), encoding="utf-8")
    text = diagrams.bench_section(tmp_path)
    assert "<th>form</th><th>V</th><th>ms</th>" in text
    assert "<td>matmul</td>" in text


def test_bench_section_refuses_an_unknown_schema(tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="no 'headline', 'results' or 'measurements' list"):
        diagrams.bench_section(tmp_path)


# --------------------------------------------------------------------------------------------
# The strict build
# --------------------------------------------------------------------------------------------

_BUILT: dict[str, Path] = {}


def build_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the site once per session (``tests/test_browser.py`` reuses it)."""
    if "site" not in _BUILT:
        site = tmp_path_factory.mktemp("site")
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _BUILT["site"] = site
    return _BUILT["site"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(tmp_path_factory)


def _code_blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"<pre\b.*?</pre>", text, flags=re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", b)) for b in blocks]


def _seed_002_blocks() -> list[str]:
    """The seed notebook's printed tensors (from the seed when present, else the fixture)."""
    if SEED_002.is_file():
        text = SEED_002.read_text(encoding="utf-8")
        pattern = r"^(?:Parameter containing:\n)?tensor\(.*?\)$(?=\n\n|\n*\Z)"
        found = re.findall(pattern, text, flags=re.DOTALL | re.MULTILINE)
        assert len(found) == 8, found  # In [5], [6], [7], [8], [12], [16], [18], [19]
        return found
    chunks = re.split(r"^## .*\n", SEED_002_TABLES.read_text(encoding="utf-8"), flags=re.M)
    return [c.strip("\n") for c in chunks[1:]]


@pytest.mark.slow
def test_worked_example_prints_the_seed_notebook_numbers(site: Path) -> None:
    output = "\n".join(_code_blocks(site / "lookup-is-a-matmul" / "index.html"))
    for block in _seed_002_blocks():
        assert block in output, f"not printed by the built page:\n{block}"


@pytest.mark.slow
def test_keras_page_prints_the_seed_notebook_arrays(site: Path) -> None:
    output = "\n".join(_code_blocks(site / "tensorflow-keras" / "index.html"))
    expected = [
        "array([[0.22, 0.22, 0.22, 0.22, 0.22],\n       [0.33, 0.33, 0.33, 0.33, 0.33],\n"
        "       [0.11, 0.11, 0.11, 0.11, 0.11]], dtype=float32)"
    ]
    if SEED_004.is_file():
        assert expected[0] in SEED_004.read_text(encoding="utf-8")
    for block in expected:
        assert block in output


@pytest.mark.slow
def test_built_pages_are_self_contained(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 12
    for page in pages:
        text = page.read_text(encoding="utf-8")
        # No script, stylesheet, font or image from another host.
        for attr in re.findall(r'<(?:script|link|img)\b[^>]*?(?:src|href)="([^"]+)"', text):
            assert not attr.startswith(("http:", "https:", "//")), (page, attr)
        assert "fonts.googleapis" not in text, page
    assert (site / "javascripts" / "mathjax" / "tex-svg-full.js").is_file()
    assert not (site / "_scripts").exists()


@pytest.mark.slow
def test_built_pages_hold_their_figures_and_maths(site: Path) -> None:
    expected_figures = {
        "lookup-is-a-matmul": 6,
        "gradients": 4,
        "efficiency": 1,
        "when-equivalence-breaks": 1,
        "embedding-bag": 1,
        "tensorflow-keras": 1,
        "sharded": 2,
    }
    for name, count in expected_figures.items():
        text = (site / name / "index.html").read_text(encoding="utf-8")
        assert text.count('<svg class="ee-figure"') >= count, name
        assert "Traceback" not in text, name
    breaks = (site / "when-equivalence-breaks" / "index.html").read_text(encoding="utf-8")
    assert breaks.count('class="arithmatex"') >= 8
    assert r"\gamma_{k+s}(u)" in breaks


def test_no_page_prints_a_path_of_the_build_machine(site: Path) -> None:
    # Build-time output (tracebacks, Hypothesis's notes, reprs of modules) must not leak the
    # checkout's location, the home directory or the interpreter's into the published site.
    machine_paths = {str(ROOT), os.path.expanduser("~"), sys.prefix, sys.base_prefix}
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for path in machine_paths:
            assert path not in text, f"{page.relative_to(site)} prints {path}"


# --------------------------------------------------------------------------------------------
# What the sources say reaches the page
# --------------------------------------------------------------------------------------------

# pymdownx.snippets' include marker. Inside a ```python fence a formatter reads the one-line form
# ``--8<-- "file"`` as Python and rewrites it (``--8 < --"file"``); the block form (the marker on
# its own line, the path, the marker again) does not parse, so formatters leave it alone.
_INCLUDE_LINE = re.compile(r"^-+8<-+(?:\s+\"[^\"]+\")?$")
_SPHINX_ROLE = re.compile(r":(?:func|class|meth|data|attr|mod|exc|obj|py:\w+):`")


def test_snippet_includes_are_written_so_that_formatters_keep_them() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "8<" in line or re.search(r"-+\s*8\s*<", line):
                where = f"{page.relative_to(ROOT)}:{number}"
                assert _INCLUDE_LINE.match(line.strip()), f"{where}: mangled include {line!r}"


def test_docstrings_use_markdown_cross_references() -> None:
    # mkdocstrings renders Markdown: a Sphinx role (:func:`x`) would reach the page as text.
    for source in sorted((ROOT / "src").rglob("*.py")):
        text = source.read_text(encoding="utf-8")
        found = _SPHINX_ROLE.findall(text)
        assert not found, f"{source.relative_to(ROOT)} has Sphinx roles; write [`name`][] instead"


def _page_text(page: Path) -> str:
    """The page as a reader sees it: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_built_pages_hold_no_unexpanded_include_nor_raw_role(site: Path) -> None:
    for page in sorted(site.rglob("*.html")):
        text = _page_text(page)
        where = page.relative_to(site)
        assert not re.search(r"-+\s*8\s*<\s*-+", text), f"{where} shows an unexpanded include"
        assert not _SPHINX_ROLE.search(text), f"{where} shows a raw Sphinx role"


def test_api_examples_render_as_code(site: Path) -> None:
    # A doctest outside a Google "Examples:" section renders as nested blockquotes (">>>").
    for page in sorted((site / "api").rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        assert "<blockquote>" not in text, f"{page.relative_to(site)} renders a blockquote"
