"""What every entry shares: one verify call as a JSON record, and the probe that chooses the calls.

A library is probed with the package's own verifiers, never by reading its code:

1. the adapter as it is, with the verifier's defaults (every dtype, every bag mode, no options;
   one example in five is bad input on the CPU, which the candidate must refuse);
2. if that failed and the entry has a *checked* adapter (the package's own input checks in
   front of the same library call, so that the library is judged on valid calls only), the
   checked adapter with the defaults;
3. if the defaults still failed: one run per bag mode (in float32), then one per dtype (in the
   modes that passed), to find which of them the library supports on its own; if none does,
   the same again with the entry's *workaround* adapter if it has one (which answers the call
   that failed everywhere itself), else the probe stops there. With a checked adapter, one
   more run of the adapter as it is, on what passed, tells whether the library refuses bad
   input where it computes;
4. one run per option, on the dtypes and modes that passed;
5. one run with every option that passed, together, with a larger budget.

Each run is recorded with its call as text, its verdict, the report's summary, failure and
counterexample, and a short ``found`` text computed from the failure message. Nothing in the
JSON is typed by hand.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.metadata
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "DTYPES",
    "Probe",
    "Run",
    "classify",
    "entry_result",
    "execute",
    "log",
    "machine",
    "replay",
    "scrub",
]

ROOT = Path(__file__).resolve().parents[3]

#: Dtypes by the names the JSON uses, in the verifier's shrinking order.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}

_VERIFIERS: dict[str, tuple[str, str]] = {
    "verify_embedding": ("embedding_equivalence", "verify_embedding"),
    "verify_embedding_bag": ("embedding_equivalence", "verify_embedding_bag"),
    "verify_sharded_embedding": ("embedding_equivalence.distributed", "verify_sharded_embedding"),
    "verify_quantized_embedding": ("embedding_equivalence", "verify_quantized_embedding"),
    # It draws float tables and quantizes them itself: its candidate is always the adapter.
    "verify_torchao_embedding": ("real_kernels.torchao_int8", "verify_torchao_embedding"),
}


def log(message: str) -> None:
    """Progress, on stderr."""
    print(message, file=sys.stderr, flush=True)


#: Called with ``("start", run)`` before a call and ``("record", record)`` after it, so that
#: the generator knows which call was running if the process dies (see generate.py).
EVENTS: list[Callable[[str, Any], None]] = []
#: Records of calls already made (by label): a restarted process takes them as they are.
KNOWN: dict[str, dict[str, Any]] = {}


def _emit(kind: str, payload: Any) -> None:
    for hook in EVENTS:
        hook(kind, payload)


def scrub(text: str | None) -> str | None:
    """``text`` without paths of this machine (the published page must not show them)."""
    if text is None:
        return None
    text = re.sub(r"(?:/[\w.+-]+)+/(?:site|dist)-packages/", "site-packages/", text)
    text = re.sub(r"/tmp/[\w./+-]+", "<tmp>", text)
    for path, name in (
        (str(ROOT) + os.sep, ""),  # paths of the project, relative to its root
        (str(ROOT), "."),
        (sys.prefix, "<venv>"),
        (sys.base_prefix, "<python>"),
        (os.path.expanduser("~"), "~"),
    ):
        if len(path) > 1:
            text = text.replace(path, name)
    return text


def _source(value: Any) -> str:
    """A keyword argument's value as Python source (dtypes by their torch name)."""
    if isinstance(value, (list, tuple)) and value and all(v in DTYPES for v in value):
        return "[" + ", ".join(f"torch.{v}" for v in value) + "]"
    if isinstance(value, list):
        return repr(tuple(value))
    return repr(value)


