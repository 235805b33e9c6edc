"""Ready-to-file reports: a defect of a library, as a script that its maintainers can run.

An entry names the recorded calls whose failure is a defect of its library ([`Defect`][]: the
call's label and the library's function or class), after checking that the failure is the
library's and not the interpreter's, the adapter's or the verifier's. The report is that call's
minimal counterexample with the import of the adapter replaced by the adapter's own source (the
functions of the entry's module and of ``_adapt`` that it calls, the constants they read and
the imports they use), so that it needs the library, torch and embedding-equivalence only. The
generator runs each report in a fresh process, in an empty folder, and records how it ended:
a report that does not fail is an error of the generation, not a report.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["Defect", "inline_candidate", "reports"]

_IMPORT = re.compile(r"^from (real_kernels\.\w+) import (\w+) as candidate$", re.MULTILINE)
#: The call a finding ends with, `` [adapter(input=..., ...)]`` (and a note after it).
_CALL = re.compile(r" \[\w+\(.*\)\]( \(.*\))?$")
#: Seconds a report's script may take.
TIMEOUT = 300


@dataclass(frozen=True)
class Defect:
    """A recorded call whose failure is a defect of the library.

    Attributes:
        label: the call's label in the entry's records.
        api: the library's function or class that has the defect, for the title.
    """

    label: str
    api: str


def _names(code: types.CodeType) -> set[str]:
    """The global names a function's code (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _top_level(module: types.ModuleType) -> tuple[dict[str, str], dict[str, str]]:
    """The module's imports and constants: bound name -> the source line that binds it."""
    source = inspect.getsource(module)
    imports: dict[str, str] = {}
    constants: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            for alias in node.names:
                bound = alias.asname or alias.name
                as_text = f" as {alias.asname}" if alias.asname else ""
                imports[bound] = f"from {node.module} import {alias.name}{as_text}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                as_text = f" as {alias.asname}" if alias.asname else ""
                imports[bound] = f"import {alias.name}{as_text}"
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            text = ast.get_source_segment(source, node) or ""
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = text
    return imports, constants


def inline_candidate(counterexample: str) -> str:
    """``counterexample`` with ``from real_kernels.M import F as candidate`` replaced by F's
    source and what it needs, then ``candidate = F``; as it is when it imports no adapter
    (a candidate made by ``torch.compile`` is rebuilt from torch's own function)."""
    match = _IMPORT.search(counterexample)
    if match is None:
        return counterexample
    module = importlib.import_module(match.group(1))
    imports: dict[str, str] = {}
    constants: dict[str, str] = {}
    functions: list[tuple[str, str]] = []  # (qualified name, source), callees first

    def visit(mod: types.ModuleType, name: str) -> None:
        key = f"{mod.__name__}.{name}"
        if any(k == key for k, _ in functions):
            return
        fn = getattr(mod, name)
        mod_imports, mod_constants = _top_level(mod)
        for used in sorted(_names(fn.__code__)):
            target = vars(mod).get(used)
            if inspect.isfunction(target) and target.__module__.startswith("real_kernels."):
                visit(sys.modules[target.__module__], target.__name__)
            elif used in mod_constants:
                constants.setdefault(used, mod_constants[used])
            elif used in mod_imports:  # the library's, torch's, the package's (not relative)
                imports.setdefault(used, mod_imports[used])
        functions.append((key, textwrap.dedent(inspect.getsource(fn))))

    visit(module, match.group(2))
    path = f"docs/_scripts/real_kernels/{match.group(1).rpartition('.')[2]}.py"
    block = [f"# The adapter under test, from {path}: F.embedding's (or F.embedding_bag's) call"
             " made with the library."]  # fmt: skip
    block += sorted(set(imports.values()))
    block += ["", *constants.values()]
    for _, source in functions:
        block += ["", source.rstrip()]
    block += ["", f"candidate = {match.group(2)}"]
    return counterexample[: match.start()] + "\n".join(block) + counterexample[match.end() :]


def _run(script: str) -> tuple[int, str]:
    """Run ``script`` in a fresh process, in an empty folder; ``(exit status, the end of its
    traceback)``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    with tempfile.TemporaryDirectory(prefix="report-") as folder:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=folder, env=env, capture_output=True,
            text=True, timeout=TIMEOUT,
        )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    if not starts:
        return done.returncode, "\n".join(lines[-4:])
    # The last traceback: its innermost frame and the exception's first line.
    after = [i for i in range(starts[-1] + 1, len(lines)) if not lines[i].startswith(" ")]
    end = after[0] if after else len(lines) - 1
    return done.returncode, "\n".join(lines[max(end - 2, starts[-1] + 1) : end + 1])


def reports(
    records: list[dict[str, Any]], defects: tuple[Defect, ...], versions: dict[str, str]
) -> list[dict[str, Any]]:
    """The ready-to-file reports of ``defects``, each checked to fail as recorded.

    Raises:
        ValueError: a defect names no failing call, or its script does not fail.
    """
    from ._common import scrub

    by_label = {r["label"]: r for r in records}
    found = []
    for defect in defects:
        record = by_label.get(defect.label)
        if record is None or record["passed"] or not record["counterexample"]:
            raise ValueError(f"{defect.label!r}: no failing call with a counterexample")
        script = inline_candidate(record["counterexample"])
        status, last = _run(script)
        if status == 0:
            raise ValueError(f"{defect.label!r}: the report's script does not fail")
        found.append(
            {
                "label": defect.label,
                "title": f"{defect.api}: {_CALL.sub('', record['found'])}",
                "versions": versions,
                "failure": record["failure"],
                "repro": scrub(script),
                "exit_status": status,
                "stderr_tail": scrub(last),
            }
        )
    return found
