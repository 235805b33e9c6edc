"""The page "Verify a Triton kernel without a GPU" (docs/triton.md, docs/_scripts/triton_page.py).

- Without triton (or numpy), each step shows its code and says plainly that its result is
  missing, instead of failing the build; nothing of the step runs.
- Built with triton (CI installs the extra), the page holds the results: the worked kernel
  passed, the bug was caught at its boundary, the interpreter's limit was named.
- The steps switch the interpreter on for themselves only: the environment is restored.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "docs" / "_scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import triton_page  # noqa: E402


@pytest.fixture
def without_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec

    def hidden(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "triton" else find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", hidden)


@pytest.mark.parametrize("name", sorted(p.stem for p in triton_page.STEPS.glob("*.py")))
def test_without_triton_a_step_shows_its_code_and_says_so(without_triton: None, name: str) -> None:
    text = triton_page.step(name)
    assert text.startswith(f'```python title="{name}.py"\n')
    assert (triton_page.STEPS / f"{name}.py").read_text(encoding="utf-8").strip() in text
    assert '!!! warning "Not run: triton is not installed"' in text
    assert "```text" not in text  # no result: the step did not run


def test_without_triton_a_command_says_so(without_triton: None) -> None:
    text = triton_page.command(["embedding-equivalence", "verify", "--triton-interpret"])
    assert "$ embedding-equivalence verify --triton-interpret" in text
    assert "Not run: triton is not installed" in text


def test_every_step_is_on_the_page() -> None:
    page = (ROOT / "docs" / "triton.md").read_text(encoding="utf-8")
    for path in triton_page.STEPS.glob("*.py"):
        assert f'step("{path.stem}")' in page, path.stem


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_a_step_runs_under_the_interpreter_and_restores_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A step of its own, run by the page's machinery: it sees the interpreter on and the
    # worked kernels interpreted (the page's own steps run in the build, checked below).
    (tmp_path / "probe.py").write_text(
        "import os\n"
        "from triton.runtime.interpreter import InterpretedFunction\n"
        "from triton_kernels import gather_rows\n"
        "print('TRITON_INTERPRET =', os.environ['TRITON_INTERPRET'])\n"
        "print('interpreted:', isinstance(gather_rows, InterpretedFunction))\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(triton_page, "STEPS", tmp_path)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("EMBEDDING_DOCS_CACHE", raising=False)  # run here, not read back
    text = triton_page.step("probe")
    assert "TRITON_INTERPRET = 1\ninterpreted: True" in text
    assert "TRITON_INTERPRET" not in os.environ


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_the_built_page_holds_the_results(tmp_path_factory: pytest.TempPathFactory) -> None:
    from test_docs import build_site  # the same strict build, once per session

    page = (build_site(tmp_path_factory) / "triton" / "index.html").read_text(encoding="utf-8")
    assert "Not run:" not in page
    # The default verification of the worked kernel in the dtypes the interpreter runs: the
    # boundary phase and the random examples.
    passed = r"triton_kernels\.triton_embedding: PASSED after [\d,]+ examples \(([\d,]+) at"
    found = re.search(passed, page)
    assert found, "the worked kernel's verification did not pass"
    assert int(found[1].replace(",", "")) > 200, "fewer boundary examples than the phase has"
    # The pytest demo: the boundary row and the three dtypes named pass, bfloat16 is skipped.
    assert re.search(r"4 passed, 1 skipped", page)
    # The page wraps the output at its width.
    skipped = r"bfloat16 is not among the dtypes this test\s+names \(float32, float64, float16\)"
    assert re.search(skipped, page)
    assert "fails from D = 1,025; passes at 1,024" in page
    assert "interpreter_limit='atomic-dtype'" in page
    assert "False bfloat16-subnormal-cast" in page  # the default run names the bfloat16 limit
    assert "0 active drivers" in page  # the command line without --triton-interpret:
    assert "on the command line: --triton-interpret" in page  # refused, with how to run it
    assert "triton_kernels.racy_embedding: PASSED" in page
    # bench: verified first, then timed beside F.embedding, with the ratio's spread.
    assert re.search(r"verified\s+first: passed, [\d,]+ examples", page)
    assert "ratio = candidate / F.embedding" in page
    # The cost step counted the calls a verification makes, with the second call of each.
    assert "each valid example twice: the second call checks" in page
    assert re.search(r"\d+ forward calls [^<]*? and\s+\d+ backward passes", page)


def test_the_gpu_run_is_rendered_readably_from_its_json_and_marked() -> None:
    import json

    from verify_page import WIDTH

    data = json.loads((ROOT / "docs" / "triton-cuda.json").read_text(encoding="utf-8"))
    text = triton_page.gpu_results(built={"torch": "2.13.0+cpu", "triton": "3.9.0"})
    note, _, block = text.partition("```text\n")
    # Marked: the machine and versions of the record, beside this build's.
    assert data["device"] in note
    assert f"torch {data['torch']}, Triton {data['triton']}" in note
    assert "this site was built with torch 2.13.0+cpu, Triton 3.9.0" in note
    assert "with the same versions" in triton_page.gpu_results(
        built={"torch": data["torch"], "triton": data["triton"]}
    )
    # Readable: short candidate names, tensors laid out, lines within the page's width.
    assert "<locals>" not in block
    assert all(len(line) <= WIDTH for line in block.splitlines())
    flat = " ".join(block.split())
    for result in data["results"]:
        assert f"[{result['check']}]" in block
        for line in result["lines"]:
            assert " ".join(triton_page.short_names(line).split()) in flat
    assert "  liger: PASSED after 100 examples" in block
    page = (ROOT / "docs" / "triton.md").read_text(encoding="utf-8")
    assert "gpu_results()" in page
