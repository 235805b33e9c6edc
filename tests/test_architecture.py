"""The "Architecture" page cannot rot: every module its figure and table name must exist.

``figures.architecture.DATA_PATH`` (the docs' package ``docs/_scripts/figures``) is the one
source of the page's figure and table; here every module it names is imported, the figure is
checked to show each of them legibly, and the page is checked to print both from
``markdown-exec`` blocks and to sit in the nav.
"""

from __future__ import annotations

import importlib
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' package figures

import figures  # noqa: E402 (needs matplotlib)
from figures import architecture  # noqa: E402

PAGE = ROOT / "docs" / "architecture.md"
SVG = "{http://www.w3.org/2000/svg}"


def _parts() -> list[architecture.Part]:
    return [p for row in figures.DATA_PATH for stage in row for p in stage.parts]


def test_every_module_on_the_data_path_exists() -> None:
    missing = {}
    for name in architecture.modules():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            missing[name] = str(error)
    assert not missing, f"modules named by the Architecture page do not exist: {missing}"


def test_the_data_path_is_well_formed() -> None:
    names = [stage.name for row in figures.DATA_PATH for stage in row]
    assert len(names) == len(set(names)), "two stages share a name"
    assert [s.name for s in figures.DATA_PATH[0]] == ["strategy"]
    assert all(stage.parts for row in figures.DATA_PATH for stage in row)
    assert all(p.role.strip() for p in _parts())
    # The engine, _check, holds both seams and the judge.
    engine = {
        s.name
        for row in figures.DATA_PATH
        for s in row
        for p in s.parts
        if p.module == "_engine.check"
    }
    assert engine == {"runner (seam 1)", "oracle (seam 2)", "judge"}


@pytest.fixture(scope="module")
def figure() -> str:
    return figures.data_path_figure()


def test_the_figure_shows_every_stage_and_module(figure: str) -> None:
    root = ET.fromstring(figure)
    assert root.get("role") == "img"
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    for part in _parts():
        assert part.module in texts, part.module
    for row in figures.DATA_PATH:
        for stage in row:
            assert stage.name in texts, stage.name


def test_the_figure_text_is_at_least_11px(figure: str) -> None:
    sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", figure)]
    assert sizes, "no font sizes in the SVG"
    assert min(sizes) >= 11.0, sorted(set(sizes))
    assert "font: " not in figure  # no shorthand that would escape the check above


def test_the_table_lists_every_module() -> None:
    table = figures.architecture_table()
    rows = table.splitlines()[2:]  # below the header and its rule
    assert len(rows) == len(_parts())
    for name in architecture.modules():
        assert f"`{name}`" in table


def test_the_page_prints_the_figure_and_the_table_and_is_in_the_nav() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "figures.data_path_figure()" in text
    assert "figures.architecture_table()" in text
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = [next(iter(item.values())) for item in config["nav"] if isinstance(item, dict)]
    at = pages.index("architecture.md")
    assert pages[at - 2 : at + 2] == [
        "sharded.md",
        "real-kernels.md",
        "architecture.md",
        "tensorflow-keras.md",
    ]
