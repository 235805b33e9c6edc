"""Build the site with Zensical without running the pages' code: ``zensical_build.py ARGS``.

CI runs every page's code once, in ``mkdocs build --strict``. This checks that Zensical,
Material's successor, still builds the same pages from the same ``mkdocs.yml`` (theme, nav,
extensions, mkdocstrings, links and anchors), with the pages' code shown and not run: it writes
[`derive`][]'s config beside ``mkdocs.yml`` (Zensical wants ``docs_dir`` inside the config
file's folder), runs ``zensical build -f`` on it with ``ARGS``, and removes it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The derived config, written beside ``mkdocs.yml`` for one build and removed after it.
CONFIG = ROOT / "zensical-no-exec.yml"
#: The plugin that runs the pages' code: dropped.
EXEC = re.compile(r"^  - markdown-exec\n", re.MULTILINE)
#: Without markdown-exec, superfences takes a ``python exec="true"`` fence for no fence at all
#: (its code becomes paragraphs, its comments headings): with ``relaxed_headers``, a code block.
FENCES = re.compile(r"^  - pymdownx\.superfences\n", re.MULTILINE)
RELAXED = "  - pymdownx.superfences:\n      relaxed_headers: true\n"


def derive(config: str) -> str:
    """``mkdocs.yml``'s text without markdown-exec, and with superfences' relaxed headers."""
    for line in (EXEC, FENCES):
        if len(line.findall(config)) != 1:
            raise ValueError(f"mkdocs.yml has no single line {line.pattern!r}: update {__file__}")
    return FENCES.sub(RELAXED, EXEC.sub("", config))


def main(args: list[str]) -> int:
    """``zensical build -f CONFIG ARGS`` on [`derive`][]'s config; its exit status."""
    CONFIG.write_text(derive((ROOT / "mkdocs.yml").read_text(encoding="utf-8")), encoding="utf-8")
    try:
        build = [sys.executable, "-m", "zensical", "build", "-f", str(CONFIG), *args]
        return subprocess.run(build, cwd=ROOT, check=False).returncode
    finally:
        CONFIG.unlink()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
