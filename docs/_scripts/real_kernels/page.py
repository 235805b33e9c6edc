"""Markdown for docs/real-kernels.md, read from docs/real-kernels.json at build time.

Imports no library: the site builds without them.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_page import wrap, wrap_code

from . import ENTRIES

__all__ = [
    "CATEGORIES",
    "ENTRY_FIELDS",
    "RUN_FIELDS",
    "Finding",
    "findings",
    "headline",
    "load",
    "recorded_elsewhere",
    "render_entry",
    "render_summary",
    "site_build",
]

JSON_PATH = Path(__file__).resolve().parents[2] / "real-kernels.json"
#: The GPU record of the Triton page (``benchmarks/triton_cuda_check.py``): its checks of a
#: library, by entry, are shown with that entry.
GPU_JSON_PATH = JSON_PATH.parent / "triton-cuda.json"
GPU_CHECKS = {"liger_embedding": "Liger"}

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


# --------------------------------------------------------------------------------------------
# Findings: the failing calls of an entry, one per distinct finding, by category
# --------------------------------------------------------------------------------------------

#: The categories of a finding, in the order a headline names them, with their headings.
CATEGORIES = {
    "defect": "confirmed defects",
    "other": "other findings",
    "missing option": "options it does not have",
    "interpreter limit": "limits of Triton's interpreter",
}
#: What the summary table's columns call them.
_COLUMNS = {
    "defect": "confirmed defects",
    "other": "other findings",
    "missing option": "options it lacks",
    "interpreter limit": "interpreter limits",
}
#: What a category means, under its heading on the page.
_MEANING = {
    "defect": "the library's own, each checked to fail in a fresh process with the library, "
    "torch and embedding-equivalence only (the ready-to-file reports below)",
    "other": "not yet checked call by call to be the library's own defect: an unsupported "
    "dtype or mode, a result that differs, bad input it accepts",
    "missing option": "the library's API has no argument for it, so the adapter refuses "
    "(`no_counterpart`): not the library's failure",
    "interpreter limit": "the kernel met an operation that Triton's interpreter cannot run "
    "on the CPU: neither a pass nor the library's failure",
}

#: The refusal of ``no_counterpart`` (docs/_scripts/real_kernels/_adapt.py).
_NO_ARGUMENT = re.compile(r"raises NotImplementedError: \S+ has no argument for (\w+)=")
_DTYPE = re.compile(r"\b(?:torch\.)?b?float\d+\b|'BFloat16'|'Half'")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _call_span(text: str) -> tuple[int, int] | None:
    """Where the first call with an ``input=`` argument lies in ``text``."""
    match = re.search(r"[A-Za-z_][\w.]*\(input=", text)
    if match is None:
        return None
    depth = 0
    for k in range(match.end() - len("input=") - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            return match.start(), k + 1
    return None


def _call(text: str) -> str | None:
    """The first call in ``text`` (``name(input=..., ...)``), tensors on one line."""
    span = _call_span(text)
    return None if span is None else re.sub(r"\s+", " ", text[span[0] : span[1]])


def _without_call(text: str) -> str:
    """``text`` without its call: the finding, said of any call."""
    span = _call_span(text)
    if span is not None:
        start, end = span
        if text[start - 1 : start] == "[" and text[end : end + 1] == "]":
            text = text[: start - 1].rstrip() + text[end + 1 :]  # the call in brackets: cut
        else:
            text = text[:start] + "…" + text[end:]
    return text.replace("backward of … raised", "its backward raised").removeprefix("… ").strip()


@dataclass
class Finding:
    """One distinct finding of an entry: what it is, its category, the calls that met it.

    Attributes:
        category: a key of [`CATEGORIES`][].
        text: the finding, as the first call that met it reported it, without its call.
        runs: the numbers of the calls (1-based, as in the entry's table) that met it.
        call: the minimal call that shows it: the ready-to-file report's for a defect, else
            the first call's, or ``None`` where its report names none.
        labels: the labels of those calls.
    """

    category: str
    text: str
    runs: list[int] = field(default_factory=list)
    call: str | None = None
    labels: list[str] = field(default_factory=list)


def _key(run: dict[str, Any]) -> tuple[str, str]:
    """What makes two failing calls one finding: the same category and the same message,
    whatever the call, the dtype and the numbers in it."""
    found = run["found"]
    if run["kind"] == "interpreter limit":
        return "interpreter limit", str(run.get("interpreter_limit"))
    missing = _NO_ARGUMENT.search(found)
    if run["kind"] == "refuses" and missing:
        return "missing option", missing.group(1)
    return "finding", _NUMBER.sub("#", _DTYPE.sub("#", _without_call(found)))


def findings(data: dict[str, Any]) -> list[Finding]:
    """The entry's distinct findings, ordered by category then by first call; a finding is
    a confirmed defect where one of its calls has a ready-to-file report."""
    reports = {report["label"]: report for report in data.get("reports") or []}
    grouped: dict[tuple[str, str], Finding] = {}
    for number, run in enumerate(data["runs"], 1):
        if run["passed"]:
            continue
        key = _key(run)
        if key not in grouped:
            category = "other" if key[0] == "finding" else key[0]
            text = run["found"]
            if category == "missing option":
                text = f"no argument for `{key[1]}`"
            elif category == "interpreter limit":
                text = _without_call(run["found"])
            else:
                text = _without_call(text)
            grouped[key] = Finding(category, text, call=_call(run["found"]))
        finding = grouped[key]
        finding.runs.append(number)
        finding.labels.append(run["label"])
        report = reports.get(run["label"])
        if report is not None and finding.category != "defect":
            finding.category = "defect"
            finding.call = _call(report["failure"]) or finding.call
    order = list(CATEGORIES)
    return sorted(grouped.values(), key=lambda f: (order.index(f.category), f.runs[0]))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n != 1 else f"1 {noun.removesuffix('s')}"


def headline(data: dict[str, Any]) -> str:
    """One line: confirmed defects, other findings, options it lacks, interpreter limits
    (distinct findings, the calls that met them in brackets), then the calls that passed."""
    found = findings(data)
    parts = []
    for category, noun in CATEGORIES.items():
        of = [f for f in found if f.category == category]
        calls = sum(len(f.runs) for f in of)
        singular = {"confirmed defects": "confirmed defect", "other findings": "other finding",
                    "options it does not have": "option it does not have",
                    "limits of Triton's interpreter": "limit of Triton's interpreter"}  # fmt: skip
        word = noun if len(of) != 1 else singular[noun]
        parts.append(f"**{len(of)}** {word}" + (f" ({_count(calls, 'calls')})" if of else ""))
    runs = data["runs"]
    passed = sum(r["passed"] for r in runs)
    line = " · ".join(parts) + f"; {passed} of {len(runs)} calls passed"
    if all(r["spec"]["kwargs"].get("boundaries", True) is False for r in runs):
        line += " (random examples only: no boundary phase)"
    return line + "."


# --------------------------------------------------------------------------------------------
# Versions and machines: the site's build against the records'
# --------------------------------------------------------------------------------------------


def site_build() -> dict[str, str]:
    """The torch and Triton versions (where installed) and the machine building the site."""
    from ._common import machine  # imports torch, which the site's build has

    built: dict[str, str] = {}
    for name in ("torch", "triton"):
        try:
            built[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    built["machine"] = machine()
    return built


_NAMES = {"torch": "torch", "triton": "Triton"}


def _hardware(machine: str) -> str:
    """``machine`` without its count of torch threads: ``"x86_64, 2 CPUs"``."""
    return re.sub(r", \d+ torch threads?$", "", machine)


def recorded_elsewhere(versions: dict[str, str], machine: str, built: dict[str, str]) -> str | None:
    """``"recorded on M with torch X, Triton Y; this site was built with torch Z ..."`` where
    the record's torch or Triton version or its machine is not the build's, else ``None``."""
    names = [n for n in _NAMES if n in versions]
    other = [n for n in names if versions[n] != built.get(n)]
    # The machine, not its setting of torch's threads (CI builds the site with one thread).
    same_machine = _hardware(machine) == _hardware(built.get("machine", ""))
    if not other and same_machine:
        return None
    with_ = ", ".join(f"{_NAMES[n]} {versions[n]}" for n in names)
    site = ", ".join(f"{_NAMES[n]} {built.get(n, 'not installed')}" for n in names)
    where = "" if same_machine else f" on {built.get('machine', '?')}"
    return f"recorded on {machine} with {with_}; this site was built with {site}{where}"


def _elsewhere_note(text: str | None) -> str:
    if text is None:
        return ""
    return f'!!! note "Recorded elsewhere"\n    {_text(text[0].upper() + text[1:])}.\n\n'


# --------------------------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------------------------


def render_summary(
    entries: dict[str, Any] | None = None, built: dict[str, str] | None = None
) -> str:
    """One row per entry: the library's version, the calls that passed, then its distinct
    findings by category (a finding met by ten calls counts once), and the examples. An entry
    recorded with other versions, or on another machine, than the site's build is marked."""
    entries = load() if entries is None else entries
    built = site_build() if built is None else built
    rows = [
        "| library | version | calls passed | " + " | ".join(_COLUMNS.values()) + " | examples |",
        "|---|---|---:|" + "---:|" * len(_COLUMNS) + "---:|",
    ]
    marked = []
    for e in ENTRIES:
        data = entries.get(e.id)
        link = f"[{e.title}](#{e.id.replace('_', '-')})"
        if not data or data.get("status") == "never run":
            rows.append(f"| {link} | not run yet |" + " |" * (len(_COLUMNS) + 2))
            continue
        library = e.distributions[0]
        version = f"{library} {data['versions'].get(library, '?')}"
        if recorded_elsewhere(data["versions"], data["machine"], built):
            version += " †"
            marked.append(e.title)
        found = findings(data)
        counts = [sum(f.category == c for f in found) for c in _COLUMNS]
        passed = sum(r["passed"] for r in data["runs"])
        rows.append(
            f"| {link} | {version} | {passed} of {len(data['runs'])} | "
            + " | ".join(str(n) for n in counts)
            + f" | {data['examples']} |"
        )
    out = "\n".join(rows) + "\n"
    if marked:
        out += (
            "\n† recorded with another torch or Triton version, or on another machine, than "
            "this site's build (each entry says which).\n"
        )
    return out


def render_entry(
    entry_id: str, entries: dict[str, Any] | None = None, built: dict[str, str] | None = None
) -> str:
    """The headline, each distinct finding with its count, the table of calls, and each
    failure with its counterexample; where the record was made with other versions or on
    another machine than the site's build (``built``, [`site_build`][]), a note says so."""
    entries = load() if entries is None else entries
    built = site_build() if built is None else built
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
    out.append(_elsewhere_note(recorded_elsewhere(data["versions"], data["machine"], built)))
    out.append(f"**What the verifier found:** {headline(data)}\n")
    out += _findings(data)
    out += [f"- {_text(line)}" for line in data["found"] if line.startswith("passes: ")]
    out += [f"- {_text(note)}" for note in data["notes"]]
    out += _gpu_checks(entry_id, built)
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


def _findings(data: dict[str, Any]) -> list[str]:
    """A list per category: one line per distinct finding, with the calls that met it."""
    found = findings(data)
    out = []
    for category, heading in CATEGORIES.items():
        of = [f for f in found if f.category == category]
        if not of:
            continue
        out.append(f"- *{heading[0].upper() + heading[1:]}* ({_MEANING[category]}):\n")
        for f in of:
            numbers = ", ".join(str(n) for n in f.runs)
            times = f"**x{len(f.runs)}** " if len(f.runs) > 1 else ""
            calls = "call" if len(f.runs) == 1 else "calls"
            line = f"    - {times}{_text(f.text)} ({calls} {numbers})"
            if f.call and category in ("defect", "other"):
                what = "minimal call" if category == "defect" else "first call"
                line += f"; {what}: `{f.call}`"
            out.append(line)
        out.append("")
    return out


def _gpu_checks(entry_id: str, built: dict[str, str], path: Path = GPU_JSON_PATH) -> list[str]:
    """The GPU record's checks of this entry's library (compiled, no interpreter), marked
    with the machine and versions that produced them."""
    prefix = GPU_CHECKS.get(entry_id)
    if prefix is None or not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    checks = [c for c in data["results"] if c["check"].startswith(prefix)]
    if not checks:
        return []
    versions = {"torch": data["torch"], "triton": data["triton"]}
    where = recorded_elsewhere(versions, data["device"], built) or (
        f"recorded on {data['device']} with torch {data['torch']}, Triton {data['triton']}"
    )
    out = [
        f"- *On a GPU*, compiled, without the interpreter ({_text(where)}; the "
        "[Triton page's GPU record](../triton/#what-the-interpreter-cannot-tell-you)):\n"
    ]
    for check in checks:
        verdict = _short_name(check["lines"][0]) if check["lines"] else "no output"
        out.append(f"    - {_text(check['check'])}: {_text(verdict)}")
    return [*out, ""]


def _short_name(line: str) -> str:
    """``line`` with a candidate's qualified name (``__main__._checks.<locals>.liger``) cut
    to its own name."""
    return re.sub(r"[\w.]*<locals>\.(\w+)", r"\1", line)


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
