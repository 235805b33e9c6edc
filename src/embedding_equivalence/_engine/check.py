"""The verification engine: one call, run by a runner, judged against an oracle.

Every verifier and every assertion helper goes through here, in four steps:

1. a [`Call`][embedding_equivalence._draw.cases.Call] is built (from a drawn case, or from the
   tensors a user passed);
2. an **oracle** ([`Oracle`][embedding_equivalence.oracle.expected.Oracle]) is built from the
   call's tensors *before* the candidate runs;
3. a **runner** ([`Runner`][]) runs the candidate, forward and backward, and returns an
   [`Outcome`][]: plain results or the exception, never a half-finished state.
   [`run_in_process`][] runs it here; a sharded verifier runs it on every rank of a process
   group and gathers the outcomes;
4. [`judge`][] compares the outcome with the oracle and raises
   [`EquivalenceError`][] with the first difference, its position, both values, the bound
   and a repro snippet, or returns the largest ``|error| / bound``.

Runner and oracle are the two seams: a new verifier brings its own and reuses the rest.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ..oracle.call import Call
from ..oracle.expected import Oracle
from .compare import compare_exact_or_bounded, compare_rows
from .purity import (
    LATER,
    Again,
    Before,
    call_again,
    first_difference,
    negate_referenced,
    negated_values,
    same_bits,
    shared_input,
)
from .repro import candidate_source, describe_call


class EquivalenceError(AssertionError):
    """A candidate's output, gradient or side effect differs from the exact reference.

    The one error of the package's checks: the ``testing`` assertions raise it, and so does
    [`VerificationReport.raise_for_failure`][embedding_equivalence.VerificationReport.raise_for_failure].
    Its text is the message, then the repro under a heading; the two are also kept apart,
    so that nothing has to parse the text.

    Attributes:
        message: what differs, without the repro.
        repro: a runnable Python script that reproduces the failure (``""`` if none).
        worst: the largest ``|error| / bound`` seen (``inf`` for an exact check that failed).
    """

    def __init__(
        self, message: str, repro: str = "", worst: float = math.inf, *, heading: str = "Repro"
    ) -> None:
        super().__init__(message + (f"\n\n{heading}:\n{repro}" if repro else ""))
        self.message = message
        self.repro = repro
        self.worst = worst


EquivalenceError.__module__ = "embedding_equivalence"  # its public home, in tracebacks too


class AbortRun(BaseException):
    """Ends a verification run at once, without shrinking: the machinery itself failed.

    A rank that hangs or dies leaves no process group to run further examples on; shrinking
    would repeat the timeout for every attempt. Derived from ``BaseException`` so that
    Hypothesis lets it through instead of treating it as a failing example.

    Attributes:
        use_last_failure: report the smallest failure seen before, rather than the example
            that was running.
    """

    def __init__(self, message: str, *, use_last_failure: bool = False) -> None:
        super().__init__(message)
        self.use_last_failure = use_last_failure


# --- running ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What running a candidate on one call produced.

    Attributes:
        output: what the candidate returned (anything: the judge checks it is a tensor).
        error: the exception the candidate raised, or ``None``.
        stage: where it raised: ``"forward"`` or ``"backward"``.
        requires_grad: whether the output was connected to the autograd graph.
        weight_grad: ``weight.grad`` after the backward pass (dense or sparse), or ``None``.
        per_sample_weights_grad: ``per_sample_weights.grad`` after the backward pass.
        table: the table after the call (``max_norm`` renormalizes it in place).
        rank: the rank that reported it, for a candidate run on a process group.
        traceback: the formatted traceback of ``error`` where it was raised (another process).
        seconds: when ``error`` was raised, in seconds from the start of the call.
        side_effect: an argument the call changed in place, or ``None`` (judged first).
        shares: an argument the output shares memory with, or ``None`` (judged after the
            values, as the second call is).
        again: what a second call on the negated table gave
            ([`call_again`][embedding_equivalence._engine.purity.call_again]), or ``None``.
    """

    output: object = None
    error: BaseException | None = None
    stage: str | None = None
    requires_grad: bool = False
    weight_grad: torch.Tensor | None = None
    per_sample_weights_grad: torch.Tensor | None = None
    table: torch.Tensor | None = None
    rank: int | None = None
    traceback: str | None = None
    seconds: float = 0.0
    side_effect: str | None = None
    shares: str | None = None
    again: Again | None = None


