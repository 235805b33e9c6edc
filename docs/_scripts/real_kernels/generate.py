"""Run every entry whose library imports and write ``docs/real-kernels.json``.

    python docs/_scripts/real_kernels/generate.py              # every entry
    python docs/_scripts/real_kernels/generate.py fbgemm_tbe   # some entries

Each entry runs in a child process of its own (``--child``): a library that reads out of
bounds, crashes or hangs takes only its child down, and each library's import-time state
(inductor's caches, Megatron's parallel state) stays there. An entry whose library does not
import keeps its previous result, which still names the versions that produced it. Progress
goes to stderr.

If the process dies during a call (a kernel that aborts), the generator records that call as
crashed, with the end of the process's stderr, and starts a new process for the calls after
it. [`run_child`][] with ``small=N`` runs an entry's recorded calls again instead (a passing
call with at most N examples, a failing one with its own budget and seed) and returns their
verdicts: tests/test_real_kernels.py compares them with the JSON.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
JSON_PATH = ROOT / "docs" / "real-kernels.json"
SCHEMA = "embedding-equivalence/real-kernels/1"
#: Exit status of a child whose library does not import.
MISSING = 3
#: Seconds an entry may take before its child is ended.
ENTRY_TIMEOUT = 1800
#: Calls of one entry that may crash its process before the entry is given up.
MAX_CRASHES = 8

if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # docs/_scripts: the package real_kernels

from real_kernels import ENTRIES, entry  # noqa: E402


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _quiet_library_logs() -> None:
    """Libraries log their own errors (inductor's failed compiles) at length; the report has
    them, so keep stderr for progress."""
    import logging

    import torch._logging

    silent = logging.CRITICAL + 1
    torch._logging.set_logs(all=logging.CRITICAL)  # dynamo and inductor set their own levels
    for name in ("torch", "fbgemm_gpu", "torchrec", "megatron"):
        logging.getLogger(name).setLevel(silent)


def _no_local_constants() -> None:
    """Draw without the literals of local modules.

    Recent Hypothesis releases mix the constants found in the source of every local module
    that is loaded (this package, the editable embedding_equivalence, these scripts) into its
    draws. The same seed would then draw other examples after any edit of those files, and a
    failure found by chance would come and go. The children draw without them, so that a
    recorded verdict replays until the libraries or the strategies change.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "_local_constants"):
        empty = providers._local_constants
        providers._get_local_constants = lambda: empty


