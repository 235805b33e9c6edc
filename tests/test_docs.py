"""The documentation site: the nav, the generated figures, and one strict build.

The build tests (slow tier) run ``mkdocs build --strict`` once into a temporary folder (every
``markdown-exec`` block of every page runs then) and read the built HTML: the worked example
must print the numbers of the seed notebook ``shared/seeds/002_f71e86774d60ee6a.txt``, taken
from ``tests/data/seed_002_tables.txt`` as ``tests/test_seed_example.py`` does. Where the
site is already built by the same strict command (CI builds it before the slow tier),
``EMBEDDING_TEST_SITE`` names its folder and the tests read it instead of building it again.
"""

from __future__ import annotations

import ast
import fcntl
import html
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import torch

# The docs' tools (the "docs" extra): without them there is nothing to test here.
yaml = pytest.importorskip("yaml")
pytest.importorskip("matplotlib")
pytest.importorskip("mkdocs")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' package figures

import figures  # noqa: E402 (needs matplotlib)

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
def svgs() -> dict[str, str]:
    return {name: make() for name, make in figures.FIGURES.items()}


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_every_figure_is_a_valid_inline_svg(svgs: dict[str, str], name: str) -> None:
    svg = svgs[name]
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


def test_figure_ids_are_unique_across_figures(svgs: dict[str, str]) -> None:
    # Several figures are inlined in one page: their ids must not collide.
    ids: list[str] = []
    for svg in svgs.values():
        ids += [e.get("id", "") for e in ET.fromstring(svg).iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    for name, svg in svgs.items():
        for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', svg):
            assert f'id="{ref}"' in svg, (name, ref)


def test_figures_show_the_worked_example(svgs: dict[str, str]) -> None:
    lookup = svgs["lookup_figure"]
    for value in ("0.3374", "0.6957", "-1.8061", "-2.8400", "0.7953", "ids[0]=2"):
        assert value in lookup
    assert "out[0] = 0·W[0] + 0·W[1] + 1·W[2] + 0·W[3] = W[2]" in svgs["matmul_figure"]
    assert "stride (5, 1)" in svgs["storage_figure"]
    assert "stride (1, 5)" in svgs["storage_figure"]
    assert ">1001<" in svgs["gradient_figure"]  # G[0] + G[3] into row 2


def test_figures_accept_other_tensors() -> None:
    weight = torch.arange(12.0).reshape(6, 2)
    ids = torch.tensor([5, 0, 5])
    assert "10.0000" in figures.lookup_figure(weight, ids)
    assert "out[2]" in figures.matmul_figure(ids, weight, row=2)
    svg = figures.gradient_figure(ids, torch.ones(3, 2), 6, padding_idx=-1)
    assert "padding_idx: 0" in svg
    ET.fromstring(figures.bag_figure(torch.tensor([1, 1, 0]), torch.tensor([0]), weight))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: figures.lookup_figure(torch.zeros(40, 2), torch.tensor([0])), "at most 16"),
        (lambda: figures.matmul_figure(row=3), r"row=3 must lie in \[0, 3\)"),
        (lambda: figures.forward_cost("gather", 1, 1, 1, 4), "unknown form 'gather'"),
    ],
    ids=["too-large", "bad-row", "unknown-form"],
)
def test_figure_misuse_is_refused(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_worked_example_leaves_the_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    weight, ids = figures.worked_example()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert weight.shape == (4, 5)
    assert ids.tolist() == [2, 3, 1]
    assert f"{weight[2, 0].item():.4f}" == "0.6957"


def test_forward_cost_counts() -> None:
    lookup = figures.forward_cost("lookup", 3, 4, 5, 4)
    assert (lookup.bytes_moved, lookup.flops, lookup.temporary_bytes) == (3 * 8 + 2 * 60, 0, 0)
    dense = figures.forward_cost("dense matmul", 3, 4, 5, 4)
    assert dense.flops == 2 * 3 * 4 * 5
    assert dense.temporary_bytes == 3 * 4 * 4
    assert dense.bytes_moved == 3 * 8 + 2 * 48 + 80 + 60
    sparse = figures.forward_cost("sparse matmul", 3, 10**6, 5, 4)
    assert sparse.flops == 2 * 3 * 5  # independent of V
    assert lookup.intensity == 0.0
    assert dense.intensity > 0


# --------------------------------------------------------------------------------------------
# The benchmark section
# --------------------------------------------------------------------------------------------


def test_bench_section_without_results_says_how_to_make_them(tmp_path: Path) -> None:
    text = figures.bench_section(tmp_path)
    assert "python benchmarks/efficiency.py --out docs/bench" in text
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
    text = figures.bench_section(tmp_path)
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
    text = figures.bench_section(tmp_path)
    assert "<th>form</th><th>V</th><th>ms</th>" in text
    assert "<td>matmul</td>" in text


def test_bench_section_refuses_an_unknown_schema(tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="no 'headline', 'results' or 'measurements' list"):
        figures.bench_section(tmp_path)


# --------------------------------------------------------------------------------------------
# The strict build
# --------------------------------------------------------------------------------------------

_BUILT: dict[str, Path] = {}
#: Names a site already built with ``mkdocs build --strict`` from this tree (CI's build step).
SITE_ENV = "EMBEDDING_TEST_SITE"


def build_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the site once per session (``tests/test_browser.py`` reuses it).

    ``$EMBEDDING_TEST_SITE``, when set, names a site built by the same strict command, which
    is read instead (it must hold the home page). Under pytest-xdist the workers share the
    parent of their temporary folders: the first to need the site builds it there, under a
    lock, and the others read that build.
    """
    if "site" not in _BUILT and os.environ.get(SITE_ENV):
        built = Path(os.environ[SITE_ENV]).resolve()
        assert (built / "index.html").is_file(), f"{SITE_ENV}={built} holds no built site"
        _BUILT["site"] = built
    if "site" not in _BUILT:
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent  # the session's folder, above each worker's own
        site = root / "site"
        with (root / "site.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            passed = root / "site.passed"  # written after a strict build passed, never before
            if not passed.is_file():
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
                passed.touch()
        _BUILT["site"] = site
    return _BUILT["site"]


@pytest.fixture
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site (built once per session); only the slow tier may ask for it."""
    if request.node.get_closest_marker("slow") is None:
        pytest.fail("a test of the built site belongs to the slow tier: mark it slow")
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


@pytest.mark.slow
def test_no_page_prints_a_path_of_the_build_machine(site: Path) -> None:
    # Build-time output (tracebacks, Hypothesis's notes, reprs of modules) must not leak the
    # checkout's location, the home directory or the interpreter's into the published site.
    machine_paths = {str(ROOT), os.path.expanduser("~"), sys.prefix, sys.base_prefix}
    # Any absolute path to a Python file (a traceback's 'File "/...py"', a module's repr),
    # wherever the checkout or the interpreter lives: printed output names files
    # relative to the project.
    absolute_file = re.compile(r"(?<![\w.~-])/(?:[\w.-]+/)+[\w.-]+\.py\b")
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for path in machine_paths:
            assert path not in text, f"{page.relative_to(site)} prints {path}"
        shown = _page_text(page)
        found = absolute_file.findall(shown)
        assert not found, f"{page.relative_to(site)} prints absolute paths {found[:3]}"


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


@pytest.mark.slow
def test_built_pages_hold_no_unexpanded_include_nor_raw_role(site: Path) -> None:
    for page in sorted(site.rglob("*.html")):
        text = _page_text(page)
        where = page.relative_to(site)
        assert not re.search(r"-+\s*8\s*<\s*-+", text), f"{where} shows an unexpanded include"
        assert not _SPHINX_ROLE.search(text), f"{where} shows a raw Sphinx role"


@pytest.mark.slow
def test_api_examples_render_as_code(site: Path) -> None:
    # A doctest outside a Google "Examples:" section renders as nested blockquotes (">>>").
    for page in sorted((site / "api").rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        assert "<blockquote>" not in text, f"{page.relative_to(site)} renders a blockquote"


# --------------------------------------------------------------------------------------------
# Links that land, exponents that stay exponents
# --------------------------------------------------------------------------------------------


class _Anchors(HTMLParser):
    """The ids of an HTML page (``id`` and ``<a name>``) and the targets of its links."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.ids.update(
            v for k, v in values.items() if v and (k == "id" or (k, tag) == ("name", "a"))
        )
        if tag == "a" and values.get("href"):
            self.hrefs.append(str(values["href"]))


def _anchors(page: Path) -> _Anchors:
    parser = _Anchors()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.mark.slow
def test_every_internal_link_lands_on_an_anchor(site: Path) -> None:
    pages = {page: _anchors(page) for page in sorted(site.rglob("*.html"))}
    broken = []
    for page, parsed in pages.items():
        for href in parsed.hrefs:
            url = urlsplit(href)
            if url.scheme or url.netloc or not url.fragment:
                continue  # another site, or a page without a heading to land on
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if target not in pages or unquote(url.fragment) not in pages[target].ids:
                broken.append(f"{page.relative_to(site)}: {href}")
    assert not broken, "links to anchors that do not exist:\n" + "\n".join(broken)


#: An exponent written as Python writes it: Markdown reads the two stars of a pair of them as
#: bold (``N = 2**17 ids, D = 2**13`` reads "N = 2<strong>17 ids, D = 2</strong>13").
_EXPONENT = re.compile(r"[\w)\]]\*\*[\w(]")
_INLINE_CODE = re.compile(r"``[^`]*``|`[^`\n]*`")


def test_docstrings_write_exponents_as_code() -> None:
    # mkdocstrings renders docstrings (and attribute docstrings) as Markdown.
    found = []
    for source in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                continue
            if isinstance(node.value.value, str) and _EXPONENT.search(
                _INLINE_CODE.sub("", node.value.value)
            ):
                found.append(f"{source.relative_to(ROOT)}:{node.lineno}")
    assert not found, "write exponents as ``2**17`` (in backticks) in: " + ", ".join(found)


def test_page_prose_writes_exponents_as_code() -> None:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for line in text.splitlines():
            prose = re.sub(r"\$[^$]*\$", "", _INLINE_CODE.sub("", line))  # code and maths
            if _EXPONENT.search(prose):
                found.append(f"{page.relative_to(ROOT)}: {line.strip()[:80]}")
    assert not found, "write exponents as `2**17` (in backticks):\n" + "\n".join(found)


@pytest.mark.slow
def test_no_page_renders_an_exponent_as_bold(site: Path) -> None:
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        found = re.findall(r".{0,30}\d<strong>\d.{0,30}", text)
        assert not found, f"{page.relative_to(site)}: {found[:2]}"


# --------------------------------------------------------------------------------------------
# What the pages print: no machinery of the build, and lines that fit the page
# --------------------------------------------------------------------------------------------

_SHOWN = re.compile(r'source="[^"]+"')


def _shown_python(page: Path) -> list[tuple[int, str]]:
    """The Python a page shows (its line and the code without its hidden lines): plain
    ``python`` blocks and ``exec`` blocks with a ``source``, not pymdownx.snippets includes."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```python([^\n]*)\n(.*?)^```", text, flags=re.S | re.M):
        options, code = match.groups()
        if ("exec=" in options and not _SHOWN.search(options)) or "--8<--" in code:
            continue
        shown = [line for line in code.splitlines() if "markdown-exec: hide" not in line]
        blocks.append((text[: match.start()].count("\n") + 1, "\n".join(shown)))
    return blocks


#: What shown code must not hold: the build's path set-up, the package's private modules, and
#: the docs' own helper modules (imported by hidden lines, or by blocks that show no code).
_BUILD_MACHINERY = re.compile(
    r"sys\.path|embedding_equivalence\._|\bimport figures\b|\bfigures\.|verify_page|triton_page"
)


@pytest.mark.parametrize(
    "page",
    sorted(p.name for p in DOCS.glob("*.md") if p.name != "architecture.md"),
)
def test_shown_code_holds_no_build_machinery(page: str) -> None:
    # The Architecture page is about the private modules: it may name them.
    for line, code in _shown_python(DOCS / page):
        found = _BUILD_MACHINERY.findall(code)
        assert not found, f"docs/{page}:{line} shows {found}"


#: Shown code that still names a private module, with the reason: its source is a file that
#: these pages include as it is.
_PRIVATE_NAMES_ELSEWHERE: dict[str, str] = {}


@pytest.mark.slow
def test_outputs_name_no_session_module_nor_private_module(site: Path) -> None:
    for page in sorted(site.rglob("*.html")):
        name = page.parent.relative_to(site).as_posix()
        if name in ("architecture", "."):
            continue
        for block in _code_blocks(page):
            # markdown-exec runs each block as a module of its own: a function defined there
            # must not be named after it.
            assert "_code_block_session" not in block, f"{name} prints a block's module"
            if name not in _PRIVATE_NAMES_ELSEWHERE:
                private = re.findall(r"embedding_equivalence[./]_\w+", block)
                assert not private, f"{name} shows private modules {private}"


#: A report line: a verdict, or a failure that names the exact value.
_REPORT_LINE = re.compile(r"(PASSED|FAILED) after \d|but the exact value is")


@pytest.mark.slow
def test_reports_fit_the_page_and_print_tensors_as_torch_does(site: Path) -> None:
    from verify_page import WIDTH

    for page in sorted(site.rglob("*.html")):
        name = page.parent.relative_to(site).as_posix()
        for block in _code_blocks(page):
            # A tensor's rows joined into one line by a one-line message: "],         [".
            assert not re.search(r"\],[ ]{2,}\[", block), f"{name}: a tensor's rows joined"
            for line in block.splitlines():
                if "  " in line.strip() or not _REPORT_LINE.search(line):
                    continue  # a row of a table (aligned columns), or not a report's line
                assert len(line) <= WIDTH, f"{name}: {len(line)} characters: {line[:100]}"


def test_wrap_lays_out_tensors_as_torch_prints_them_and_keeps_tables_and_code() -> None:
    import verify_page

    table = torch.tensor([[0.25, -1.5], [3.0, 4.0], [5.5, -6.0]])
    joined = repr(table).replace("\n", " ")  # as a one-line message writes it
    line = "weight.grad[0, 0] = -0.328, but the exact value is -0.262 (off by 0.0663, 1.41e+06 "
    line += f"times the bound 4.7e-08) [kernel(input=tensor([2, 0]), weight={joined})]"
    wrapped = verify_page.wrap(line).splitlines()
    assert all(len(row) <= verify_page.WIDTH for row in wrapped)
    start = next(k for k, row in enumerate(wrapped) if "weight=tensor(" in row)
    column = wrapped[start].index("weight=tensor(") + len("weight=")
    printed = [row[column:] for row in wrapped[start : start + 3]]
    assert "\n".join(printed).removesuffix(")]") == repr(table)  # torch's own layout
    assert " ".join(verify_page.wrap(line).split()) == " ".join(line.split())  # same words
    short = "pass    my_kernels:gather_embedding  padding_idx  cpu     float32" + " " * 40 + "13.1"
    assert verify_page.wrap(short) == short  # aligned columns are left as they are
    code = (
        "Minimal counterexample:\n"
        "weight = torch.randn(5, 3, dtype=torch.float64, "
        "generator=torch.Generator().manual_seed(20240539)).to(torch.float32) + 0.0\n"
        "assert_backward_equivalent(candidate, input, table, grad_output, padding_idx=2, "
        "sparse=True)"
    )
    lines = verify_page.wrap(code).splitlines()
    assert all(len(row) <= verify_page.WIDTH for row in lines)
    before, after = code.split("\n", 1)[1], "\n".join(lines[1:])
    assert ast.dump(ast.parse(after)) == ast.dump(ast.parse(before))  # the same code


# --------------------------------------------------------------------------------------------
# What the prose says the output shows
# --------------------------------------------------------------------------------------------

NOTEBOOK_URL = (
    "https://github.com/rasbt/LLMs-from-scratch/blob/main/ch02/03_bonus_embedding-vs-matmul/"
    "embeddings-and-linear-layers.ipynb"
)


def test_the_pages_credit_the_notebook_they_reproduce() -> None:
    if SEED_004.is_file():  # the notebook's address, as the seed that adapts it gives it
        assert NOTEBOOK_URL in SEED_004.read_text(encoding="utf-8")
    for page in ("index.md", "lookup-is-a-matmul.md"):
        text = " ".join((DOCS / page).read_text(encoding="utf-8").split())
        assert f"]({NOTEBOOK_URL})" in text, page
        assert "Sebastian Raschka" in text, page
    lookup = " ".join((DOCS / "lookup-is-a-matmul.md").read_text(encoding="utf-8").split())
    assert "numbers are reproduced exactly" in lookup
    gradients = " ".join((DOCS / "gradients.md").read_text(encoding="utf-8").split())
    # The open question is a reader's, in notes on the notebook, not the notebook's.
    assert "A reader's notes on that notebook" in gradients
    assert "The notebook this project started from ends with" not in gradients


@pytest.mark.slow
def test_gradients_page_shows_the_notebooks_next_step(site: Path) -> None:
    blocks = _code_blocks(site / "gradients" / "index.html")
    first = next(k for k, b in enumerate(blocks) if "linear.weight.grad.T" in b)
    output = blocks[first + 1]
    # One backward() through each layer, with the same upstream gradient: the gradient of the
    # table is the scatter-add of G's rows, whatever the table holds.
    ids, g = torch.tensor([2, 3, 1]), torch.arange(1.0, 16.0).reshape(3, 5)
    expected = torch.zeros(4, 5).index_add_(0, ids, g)
    linear_grad = (g.T @ torch.nn.functional.one_hot(ids, 4).float()).T
    assert torch.equal(expected, linear_grad)
    assert output.count(str(expected)) == 2, output  # embedding.weight.grad, linear's .T
    assert output.rstrip().endswith("True")
    # What the prose says the rows are.
    prose = _page_text(site / "gradients" / "index.html")
    assert "Row 2 of the embedding's gradient is G[0]" in " ".join(prose.split())
    assert torch.equal(expected[2], g[0])
    assert torch.equal(expected[1], g[2])
    assert not expected[0].any()


@pytest.mark.slow
def test_verify_page_says_what_its_reports_show(site: Path) -> None:
    page = site / "verify" / "index.html"
    output = "\n".join(_code_blocks(page))
    prose = " ".join(_page_text(page).split())
    # The overwriting kernel: caught by the boundary example of 2-d ids, each id twice.
    assert "Boundary example: fails at 2-d ids (float32)" in output
    assert re.search(r"input=tensor\(\[\[0, 1, 2\],\n +\[0, 1, 2\]\]", output)
    assert "on its example of 2-d ids, [[0, 1, 2], [0, 1, 2]]" in prose
    # Hypothesis' shrunk failure: one id twice.
    assert "input=tensor([0, 0])" in output
    assert "one id twice, [0, 0]" in prose
    assert "EmbeddingCase(" not in output  # the noted case, not the record


@pytest.mark.slow
def test_home_page_says_why_the_hand_written_lookup_fails(site: Path) -> None:
    page = site / "index.html"
    output = "\n".join(_code_blocks(page))
    prose = " ".join(_page_text(page).split())
    assert "fails at 0-d ids (float32)" in output
    assert "the output shares memory with weight" in " ".join(output.split())
    assert "a 0-d id: indexing with a 0-d tensor returns a view of the table" in prose


# --------------------------------------------------------------------------------------------
# Figures on the page
# --------------------------------------------------------------------------------------------


def test_extra_stylesheets_are_local_files() -> None:
    # docs/stylesheets/extra.css keeps display maths at their width on phones.
    sheets = _config().get("extra_css", [])
    assert sheets
    for sheet in sheets:
        assert not str(sheet).startswith(("http:", "https:", "//")), sheet
        assert (DOCS / sheet).is_file(), sheet


@pytest.mark.slow
def test_built_pages_link_the_extra_stylesheets(site: Path) -> None:
    for sheet in _config()["extra_css"]:
        assert (site / sheet).is_file(), sheet
        assert f'href="{sheet}"' in (site / "index.html").read_text(encoding="utf-8"), sheet


@pytest.mark.slow
def test_home_page_shows_the_one_hot_matmul_right_after_its_first_paragraph(site: Path) -> None:
    page = (site / "index.html").read_text(encoding="utf-8")
    article = page[page.index("<article") :]
    paragraphs = re.findall(r"<p>(.*?)</p>", article, flags=re.DOTALL)
    assert len(paragraphs) >= 2
    figure = paragraphs[1].strip()
    assert figure.startswith('<svg class="ee-figure"'), figure[:80]
    expected = ET.fromstring(figures.matmul_figure()).get("aria-label")
    assert ET.fromstring(figure).get("aria-label") == expected


# --------------------------------------------------------------------------------------------
# The derivation of "How gradients flow back", and the Keras notebook on Keras 3
# --------------------------------------------------------------------------------------------


def _next_token_model() -> dict[str, torch.Tensor]:
    """The gradients page's model, rebuilt from the same seeds: hand and autograd gradients."""
    import math

    import torch.nn.functional as F

    import embedding_equivalence as ee

    table, _ = figures.worked_example()
    w = table.double()
    v, d = w.shape
    limit = 1 / math.sqrt(d)
    w_out = torch.empty(d, v, dtype=torch.float64)
    w_out.uniform_(-limit, limit, generator=torch.Generator().manual_seed(0))
    stream = torch.tensor([2, 3, 1, 2, 0])
    ids, targets = stream[:-1], stream[1:]
    # By hand: the three steps of the chain rule.
    logits = ee.lookup_embedding(ids, w) @ w_out
    d_logits = (torch.softmax(logits, dim=1) - F.one_hot(targets, v).double()) / ids.numel()
    one_hot = F.one_hot(ids, v).double()
    d_w = one_hot.T @ (d_logits @ w_out.T)
    # By autograd.
    leaf = w.clone().requires_grad_()
    x = ee.lookup_embedding(ids, leaf)
    x.retain_grad()
    z = x @ w_out
    z.retain_grad()
    F.cross_entropy(z, targets).backward()
    assert leaf.grad is not None
    assert x.grad is not None
    assert z.grad is not None
    return {
        "d_logits": d_logits,
        "d_w": d_w,
        "auto_d_logits": z.grad,
        "auto_d_out": x.grad,
        "auto_d_w": leaf.grad,
        "one_hot": one_hot,
        "w_out": w_out,
    }


@pytest.mark.slow
def test_gradients_page_derives_dl_dw_and_agrees_with_autograd(site: Path) -> None:
    output = "\n".join(_code_blocks(site / "gradients" / "index.html"))
    m = _next_token_model()
    # The page's claims, checked here on the same numbers: steps 2 and 3 are autograd's own
    # computations, bit for bit; step 1 (and so the whole chain) agrees to float64's rounding.
    assert torch.equal(m["auto_d_logits"] @ m["w_out"].T, m["auto_d_out"])
    assert torch.equal(m["one_hot"].T @ m["auto_d_out"], m["auto_d_w"])
    eps = torch.finfo(torch.float64).eps
    for hand, auto in (("d_logits", "auto_d_logits"), ("d_w", "auto_d_w")):
        difference = (m[hand] - m[auto]).abs().max().item()
        assert difference <= 8 * eps * m[auto].abs().max().item(), (hand, difference)
    # What the page prints: the derived gradient, autograd's, and the comparisons.
    assert str(m["d_w"]) in output
    assert str(m["auto_d_w"]) in output
    assert str(m["d_w"]) == str(m["auto_d_w"])  # the same printed digits
    for line in (
        "step 2: autograd's dL/dlogits @ W_out.T == dL/dout: True",
        "step 3: one_hot.T @ autograd's dL/dout == W.grad: True",
        "row 2 == G[0] + G[3]: True",
        "row 0 == 0: True",
    ):
        assert line in output, line
    printed = re.findall(r"^(.+), hand - autograd, max \|difference\|: (\S+)$", output, flags=re.M)
    assert dict(printed) == {
        "step 1: dL/dlogits": f"{(m['d_logits'] - m['auto_d_logits']).abs().max().item():.1e}",
        "dL/dW": f"{(m['d_w'] - m['auto_d_w']).abs().max().item():.1e}",
    }
    options = re.findall(r"^(\w+) +(\S+) +W\.grad == the formula: (\w+)$", output, flags=re.M)
    forms = {"lookup_embedding", "matmul_embedding"}
    names = {"padding_idx=2", "scale_grad_by_freq", "max_norm=1.0"}
    assert {(form, name) for form, name, _ in options} == {(f, n) for f in forms for n in names}
    assert all(result == "True" for _, _, result in options), options


def test_backprop_figure_draws_the_transposed_one_hot_times_g() -> None:
    from figures.backprop import backprop_figure

    ids = torch.tensor([2, 3, 1, 2])
    g = torch.arange(20.0).reshape(4, 5) / 8  # exact, and not all integral: 4 decimals
    svg = backprop_figure(ids, g, 4)
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    assert root.get("aria-label")
    expected = torch.zeros(4, 5).index_add_(0, ids, g)  # the scatter-add, computed here
    texts = {"".join(e.itertext()).strip() for e in root.iter(f"{SVG}text")}
    for value in expected.flatten().tolist():
        assert f"{value:.4f}" in texts, value
    assert {"G[0] + G[3]", "G[2]", "G[1]", "no id: 0"} <= texts
    own = {e.get("id") for e in root.iter() if e.get("id")}
    grad = {e.get("id") for e in ET.fromstring(figures.gradient_figure()).iter() if e.get("id")}
    assert not own & grad  # both are inlined in the same page
    with pytest.raises(ValueError, match="at most 16"):
        backprop_figure(torch.zeros(17, dtype=torch.long), torch.zeros(17, 2), 4)


def _seed_004_arrays() -> dict[str, str]:
    """What seed 004 prints, derived with numpy from its ``fake_weights`` (row v = 0.11 * v)."""
    import numpy as np

    fake_weights = np.array([[round(0.11 * v, 2)] * 5 for v in range(4)], dtype=np.float32)
    idx = [2, 3, 1]
    return {
        "weights": repr([fake_weights]),
        "output": repr(fake_weights[idx]),
        "onehot": str(np.eye(4, dtype=np.float32)[idx]),
    }


@pytest.mark.slow
def test_keras_page_runs_the_seed_notebook_on_keras(site: Path) -> None:
    blocks = _code_blocks(site / "tensorflow-keras" / "index.html")
    arrays = _seed_004_arrays()
    if SEED_004.is_file():  # the derived arrays are the notebook's (in its print layout)
        seed = SEED_004.read_text(encoding="utf-8")
        for name, array in arrays.items():
            assert array in seed, name
    # The Keras source, each block followed by its output.
    first = next(k for k, b in enumerate(blocks) if "keras.layers.Embedding(" in b)
    second = next(k for k, b in enumerate(blocks) if "keras.layers.Dense(" in b)
    assert "import keras" in blocks[first]
    assert "use_bias=False" in blocks[second]
    assert "keras.ops.one_hot(" in blocks[second]
    embedding_output, dense_output = blocks[first + 1], blocks[second + 1]
    assert re.match(r"Keras 3\.\S+ on the (torch|tensorflow|jax) backend\n", embedding_output)
    assert "embedding weights:\n " + arrays["weights"] in embedding_output  # print(..., list)
    assert embedding_output.rstrip().endswith(arrays["output"])
    assert "onehot:\n " + arrays["onehot"] in dense_output
    assert arrays["weights"] in dense_output  # the Dense kernel: the table, no transpose
    assert dense_output.count(arrays["output"]) == 1
    assert dense_output.rstrip().endswith("True")  # Dense(one_hot) == Embedding(ids)


# --------------------------------------------------------------------------------------------
# The measured section of "Efficiency": one run, narrow tables, the model's agreement
# --------------------------------------------------------------------------------------------

# How wide a table of the site can be, from Material's stylesheet (the numbers are checked
# against the installed theme by test_table_width_constants_are_the_themes):
#   - html{font-size:125%}: the root em is 20 px at a 1280 px wide window (137.5% from 1600 px);
#   - table:not([class]){font-size:.64rem}: a table's text is 0.64 x 20 = 12.8 px;
#   - th{min-width:5rem; padding:.9375em 1.25em} and td{padding:.9375em 1.25em}: every column
#     is at least 5 x 20 = 100 px wide, and holds 2 x 1.25 x 12.8 = 32 px of padding;
#   - a character is at most 0.64 em wide (DejaVu Sans's digits, 0.636 em, are the widest of
#     the fonts the theme's stack falls back to on Linux; Arial's and Helvetica's are 0.556).
# A column is then max(100, 32 + 0.64 x 12.8 x its widest cell's characters) px wide, at most,
# when nothing wraps; the table's width is their sum.
TABLE_TARGET_PX = 1000
ROOT_PX = 20.0
TABLE_FONT_PX = 0.64 * ROOT_PX
CELL_PADDING_PX = 2 * 1.25 * TABLE_FONT_PX
COLUMN_MIN_PX = 5 * ROOT_PX
CHAR_PX = 0.64 * TABLE_FONT_PX
# Every column takes at least COLUMN_MIN_PX: more columns than this cannot fit the target.
MAX_COLUMNS = int(TABLE_TARGET_PX // COLUMN_MIN_PX)
# Characters per row (the widest cell of each column, summed) that fit the target when every
# column needs its padding; a table of fewer columns may hold a few more in its narrow ones.
MAX_ROW_CHARS = int((TABLE_TARGET_PX - MAX_COLUMNS * CELL_PADDING_PX) // CHAR_PX)


def _tables(fragment: str) -> list[list[list[str]]]:
    """The tables of an HTML fragment: rows of cell texts (tags removed, entities decoded)."""
    tables = []
    for table in re.findall(r"<table\b.*?</table>", fragment, flags=re.DOTALL):
        rows = []
        for row in re.findall(r"<tr\b.*?</tr>", table, flags=re.DOTALL):
            cells = re.findall(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", row, flags=re.DOTALL)
            rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
        tables.append(rows)
    return tables


def _column_chars(table: list[list[str]]) -> list[int]:
    return [max(len(row[i]) for row in table if i < len(row)) for i in range(len(table[0]))]


def _table_width_px(table: list[list[str]]) -> float:
    return sum(max(COLUMN_MIN_PX, CELL_PADDING_PX + CHAR_PX * n) for n in _column_chars(table))


def _assert_tables_fit(fragment: str, where: str) -> None:
    __tracebackhide__ = True
    tables = _tables(fragment)
    assert tables, f"{where}: no table"
    for k, table in enumerate(tables):
        columns, chars = len(table[0]), sum(_column_chars(table))
        width = _table_width_px(table)
        if columns > MAX_COLUMNS or chars > MAX_ROW_CHARS or width > TABLE_TARGET_PX:
            raise AssertionError(
                f"{where}, table {k} ({table[0]}): {columns} columns (at most {MAX_COLUMNS}), "
                f"{chars} characters a row (at most {MAX_ROW_CHARS}), about {width:.0f} px wide "
                f"(at most {TABLE_TARGET_PX})"
            )


def test_table_width_constants_are_the_themes() -> None:
    material = pytest.importorskip("material")
    sheets = sorted((Path(material.__file__).parent / "templates").rglob("main.*.min.css"))
    assert sheets, "Material's main stylesheet not found"
    css = sheets[0].read_text(encoding="utf-8")
    assert "html{height:100%;overflow-x:hidden;font-size:125%}" in css
    assert re.search(r"table:not\(\[class\]\)\{display:inline-block;[^}]*font-size:\.64rem", css)
    assert "table:not([class]) th{min-width:5rem;padding:.9375em 1.25em" in css
    assert "table:not([class]) td{padding:.9375em 1.25em" in css


def test_the_width_check_catches_the_old_thirteen_column_table(tmp_path: Path) -> None:
    # The headline table the page used to show: 13 columns, 1,369 px wide in a browser.
    columns = [
        "mode", "V", "lookup ms", "lookup model ms", "lookup measured/model", "one-hot ms",
        "one-hot model ms", "one-hot measured/model", "one-hot/lookup measured",
        "one-hot/lookup model", "lookup peak MiB", "one-hot peak MiB", "one-hot status",
    ]  # fmt: skip
    row = dict.fromkeys(columns, 0.04795763)
    (tmp_path / "bench.json").write_text(json.dumps({"headline": [row]}), encoding="utf-8")
    old = figures.bench_section(tmp_path)
    assert _table_width_px(_tables(old)[0]) > TABLE_TARGET_PX
    with pytest.raises(AssertionError, match="13 columns"):
        _assert_tables_fit(old, "the old headline")


def _sweep_result(form: str, mode: str, n: int, v: int, d: int, ms: float, model: float):
    return {
        "form": form,
        "mode": mode,
        "num_ids": n,
        "vocab": v,
        "dim": d,
        "status": "ok",
        "median_ms": ms,
        "model_ms": model,
        "ratio": ms / model,
        "peak_bytes": 2**20,
        "analytic_bytes": 2**20,
    }


@pytest.fixture
def sweep_payload() -> dict[str, Any]:
    """A small sweep in bench.json's form: two forms, two modes, two V, one of 8 off."""
    results = []
    for v in (1024, 262144):
        for mode in ("fwd", "fwd+bwd"):
            results.append(_sweep_result("lookup", mode, 1024, v, 256, 0.0479, 0.0516))
            results.append(_sweep_result("one-hot matmul", mode, 1024, v, 256, 2699.3, 2219.9))
    results[-1] = _sweep_result("one-hot matmul", "fwd+bwd", 1024, 262144, 256, 4869.7, 2219.9)
    return {
        "schema": "embedding-equivalence/bench/2",
        "machine": {"cpu": "test cpu", "cores": "2", "load": "4.13", "load_after": "5.94"},
        "config": {
            "num_ids": 1024,
            "dim": 256,
            "vocabs": [1024, 262144],
            "dims": [256],
            "ns": [1024],
            "base_vocab": 262144,
            "dtype": "float32",
            "threads": 1,
        },
        "calibration": {"rows": [], "zero_fill": [{"bytes": 2**20, "bytes_per_s": 5e10}]},
        "results": results,
        "notes": [],
    }


def test_sweep_section_shows_the_load_and_the_model_agreement(
    tmp_path: Path, sweep_payload: dict[str, Any]
) -> None:
    (tmp_path / "bench.json").write_text(json.dumps(sweep_payload), encoding="utf-8")
    text = figures.bench_section(tmp_path)
    prose = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<svg.*?</svg>", "", text, flags=re.S)))
    assert "4.13 before the run and 5.94 after it" in prose
    assert "Other processes were running" in prose  # a load of 4 before the run
    ratios = [r["ratio"] for r in sweep_payload["results"]]
    inside = sum(0.7 <= x <= 1.3 for x in ratios)
    assert inside == len(ratios) - 1
    assert f"{inside} of {len(ratios)} measured cases" in prose
    assert text.count('<svg class="ee-figure"') == 3  # time, agreement, memory
    assert '<details class="note">' in text
    _assert_tables_fit(text, "sweep_section")


@pytest.mark.slow  # the section rendered again (2 s)
def test_the_tables_and_the_figures_show_the_same_run(
    tmp_path: Path, sweep_payload: dict[str, Any]
) -> None:
    # An SVG left in the folder by another run is not shown beside a sweep's results.
    (tmp_path / "bench.json").write_text(json.dumps(sweep_payload), encoding="utf-8")
    (tmp_path / "time_vs_vocab.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><text>stale</text></svg>',
        encoding="utf-8",
    )
    text = figures.bench_section(tmp_path)
    assert "stale" not in text
    assert "N = 1,024, D = 256" in text  # the figures' sweep is the tables' sweep


def test_the_page_names_the_command_that_regenerates_its_results() -> None:
    page = (DOCS / "efficiency.md").read_text(encoding="utf-8")
    # The block may sit in a collapsible note, indented as a whole.
    command = re.escape(figures.efficiency.REGENERATE)
    assert re.search(rf"^( *)```bash\n\1{command}\n\1```$", page, flags=re.M)


@pytest.mark.slow
def test_efficiency_page_shows_the_run_and_fits_its_tables(site: Path) -> None:
    # The checked-in sweep, rendered by the build: its tables fit the page.
    data = json.loads((DOCS / "bench" / "bench.json").read_text(encoding="utf-8"))
    assert data["results"], "docs/bench/bench.json holds no sweep"
    page = (site / "efficiency" / "index.html").read_text(encoding="utf-8")
    measured = page[page.index('id="measured"') :]
    text = _page_text(site / "efficiency" / "index.html")
    assert re.search(r"Load average \(1 minute\): [\d.]+ before the run and [\d.]+ after it", text)
    assert re.search(r"\d+ of \d+ measured cases \(\d+%\) are within 30% of the model", text)
    _assert_tables_fit(measured, "efficiency/index.html, Measured")


# --- the pages' slowest helpers, run beside mkdocs (warm_shared.py) ---------------------------


def test_a_shared_result_runs_once_per_key_and_every_time_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shared_results

    runs: list[str] = []

    def helper(tag: str) -> dict[str, Any]:
        runs.append(tag)
        return {"printed": f"ran {tag}", "status": [0, 1]}

    monkeypatch.delenv("EMBEDDING_DOCS_CACHE", raising=False)
    assert shared_results.shared("h", lambda: helper("a"), "a") == {
        "printed": "ran a",
        "status": [0, 1],
    }
    shared_results.shared("h", lambda: helper("a"), "a")
    assert runs == ["a", "a"]  # no folder: every call runs the helper

    monkeypatch.setenv("EMBEDDING_DOCS_CACHE", str(tmp_path / "cache"))
    first = shared_results.shared("h", lambda: helper("a"), "a")
    again = shared_results.shared("h", lambda: helper("never"), "a")  # read, not run
    other = shared_results.shared("h", lambda: helper("b"), "b")  # other arguments: runs
    assert first == again == {"printed": "ran a", "status": [0, 1]}
    assert other["printed"] == "ran b"
    assert runs == ["a", "a", "a", "b"]
    assert len(list((tmp_path / "cache").glob("h-*.json"))) == 2


# --- Zensical's build: mkdocs.yml without the plugin that runs the pages' code ----------------


def test_zensical_builds_from_mkdocs_yml_without_markdown_exec_and_nothing_else() -> None:
    import zensical_build

    derived = zensical_build.derive((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    expected = _config()
    expected["plugins"].remove("markdown-exec")
    extensions = expected["markdown_extensions"]
    relaxed = {"pymdownx.superfences": {"relaxed_headers": True}}  # exec fences as code blocks
    extensions[extensions.index("pymdownx.superfences")] = relaxed
    assert yaml.safe_load(derived) == expected


def test_zensical_build_refuses_a_mkdocs_yml_whose_plugin_line_it_does_not_find() -> None:
    import zensical_build

    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    configured = config.replace("  - markdown-exec\n", "  - markdown-exec:\n      ansi: auto\n")
    with pytest.raises(ValueError, match="markdown-exec"):
        zensical_build.derive(configured)