@dataclass(frozen=True)
class Run:
    """One verify call, JSON-able.

    Attributes:
        label: what the call tries, for the page.
        verifier: ``verify_embedding``, ``verify_embedding_bag`` or ``verify_sharded_embedding``.
        candidate: ``"module:function"`` of the adapter.
        kwargs: the verifier's keyword arguments, with dtypes by name and tuples as lists.
    """

    label: str
    verifier: str
    candidate: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def call(self) -> str:
        """The call as Python source."""
        name = self.candidate.partition(":")[2]
        first = repr(self.candidate) if self.verifier == "verify_sharded_embedding" else name
        args = [first] if self.verifier != "verify_torchao_embedding" else []
        args += [f"{k}={_source(v)}" for k, v in self.kwargs.items()]
        return f"{self.verifier}({', '.join(args)})"

    def arguments(
        self, max_examples: int | None = None, boundaries: bool | None = None
    ) -> dict[str, Any]:
        """The keyword arguments for the verifier itself (``boundaries=False``: without the
        boundary phase, which every recorded call ran)."""
        kwargs: dict[str, Any] = {}
        for key, value in self.kwargs.items():
            if key == "dtypes":
                value = [DTYPES[v] for v in value]
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        if max_examples is not None:
            kwargs["max_examples"] = max_examples
        if boundaries is not None and self.verifier != "verify_torchao_embedding":
            kwargs["boundaries"] = boundaries
        return kwargs


_VALID = re.compile(r" raised (?P<error>.*?), but the call is valid", re.S)
_INVALID = re.compile(r"but the call is invalid \((?P<kind>.*?)\) and the reference raises", re.S)


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(
    passed: bool,
    failure: str | None,
    torch_defect: str | None,
    interpreter_limit: str | None = None,
) -> tuple[str, str]:
    """``(kind, text)`` of a run, from its report's failure message.

    Kinds: ``"passed"``; ``"refuses"`` (raises on a call that the reference computes);
    ``"accepts bad input"`` (returns a result where the reference raises); ``"differs"``
    (another result: values, dtype, shape, gradient, a rank that hung or died);
    ``"interpreter limit"`` (the report names a limit of Triton's interpreter: neither a pass
    nor the library's bug). A call during which the process itself died is ``"crashes"`` (see
    [`crash_record`][]).
    """
    if passed:
        return "passed", "passed"
    failure = failure or ""
    if interpreter_limit:
        return "interpreter limit", (
            f"Triton's interpreter cannot run it ({interpreter_limit}): "
            + _first_line(failure.split("Triton's interpreter", 1)[0])
        )
    valid = _VALID.search(failure)
    invalid = _INVALID.search(failure)
    if valid:
        kind, text = "refuses", "raises " + _first_line(valid.group("error"))
    elif invalid:
        kind = "accepts bad input"
        text = f"returns a result for bad input ({invalid.group('kind')}), where torch raises"
    else:
        kind, text = "differs", _first_line(failure)
    if torch_defect:
        text += f" (torch's own function fails this case too: {torch_defect})"
    return kind, text


def execute(
    run: Run, *, max_examples: int | None = None, boundaries: bool | None = None
) -> dict[str, Any]:
    """Run ``run`` and return its JSON record (``max_examples`` overrides the budget,
    ``boundaries=False`` leaves the boundary phase out).

    A call whose record is in [`KNOWN`][] is not made again: its record is returned.
    """
    if run.label in KNOWN:
        return KNOWN[run.label]
    module, name = _VERIFIERS[run.verifier]
    verifier: Callable[..., Any] = getattr(importlib.import_module(module), name)
    sharded = run.verifier == "verify_sharded_embedding"
    from embedding_equivalence._engine.names import import_reference

    candidate = run.candidate if sharded else import_reference(run.candidate)
    log(f"  {run.label}: {run.call}")
    _emit("start", asdict(run))
    start = time.perf_counter()
    report = verifier(candidate, **run.arguments(max_examples, boundaries))
    seconds = time.perf_counter() - start
    defect = report.torch_defect
    kind, found = classify(report.passed, report.failure, defect, report.interpreter_limit)
    if not report.passed and report.failure:
        # The options are drawn, not forced: the minimal failing call may not pass one.
        call = report.failure.splitlines()[0]
        unused = [o for o in run.kwargs.get("options", []) if f"{o}=" not in call]
        if unused:
            found += f" (the minimal failing call passes no {', '.join(unused)})"
    record: dict[str, Any] = {
        "label": run.label,
        "call": run.call,
        "spec": asdict(run),
        "passed": report.passed,
        "examples": report.examples,
        "seconds": round(seconds, 2),
        "summary": scrub(str(report).splitlines()[0]),
        "failure": scrub(report.failure),
        "counterexample": scrub(report.counterexample),
        "torch_defect": defect,
        "interpreter_limit": report.interpreter_limit,
        "kind": kind,
        "found": found,
    }
    if report.compiled is not None:
        record["compiled"] = {
            "compiled_examples": report.compiled.examples,
            "eager_fallbacks": report.compiled.eager_fallbacks,
            "fallback_reasons": report.compiled.fallback_reasons,
        }
    verdict = "passed" if report.passed else f"FAILED ({kind})"
    log(f"    {verdict} after {report.examples} examples in {seconds:.1f} s: {found}")
    _emit("record", record)
    return record