#: Runs a candidate on a call and reports what happened (the first seam): one outcome, or one
#: a rank (each with its ``rank``) for a candidate run on the ranks of a process group.
Runner = Callable[[Callable[..., Any], Call], "Outcome | Sequence[Outcome]"]


def _outcomes(result: Outcome | Sequence[Outcome]) -> list[Outcome]:
    return [result] if isinstance(result, Outcome) else list(result)


def on_rank(name: str, outcome: Outcome) -> str:
    """``name``, with the rank that reported ``outcome`` when it came from a process group."""
    return name if outcome.rank is None else f"{name} on rank {outcome.rank}"


def _raised(outcome: Outcome) -> str:
    """``TypeName: message``, with the traceback of an error raised in another process."""
    text = f"{type(outcome.error).__name__}: {outcome.error}"
    if outcome.traceback:
        text += f"\n\nTraceback on rank {outcome.rank}:\n{outcome.traceback.rstrip()}\n"
    return text


def run_in_process(candidate: Callable[..., Any], call: Call) -> Outcome:
    """Run ``candidate`` on ``call`` in this process: forward, then backward if asked.

    The backward pass runs when ``call.grad_output`` is set and the output is a tensor that
    requires grad. Exceptions are caught and recorded with their stage.

    Args:
        candidate: the kernel under test.
        call: the call; its tensors are used (and modified) as they are.

    Returns:
        The [`Outcome`][].
    """
    before = Before.of(call)
    try:
        out = candidate(*call.args, **call.kwargs)
    except Exception as exc:  # the judge decides whether raising was right
        return Outcome(error=exc, stage="forward")
    outcome = Outcome(out, table=call.weight.detach(), side_effect=before.changed("the call"))
    outcome.shares = shared_input(out, call)
    if outcome.side_effect is None and isinstance(out, torch.Tensor):
        _backward_and_again(candidate, call, out, outcome)
    # The large arguments, compared once, at the end (see Before.changed).
    outcome.side_effect = outcome.side_effect or before.changed(LATER, last=True)
    return outcome


def _backward_and_again(
    candidate: Callable[..., Any], call: Call, out: torch.Tensor, outcome: Outcome
) -> None:
    """The backward pass (if asked), the upstream gradient kept; then the second call."""
    outcome.requires_grad = out.requires_grad
    if call.grad_output is not None and out.requires_grad:
        upstream = Before.of(call, [("grad_output", call.grad_output)])
        try:
            out.backward(call.grad_output)
        except Exception as exc:
            outcome.error, outcome.stage = exc, "backward"
            return
        outcome.weight_grad = call.weight.grad
        outcome.per_sample_weights_grad = getattr(call.per_sample_weights, "grad", None)
        outcome.side_effect = upstream.changed("backward")
        if outcome.side_effect:
            return
    values = negated_values(call)
    if values is not None:
        negate = negate_referenced(call, values)
        outcome.again = call_again(candidate, call.args, call.kwargs, negate, out)


# --- judging ----------------------------------------------------------------------------------


def _check_output(
    out: object, call: Call, oracle: Oracle, shape: tuple[int, ...], name: str
) -> str | None:
    returned = f"{name} returned"
    if not isinstance(out, torch.Tensor):
        return f"{returned} {type(out).__name__}, not a torch.Tensor"
    if tuple(out.shape) != shape:
        return f"{returned} shape {tuple(out.shape)}, expected {oracle.output_shape_text} = {shape}"
    if out.dtype != call.output_dtype:
        dtype = f"the {call.output_dtype_of}'s dtype {call.output_dtype}"
        return f"{returned} dtype {out.dtype}, expected {dtype}"
    device = call.weight.device
    if out.device != device:
        return f"{returned} a tensor on {out.device}, expected the weight's device {device}"
    return None


def _dense_grad(outcome: Outcome, call: Call, name: str) -> str | torch.Tensor:
    """The weight's gradient as a dense tensor, or the message of what is wrong with it."""
    if not outcome.requires_grad:
        return (
            f"{name} returned a tensor that does not require grad: the result is not connected "
            f"to the weight in the autograd graph"
        )
    if outcome.stage == "backward":
        return f"backward of {name} raised {_raised(outcome)}"
    grad = outcome.weight_grad
    if grad is None:
        return f"{name}: weight.grad is None after backward"
    sparse = bool(call.kwargs.get("sparse", False))
    if sparse and grad.layout != torch.sparse_coo:
        return f"{name}: sparse=True must give a sparse COO gradient, got layout {grad.layout}"
    if not sparse and grad.layout != torch.strided:
        return f"{name}: the gradient must be dense without sparse=True, got layout {grad.layout}"
    dense = grad.to_dense() if grad.layout != torch.strided else grad
    shape = tuple(call.weight.shape)
    if tuple(dense.shape) != shape:
        return f"{name}: weight.grad has shape {tuple(dense.shape)}, expected {shape}"
    return dense


