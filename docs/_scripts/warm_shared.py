"""Run the pages' shared helpers ahead of the site builders (``warm_shared.py`` in CI).

CI starts this beside its two site builders, with the same ``EMBEDDING_DOCS_CACHE``: it runs
the helpers that [`shared_results.shared`][] stores, the longest first, while the builders
render the pages before them. A builder that reaches a helper finds its result, or waits on
its lock while this process finishes it; so the helpers' work runs once, on the core the
builders leave free. A helper that fails here is only reported: the builder that reaches it
runs it itself, and fails the build if it fails there too.
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

#: ``(module, function, arguments)``: each call as its page makes it, the longest first.
WARM: list[tuple[str, str, tuple[str, ...]]] = [
    ("triton_page", "demo", ("pytest",)),
    ("triton_page", "demo", ("cli",)),
    ("verify_page", "pytest_plugin_demo", ()),
    ("keras_backends", "measure_all", ()),
    ("triton_page", "step", ("verify",)),
    ("triton_page", "step", ("limit",)),
    ("triton_page", "step", ("bug",)),
    ("triton_page", "demo", ("cli without the switch",)),
    ("triton_page", "step", ("race",)),
    ("triton_page", "step", ("cost",)),
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
