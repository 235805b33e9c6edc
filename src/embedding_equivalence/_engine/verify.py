"""``verify_embedding``, ``verify_embedding_bag``, ``verify_quantized_embedding``: the verifiers.

Each verifier is a thin adapter over the engine ([`embedding_equivalence._engine.check`][]): a
strategy that draws cases, an oracle that judges them, and the table of options it exercises.
[`run_verification`][] runs Hypothesis over any such adapter and builds the report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky, InvalidArgument

from .. import strategies as ees
from .._draw import tensors as _tensors
from .._draw.boundaries import Boundary, bag_boundaries, embedding_boundaries, quantized_boundaries
from .._draw.cases import EmbeddingBagCase, EmbeddingCase
from .._draw.sizes import SizeSpec, case_sizes
from ..forms.options import option_applies
from ..forms.quantized import check_scheme
from ..forms.validation import dtype_name
from ..oracle import BagOracle, EmbeddingOracle
from ..oracle.quantized import QuantizedOracle
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
    preserved_global_state,
    run_in_process,
)
from .compiled import CompiledRunner, compiled_context
from .repro import candidate_name, candidate_source, is_compiled
from .torch_defects import describe as describe_defect
from .torch_defects import torch_defect_behind
from .transforms import check_transforms, check_transforms_argument
from .triton_limits import interpreter_limit_note

__all__ = [
    "VerificationReport",
    "check_budget",
    "merge_reports",
    "option_names",
    "resolve_dtypes_devices",
    "run_verification",
    "verify_embedding",
    "verify_embedding_bag",
    "verify_quantized_embedding",
    "with_invalid",
]


@dataclass
class VerificationReport:
    """The outcome of [`verify_embedding`][] or [`verify_embedding_bag`][].

    Attributes:
        candidate: the candidate's qualified name.
        passed: True when no example failed.
        examples: examples run (up to and including the first failure).
        counterexample: ``None``, or a runnable Python snippet that rebuilds the minimal
            failing call exactly (tensors, layouts, options and upstream gradient).
        failure: the assertion message of the minimal failing example.
        worst_error: the largest ``|error| / bound`` over all passing gradient checks (0 when
            every gradient was exact; at most 1 when passed).
        seed: the Hypothesis seed; pass it back as ``seed=`` to replay the same run.
        elapsed: wall-clock seconds.
        options: the options exercised.
        dtypes: the dtypes drawn from.
        devices: the devices drawn from.
        boundary: for a failure in the boundary phase, which boundary it crossed (e.g.
            ``"fails from N = 769; passes at 768"``); ``None`` otherwise.
        boundary_examples: how many boundary examples ran (0 with ``boundaries=False``).
        torch_defect: for a failure that torch's own function fails too and that the
            package's defect table names, the defect's id (see
            "How to read a counterexample" on the Verify page); ``None`` otherwise.
        interpreter_limit: for a failure that only Triton's interpreter causes (a dtype or an
            operation it cannot run), the limit's id; ``None`` otherwise.
        modes: [`verify_embedding_bag`][]'s modes, in the order they ran; ``()`` otherwise.
        scheme: [`verify_quantized_embedding`][]'s scheme (e.g. ``"int8 (symmetric)"``);
            ``None`` otherwise.
        compiled_examples: for a ``torch.compile``d candidate, the examples that ran
            compiled; ``None`` for any other candidate.
        eager_fallbacks: for a compiled candidate, the examples during which dynamo gave up
            on a frame (a graph break, an error while tracing, a limit) and ran eagerly.
        fallback_reasons: those examples counted by dynamo's reason.
        sharding: for a sharded run, ``"vocab"`` or ``"dim"``; ``None`` otherwise.
        world_size: for a sharded run, the number of ranks.
        group_starts: for a sharded run, how often the process group was started (a
            failure that leaves ranks waiting in a collective needs a restart).
        startup_seconds: for a sharded run, the seconds each start of the group took.
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
    modes: tuple[str, ...] = ()
    scheme: str | None = None
    compiled_examples: int | None = None
    eager_fallbacks: int = 0
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    sharding: str | None = None
    world_size: int | None = None
    group_starts: int = 0
    startup_seconds: tuple[float, ...] = ()

    @property
    def examples_per_second(self) -> float:
        """Throughput of the run."""
        return self.examples / self.elapsed if self.elapsed > 0 else math.inf

    def raise_for_failure(self) -> None:
        """Raise [`EquivalenceError`][embedding_equivalence.EquivalenceError] if the run failed.

        The message holds the failure and the minimal counterexample.

        Raises:
            EquivalenceError: the candidate failed.
        """
        __tracebackhide__ = True
        if not self.passed:
            raise EquivalenceError(str(self))

    def _compiled_text(self) -> str:
        """For a compiled candidate: how many examples ran compiled, and why others did not."""
        if self.compiled_examples is None:
            return ""
        text = (
            f"; compiled: {self.compiled_examples} examples ran compiled, "
            f"{self.eager_fallbacks} fell back to eager"
        )
        if self.fallback_reasons:
            reasons = self.fallback_reasons.items()
            text += " (" + "; ".join(f"{n}x {r}" for r, n in reasons) + ")"
        return text

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        head = (
            f"{self.candidate}: {status} after {self.examples} examples"
            + (f" ({self.boundary_examples} at boundaries)" if self.boundary_examples else "")
            + f" in {self.elapsed:.1f} s "
            f"(seed={self.seed}, options={list(self.options)}, "
            f"dtypes={[dtype_name(d) for d in self.dtypes]}, "
            f"devices={list(self.devices)})"
        )
        head += self._compiled_text()
        if self.passed:
            what = "gradient error" if self.scheme is None else "error"
            return head + f"; worst {what} {self.worst_error:.3g} of the bound"
        crossed = f"\nBoundary example: {self.boundary}" if self.boundary else ""
        return f"{head}{crossed}\n{self.failure}\n\nMinimal counterexample:\n{self.counterexample}"


