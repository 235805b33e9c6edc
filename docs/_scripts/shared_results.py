"""Results that the site's builders share: each page's code runs once for both builders.

CI builds the site twice, with mkdocs and with zensical, and each builder would run every page's
code. With ``EMBEDDING_DOCS_CACHE`` set to a folder, results are stored there and read back:

- [`share_page_blocks`][] wraps markdown-exec's runner in a builder's process
  (``build_site.py`` does it): every ``exec`` block's output is stored by the first builder
  (mkdocs, in CI) and read by the second (zensical), which then renders without running them;
- [`shared`][] stores one helper's result (the Triton page's steps and commands, the Keras
  backends' table, the pytest plugin's demo): ``warm_shared.py`` runs these on the core that
  the first builder leaves free, and the builder reads them when its page reaches them (or
  waits on the entry's lock while they are finished).

Without the variable (a local ``mkdocs build``, ``mkdocs serve``), everything runs, every time.

An entry's key is what it was called with (a helper's name and arguments, a block's code,
options and the earlier code of its session), a digest of every file of the package, of
``docs/_scripts`` and of the recorded results under ``docs/`` (``*.json``), and the versions of
the libraries that the pages measure: an edit to any of them, or another torch, runs it again.
The results are produced while the site builds, as before; they are not kept in the repository.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: The folders whose files key every entry.
SOURCES = (ROOT / "src" / "embedding_equivalence", HERE)
#: The recorded results that pages read: every ``.json`` file under ``docs/``.
DATA = ROOT / "docs"
#: The variable that names the folder of shared results (CI sets it; local builds do not).
CACHE_ENV = "EMBEDDING_DOCS_CACHE"
#: The distributions whose versions key every entry.
MEASURED = ("torch", "triton", "numpy", "keras", "tensorflow", "jax", "jaxlib", "hypothesis")

T = TypeVar("T")


@functools.cache
def _sources_digest() -> str:
    """sha256 over the paths and contents of the files of [`SOURCES`][] and [`DATA`][]."""
    digest = hashlib.sha256()
    files = [path for folder in SOURCES for path in sorted(folder.rglob("*"))]
    files += sorted(DATA.rglob("*.json"))
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _versions() -> dict[str, str | None]:
    """The installed version of each of [`MEASURED`][] (``None`` where it is absent)."""
    found: dict[str, str | None] = {}
    for distribution in MEASURED:
        try:
            found[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            found[distribution] = None
    return found


@contextlib.contextmanager
def _entry(name: str, *key_parts: Any) -> Iterator[Path | None]:
    """The cache file of one result, locked while the caller reads or writes it.

    Yields ``None`` when ``EMBEDDING_DOCS_CACHE`` is unset (nothing is shared). The key is
    ``key_parts``, a digest of [`SOURCES`][] and [`DATA`][], and the versions of [`MEASURED`][].
    """
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        yield None
        return
    key = json.dumps([*key_parts, _sources_digest(), _versions()], sort_keys=True, default=str)
    entry = Path(folder) / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other builder waits here while this one runs it
        yield entry


def _read(entry: Path) -> Any:
    return json.loads(entry.read_text(encoding="utf-8"))["result"]


def _write(entry: Path, result: Any) -> None:
    partial = entry.with_suffix(".partial")
    partial.write_text(json.dumps({"result": result}), encoding="utf-8")
    os.replace(partial, entry)  # whole or absent: a reader never sees half an entry


def shared(name: str, compute: Callable[[], T], *args: Any) -> T:
    """``compute()``, or the result another builder of this site already stored for it.

    Args:
        name: the helper's name (the entry's file name starts with it).
        compute: runs the helper; its result must survive a JSON round trip unchanged.
        args: the helper's arguments (JSON-serialisable), part of the key.

    Returns:
        The helper's result.
    """
    with _entry(name, name, args) as entry:
        if entry is None:
            return compute()
        if entry.exists():
            return _read(entry)
        result = compute()
        _write(entry, result)
        return result


def share_page_blocks() -> None:
    """Make this process's site builder store or read every ``exec`` block's output.

    With ``EMBEDDING_DOCS_CACHE`` set, markdown-exec's Python runner is wrapped: a block whose
    output is stored (by the builder that ran before, in CI mkdocs) is not run again, its
    output is read; any other block runs and its output is stored. A block's key is its code,
    its options, and the code of the blocks before it in its session (whose variables it may
    read), on top of [`shared`][]'s key. A block that reads a session whose earlier blocks were
    read, not run, first runs those blocks (their output discarded), so that its variables
    are there. A block that raises is never stored: the builder reports it as before.
    Without the variable, nothing changes.
    """
    if not os.environ.get(CACHE_ENV):
        return
    from markdown_exec._internal.formatters import python as runner

    run = runner._run_python
    history: dict[str, list[str]] = defaultdict(list)  # each session's blocks so far
    behind: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)  # read, not run

    def _catch_up(session: str) -> None:
        now = runner._sessions_counter[session]
        for count, call in behind.pop(session, []):
            runner._sessions_counter[session] = count - 1  # the block's own name, as before
            run(**call)
        runner._sessions_counter[session] = now

    def run_shared(
        code: str,
        returncode: int | None = None,
        session: str | None = None,
        id: str | None = None,
        **extra: str,
    ) -> str:
        call = {"code": code, "returncode": returncode, "session": session, "id": id, **extra}
        before = history[session] if session else []
        with _entry("block", "block", sorted(call.items()), before) as entry:
            assert entry is not None
            if session:
                history[session].append(code)
            if entry.exists():
                runner._code_block_id(id, session, extra.get("title"))  # numbered as if run
                if session:
                    behind[session].append((runner._sessions_counter[session], call))
                return _read(entry)
            if session:
                _catch_up(session)
            output = run(**call)
            _write(entry, output)
            return output

    runner._run_python = run_shared
