"""The pages' slowest helpers, run ahead of mkdocs on the other core: [`shared`][].

CI's site build runs every page's code once, in ``mkdocs build``, on one core. Beside it,
``warm_shared.py`` runs the helpers that spend tens of seconds in processes of their own (the
Triton page's commands and steps, the Verify page's pytest-plugin demo, the Keras backends'
table) and stores each result in the folder ``EMBEDDING_DOCS_CACHE``; the page that reaches a
helper reads its result there, or waits while it is finished, or runs it itself when the warmer
has not started it. CI empties the folder before each build, so a result is never older than
the build that reads it. Without the variable (a local ``mkdocs build``, ``mkdocs serve``),
every helper runs where its page calls it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

#: The variable that names the folder of results (CI sets it; local builds do not).
CACHE_ENV = "EMBEDDING_DOCS_CACHE"

T = TypeVar("T")


def shared(name: str, compute: Callable[[], T], *args: Any) -> T:
    """``compute()``, or the result that ``warm_shared.py`` stored for ``name`` and ``args``.

    Args:
        name: the helper's name (its result's file name starts with it).
        compute: runs the helper; its result must survive a JSON round trip unchanged.
        args: the helper's arguments (JSON-serialisable), part of the key.

    Returns:
        The helper's result.
    """
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return compute()
    key = hashlib.sha256(json.dumps([name, args], sort_keys=True).encode()).hexdigest()[:20]
    entry = Path(folder) / f"{name}-{key}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other process waits here while this one runs it
        if entry.exists():
            return json.loads(entry.read_text(encoding="utf-8"))["result"]
        result = compute()
        entry.write_text(json.dumps({"result": result}), encoding="utf-8")
        return result
