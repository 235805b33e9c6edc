"""``verify_embedding``: property-based verification of a user's embedding kernel."""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from . import strategies as ees
from ._cases import EmbeddingCase
from .testing import EquivalenceError, assert_case_equivalent

__all__ = ["VerificationError", "VerificationReport", "verify_embedding"]


class VerificationError(AssertionError):
    """Raised by :meth:`VerificationReport.raise_for_failure`; the message holds the repro."""


@dataclass
class VerificationReport:
    """The outcome of :func:`verify_embedding`.

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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def examples_per_second(self) -> float:
        """Throughput of the run."""
        return self.examples / self.elapsed if self.elapsed > 0 else math.inf

    def raise_for_failure(self) -> None:
        """Raise :class:`VerificationError` with the failure and the repro if the run failed.

        Raises:
            VerificationError: the candidate failed.
        """
        __tracebackhide__ = True
        if not self.passed:
            raise VerificationError(str(self))

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        head = (
            f"{self.candidate}: {status} after {self.examples} examples in {self.elapsed:.1f} s "
            f"(seed={self.seed}, options={list(self.options)}, "
            f"dtypes={[str(d).removeprefix('torch.') for d in self.dtypes]}, "
            f"devices={list(self.devices)})"
        )
        if self.passed:
            return head + f"; worst gradient error {self.worst_error:.3g} of the bound"
        return f"{head}\n{self.failure}\n\nMinimal counterexample:\n{self.counterexample}"


@contextlib.contextmanager
def preserved_global_state() -> Iterator[None]:
    """Restore torch's and Python's global state on exit, whatever the candidate changed.

    Covers grad mode, the default dtype, the CPU and CUDA RNG states, Python's ``random``,
    deterministic-algorithm flags, the TF32 flags and the float32 matmul precision.
    """
    grad = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    tf32_matmul = torch.backends.cuda.matmul.allow_tf32
    tf32_cudnn = torch.backends.cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    py_state = random.getstate()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            torch.set_grad_enabled(grad)
            torch.set_default_dtype(default_dtype)
            torch.use_deterministic_algorithms(det, warn_only=det_warn)
            torch.backends.cuda.matmul.allow_tf32 = tf32_matmul
            torch.backends.cudnn.allow_tf32 = tf32_cudnn
            torch.set_float32_matmul_precision(precision)
            random.setstate(py_state)


def _resolve(
    dtypes: Sequence[torch.dtype] | None, devices: Sequence[str | torch.device] | None
) -> tuple[tuple[torch.dtype, ...], tuple[str, ...]]:
    devs = (
        tuple(str(torch.device(d)) for d in devices) if devices else tuple(ees.available_devices())
    )
    for d in devs:
        if torch.device(d).type not in ees.available_devices():
            raise InvalidArgument(
                f"devices contains {d!r}, which is not available here; available: "
                f"{ees.available_devices()}"
            )
    if dtypes is None:
        dts: list[torch.dtype] = []
        for d in devs:
            dts += [x for x in ees.supported_float_dtypes(d) if x not in dts]
        return tuple(dts), devs
    for dt in dtypes:
        if not isinstance(dt, torch.dtype) or not dt.is_floating_point:
            raise InvalidArgument(f"dtypes contains {dt!r}, which is not a floating torch.dtype")
    return tuple(dtypes), devs


def _qualname(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{name}" if module else name


def run_verification(
    check: Callable[[Any], float],
    cases: st.SearchStrategy[Any],
    candidate_name: str,
    *,
    options: tuple[str, ...],
    dtypes: tuple[torch.dtype, ...],
    devices: tuple[str, ...],
    max_examples: int,
    seed: int | None,
    source: Callable[[Any, AssertionError], str],
) -> VerificationReport:
    """Run ``check`` over ``cases`` with Hypothesis and summarize the outcome.

    Args:
        check: raises ``AssertionError`` on failure, returns the worst error fraction.
        cases: the strategy to draw from.
        candidate_name: for the report.
        options: for the report.
        dtypes: for the report.
        devices: for the report.
        max_examples: Hypothesis's example budget.
        seed: Hypothesis seed (``None``: a fresh random one, recorded in the report).
        source: makes the repro snippet of a failing case.

    Returns:
        The report.
    """
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgument(f"max_examples={max_examples!r} must be a positive int")
    run_seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    state: dict[str, Any] = {"examples": 0, "failed": False, "worst": 0.0, "last": None}

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
    def run(case: Any) -> None:
        if not state["failed"]:
            state["examples"] += 1
        try:
            worst = check(case)
        except AssertionError as exc:
            state["failed"] = True
            state["last"] = (case, exc)
            raise
        if not state["failed"]:
            state["worst"] = max(state["worst"], worst)

    start = time.perf_counter()
    with preserved_global_state():
        try:
            hypothesis_seed(run_seed)(run)()
            passed = True
        except AssertionError:
            passed = False
    elapsed = time.perf_counter() - start
    counterexample = failure = None
    if not passed and state["last"] is not None:
        case, exc = state["last"]
        failure = str(exc).split("\n\nRepro:\n")[0]
        counterexample = source(case, exc)
    return VerificationReport(
        candidate=candidate_name,
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
    )


def verify_embedding(
    candidate: Callable[..., Any],
    *,
    options: Sequence[str] = (),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = 100,
    backward: bool = True,
    seed: int | None = None,
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

    Returns:
        A :class:`VerificationReport`; call ``.raise_for_failure()`` to turn a failure into
        an exception.

    Raises:
        InvalidArgument: unknown options, a non-float dtype, an absent device, or a bad
            ``max_examples``.

    Example:
        >>> import torch
        >>> from embedding_equivalence import verify_embedding
        >>> report = verify_embedding(lambda input, weight: weight[input], max_examples=20, seed=0)
        >>> report.passed
        False
    """
    if not callable(candidate):
        raise InvalidArgument(f"candidate={candidate!r} must be callable")
    opts = tuple(options)
    dts, devs = _resolve(dtypes, devices)
    valid = ees.embedding_cases(
        options=opts, dtype=st.sampled_from(dts), device=st.sampled_from(devs)
    )
    cases: st.SearchStrategy[EmbeddingCase] = valid
    if "cpu" in devs:
        # Bad input only on the CPU: an out-of-range id on CUDA is a device-side assert that
        # leaves the CUDA context unusable for the rest of the process.
        invalid = ees.embedding_cases(
            options=opts, dtype=st.sampled_from(dts), device="cpu", invalid=True
        )
        # One example in five is invalid input; shrinking goes to 0, the valid branch.
        cases = st.integers(0, 4).flatmap(lambda k: invalid if k == 4 else valid)

    def check(case: EmbeddingCase) -> float:
        return assert_case_equivalent(candidate, case, backward=backward)

    def source(case: EmbeddingCase, exc: AssertionError) -> str:
        if isinstance(exc, EquivalenceError) and exc.repro:
            return exc.repro
        return case.source("candidate", backward=backward)

    return run_verification(
        check,
        cases,
        _qualname(candidate),
        options=opts,
        dtypes=dts,
        devices=devs,
        max_examples=max_examples,
        seed=seed,
        source=source,
    )