def judge(outcome: Outcome, call: Call, oracle: Oracle, name: str, repro: str) -> float:
    """Compare what the candidate did with what the oracle says, in a fixed order.

    The order: the forward raised; the output's type, shape, dtype and device; the table after
    ``max_norm``; the output's values; then, when the call has a ``grad_output``, the
    backward (connected, did not raise, layout, shape) and the gradients of the table and of
    ``per_sample_weights``. The first difference is raised.

    Args:
        outcome: what [`Runner`][] reported.
        call: the call (its ``grad_output`` decides whether gradients are judged).
        oracle: the exact reference of the call.
        name: the call as written in messages
            ([`describe_call`][embedding_equivalence._engine.repro.describe_call]).
        repro: the snippet attached to the error.

    Returns:
        The largest ``|error| / bound`` over the bounded comparisons (0 when exact).

    Raises:
        EquivalenceError: the first difference.
    """
    __tracebackhide__ = True
    expected, bound = oracle.output()
    if outcome.stage == "forward":
        raise EquivalenceError(
            f"{name} raised {_raised(outcome)}, but the call is valid (the reference returns a "
            f"tensor of shape {tuple(expected.shape)})",
            repro,
        ) from outcome.error
    # What changed the caller's memory comes first: it may be why a value is wrong (the first
    # output, overwritten by a second call).
    for problem in (outcome.side_effect, outcome.again and outcome.again.overwrote):
        if problem:
            raise EquivalenceError(f"{name}: {problem}", repro)
    msg = _check_output(outcome.output, call, oracle, tuple(expected.shape), name)
    if msg:
        raise EquivalenceError(msg, repro)
    renormed = oracle.renormed()
    if renormed is not None and outcome.table is not None:
        msg, _ = compare_rows("weight (after max_norm)", outcome.table, renormed)
        if msg:
            raise EquivalenceError(f"{msg} [{name}]", repro)
    assert isinstance(outcome.output, torch.Tensor)
    msg, worst = compare_exact_or_bounded("out", outcome.output, expected, bound)
    if msg:
        raise EquivalenceError(f"{msg} [{name}]", repro, worst)
    _judge_again(outcome, call, oracle, name, repro)
    if call.grad_output is None:
        return worst
    dense = _dense_grad(outcome, call, name)
    if isinstance(dense, str):
        raise EquivalenceError(dense, repro)
    grad = oracle.weight_grad(call.grad_output)
    msg, worst_grad = compare_rows("weight.grad", dense, grad)
    if msg:
        index = torch.tensor(grad.rows, dtype=torch.int64, device=dense.device)
        other = oracle.weight_grad_explaining(call.grad_output, dense[index])
        if other is not None:
            msg, worst_grad = compare_rows("weight.grad", dense, other)
            msg = msg and msg + other.note
    if msg:
        raise EquivalenceError(f"{msg} [{name}]", repro, worst_grad)
    worst = max(worst, worst_grad)
    psw = call.per_sample_weights
    expected_psw = oracle.per_sample_weights_grad(call.grad_output)
    if psw is not None and psw.requires_grad and expected_psw is not None:
        exact, psw_bound = expected_psw
        actual = outcome.per_sample_weights_grad
        if actual is None and bool((exact != 0).any()):
            raise EquivalenceError(
                f"{name}: per_sample_weights.grad is None after backward, but the exact "
                f"gradient is not zero: the result is not connected to per_sample_weights in "
                f"the autograd graph",
                repro,
            )
        # None is autograd's zero gradient (no weight was used: no bags, or padding only).
        actual = torch.zeros_like(psw) if actual is None else actual
        msg, worst_psw = compare_exact_or_bounded(
            "per_sample_weights.grad", actual, exact, psw_bound
        )
        if msg:
            raise EquivalenceError(f"{msg} [{name}]", repro, worst_psw)
        worst = max(worst, worst_psw)
    return worst