def crash_record(spec: dict[str, Any], status: int, stderr_tail: str) -> dict[str, Any]:
    """The record of a call during which the process died: no report, the end of its stderr."""
    run = Run(**spec)
    how = f"signal {-status}" if status < 0 else f"exit status {status}"
    try:
        import signal

        how = signal.Signals(-status).name if status < 0 else how
    except ValueError:
        pass
    lines = [line for line in stderr_tail.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith(f"  {run.label}: ")]
    lines = lines[starts[-1] + 1 :] if starts else lines  # what the process wrote in the call
    last = scrub(lines[-1].strip()) if lines else ""
    return {
        "label": run.label,
        "call": run.call,
        "spec": spec,
        "passed": False,
        "examples": None,
        "seconds": None,
        "summary": f"the process died ({how}) during the call: no report",
        "failure": scrub("\n".join(lines[-12:])),
        "counterexample": None,
        "torch_defect": None,
        "kind": "crashes",
        "found": f"the process died ({how}) during the call: {_first_line(last or '')}",
    }


@dataclass
class Probe:
    """Choose and run the verify calls of one adapter (see the module's docstring).

    Attributes:
        verifier: the verifier's name (see [`Run`][]).
        candidate: the adapter as it is, ``"module:function"``.
        options: the verifier's options to try, one at a time.
        checked: the same adapter with the package's input checks in front, or ``None``.
        workaround: a checked adapter that also answers a call the library fails on everywhere
            (so that no mode or dtype passes and the probe would stop), or ``None``.
        workaround_label: what the workaround answers, for the labels.
        unchecked_workaround: the workaround without the input checks (the adapter as it is,
            but answering that call), or ``None``: once the workaround was needed, the run on
            bad input uses it, so that it reaches bad input.
        unchecked_label: what it answers, for the label of that run.
        fixed: keyword arguments of every call (``sharding``, ``world_size``).
        dtypes: dtypes to try, by name.
        modes: bag modes to try (``None`` for a lookup).
        budget: examples of each probing call.
        final_budget: examples of the last call, with every option that passed.
        seed: the seed of every call.
        prefix: the labels' prefix (e.g. ``"Shard(0)"``).
        explore: ``False``: the first call only (the adapter as it is, with the defaults).
    """

    verifier: str
    candidate: str
    options: tuple[str, ...]
    checked: str | None = None
    workaround: str | None = None
    workaround_label: str = ""
    unchecked_workaround: str | None = None
    unchecked_label: str = ""
    fixed: dict[str, Any] = field(default_factory=dict)
    dtypes: tuple[str, ...] = tuple(DTYPES)
    modes: tuple[str, ...] | None = None
    budget: int = 30
    final_budget: int = 100
    seed: int = 0
    prefix: str = ""
    explore: bool = True
    records: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def _run(
        self,
        label: str,
        candidate: str,
        *,
        dtypes: tuple[str, ...] | None = None,
        modes: tuple[str, ...] | None = None,
        options: tuple[str, ...] = (),
        budget: int | None = None,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self.fixed)
        if options:
            kwargs["options"] = list(options)
        if modes is not None and tuple(modes) != self.modes:  # the probe's modes: the default
            kwargs["modes"] = list(modes)
        if dtypes is not None and tuple(dtypes) != self.dtypes:
            kwargs["dtypes"] = list(dtypes)
        kwargs["max_examples"] = budget or self.budget
        kwargs["seed"] = self.seed
        label = f"{self.prefix}: {label}" if self.prefix else label
        record = execute(Run(label, self.verifier, candidate, kwargs))
        self.records.append(record)
        return record

    def run(self) -> list[dict[str, Any]]:
        """Run the probe; returns the records (also kept in ``records``)."""
        as_is = self._run("as it is, defaults", self.candidate)
        if not self.explore:
            return self.records
        candidate, checked = self.candidate, ""
        dtypes, modes = self.dtypes, self.modes
        if not as_is["passed"]:
            if self.checked is not None:
                candidate, checked = self.checked, " (input checked first)"
                defaults = self._run(f"defaults{checked}", candidate)
            if self.checked is None or not defaults["passed"]:
                supported = self._supported(candidate, checked)
                if supported is None and self.workaround is not None:
                    candidate, checked = self.workaround, f" ({self.workaround_label})"
                    supported = self._supported(candidate, checked)
                if supported is None:
                    self.notes.append("no dtype or mode passed on its own, so no option was tried")
                    return self.records
                dtypes, modes = supported
                if self.checked is not None and as_is["kind"] != "accepts bad input":
                    # Is bad input refused where the library computes? (The first call may
                    # have stopped at something else first.)
                    unchecked, label = self.candidate, "as it is"
                    if candidate == self.workaround and self.unchecked_workaround is not None:
                        unchecked = self.unchecked_workaround
                        label = f"as it is ({self.unchecked_label})"
                    self._run(
                        f"{label}, bad input included, on what passed", unchecked,
                        dtypes=dtypes, modes=modes, budget=self.final_budget,
                    )  # fmt: skip
        applicable = self._applicable_modes()
        passing: list[str] = []
        for option in self.options:
            option_modes = None
            if modes is not None:
                option_modes = tuple(m for m in modes if applicable(option, m))
                if not option_modes:
                    self.notes.append(
                        f"{option}: not tried, it applies to no mode that passed "
                        f"({', '.join(modes)})"
                    )
                    continue
            record = self._run(
                f"{option}{checked}", candidate, dtypes=dtypes, modes=option_modes,
                options=(option,),
            )  # fmt: skip
            if record["passed"]:
                passing.append(option)
        self._run(
            f"everything that passed, together{checked}", candidate, dtypes=dtypes, modes=modes,
            options=tuple(passing), budget=self.final_budget,
        )  # fmt: skip
        return self.records

    def _supported(
        self, candidate: str, checked: str
    ) -> tuple[tuple[str, ...], tuple[str, ...] | None] | None:
        """One run per mode (in the first dtype), then one per dtype (in the modes that
        passed); the dtypes and modes that passed, or ``None`` if none did."""
        dtypes, modes = self.dtypes, self.modes
        passed: list[str] = []
        if modes is not None:
            first, dtypes = dtypes[0], dtypes[1:]
            passed_modes = []
            for mode in modes:
                label = f"mode={mode!r}, {first}{checked}"
                if self._run(label, candidate, dtypes=(first,), modes=(mode,))["passed"]:
                    passed_modes.append(mode)
            if not passed_modes:
                return None
            passed.append(first)
            modes = tuple(passed_modes)
        for dtype in dtypes:
            if self._run(f"{dtype}{checked}", candidate, dtypes=(dtype,), modes=modes)["passed"]:
                passed.append(dtype)
        return (tuple(passed), modes) if passed else None

    @staticmethod
    def _applicable_modes() -> Callable[[str, str], bool]:
        from embedding_equivalence.forms.options import option_applies

        return option_applies