def resolve_dtypes_devices(
    dtypes: Sequence[torch.dtype | str] | None, devices: Sequence[str | torch.device] | None
) -> tuple[tuple[torch.dtype, ...], tuple[str, ...]]:
    """Check a verifier's ``dtypes`` and ``devices``; ``None`` resolved to what is present.

    Raises:
        InvalidArgument: a single device or dtype where a sequence belongs, a device that is
            not present, or a dtype that is not floating (dtypes may be given by name).
    """
    if isinstance(devices, str | torch.device):
        raise InvalidArgument(
            f"devices={devices!r} must be a sequence of devices, e.g. devices=[{str(devices)!r}]"
        )
    devs = tuple(str(d) for d in devices) if devices else tuple(ees.available_devices())
    for d in devs:
        problem = _tensors.device_problem(d)
        if problem is not None:
            raise InvalidArgument(f"devices contains {d!r}, which {problem}")
    devs = tuple(str(torch.device(d)) for d in devs)
    if dtypes is not None:
        return _tensors.float_dtypes(dtypes, "dtypes"), devs
    dts: list[torch.dtype] = []
    for d in devs:
        dts += [x for x in ees.supported_float_dtypes(d) if x not in dts]
    return tuple(dts), devs


def option_names(options: Sequence[str]) -> tuple[str, ...]:
    """A verifier's ``options`` as a tuple; a bare string is refused, not split into letters.

    Raises:
        InvalidArgument: ``options`` is a string.
    """
    if isinstance(options, str):
        raise InvalidArgument(
            f"options={options!r} must be a sequence of names, e.g. options=[{options!r}]"
        )
    return tuple(options)


def check_budget(candidate: object, max_examples: object) -> None:
    if not callable(candidate):
        raise InvalidArgument(f"candidate={candidate!r} must be callable")
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgument(f"max_examples={max_examples!r} must be a positive int")


def _on_cpu(
    devices: tuple[str, ...], make: Callable[[], st.SearchStrategy[Any]]
) -> st.SearchStrategy[Any] | None:
    """The strategy of bad input, drawn on the CPU only (``None`` without a CPU).

    An out-of-range id on CUDA is a device-side assert that leaves the CUDA context unusable
    for the rest of the process.
    """
    return make() if "cpu" in devices else None


def with_invalid(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any] | None
) -> st.SearchStrategy[Any]:
    """One example in five from ``invalid``; shrinking goes to 0, the valid branch."""
    if invalid is None:
        return valid
    return st.integers(0, 4).flatmap(lambda k: invalid if k == 4 else valid)


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
        yield
        return
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


