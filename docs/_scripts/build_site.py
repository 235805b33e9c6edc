"""Run a site builder with the pages' results shared: ``build_site.py mkdocs|zensical ARGS``.

CI builds the site with ``python docs/_scripts/build_site.py mkdocs build --strict ...`` and
then with ``... zensical build --strict``: the same commands as ``mkdocs``/``zensical``, with
[`shared_results.share_page_blocks`][] installed first, so that with ``EMBEDDING_DOCS_CACHE``
set the second builder reads every block's output that the first one stored. ``mkdocs.yml``
stays plain: a local ``mkdocs build`` or ``zensical build`` runs every block, as always.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from shared_results import share_page_blocks  # noqa: E402

BUILDERS = ("mkdocs", "zensical")


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` (a builder of [`BUILDERS`][]) with the rest of ``argv``."""
    if not argv or argv[0] not in BUILDERS:
        print(f"usage: build_site.py {{{'|'.join(BUILDERS)}}} ARGS...", file=sys.stderr)
        return 2
    share_page_blocks()
    if argv[0] == "mkdocs":
        from mkdocs.__main__ import cli
    else:
        from zensical.main import cli
    sys.argv = argv
    return cli()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