def versions(distributions: tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``distributions`` and of this package and Python."""
    found: dict[str, str] = {}
    for name in (*distributions, "embedding-equivalence"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    found["python"] = platform.python_version()
    return found


def machine() -> str:
    """The machine, in words: architecture, CPUs, torch threads."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads"


def recorded_threads(described: str) -> int:
    """The torch threads of a machine that [`machine`][] described.

    A replay runs with them: inductor's CPU backward of ``F.embedding`` fails to compile with
    two threads and compiles with one, so a verdict may hold only at its thread count.

    Raises:
        ValueError: ``described`` names no thread count.
    """
    found = re.search(r"(\d+) torch threads", described)
    if found is None:
        raise ValueError(f"the recorded machine {described!r} names no thread count")
    return int(found.group(1))


def _found_lines(records: list[dict[str, Any]]) -> list[str]:
    """The failing runs' findings, one line each, then one line for the passing runs."""
    lines = [f"{r['label']}: {r['found']}" for r in records if not r["passed"]]
    passing = [r["label"] for r in records if r["passed"]]
    if passing:
        lines.append("passes: " + "; ".join(passing))
    return lines


def entry_result(
    entry_id: str,
    records: list[dict[str, Any]],
    notes: list[str] | None = None,
    defects: tuple[Any, ...] = (),
) -> dict[str, Any]:
    """The JSON of one entry, from its runs' records; ``defects`` (the library's, see
    ``_reports.Defect``) become ready-to-file reports, each run once to check that it fails."""
    from . import entry
    from ._reports import reports

    e = entry(entry_id)
    found = versions(e.distributions)
    return {
        "id": e.id,
        "title": e.title,
        "versions": found,
        "machine": machine(),
        "generated": datetime.date.today().isoformat(),
        "status": "ran",
        "passed": all(r["passed"] for r in records),
        "examples": sum(r["examples"] or 0 for r in records),
        "seconds": round(sum(r["seconds"] or 0 for r in records), 1),
        "found": _found_lines(records),
        "notes": notes or [],
        "runs": records,
        "reports": reports(records, defects, found) if defects else [],
    }


#: The passing calls that a replay makes again: the others are probing calls whose dtypes,
#: modes and options the last call of their probe (everything that passed, together) covers.
REPLAYED_PASSING = ("everything that passed, together", "bad input included")


def cheapest_failing(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failing call whose record took the least time, if any: a failure replayed at the
    least cost (with inductor and a cold cache, one dtype's call compiles 20 graphs where the
    call over every dtype compiles 59; a replay of one call more of each kind of failure made
    the slow tier's DTensor replay twice as long, on a machine whose cores CI keeps busy)."""
    return min((r for r in records if not r["passed"]), key=lambda r: r["seconds"], default=None)


def replay(
    records: list[dict[str, Any]], small: int, max_world_size: int = 2
) -> list[dict[str, Any]]:
    """Run recorded calls again and return their verdicts next to the recorded ones.

    The [`cheapest_failing`][] call is made again as recorded, boundary phase, budget and
    seed included (it fails at the same example); of the passing calls, those named in
    [`REPLAYED_PASSING`][], with at most ``small`` random examples and without the boundary
    phase, which their record ran (a check that they still pass, at a cost that fits CI).
    Calls on more than ``max_world_size`` ranks are left out.
    """
    results = []
    runs = [(r, Run(**r["spec"])) for r in records]
    runs = [(r, run) for r, run in runs if run.kwargs.get("world_size", 1) <= max_world_size]
    failure = cheapest_failing([r for r, _ in runs])
    for record, run in runs:
        if record["passed"] and not any(k in record["label"] for k in REPLAYED_PASSING):
            continue
        if not record["passed"] and record is not failure:
            continue
        budget = run.kwargs.get("max_examples", 100)
        if record["passed"]:
            again = execute(run, max_examples=min(small, budget), boundaries=False)
        else:
            again = execute(run, max_examples=budget)
        results.append(
            {
                "label": record["label"],
                "expected": [record["passed"], record["kind"]],
                "got": [again["passed"], again["kind"]],
                "examples": again["examples"],
                "seconds": again["seconds"],
                "found": again["found"],
            }
        )
    return results
