"""Markdown for docs/real-kernels.md, read from docs/real-kernels.json at build time.

Imports no library: the site builds without them.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

from verify_page import wrap, wrap_code

from . import ENTRIES

__all__ = ["ENTRY_FIELDS", "RUN_FIELDS", "load", "render_entry", "render_summary"]

JSON_PATH = Path(__file__).resolve().parents[2] / "real-kernels.json"

#: What the page reads from each entry that has run, and from each of its calls.
ENTRY_FIELDS = ("id", "title", "status", "versions", "machine", "generated", "passed",
                "examples", "seconds", "found", "notes", "runs")  # fmt: skip
RUN_FIELDS = ("label", "call", "spec", "passed", "examples", "seconds", "summary", "failure",
              "counterexample", "kind", "found")  # fmt: skip

_VERDICT = {
    "passed": "passed",
    "refuses": "raises on a valid call",
    "accepts bad input": "accepts bad input",
    "differs": "differs",
    "crashes": "process died",
    "interpreter limit": "Triton's interpreter cannot run it",
}


def load(path: Path = JSON_PATH) -> dict[str, Any]:
    """The entries of the JSON, by id."""
    return json.loads(path.read_text(encoding="utf-8"))["entries"]


def _text(text: str) -> str:
    """``text`` for Markdown: ``<tmp>`` and ``<repo>`` are not HTML tags, and an exponent
    (``2**17``) is code, not the start of bold text."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"(?<![\w`])(\d+\*\*\d+)(?![\w`])", r"`\1`", text)


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|").replace("\n", " ")


def _versions(data: dict[str, Any]) -> str:
    return ", ".join(f"{name} {version}" for name, version in data["versions"].items())


def _stale(data: dict[str, Any]) -> str:
    """An admonition for an entry that the last generation could not run."""
    not_run = data.get("not_run")
    if not not_run:
        return ""
    return (
        f'!!! warning "Not run on {not_run["date"]}"\n'
        f"    {_text(not_run['reason'])}. The result below is the previous one, produced with "
        f"{_versions(data)}.\n\n"
    )


#: A frame of the package's own code in a traceback (the rank that called the candidate), with
#: the lines that show its source: the traceback on the page starts at the candidate's frames.
_OWN_FRAME = re.compile(r'^  File "src/embedding_equivalence/[^\n]*\n(?:    [^\n]*\n)*', re.M)


def _shown(body: str, fence: str) -> str:
    """``body`` at the page's width: Python broken inside its brackets, text wrapped with
    tensors as torch prints them, and tracebacks without the package's own frames."""
    if fence == "python":
        return "\n".join(part for line in body.split("\n") for part in wrap_code(line))
    return wrap(_OWN_FRAME.sub("", body))


def _details(title: str, body: str, fence: str = "text", kind: str = "failure") -> str:
    """A collapsed block (pymdownx.details) holding ``body`` as a code block."""
    title = title.replace('"', "'")
    inner = f"```{fence}\n{_shown(body.rstrip(), fence)}\n```"
    return f'??? {kind} "{title}"\n' + textwrap.indent(inner, "    ") + "\n"


def render_summary(entries: dict[str, Any] | None = None) -> str:
    """One row per entry: the library's version, calls, failed calls, examples."""
    entries = load() if entries is None else entries
    rows = [
        "| library | version | verify calls | failed | examples |",
        "|---|---|---:|---:|---:|",
    ]
    for e in ENTRIES:
        data = entries.get(e.id)
        link = f"[{e.title}](#{e.id.replace('_', '-')})"
        if not data or data.get("status") == "never run":
            rows.append(f"| {link} | not run yet | | | |")
            continue
        library = e.distributions[0]
        version = f"{library} {data['versions'].get(library, '?')}"
        failed = sum(not r["passed"] for r in data["runs"])
        rows.append(f"| {link} | {version} | {len(data['runs'])} | {failed} | {data['examples']} |")
    return "\n".join(rows)


def render_entry(entry_id: str, entries: dict[str, Any] | None = None) -> str:
    """What the verifier found, the table of calls, and each failure with its counterexample."""
    entries = load() if entries is None else entries
    data = entries.get(entry_id)
    if not data or data.get("status") == "never run":
        not_run = (data or {}).get("not_run", {})
        reason = not_run.get("reason", "no result in the JSON yet")
        tried = ""
        if not_run.get("versions"):
            tried = f" (tried on {not_run['date']} with {_versions(not_run)}, {not_run['machine']})"
        return f'!!! note "Not run yet"\n    {_text(reason)}{_text(tried)}.\n'
    out = [_stale(data)]
    out.append(
        f"Produced on {data['generated']} with {_versions(data)} ({data['machine']}): "
        f"{len(data['runs'])} verify calls, {data['examples']} examples, "
        f"{data['seconds']:.0f} s.\n"
    )
    out.append("**What the verifier found:**\n")
    out += [f"- {_text(line)}" for line in data["found"]]
    out += [f"- {_text(note)}" for note in data["notes"]]
    out.append("\n| # | what was tried | verdict | examples | s |")
    out.append("|---:|---|---|---:|---:|")
    for number, run in enumerate(data["runs"], 1):
        examples = "" if run["examples"] is None else run["examples"]
        seconds = "" if run["seconds"] is None else f"{run['seconds']:.1f}"
        out.append(
            f"| {number} | {_cell(run['label'])} | {_VERDICT[run['kind']]} | {examples} "
            f"| {seconds} |"
        )
    calls = [f"# {n}. {run['label']}\n{run['call']}" for n, run in enumerate(data["runs"], 1)]
    out.append("\nThe verify calls, in the order they ran:\n")
    out.append("```python\n" + _shown("\n".join(calls), "python") + "\n```")
    out.append("")
    for number, run in enumerate(data["runs"], 1):
        if run["passed"]:
            continue
        body = f"{run['summary']}\n\n{run['failure'] or ''}"
        out.append(f"**{number}. {_text(run['label'])}:** {_text(run['found'])}\n")
        out.append(_details(f"{number}. the report", body))
        if run["counterexample"]:
            out.append(
                _details(
                    f"{number}. the minimal counterexample", run["counterexample"], "python",
                    kind="example",
                )
            )  # fmt: skip
    out += _reports(data)
    return "\n".join(out) + "\n"


def _reports(data: dict[str, Any]) -> list[str]:
    """The library's defects as ready-to-file reports: a title, the versions, what happens,
    and a script that needs the library, torch and embedding-equivalence only."""
    found = data.get("reports") or []
    if not found:
        return []
    out = [
        "**Ready-to-file reports** (the library's defects among the findings above; each "
        "script was run in a fresh process, outside this repository, and failed):\n"
    ]
    for report in found:
        body = (
            f"{report['title']}\n\nVersions: {_versions(report)}\n\nWhat happens:\n"
            f"{report['failure']}\n\nThe script below ends with (exit status "
            f"{report['exit_status']}):\n{report['stderr_tail']}"
        )
        out.append(f"- {_text(report['title'])}\n")
        out.append(textwrap.indent(_details("the report", body, kind="bug"), "    "))
        out.append(textwrap.indent(_details("the script", report["repro"], "python",
                                            kind="example"), "    "))  # fmt: skip
    return out