def _import_or_none(module: str) -> str | None:
    """``None`` if ``module`` imports, else why not."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # a wheel that does not load raises OSError or RuntimeError too
        return f"{module} does not import: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def child(entry_id: str, out: Path, small: int | None, known: Path | None) -> int:
    """Run one entry (or replay its recorded calls) in this process.

    Writes one JSON line to ``out`` when a call starts, one when it ends, and the result last;
    calls recorded in ``known`` are not made again.
    """
    _quiet_library_logs()
    _no_local_constants()
    stream = out.open("a", encoding="utf-8")

    def write(kind: str, payload: Any) -> None:
        stream.write(json.dumps({kind: payload}) + "\n")
        stream.flush()

    why = _import_or_none(entry(entry_id).requires)
    if why is not None:
        write("missing", why)
        return MISSING
    from real_kernels import _common

    _common.EVENTS.append(write)
    if known is not None:
        for record in json.loads(known.read_text(encoding="utf-8")):
            _common.KNOWN[record["label"]] = record
    module = importlib.import_module(f"real_kernels.{entry_id}")
    if small is None:
        result: Any = module.verify()
    else:
        import torch

        recorded = json.loads(JSON_PATH.read_text(encoding="utf-8"))["entries"][entry_id]
        torch.set_num_threads(_common.recorded_threads(recorded["machine"]))
        result = _common.replay(recorded["runs"], small)
    write("result", result)
    return 0


def _spawn(command: list[str], timeout: float, env: dict[str, str] | None) -> tuple[int, list[str]]:
    """Run ``command``, passing its stderr on; ``(exit status, the last lines of stderr)``."""
    tail: collections.deque[str] = collections.deque(maxlen=60)
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=None if env is None else {**os.environ, **env},
    ) as process:

        def relay() -> None:
            assert process.stderr is not None
            for raw in process.stderr:
                line = raw.decode(errors="replace")
                tail.append(line)
                sys.stderr.write(line)
            sys.stderr.flush()

        reader = threading.Thread(target=relay, daemon=True)
        reader.start()
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()  # its ranks die with it (they ask Linux to: PR_SET_PDEATHSIG)
            process.wait()
            tail.append(f"the entry's process was ended after {timeout:.0f} s\n")
            status = -signal.SIGKILL
        reader.join(timeout=10)
    return status, list(tail)


def run_child(
    entry_id: str,
    *,
    small: int | None = None,
    timeout: float = ENTRY_TIMEOUT,
    env: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """Run ``child`` in a fresh interpreter; ``(exit status, its result or None)``.

    If the process dies during a call (a library that aborts, or a timeout), that call is
    recorded as crashed and a new process goes on with the calls after it; ``timeout`` bounds
    them all. ``env`` is added to the child's environment (and so to its ranks'), after the
    entry's own (``Entry.env``).
    """
    from real_kernels._common import crash_record

    env = {**dict(entry(entry_id).env), **(env or {})}
    known: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="real-kernels-") as tmp:
        for attempt in range(MAX_CRASHES + 1):
            out = Path(tmp) / f"events-{attempt}.jsonl"
            command = [sys.executable, str(Path(__file__).resolve()), "--child", entry_id]
            command += ["--out", str(out)]
            if small is not None:
                command += ["--small", str(small)]
            if known:
                (Path(tmp) / "known.json").write_text(json.dumps(known), encoding="utf-8")
                command += ["--known", str(Path(tmp) / "known.json")]
            status, tail = _spawn(command, max(deadline - time.monotonic(), 1), env)
            text = out.read_text(encoding="utf-8") if out.exists() else ""
            events = [json.loads(line) for line in text.splitlines()]
            by_kind = {kind: payload for event in events for kind, payload in event.items()}
            if "result" in by_kind:
                return status, by_kind["result"]
            if "missing" in by_kind:
                return MISSING, {"missing": by_kind["missing"]}
            started = [e["start"] for e in events if "start" in e]
            finished = [e["record"] for e in events if "record" in e]
            known += finished
            if len(started) == len(finished):  # it died outside a call
                return status, None
            crashed = crash_record(started[-1], status, "".join(tail))
            _log(f"  {crashed['label']}: {crashed['found']}")
            known.append(crashed)
    return status, None


def _previous() -> dict[str, Any]:
    if JSON_PATH.exists():
        return json.loads(JSON_PATH.read_text(encoding="utf-8"))["entries"]
    return {}


def generate(entry_ids: list[str]) -> dict[str, Any]:
    """Run ``entry_ids``, merge with the previous results, write and return the JSON."""
    previous = _previous()
    entries: dict[str, Any] = {}
    for e in ENTRIES:
        if e.id not in entry_ids:
            if e.id in previous:
                entries[e.id] = previous[e.id]
            continue
        _log(f"[{e.id}] {e.title}")
        start = time.perf_counter()
        status, data = run_child(e.id)
        if status == 0 and data is not None:
            entries[e.id] = data
            verdict = "passed" if data["passed"] else "failed"
            _log(f"[{e.id}] {verdict}: {len(data['runs'])} calls, {data['examples']} examples, "
                 f"{time.perf_counter() - start:.0f} s")  # fmt: skip
            continue
        why = (data or {}).get("missing") or f"the entry's process exited with status {status}"
        kept = dict(previous.get(e.id) or {"id": e.id, "title": e.title, "status": "never run"})
        if kept.get("status") != "never run":
            kept["status"] = "kept"
        kept["not_run"] = {"date": datetime.date.today().isoformat(), "reason": why}
        if kept["status"] == "never run":  # what was tried: the versions installed here
            from real_kernels._common import machine, versions

            kept["not_run"].update(versions=versions(e.distributions), machine=machine())
        entries[e.id] = kept
        _log(f"[{e.id}] not run ({why}); the previous result is kept")
    payload = {"schema": SCHEMA, "entries": entries}
    JSON_PATH.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    _log(f"wrote {JSON_PATH.relative_to(ROOT)}")
    return payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entries", nargs="*", help="entry ids (default: every entry)")
    parser.add_argument("--child", metavar="ENTRY", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--small", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--known", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.out, args.small, args.known)
    ids = args.entries or [e.id for e in ENTRIES]
    for i in ids:
        entry(i)  # refuses an unknown id before anything runs
    generate(ids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