def _judge_again(outcome: Outcome, call: Call, oracle: Oracle, name: str, repro: str) -> None:
    """Judge the output's ownership: it shares no argument's memory, and a second call.

    The second call, on the negated table, must leave the first output unchanged and give
    the new values.
    """
    __tracebackhide__ = True
    again = outcome.again
    if outcome.shares:
        raise EquivalenceError(f"{name}: {outcome.shares}", repro)
    if again is None:
        return
    what = f"{name}, called again on the same tensors after the table was negated in place"
    if again.error is not None:
        raise EquivalenceError(f"{what}, raised {type(again.error).__name__}: {again.error}", repro)
    first = outcome.output
    assert isinstance(first, torch.Tensor)  # judged before this
    if oracle.negates and same_bits(again.output, first, negated=True):
        return  # -out, bit for bit: within out's bound of the negated exact output
    expected, bound = oracle.negated_output()
    second = again.output
    msg = _check_output(second, call, oracle, tuple(expected.shape), what)
    if msg:
        raise EquivalenceError(msg, repro)
    assert isinstance(second, torch.Tensor)
    msg, worst = compare_exact_or_bounded("out", second, expected, bound)
    if msg is None:
        return
    msg += f" [{what}]"
    stale = torch.equal(second, first.detach().to(second.device))
    if stale and not torch.equal(expected, -expected):
        msg += (
            ": the first call's output, returned again for new values (state kept between "
            "calls, such as a result cached by the inputs' address or shape)"
        )
    elif bool((second.isnan() & ~expected.isnan().to(second.device)).any()):
        msg += (
            ": NaN where the value is finite. The second call runs with torch's deterministic "
            "algorithms on, which fill new memory with NaN: the kernel returns memory it "
            "allocated and did not write"
        )
    raise EquivalenceError(msg, repro, worst)


# --- one call, one case -----------------------------------------------------------------------

#: Builds the oracle of a call from its tensors (the second seam).
OracleFactory = Callable[[Call], Oracle]


def check_call(
    candidate: Callable[..., Any],
    call: Call,
    oracle: Oracle,
    repro: str,
    *,
    runner: Runner = run_in_process,
    name: str | None = None,
) -> tuple[float, list[Outcome]]:
    """Run ``candidate`` on ``call`` with ``runner`` and judge the outcome against ``oracle``.

    Args:
        candidate: the kernel under test.
        call: the call (its weight is the candidate's to modify).
        oracle: built from the call's tensors before this runs.
        repro: the snippet attached to a failure.
        runner: how the candidate is run.
        name: the call as written in messages (default: described from ``call``).

    Returns:
        The largest ``|error| / bound`` (0 when exact), and the outcomes judged (one a rank),
        for a caller that compares them with another run.

    Raises:
        EquivalenceError: the first difference.
    """
    __tracebackhide__ = True
    name = name or describe_call(candidate, call)
    worst, outcomes = 0.0, _outcomes(runner(candidate, call))
    for outcome in outcomes:  # a loop, not a generator: its frame would show in tracebacks
        worst = max(worst, judge(outcome, call, oracle, on_rank(name, outcome), repro))
    return worst, outcomes


class CheckableCase(Protocol):
    """What the engine needs of a drawn case (``EmbeddingCase``, ``EmbeddingBagCase``)."""

    @property
    def invalid(self) -> str | None:
        """``None`` for a valid call, else why the reference refuses it."""
        ...

    def call(self, backward: bool = True) -> Call:
        """Fresh tensors and arguments."""
        ...

    def source(self, fn: str = "candidate", backward: bool = True, preamble: str = "") -> str:
        """A runnable snippet."""
        ...


#: Writes a case's replay snippet: ``(case, backward, preamble) -> source``.
Snippet = Callable[[CheckableCase, bool, str], str]


def case_snippet(case: CheckableCase, backward: bool, preamble: str) -> str:
    """The default [`Snippet`][]: the case's own source, calling ``candidate``."""
    return case.source("candidate", backward=backward, preamble=preamble)