def run_verification(
    candidate: Callable[..., Any],
    cases: st.SearchStrategy[Any],
    oracle_for: OracleFactory,
    *,
    backward: bool,
    options: tuple[str, ...],
    dtypes: tuple[torch.dtype, ...],
    devices: tuple[str, ...],
    max_examples: int,
    seed: int | None,
    runner: Runner = run_in_process,
    snippet: Snippet = case_snippet,
    transforms: Sequence[str] = (),
    boundaries: Iterable[Boundary] = (),
) -> VerificationReport:
    """Run the boundary examples, then the engine over ``cases`` with Hypothesis; summarize.

    Args:
        candidate: the kernel under test.
        cases: the strategy of cases to draw
            ([`CheckableCase`][embedding_equivalence._engine.check.CheckableCase]).
        oracle_for: builds each call's oracle.
        backward: also check gradients.
        options: for the report.
        dtypes: for the report.
        devices: for the report.
        max_examples: Hypothesis's example budget.
        seed: Hypothesis seed (``None``: a fresh random one, recorded in the report).
        runner: how the candidate is run.
        snippet: writes the counterexample's replay snippet.
        transforms: also check ``jvp`` and/or ``vmap`` on each valid case.
        boundaries: the fixed boundary examples, checked first (see
            [`embedding_equivalence._draw.boundaries`][]); a failure there ends the run.

    Returns:
        The report.
    """
    check_budget(candidate, max_examples)
    run_seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    state: dict[str, Any] = {
        "examples": 0,
        "failed": False,
        "worst": 0.0,
        "last": None,
        "current": None,
        "boundary_examples": 0,
    }

    compiled = CompiledRunner(runner) if is_compiled(candidate) else None
    if compiled is not None:
        runner = compiled

    def check_one(case: CheckableCase) -> float:
        worst = check_case(
            candidate, case, oracle_for, backward=backward, runner=runner, snippet=snippet
        )
        if transforms and case.invalid is None and _small(case):
            check_transforms(candidate, case, oracle_for, transforms, candidate_source(candidate))
        return worst

    def check_boundary(case: CheckableCase) -> None:
        state["current"] = case
        state["worst"] = max(state["worst"], check_one(case))

    def count_boundary() -> None:
        state["examples"] += 1
        state["boundary_examples"] += 1

    @settings(
        max_examples=max_examples,
        deadline=None,  # torch kernels warm up on first use; timing says nothing here
        database=None,  # a verification run must not write into the user's project
        derandomize=False,
        print_blob=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=[HealthCheck(h) for h in HealthCheck],
        report_multiple_bugs=False,
    )
    @given(cases)
    def run(case: CheckableCase) -> None:
        if not state["failed"]:
            state["examples"] += 1
        state["current"] = case
        try:
            worst = check_one(case)
        except AssertionError as exc:
            state["failed"] = True
            state["last"] = (case, exc)
            if compiled is not None:
                compiled.counting = False
            raise
        if not state["failed"]:
            state["worst"] = max(state["worst"], worst)

    start = time.perf_counter()
    flaky = False
    aborted: AbortRun | None = None
    compiling = compiled_context() if compiled else contextlib.nullcontext()
    crossed: str | None = None
    with preserved_global_state(), replayable_draws(), compiling:
        try:
            found = run_boundaries(boundaries, check_boundary, count_boundary)
            if found is not None:
                state["last"], crossed = (found.case, found.error), found.crossed
                raise found.error
            hypothesis_seed(run_seed)(run)()
            passed = True
        except AssertionError:
            passed = False
        except Flaky:
            # A failure that did not fail again on replay: the candidate is not deterministic
            # (it reads uninitialised memory, or depends on state outside its arguments).
            # Report the failure seen, instead of letting Hypothesis's error escape.
            passed = False
            flaky = state["last"] is not None
            if not flaky:
                raise
        except AbortRun as exc:  # a rank hung or died: no shrinking, report what ran
            passed, aborted = False, exc
            if not (exc.use_last_failure and state["last"] is not None):
                state["last"] = (state["current"], exc)
    elapsed = time.perf_counter() - start
    counterexample = failure = None
    counts = compiled.summary() if compiled is not None else {}
    defect_id: str | None = None
    limit_id: str | None = None
    if not passed and state["last"] is not None:
        case, exc = state["last"]
        failure = str(exc).split("\n\nRepro:\n")[0]
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
            else snippet(case, backward, candidate_source(candidate))
        )
        # "This is torch, not you": torch's own function fails the minimal case too.
        if isinstance(exc, EquivalenceError) and isinstance(case, EmbeddingCase | EmbeddingBagCase):
            defect = torch_defect_behind(case, backward)
            if defect is not None:
                failure += "\n\n" + describe_defect(defect)
                defect_id = defect.id
        limit_id, note = interpreter_limit_note(candidate, case, exc, oracle_for, backward)
        failure += note
    return VerificationReport(
        candidate=candidate_name(candidate),
        passed=passed,
        examples=state["examples"],
        counterexample=counterexample,
        failure=failure,
        worst_error=state["worst"],
        seed=run_seed,
        elapsed=elapsed,
        options=options,
        dtypes=dtypes,
        devices=devices,
        boundary=crossed,
        boundary_examples=state["boundary_examples"],
        torch_defect=defect_id,
        interpreter_limit=limit_id,
        **counts,
    )


