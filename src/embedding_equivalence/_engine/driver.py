"""The one driver: every verifier is a [`Verification`][] that [`drive`][] runs.

A verifier describes what it draws, how it judges, how the candidate runs and how a failure
is written; the driver does the rest, once for every verifier (as torch's OpInfo drives many
tests from one description):

1. the budget is shared between the verification's [`Part`][]s (the modes of a bag, the
   devices of a sharded run), which run one after another until one fails;
2. in each part the boundary examples run first (the same under every seed, a failure there
   narrowed to the boundary it crossed), then Hypothesis draws the random examples with the
   run's seed and shrinks the first failure;
3. a ``torch.compile``d candidate runs compiled on every example, its fallbacks counted;
4. a failure is diagnosed: torch's own defect, or a limit of Triton's interpreter;
5. the parts' reports are merged, and the verification's records (the bag's modes, the
   quantized scheme) added.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from .._draw.boundary_data import Boundary
from .arguments import Arguments
from .boundary_phase import run_boundaries
from .check import (
    AbortRun,
    CheckableCase,
    EquivalenceError,
    OracleFactory,
    Runner,
    Snippet,
    case_snippet,
    check_case,
    run_in_process,
)
from .compiled import CompiledRunner, compiled_context
from .names import candidate_name, is_compiled
from .replay import preserved_global_state
from .report import VerificationReport, merge_reports
from .repro import candidate_source
from .torch_defects import TorchDefect, torch_defect_behind
from .torch_defects import describe as describe_defect
from .transforms import check_transforms
from .triton_limits import InterpreterLimit, interpreter_limit_behind
from .triton_limits import describe as describe_limit


@dataclass
class Part:
    """One Hypothesis run of a verification, with its share of the examples.

    Attributes:
        cases: the strategy of valid cases
            ([`CheckableCase`][embedding_equivalence._engine.check.CheckableCase]).
        invalid: the strategy of calls the reference refuses, or ``None``; the driver draws
            one example in five from it ([`with_invalid`][]).
        boundaries: the fixed boundary examples checked before the random ones.
        runner: how the candidate runs (the engine's first seam).
        snippet: how a failing case is written as a script.
        devices: the part's devices, for its report (default: the run's).
        dtypes: the part's dtypes, for its report (default: the run's).
        finish: adds what the part alone knows to its report (a process group's starts).
        close: releases what the part holds (a process group), whatever happened.
    """

    cases: st.SearchStrategy[Any]
    invalid: st.SearchStrategy[Any] | None = None
    boundaries: Iterable[Boundary] = ()
    runner: Runner = run_in_process
    snippet: Snippet = case_snippet
    devices: tuple[str, ...] | None = None
    dtypes: tuple[Any, ...] | None = None
    finish: Callable[[VerificationReport], VerificationReport] | None = None
    close: Callable[[], None] | None = None


@dataclass(frozen=True)
class Verification:
    """A verifier as data: the candidate, its resolved arguments, its oracle and its parts.

    Attributes:
        candidate: the kernel under test.
        arguments: the verifier's checked arguments.
        oracle: builds each call's exact reference (the engine's second seam).
        parts: builds each part when it is its turn (a part may start processes).
        records: fields of the report that describe the kind of run (``bag=BagRun(...)``).
    """

    candidate: Callable[..., Any]
    arguments: Arguments
    oracle: OracleFactory
    parts: Sequence[Callable[[], Part]]
    records: dict[str, Any] = field(default_factory=dict)


def with_invalid(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any] | None
) -> st.SearchStrategy[Any]:
    """One example in five from ``invalid``; shrinking goes to 0, the valid branch."""
    if invalid is None:
        return valid
    return st.integers(0, 4).flatmap(lambda k: invalid if k == 4 else valid)


def drawn_part(
    args: Arguments,
    cases: Callable[..., st.SearchStrategy[Any]],
    boundaries: Iterable[Boundary] = (),
    invalid: Callable[..., st.SearchStrategy[Any]] | None = None,
) -> Part:
    """A part that draws ``cases`` in the run's dtypes, devices and sizes, bad input on the CPU.

    Args:
        args: the run's arguments.
        cases: a case strategy, called with ``dtype``, ``device``, ``invalid`` and the size
            knobs.
        boundaries: the part's boundary examples.
        invalid: the strategy of the bad input, called alike (default: ``cases``).
    """
    dtype = st.sampled_from(args.dtypes)
    valid = cases(dtype=dtype, device=st.sampled_from(args.devices), invalid=False, **args.sizes)
    # Bad input is drawn on the CPU only (none without a CPU): an out-of-range id on CUDA is a
    # device-side assert that leaves the CUDA context unusable for the rest of the process.
    if "cpu" not in args.devices:
        return Part(valid, boundaries=boundaries)
    bad = (invalid or cases)(dtype=dtype, device="cpu", invalid=True, **args.sizes)
    return Part(valid, bad, boundaries=boundaries)


def drive(verification: Verification) -> VerificationReport:
    """Run a verification: its parts in turn with their share of the examples; one report.

    Args:
        verification: the description.

    Returns:
        The merged report; the parts stop at the first failure.
    """
    share, extra = divmod(verification.arguments.max_examples, len(verification.parts))
    reports: list[VerificationReport] = []
    for i, make in enumerate(verification.parts):
        budget = share + (1 if i < extra else 0)
        if budget == 0:
            break
        part = make()
        try:
            report = _run_part(verification, part, budget)
            if part.finish is not None:
                report = part.finish(report)
        finally:
            if part.close is not None:
                part.close()
        reports.append(report)
        if not report.passed:
            break
    return dataclasses.replace(merge_reports(reports), **verification.records)


@contextlib.contextmanager
def replayable_draws() -> Iterator[None]:
    """Draw without the literals of the program's own modules, so that a seed replays anywhere.

    Recent Hypothesis releases mix the constants found in the source of every local module
    that is loaded (the caller's script, its tests, an editable install of this package) into
    a few percent of their draws. The same ``seed`` would then draw other examples in another
    program, or after an edit of any local file, and a report's seed would not replay its
    failure. The verifiers draw without them; Hypothesis's own constants stay. The hook is
    private to Hypothesis: where it is missing, nothing changes.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - depends on the Hypothesis version
        providers = None
    get = getattr(providers, "_get_local_constants", None)
    constants = getattr(providers, "_local_constants", None)
    if get is None or constants is None:  # pragma: no cover - depends on the version
        yield
        return
    empty = type(constants)()
    providers._get_local_constants = lambda: empty  # type: ignore[attr-defined]
    try:
        yield
    finally:
        providers._get_local_constants = get  # type: ignore[attr-defined]


def _small(case: CheckableCase) -> bool:
    """Whether a case is small enough for the transforms (a batch of tables, tangents)."""
    weight = getattr(case, "weight", None)
    return weight is None or weight.num_embeddings * weight.embedding_dim <= 1 << 16


@dataclass
class _State:
    """What one part's run has seen so far."""

    examples: int = 0
    boundary_examples: int = 0
    worst: float = 0.0
    failed: bool = False
    current: Any = None
    last: tuple[Any, BaseException] | None = None


def _run_part(verification: Verification, part: Part, budget: int) -> VerificationReport:
    """The boundary examples of ``part``, then ``budget`` random ones; the part's report."""
    candidate, args = verification.candidate, verification.arguments
    oracle_for, backward, snippet = verification.oracle, args.backward, part.snippet
    state = _State()
    compiled = CompiledRunner(part.runner) if is_compiled(candidate) else None
    runner = part.runner if compiled is None else compiled

    def check_one(case: CheckableCase) -> None:
        state.current = case
        worst = check_case(
            candidate, case, oracle_for, backward=backward, runner=runner, snippet=snippet,
            deterministic=args.deterministic,
        )  # fmt: skip
        if args.transforms and case.invalid is None and _small(case):
            check_transforms(
                candidate, case, oracle_for, args.transforms, candidate_source(candidate)
            )
        if not state.failed:  # the worst error of the examples that passed, not shrinking's
            state.worst = max(state.worst, worst)

    def check_boundary(case: CheckableCase) -> None:
        state.examples += 1
        state.boundary_examples += 1
        check_one(case)

    @settings(
        max_examples=budget,
        deadline=None,  # torch kernels warm up on first use; timing says nothing here
        database=None,  # a verification run must not write into the user's project
        derandomize=False,
        print_blob=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=[HealthCheck(h) for h in HealthCheck],
        report_multiple_bugs=False,
    )
    @given(with_invalid(part.cases, part.invalid))
    def run(case: CheckableCase) -> None:
        if not state.failed:
            state.examples += 1
        try:
            check_one(case)
        except AssertionError as exc:
            state.failed = True
            state.last = (case, exc)
            if compiled is not None:
                compiled.counting = False
            raise

    start = time.perf_counter()
    passed = flaky = False
    aborted: AbortRun | None = None
    compiling = compiled_context() if compiled else contextlib.nullcontext()
    crossed: str | None = None
    with preserved_global_state(), replayable_draws(), compiling:
        try:
            found = run_boundaries(part.boundaries if args.boundaries else (), check_boundary)
            if found is not None:
                state.last, crossed = (found.case, found.error), found.crossed
                raise found.error
            hypothesis_seed(args.seed)(run)()
            passed = True
        except AssertionError:  # the failure is state.last
            pass
        except Flaky:
            # A failure that did not fail again on replay: the candidate is not deterministic
            # (it reads uninitialised memory, or depends on state outside its arguments).
            # Report the failure seen, instead of letting Hypothesis's error escape.
            flaky = state.last is not None
            if not flaky:
                raise
        except AbortRun as exc:  # a rank hung or died: no shrinking, report what ran
            aborted = exc
            if not (exc.use_last_failure and state.last is not None):
                state.last = (state.current, exc)
    report = VerificationReport(
        candidate=candidate_name(candidate),
        passed=passed,
        examples=state.examples,
        counterexample=None,
        failure=None,
        worst_error=state.worst,
        seed=args.seed,
        elapsed=time.perf_counter() - start,
        options=args.options,
        dtypes=part.dtypes if part.dtypes is not None else args.dtypes,
        devices=part.devices if part.devices is not None else args.devices,
        boundary=crossed,
        boundary_examples=state.boundary_examples,
        compiled=None if compiled is None else compiled.summary(),
    )  # fmt: skip
    if passed or state.last is None:
        return report
    return _diagnosed(verification, part, report, *state.last, aborted=aborted, flaky=flaky)


def _diagnosed(
    verification: Verification,
    part: Part,
    report: VerificationReport,
    case: Any,
    exc: BaseException,
    *,
    aborted: AbortRun | None,
    flaky: bool,
) -> VerificationReport:
    """``report`` with its failure, counterexample, and the diagnosis of who is at fault."""
    candidate, backward = verification.candidate, verification.arguments.backward
    failure = exc.message if isinstance(exc, EquivalenceError) else str(exc)
    if aborted is not None and aborted is not exc:
        failure += f"\n({aborted})"
    if flaky:
        failure += (
            "\n(The failure did not reproduce when the example was run again: the candidate "
            "is not deterministic, e.g. it reads uninitialised memory.)"
        )
    counterexample = (
        exc.repro
        if isinstance(exc, EquivalenceError) and exc.repro
        else part.snippet(case, backward, candidate_source(candidate))
    )
    defect: TorchDefect | None = None
    limit: InterpreterLimit | None = None
    if isinstance(exc, EquivalenceError):  # a failure of the checks: who is at fault?
        # "This is torch, not you": torch's own function fails the minimal case too (only a
        # case of F.embedding or F.embedding_bag can be replayed on it).
        defect = torch_defect_behind(case, backward)
        if defect is None and is_compiled(candidate):
            defect = torch_defect_behind(case, backward, compiled=True)
        # "This is Triton's interpreter, not you".
        limit = interpreter_limit_behind(candidate, case, verification.oracle, backward)
    if defect is not None:
        failure += "\n\n" + describe_defect(defect)
    if limit is not None:
        failure += "\n\n" + describe_limit(limit, case)
    return dataclasses.replace(
        report,
        failure=failure,
        counterexample=counterexample,
        torch_defect=None if defect is None else defect.id,
        interpreter_limit=None if limit is None else limit.id,
    )