def check_case(
    candidate: Callable[..., Any],
    case: CheckableCase,
    oracle_factory: OracleFactory,
    *,
    backward: bool = True,
    runner: Runner = run_in_process,
    snippet: Snippet = case_snippet,
    deterministic: bool = False,
) -> float:
    """Check ``candidate`` on one drawn case: valid ones against the oracle, invalid ones raise.

    Args:
        candidate: the kernel under test.
        case: the drawn call.
        oracle_factory: builds the oracle from the call's tensors.
        backward: also check the gradients.
        runner: how the candidate is run.
        snippet: writes the replay snippet (a runner that is not this process brings its own).
        deterministic: run a valid case twice: the runs must agree bit for bit.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: the first difference, with a snippet that rebuilds the case.
    """
    __tracebackhide__ = True
    repro = snippet(case, backward, candidate_source(candidate))
    try:
        return _check_fresh_call(
            candidate, case, oracle_factory, backward, runner, repro, deterministic
        )
    except EquivalenceError as exc:
        _drop_tensors(exc)
        raise


def _drop_tensors(exc: BaseException) -> None:
    """Clear the local variables of the finished frames in ``exc``'s tracebacks (its causes too).

    A failure is kept while Hypothesis shrinks it and in the report; its traceback would keep
    every tensor of the failing call alive with it (a table past ``2**31`` elements and its
    gradient: 8 GiB in float16). The messages and the snippet hold all that a report says.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


def _check_fresh_call(
    candidate: Callable[..., Any],
    case: CheckableCase,
    oracle_factory: OracleFactory,
    backward: bool,
    runner: Runner,
    repro: str,
    deterministic: bool,
) -> float:
    """[`check_case`][] on a fresh call of ``case``, whose tensors live in this frame only.

    With ``deterministic``, a valid case runs once more, on a fresh call: the run judged and
    that one must agree ([`check_runs_agree`][]).
    """
    __tracebackhide__ = True
    call = case.call(backward=backward and case.invalid is None)
    if case.invalid is not None:
        for outcome in _outcomes(runner(candidate, call)):
            if outcome.stage != "forward":
                raise EquivalenceError(
                    f"{on_rank(describe_call(candidate, call), outcome)} returned a result, but "
                    f"the call is invalid ({case.invalid}) and the reference raises: bad input "
                    f"must be refused, not clamped, wrapped or read out of bounds",
                    repro,
                )
        return 0.0
    # The oracle reads what it needs of the table now, before the candidate runs (max_norm
    # renorms the table in place): the referenced rows, and with max_norm a copy of a small
    # table or a digest of each row of a large one. No copy is made here.
    before = call.weight.detach()
    oracle = oracle_factory(dataclasses.replace(call, weight=before, grad_output=None))
    name = describe_call(candidate, call, weight=before)
    worst, judged = check_call(candidate, call, oracle, repro, runner=runner, name=name)
    if deterministic:
        again = _outcomes(runner(candidate, case.call(backward=backward)))
        check_runs_agree([judged, again], name, _with_runs_agree(case, backward, repro))
    return worst


def check_runs_agree(runs: Sequence[Sequence[Outcome]], name: str, repro: str) -> None:
    """Two runs of one call (their outcomes, rank by rank) must agree bit for bit.

    Compared: the output, and the gradients of the table and of ``per_sample_weights``.

    Args:
        runs: the outcomes of the first run and of the second.
        name: the call as written in messages.
        repro: the snippet attached to the error.

    Raises:
        EquivalenceError: the first element that differs.
    """
    __tracebackhide__ = True
    names = {"output": "out", "weight_grad": "weight.grad"}
    for first, second in zip(*runs, strict=True):
        for what in ("output", "weight_grad", "per_sample_weights_grad"):
            a, b = getattr(first, what), getattr(second, what)
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                continue
            a, b = (t.to_dense() if t.layout != torch.strided else t for t in (a, b))
            where = first_difference(names.get(what, "per_sample_weights.grad"), a, b, how="")
            if where is not None:
                raise EquivalenceError(
                    f"two runs of the same call differ: {where} [{on_rank(name, first)}]; with "
                    f"deterministic=True (or torch's deterministic algorithms on) every run of a "
                    f"call must agree bit for bit, forward and backward",
                    repro,
                )


def _with_runs_agree(case: CheckableCase, backward: bool, repro: str) -> str:
    """``repro``, asserting that two runs agree too where the case can write its arguments."""
    arguments = getattr(case, "arguments_source", None)
    if arguments is None:
        return repro
    gradient = ", grad_output=grad_output" if backward else ""
    return repro + (
        "\n# Two runs of one call must agree bit for bit (deterministic=True).\n"
        "from embedding_equivalence.testing import assert_runs_agree\n"
        f"assert_runs_agree(candidate, {arguments()}{gradient})"
    )
