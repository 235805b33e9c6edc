"""Run the pages' slowest helpers beside ``mkdocs build`` (CI), on the core that it leaves free.

CI starts this with the builder, both with the same empty ``EMBEDDING_DOCS_CACHE``: each result
is stored by [`shared_results.shared`][], and the page that calls the helper reads it (or waits
while it is finished, or runs it itself when this process has not reached it yet), so every
helper runs once. A helper that fails here is only reported: the page that calls it runs it
again, and fails the build if it fails there too.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

#: ``(module, function, arguments)``: each call as its page makes it. mkdocs renders the pages
#: in the order of their files (sharded, tensorflow-keras, triton, verify) and reaches the
#: helpers in that order; this list starts with the longest (the Triton page's pytest run), then
#: takes the others from the last one the builder reaches back to the first, so that the two
#: meet in the middle instead of waiting on each other.
WARM: list[tuple[str, str, tuple[str, ...]]] = [
    ("triton_page", "demo", ("pytest",)),
    ("verify_page", "pytest_plugin_demo", ()),
    ("triton_page", "step", ("race",)),
    ("triton_page", "demo", ("cli without the switch",)),
    ("triton_page", "demo", ("cli",)),
    ("triton_page", "demo", ("bench",)),
]


def main() -> int:
    """Run every helper of [`WARM`][]; 0 unless ``EMBEDDING_DOCS_CACHE`` is unset."""
    if not os.environ.get("EMBEDDING_DOCS_CACHE"):
        print("EMBEDDING_DOCS_CACHE is not set: nothing would be shared", file=sys.stderr)
        return 2
    for module, function, args in WARM:
        start = time.perf_counter()
        try:
            getattr(importlib.import_module(module), function)(*args)
        except Exception:
            print(f"{module}.{function}{args} failed here:", file=sys.stderr)
            traceback.print_exc()
            continue
        print(f"{module}.{function}{args}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
