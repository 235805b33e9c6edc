"""The verifiers' report: typed fields, one record per kind of run, and one renderer.

Every verifier fills the same fields of [`VerificationReport`][]; what only one kind of run
has lives in a record of its own (the public
[`CompiledRun`][embedding_equivalence.CompiledRun],
[`ShardedRun`][embedding_equivalence.ShardedRun],
[`QuantizedRun`][embedding_equivalence.QuantizedRun] and
[`BagRun`][embedding_equivalence.BagRun]), ``None`` for the other kinds. The fields hold
plain values (a scheme is its name, a time is seconds); the text, the CLI's table row and the
JSON are made here, once: [`render_text`][], [`report_fields`][].
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..forms.dtypes import dtype_name
from .check import EquivalenceError

#: The name and version of the JSON that ``verify --json`` writes (see the Verify page).
JSON_SCHEMA = "embedding-equivalence/verify/2"


@dataclass(frozen=True)
class CompiledRun:
    """A ``torch.compile``d candidate's run: how many examples ran compiled.

    Attributes:
        examples: examples during which dynamo gave up on no frame.
        eager_fallbacks: examples during which it gave up on one (a graph break, an error
            while tracing, a limit) and ran at least partly eagerly.
        fallback_reasons: those examples counted by dynamo's reason, most frequent first.
        graphs: the graphs dynamo compiled for them (one per new guard set: a dtype, an
            index dtype, a rank, a layout, an option's value; sizes are dynamic after the
            first change).
    """

    examples: int = 0
    eager_fallbacks: int = 0
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    graphs: int = 0


@dataclass(frozen=True)
class ShardedRun:
    """A run on the ranks of a process group.

    Attributes:
        sharding: ``"vocab"`` or ``"dim"``.
        world_size: the number of ranks.
        group_starts: how often the process group was started (a failure that leaves ranks
            waiting in a collective needs a restart).
        startup_seconds: the seconds each start of the group took.
    """

    sharding: str
    world_size: int
    group_starts: int = 0
    startup_seconds: tuple[float, ...] = ()


@dataclass(frozen=True)
class QuantizedRun:
    """A quantized table's run.

    Attributes:
        scheme: the scheme's name (``"int8"``, ``"uint4"``, ``"float8_e4m3fn"``,
            ``"float8_e5m2"``).
        symmetric: ``"int8"`` tables without a zero point.
        source: who quantized the tables, where not this package (e.g. ``"torchao 0.9"``).
    """

    scheme: str
    symmetric: bool = False
    source: str | None = None


@dataclass(frozen=True)
class BagRun:
    """An ``F.embedding_bag`` run.

    Attributes:
        modes: the reductions exercised, in the order they ran.
    """

    modes: tuple[str, ...]


@dataclass
class VerificationReport:
    """The outcome of a verifier (``verify_embedding`` and its siblings).

    Attributes:
        candidate: the candidate's qualified name.
        passed: True when no example failed.
        examples: examples run (up to and including the first failure).
        counterexample: ``None``, or a runnable Python script that rebuilds the minimal
            failing call exactly (tensors, layouts, options and upstream gradient) and fails
            while the bug is there.
        failure: what the minimal failing example did wrong (``None`` when passed).
        worst_error: the largest ``|error| / bound`` over every bounded comparison of the
            examples that passed (outputs and gradients; 0 when every one was exact; at most
            1 when passed).
        seed: the Hypothesis seed; pass it back as ``seed=`` to replay the same run.
        elapsed: wall-clock seconds.
        options: the options exercised.
        dtypes: the dtypes drawn from.
        devices: the devices drawn from.
        boundary: for a failure in the boundary phase, which boundary it crossed (e.g.
            ``"fails from N = 769; passes at 768"``); ``None`` otherwise.
        boundary_examples: how many boundary examples ran (0 with ``boundaries=False``).
        torch_defect: for a failure that torch's own function fails too and that the
            package's defect table names, the defect's id (see "How to read a
            counterexample" on the Verify page); ``None`` otherwise.
        interpreter_limit: for a failure that only Triton's interpreter causes (a dtype or an
            operation it cannot run), the limit's id; ``None`` otherwise.
        compiled: for a ``torch.compile``d candidate, its
            [`CompiledRun`][embedding_equivalence.CompiledRun]; else ``None``.
        sharded: for a sharded run, its [`ShardedRun`][embedding_equivalence.ShardedRun];
            else ``None``.
        quantized: for a quantized table, its
            [`QuantizedRun`][embedding_equivalence.QuantizedRun]; else ``None``.
        bag: for ``F.embedding_bag``, its [`BagRun`][embedding_equivalence.BagRun]; else
            ``None``.
    """

    candidate: str
    passed: bool
    examples: int
    counterexample: str | None
    failure: str | None
    worst_error: float
    seed: int
    elapsed: float
    options: tuple[str, ...] = ()
    dtypes: tuple[torch.dtype, ...] = ()
    devices: tuple[str, ...] = ()
    boundary: str | None = None
    boundary_examples: int = 0
    torch_defect: str | None = None
    interpreter_limit: str | None = None
    compiled: CompiledRun | None = None
    sharded: ShardedRun | None = None
    quantized: QuantizedRun | None = None
    bag: BagRun | None = None

    @property
    def examples_per_second(self) -> float:
        """Throughput of the run."""
        return self.examples / self.elapsed if self.elapsed > 0 else math.inf

    def raise_for_failure(self) -> None:
        """Raise [`EquivalenceError`][embedding_equivalence.EquivalenceError] if the run failed.

        Its ``message`` is the report's text without the counterexample, which is its
        ``repro``.

        Raises:
            EquivalenceError: the candidate failed.
        """
        __tracebackhide__ = True
        if not self.passed:
            raise EquivalenceError(
                render_text(self, repro=False),
                self.counterexample or "",
                heading="Minimal counterexample",
            )

    def __str__(self) -> str:
        return render_text(self)


# --- merging ------------------------------------------------------------------------------------


def _merge_compiled(runs: Sequence[CompiledRun]) -> CompiledRun:
    reasons = sum((Counter(r.fallback_reasons) for r in runs), Counter[str]())
    counts = {
        f: sum(getattr(r, f) for r in runs) for f in ("examples", "eager_fallbacks", "graphs")
    }
    return CompiledRun(**counts, fallback_reasons=dict(reasons.most_common()))


def _merge_sharded(runs: Sequence[ShardedRun]) -> ShardedRun:
    return dataclasses.replace(
        runs[-1],
        group_starts=sum(r.group_starts for r in runs),
        startup_seconds=tuple(s for r in runs for s in r.startup_seconds),
    )


def merge_reports(reports: Sequence[VerificationReport]) -> VerificationReport:
    """One report of runs made one after another (per mode, per device).

    The runs stopped at the first failure: the counts and times are summed, the worst error
    is the largest, the devices are those of every run, the records are merged, and the
    verdict, failure and counterexample are the last run's.

    Args:
        reports: the runs' reports, in the order they ran (at least one).

    Returns:
        The merged report.
    """
    last = reports[-1]  # the failing run, if any: its counterexample and failure
    compiled = [r.compiled for r in reports if r.compiled is not None]
    sharded = [r.sharded for r in reports if r.sharded is not None]
    return dataclasses.replace(
        last,
        passed=all(r.passed for r in reports),
        examples=sum(r.examples for r in reports),
        boundary_examples=sum(r.boundary_examples for r in reports),
        worst_error=max(r.worst_error for r in reports),
        elapsed=sum(r.elapsed for r in reports),
        devices=tuple(dict.fromkeys(d for r in reports for d in r.devices)),
        compiled=_merge_compiled(compiled) if compiled else None,
        sharded=_merge_sharded(sharded) if sharded else None,
    )


# --- rendering ----------------------------------------------------------------------------------


def _run_words(report: VerificationReport) -> str:
    """The kind of run, as it follows the devices in the head: modes, scheme, group."""
    words = []
    if report.bag is not None:
        words.append(f"modes={list(report.bag.modes)}")
    if (q := report.quantized) is not None:
        scheme = q.scheme + (" (symmetric)" if q.symmetric else "")
        words.append(f"scheme={scheme}" + (f" from {q.source}" if q.source else ""))
    if (s := report.sharded) is not None:
        words.append(f"sharding={s.sharding} over {s.world_size} ranks")
    return "".join(f", {w}" for w in words)


def _compiled_text(compiled: CompiledRun | None) -> str:
    """For a compiled candidate: how many examples ran compiled, and why others did not."""
    if compiled is None:
        return ""
    text = (
        f"; compiled: {compiled.examples} examples ran compiled, "
        f"{compiled.eager_fallbacks} fell back to eager, {compiled.graphs} graphs compiled"
    )
    if compiled.fallback_reasons:
        text += " (" + "; ".join(f"{n}x {r}" for r, n in compiled.fallback_reasons.items()) + ")"
    return text


def render_text(report: VerificationReport, *, repro: bool = True) -> str:
    """The report as text: the verdict and the run on one line, then what failed.

    Args:
        report: the report.
        repro: end with the minimal counterexample (``False``: the text stops at the
            failure, for a message whose repro is carried apart).

    Returns:
        The text that ``str(report)`` gives.
    """
    status = "PASSED" if report.passed else "FAILED"
    head = (
        f"{report.candidate}: {status} after {report.examples} examples"
        + (f" ({report.boundary_examples} at boundaries)" if report.boundary_examples else "")
        + f" in {report.elapsed:.1f} s "
        f"(seed={report.seed}, options={list(report.options)}, "
        f"dtypes={[dtype_name(d) for d in report.dtypes]}, "
        f"devices={list(report.devices)}{_run_words(report)})" + _compiled_text(report.compiled)
    )
    if report.passed:
        return head + f"; worst error {report.worst_error:.3g} of the bound"
    crossed = f"\nBoundary example: {report.boundary}" if report.boundary else ""
    text = f"{head}{crossed}\n{report.failure}"
    if repro:
        text += f"\n\nMinimal counterexample:\n{report.counterexample}"
    return text


#: The fields that ``verify --json`` holds as the report does, in its order.
_AS_THEY_ARE = ("failure", "boundary", "counterexample", "torch_defect", "interpreter_limit")


def report_fields(report: VerificationReport) -> dict[str, Any]:
    """The report as the rows of ``verify --json`` hold it (schema [`JSON_SCHEMA`][]).

    Args:
        report: the report.

    Returns:
        ``passed``, ``examples``, ``boundary_examples``, ``worst_error`` (``None`` when not
        finite), ``seed``, ``seconds``, ``failure``, ``boundary``, ``counterexample``,
        ``torch_defect``, ``interpreter_limit``, and the records ``compiled``, ``sharded``,
        ``quantized`` and ``bag`` (an object, or ``None`` for another kind of run).
    """
    worst = report.worst_error
    records = {
        name: None if (rec := getattr(report, name)) is None else dataclasses.asdict(rec)
        for name in ("compiled", "sharded", "quantized", "bag")
    }
    return {
        "passed": report.passed,
        "examples": report.examples,
        "boundary_examples": report.boundary_examples,
        "worst_error": worst if math.isfinite(worst) else None,
        "seed": report.seed,
        "seconds": round(report.elapsed, 3),
        **{name: getattr(report, name) for name in _AS_THEY_ARE},
        **records,
    }