def _small(case: CheckableCase) -> bool:
    """Whether a case is small enough for the transforms (a batch of tables, tangents)."""
    weight = getattr(case, "weight", None)
    return weight is None or weight.num_embeddings * weight.embedding_dim <= 1 << 16


def verify_embedding(
    candidate: Callable[..., Any],
    *,
    options: Sequence[str] = (),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = 100,
    backward: bool = True,
    seed: int | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    transforms: Sequence[str] = (),
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` is the embedding function, forward and backward.

    ``candidate`` is any callable with ``F.embedding``'s signature, called as
    ``candidate(input, weight, **kwargs)`` with only the keyword options named in
    ``options``. Over drawn vocab sizes (1 to 262,144), dims, dtypes, devices, id shapes
    (0-d, empty, multi-dim, with duplicates) and layouts (non-contiguous tables and ids), it
    checks against the exact float64 oracle, never against another torch kernel:

    - the output's shape, dtype, device, and values (exactly);
    - with ``backward``, the weight's gradient within the derived error bound (and its sparse
      layout under ``sparse=True``);
    - with ``max_norm``, the in-place renorm of the referenced rows;
    - bad input (an id out of range, a negative id, floating ids, ``padding_idx`` out of
      range): the candidate must raise, as the reference does.

    Hypothesis shrinks any failure to a minimal call, returned as a runnable snippet. Global
    state (grad mode, default dtype, RNG, deterministic flags, TF32) is restored afterwards.

    Args:
        candidate: the kernel under test.
        options: names from ``("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")``.
        dtypes: float dtypes to draw; ``None`` means every dtype each device supports.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        backward: also check gradients.
        seed: fix the run (the report's ``seed`` replays a random run).
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy; default
            1 to 262,144 within a small element budget.
        embedding_dims: ``D``, likewise; default up to 64 within that budget.
        num_ids: ``N``, the length of a 1-D input, likewise; default ids of up to three
            dims. With ints and ranges the largest example's memory is checked first.
        transforms: also check forward-mode AD and/or ``torch.func.vmap``, from
            ``("jvp", "vmap")``: the tangent of the output along a tangent table must be the
            lookup of that table, and a batch of tables must give each table's lookup.
        boundaries: first run the fixed boundary examples (sizes at ``2**k - 1``, ``2**k``
            and ``2**k + 1`` up to N = 2**17 ids, D = 2**13, V = 2**24 rows and 2**16 repeats
            of one id; edge shapes and layouts; bad input at its edges; each combination of
            the options), the same under every seed; see
            [Boundary examples](../verify.md#boundary-examples).

    Returns:
        A [`VerificationReport`][]; call ``.raise_for_failure()`` to turn a failure into
        an exception.

    Raises:
        InvalidArgument: unknown options, a non-float dtype, an absent device, a bad
            ``max_examples`` or size knob, or a largest example that would not fit in memory.

    Examples:
        >>> import torch
        >>> from embedding_equivalence import verify_embedding
        >>> report = verify_embedding(lambda input, weight: weight[input], max_examples=20, seed=0)
        >>> report.passed
        False
    """
    check_budget(candidate, max_examples)
    opts = option_names(options)
    dts, devs = resolve_dtypes_devices(dtypes, devices)
    sizes = case_sizes(
        "verify_embedding", vocab_sizes=vocab_sizes, embedding_dims=embedding_dims,
        num_ids=num_ids, dtypes=dts, devices=devs,
    )  # fmt: skip
    valid = ees.embedding_cases(
        options=opts, dtype=st.sampled_from(dts), device=st.sampled_from(devs), **sizes
    )
    invalid = _on_cpu(devs, lambda: ees.embedding_cases(
        options=opts, dtype=st.sampled_from(dts), device="cpu", invalid=True, **sizes
    ))  # fmt: skip
    cases: st.SearchStrategy[EmbeddingCase] = with_invalid(valid, invalid)
    return run_verification(
        candidate, cases, EmbeddingOracle.for_call, backward=backward, options=opts,
        dtypes=dts, devices=devs, max_examples=max_examples, seed=seed,
        transforms=check_transforms_argument(transforms),
        boundaries=embedding_boundaries(opts, dts, devs) if boundaries else (),
    )  # fmt: skip


def verify_embedding_bag(
    candidate: Callable[..., Any],
    *,
    options: Sequence[str] = (),
    modes: Sequence[str] = ("sum", "mean", "max"),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = 100,
    backward: bool = True,
    seed: int | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    transforms: Sequence[str] = (),
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` is ``F.embedding_bag``, forward and backward.

    ``candidate`` is any callable with ``F.embedding_bag``'s signature, called as
    ``candidate(input, weight, offsets, mode=..., **kwargs)`` for a 1-D input (or
    ``candidate(input, weight, mode=..., **kwargs)`` for a 2-D one) with only the keyword
    options named in ``options``. Over drawn vocab sizes, dims, dtypes, devices, bags (empty
    ones, duplicate ids inside a bag, 1-D inputs with offsets and 2-D inputs) and layouts, it
    checks against the exact float64 oracle, never against another torch kernel:

    - the output's shape ``(B, D)``, dtype, device, and values, within the derived rounding
      bound of the sum or mean, exactly for max (empty bags exactly zero);
    - with ``backward``, the gradient of the weight within the derived bound (any of the
      tied rows may take a ``max`` bag's gradient), its sparse layout under ``sparse=True``,
      and the gradient of ``per_sample_weights``;
    - with ``max_norm``, the in-place renorm of every row the input references;
    - bad input of the kinds in
      [`BAG_INVALID_KINDS`][embedding_equivalence.strategies.BAG_INVALID_KINDS] (on the CPU, one
      example in five): the candidate must raise, as the reference does. The kinds in
      [`CRASHING_BAG_INVALID_KINDS`][embedding_equivalence.strategies.CRASHING_BAG_INVALID_KINDS] (a
      negative offset, no offsets but ids, an offset past the end before the last) are left out,
      because ``F.embedding_bag`` itself reads out of bounds on them and can crash the process; so
      are zero bags followed by ids under ``include_last_offset``, for the same reason. Check those
      with ``embedding_bag_cases(invalid=[...])`` if your kernel is safe.

    The examples are shared equally between the modes, one Hypothesis run per mode in the
    order given (most bugs live in one mode); the run stops at the first failure. Hypothesis
    shrinks it to a minimal call, returned as a runnable snippet. Global state (grad mode,
    default dtype, RNG, deterministic flags, TF32) is restored afterwards.

    Args:
        candidate: the kernel under test.
        options: names from ``("padding_idx", "max_norm", "scale_grad_by_freq", "sparse",
            "per_sample_weights", "include_last_offset")``.
        modes: the reductions to exercise, from ``("sum", "mean", "max")``.
        dtypes: float dtypes to draw; ``None`` means every dtype each device supports.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        backward: also check gradients.
        seed: fix the run (the report's ``seed`` replays a random run).
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy (as for
            [`verify_embedding`][]).
        embedding_dims: ``D``, likewise.
        num_ids: ``N``, the length of a 1-D input cut into bags at drawn offsets (empty
            bags included), likewise; default inputs of up to 64 ids, 1-D or 2-D.
        transforms: also check ``("jvp", "vmap")`` as [`verify_embedding`][] does (``jvp``
            not for ``mode="max"``, whose tangent follows the primal's arg-max).
        boundaries: first run the fixed boundary examples of bags (empty bags first and
            last, no bags, 2-D inputs, bad offsets, the length of one bag up to 2**16 ids,
            up to 2**17 bags, ``D`` and ``V`` at powers of two and their neighbours, each
            combination of the options with each mode), the same under every seed.

    Returns:
        A [`VerificationReport`][] (``modes`` names the modes); call
        ``.raise_for_failure()`` to turn a failure into an exception.

    Raises:
        InvalidArgument: unknown options or modes, an option that ``modes`` never allows, a
            non-float dtype, an absent device, or a bad ``max_examples``.

    Examples:
        >>> import torch.nn.functional as F
        >>> from embedding_equivalence import verify_embedding_bag
        >>> report = verify_embedding_bag(F.embedding_bag, modes=("sum",), max_examples=20, seed=0)
        >>> report.passed
        True
    """
    check_budget(candidate, max_examples)
    opts = option_names(options)
    mds = tuple(modes) if not isinstance(modes, str) else modes
    dts, devs = resolve_dtypes_devices(dtypes, devices)
    ees.embedding_bag_cases(modes=mds, options=opts)  # refuses bad modes and options early
    transforms = check_transforms_argument(transforms)
    sizes = case_sizes(
        "verify_embedding_bag", vocab_sizes=vocab_sizes, embedding_dims=embedding_dims,
        num_ids=num_ids, dtypes=dts, devices=devs,
    )  # fmt: skip
    run_seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    invalid: st.SearchStrategy[EmbeddingBagCase] | None = _on_cpu(devs, lambda: (
        ees.embedding_bag_cases(
            modes=mds, options=opts, dtype=st.sampled_from(dts), device="cpu", invalid=True,
            **sizes,
        )
    ))  # fmt: skip
    # One run per mode, each with its share of the examples: most bugs live in one mode, and
    # a single run over all modes can leave a mode with a handful of examples.
    share, extra = divmod(max_examples, len(mds))
    reports: list[VerificationReport] = []
    phase = bag_boundaries(opts, mds, dts, devs) if boundaries else ()
    for i, mode in enumerate(mds):
        budget = share + (1 if i < extra else 0)
        if budget == 0:
            break
        valid = ees.embedding_bag_cases(
            modes=(mode,),
            options=tuple(o for o in opts if option_applies(o, mode)),
            dtype=st.sampled_from(dts),
            device=st.sampled_from(devs),
            **sizes,
        )
        report = run_verification(
            candidate, with_invalid(valid, invalid), BagOracle.for_call, backward=backward,
            options=opts, dtypes=dts, devices=devs, max_examples=budget, seed=run_seed,
            transforms=transforms, boundaries=phase if i == 0 else (),
        )  # fmt: skip
        reports.append(report)
        if not report.passed:
            break
    return dataclasses.replace(merge_reports(reports), modes=mds)


def merge_reports(reports: Sequence[VerificationReport]) -> VerificationReport:
    """One report of runs made one after another (per mode, per device).

    The runs stopped at the first failure: the counts are summed, the worst error is the
    largest, the devices are those of every run, and the verdict, failure and counterexample
    are the last run's.

    Args:
        reports: the runs' reports, in the order they ran (at least one).

    Returns:
        The merged report.
    """
    last = reports[-1]  # the failing run, if any: its counterexample and failure
    reasons: dict[str, int] = {}
    for r in reports:
        for reason, n in r.fallback_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
    compiled = [r.compiled_examples for r in reports if r.compiled_examples is not None]
    return dataclasses.replace(
        last,
        passed=all(r.passed for r in reports),
        examples=sum(r.examples for r in reports),
        boundary_examples=sum(r.boundary_examples for r in reports),
        worst_error=max(r.worst_error for r in reports),
        elapsed=sum(r.elapsed for r in reports),
        devices=tuple(dict.fromkeys(d for r in reports for d in r.devices)),
        compiled_examples=sum(compiled) if compiled else None,
        eager_fallbacks=sum(r.eager_fallbacks for r in reports),
        fallback_reasons=reasons,
        group_starts=sum(r.group_starts for r in reports),
        startup_seconds=tuple(s for r in reports for s in r.startup_seconds),
    )


def verify_quantized_embedding(
    candidate: Callable[..., Any],
    *,
    scheme: str,
    symmetric: bool = False,
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = 100,
    seed: int | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` looks rows of a quantized table up, dequantized.

    ``candidate(input, qweight, scale, zero_point)`` must return ``(*input.shape, D)`` in
    ``scale.dtype``: row ``input[i]`` of the table that the scheme stores (see
    [`quantize_rowwise`][embedding_equivalence.quantize_rowwise] for the schemes). Over drawn
    tables with wide magnitudes (scales from the subnormals to products that overflow the
    output dtype, constant rows, rows that dequantize to zero), ids of every shape and layout,
    and scale dtypes, it checks against the exact float64 dequantization:

    - the output's shape, dtype (the scale's) and device;
    - its values, within ``(u_c + u_o + u_c u_o) |x| + (1 + u_o) eta_c + eta_o``: the product
      rounded in a float32 compute dtype and the result rounded once to the output dtype,
      nothing looser (a kernel that computes in float16 fails); where the exact value rounds
      to an infinity in the output dtype, that infinity;
    - bad input (an id out of range, a negative id, floating ids): the candidate must raise.

    Args:
        candidate: the kernel under test.
        scheme: ``"int8"``, ``"uint4"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.
        symmetric: ``"int8"`` only: tables without a zero point (``zero_point=None``).
        dtypes: scale dtypes to draw; ``None`` means float32, float16 and bfloat16.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        seed: fix the run (the report's ``seed`` replays a random run).
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy.
        embedding_dims: ``D``, likewise (odd values are made even for ``"uint4"``).
        num_ids: ``N``, the length of a 1-D input, likewise.
        boundaries: first run the fixed boundary examples (edge shapes and layouts, bad ids
            at their edges, ``N``, ``D`` and ``V`` at powers of two and their neighbours),
            the same under every seed.

    Returns:
        A [`VerificationReport`][]; ``scheme`` records the scheme.

    Raises:
        InvalidArgument: an unknown scheme, ``symmetric`` with a scheme other than
            ``"int8"``, a non-float dtype, an absent device, a bad ``max_examples`` or size
            knob.

    Examples:
        >>> from embedding_equivalence import lookup_quantized_embedding
        >>> from embedding_equivalence import verify_quantized_embedding
        >>> def kernel(input, qweight, scale, zero_point):
        ...     return lookup_quantized_embedding(input, qweight, scale, zero_point, scheme="int8")
        >>> verify_quantized_embedding(kernel, scheme="int8", max_examples=20, seed=0).passed
        True
    """
    check_budget(candidate, max_examples)
    try:
        check_scheme(scheme, "verify_quantized_embedding")
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    default = dtypes is None
    dts, devs = resolve_dtypes_devices(dtypes, devices)
    if default:
        dts = tuple(d for d in ees.QUANTIZED_SCALE_DTYPES if d in dts)
    sizes = case_sizes(
        "verify_quantized_embedding", vocab_sizes=vocab_sizes, embedding_dims=embedding_dims,
        num_ids=num_ids, dtypes=dts, devices=devs,
    )  # fmt: skip

    def cases(device: Any, invalid: bool) -> st.SearchStrategy[Any]:
        return ees.quantized_embedding_cases(
            scheme, symmetric=symmetric, dtype=st.sampled_from(dts), device=device,
            invalid=invalid, **sizes,
        )  # fmt: skip

    valid = cases(st.sampled_from(devs), False)
    report = run_verification(
        candidate, with_invalid(valid, _on_cpu(devs, lambda: cases("cpu", True))),
        QuantizedOracle.factory(scheme), backward=False, options=(), dtypes=dts,
        devices=devs, max_examples=max_examples, seed=seed,
        boundaries=quantized_boundaries(scheme, symmetric, dts, devs) if boundaries else (),
    )  # fmt: skip
    return dataclasses.replace(report, scheme=scheme + (" (symmetric)" if symmetric else ""))
