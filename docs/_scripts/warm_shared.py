"""Run the pages' shared helpers ahead of the site builders (``warm_shared.py`` in CI).

CI starts this beside its first site builder (mkdocs), with the same ``EMBEDDING_DOCS_CACHE``:
it runs the helpers that [`shared_results.shared`][] stores while the builder runs the pages
before them. The builder that reaches a helper finds its result, or waits on its lock while
this process finishes it, or runs it itself when this process has not started it yet; so the
pages' code runs on both cores, once. A helper that fails here is only reported: the builder
that reaches it runs it itself, and fails the build if it fails there too.
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
    ("triton_page", "step", ("limit",)),
    ("triton_page", "step", ("bug",)),
    ("triton_page", "step", ("cost",)),
    ("triton_page", "step", ("verify",)),
    ("keras_backends", "measure_all", ()),
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
