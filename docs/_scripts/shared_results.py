"""Results that the site's builders share: an expensive helper of a page runs once per build.

CI builds the site twice, with mkdocs and with zensical side by side, and each builder runs every
page's code. The helpers that run whole processes or the Triton interpreter (the Triton page's
steps and commands, the Keras backends' table) go through [`shared`][]: with
``EMBEDDING_DOCS_CACHE`` set to a folder, the first builder to reach a helper takes a lock on its
entry, runs it and stores its result there; the other builder waits on the lock and reads the
result instead of running the helper a second time. Without the variable (a local ``mkdocs
build``, ``mkdocs serve``), every helper runs, every time.

An entry's key is the helper's name and arguments, a digest of every file of the package and
of ``docs/_scripts``, and the versions of the libraries the helpers measure: an edit to any of
them, or another torch, runs the helper again. The results are produced while the site builds,
as before; they are not kept in the repository.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: The folders whose files key every entry.
SOURCES = (ROOT / "src" / "embedding_equivalence", HERE)
#: The distributions whose versions key every entry.
MEASURED = ("torch", "triton", "numpy", "keras", "tensorflow", "jax", "jaxlib", "hypothesis")

T = TypeVar("T")


@functools.cache
def _sources_digest() -> str:
    """sha256 over the paths and contents of every file under [`SOURCES`][]."""
    digest = hashlib.sha256()
    for folder in SOURCES:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def shared(name: str, compute: Callable[[], T], *args: Any) -> T:
    """``compute()``, or the result another builder of this site already stored for it.

    Args:
        name: the helper's name (the entry's file name starts with it).
        compute: runs the helper; its result must survive a JSON round trip unchanged.
        args: the helper's arguments (JSON-serialisable), part of the key.

    Returns:
        The helper's result.
    """
    folder = os.environ.get("EMBEDDING_DOCS_CACHE")
    if not folder:
        return compute()
    versions = {d: _version(d) for d in MEASURED}
    key = json.dumps([name, args, _sources_digest(), versions], sort_keys=True, default=str)
    entry = Path(folder) / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other builder waits here while this one runs it
        if entry.exists():
            return json.loads(entry.read_text(encoding="utf-8"))["result"]
        result = compute()
        partial = entry.with_suffix(".partial")
        partial.write_text(json.dumps({"key": key, "result": result}), encoding="utf-8")
        os.replace(partial, entry)
        return result
