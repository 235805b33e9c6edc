"""Assertion helpers for your own embedding properties (pytest-friendly).

Each helper runs a candidate with ``F.embedding``'s signature (the ``assert_bag_*`` helpers:
``F.embedding_bag``'s), compares it with the exact float64 oracle, and on failure raises
[`EquivalenceError`][] (an ``AssertionError``) whose message names the function, the
arguments, the first differing position, both values and the bound, followed by a runnable
repro snippet. Tracebacks hide the helpers' own frames.

Examples:
    ```python
    import torch
    from embedding_equivalence.testing import assert_backward_equivalent

    def my_embedding(input, weight):
        return weight[input]

    weight = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([1, 1, 9])
    grad_output = torch.ones(3, 4)
    assert_backward_equivalent(my_embedding, ids, weight, grad_output)
    ```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ._draw.cases import EmbeddingBagCase as _EmbeddingBagCase
from ._draw.cases import EmbeddingCase as _EmbeddingCase
from ._engine import check as _check
from ._engine import repro as _repro
from ._engine.check import EquivalenceError
from ._engine.compare import compare_exact_or_bounded
from .oracle import BagOracle as _BagOracle
from .oracle import EmbeddingOracle as _EmbeddingOracle
from .oracle import Oracle as _Oracle
from .oracle.bag import (
    BagGradients,
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    reference_embedding_bag,
    reference_embedding_bag_grad,
)
from .oracle.bounds import gamma, renorm_error_bound, unit_roundoff
from .oracle.call import Call as _Call
from .oracle.embedding import gradient_error_bound, reference_embedding, reference_embedding_grad
from .oracle.quantized import QuantizedOracle as _QuantizedOracle

__all__ = [
    "BagGradients",
    "EquivalenceError",
    "assert_backward_equivalent",
    "assert_bag_backward_equivalent",
    "assert_bag_case_equivalent",
    "assert_bag_forward_equivalent",
    "assert_case_equivalent",
    "assert_forward_equivalent",
    "assert_quantized_equivalent",
    "assert_runs_agree",
    "compare_exact_or_bounded",
    "embedding_bag_error_bound",
    "embedding_bag_gradient_error_bound",
    "gamma",
    "gradient_error_bound",
    "reference_embedding",
    "reference_embedding_bag",
    "reference_embedding_bag_grad",
    "reference_embedding_grad",
    "renorm_error_bound",
    "unit_roundoff",
]


def _fresh(call: _Call, ids: bool = False) -> _Call:
    """``call`` on clones of its tensors, the caller's left as they are.

    Fresh leaves of the table and of ``per_sample_weights`` (requiring grad when ``call`` has
    a ``grad_output``), clones of a quantized table's scales and zero points, and with
    ``ids`` of the ids (else the ids are the caller's, in their own layout).
    """
    grad = call.grad_output is not None
    kwargs, psw = dict(call.kwargs), call.per_sample_weights
    if psw is not None:
        kwargs["per_sample_weights"] = psw.detach().clone().requires_grad_(grad)
    extra = {k: None if v is None else v.clone() for k, v in call.extra.items()}
    table = call.weight.detach().clone().requires_grad_(grad)
    input = call.input.clone() if ids else call.input
    return dataclasses.replace(call, input=input, weight=table, kwargs=kwargs, extra=extra)


def _check_tensors(
    candidate: Callable[..., Any],
    oracle_for: Callable[[_Call], _Oracle],
    call: _Call,
    clone_ids: bool = False,
) -> tuple[torch.Tensor, float]:
    """The engine on a call given as tensors: the caller's tensors are never modified.

    The candidate runs on fresh leaves (clones of the table and of ``per_sample_weights``);
    the oracle reads the table as it was; the repro spells out the caller's tensors. Returns
    the candidate's output (a tensor: the judge passed it) and the largest error ratio.
    """
    __tracebackhide__ = True
    run, weight = _fresh(call, clone_ids), call.weight.detach()
    oracle = oracle_for(
        dataclasses.replace(call, weight=weight, kwargs=run.kwargs, grad_output=None)
    )
    outcome = _check.run_in_process(candidate, run)
    name = _repro.describe_call(candidate, run, weight=weight)
    worst = _check.judge(outcome, run, oracle, name, _repro.call_source(candidate, call))
    assert isinstance(outcome.output, torch.Tensor)
    return outcome.output, worst


def assert_forward_equivalent(
    candidate: Callable[..., Any], input: torch.Tensor, weight: torch.Tensor, /, **kwargs: Any
) -> torch.Tensor:
    """Assert that ``candidate(input, weight, **kwargs)`` is the exact lookup ``weight[input]``.

    Checks the output's shape ``(*input.shape, D)``, dtype and device, and its values exactly
    (signed zeros included). With ``max_norm``, also the in-place renorm of the referenced
    rows (within [`renorm_error_bound`][]) and that the other rows are untouched. ``candidate``
    runs on a clone of ``weight``; the caller's tensor is not modified.

    Args:
        candidate: the candidate, with ``F.embedding``'s signature.
        input: ids of any shape, all in ``[0, V)``.
        weight: ``(V, D)`` floating table.
        **kwargs: options passed to ``candidate`` (``padding_idx``, ``max_norm``, ...).

    Returns:
        The candidate's output.

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    return _check_tensors(candidate, _EmbeddingOracle.for_call, _Call(input, weight, kwargs))[0]


def assert_backward_equivalent(
    candidate: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    /,
    **kwargs: Any,
) -> float:
    """Assert the forward (as [`assert_forward_equivalent`][]) and the weight's gradient.

    After ``candidate(input, w, **kwargs).backward(grad_output)`` on a fresh leaf ``w`` (a clone of
    ``weight``), ``w.grad`` must lie within [`gradient_error_bound`][] of the exact
    gradient: duplicates accumulate, the padding row and unreferenced rows are exactly zero,
    ``scale_grad_by_freq`` divides by the counts, and ``sparse=True`` gives a sparse COO
    gradient.

    Args:
        candidate: the candidate, with ``F.embedding``'s signature.
        input: ids of any shape, all in ``[0, V)``.
        weight: ``(V, D)`` floating table.
        grad_output: upstream gradient ``(*input.shape, D)``.
        **kwargs: options passed to ``candidate``.

    Returns:
        The largest ``|error| / bound`` over the gradient (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    call = _Call(input, weight, kwargs, grad_output=grad_output)
    return _check_tensors(candidate, _EmbeddingOracle.for_call, call)[1]


def assert_quantized_equivalent(
    candidate: Callable[..., Any],
    input: torch.Tensor,
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
    /,
    *,
    scheme: str,
) -> torch.Tensor:
    """Assert that ``candidate(input, qweight, scale, zero_point)`` is the dequantized lookup.

    The checks of [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]
    on one call: the output's shape, dtype (the scale's) and device, its values within the
    bound of the exact float64 dequantization, and what a kernel must not do (the table,
    scales, zero points and ids unchanged, an owned output, a second call on the negated
    scales). ``candidate`` runs on clones; the caller's tensors are not modified.

    Args:
        candidate: the candidate, ``fn(input, qweight, scale, zero_point)``.
        input: ids of any shape, all in ``[0, V)``.
        qweight: the stored values of the scheme.
        scale: ``(V,)`` per-row scales, in the output dtype.
        zero_point: ``(V,)`` int32 zero points, or ``None``.
        scheme: the scheme's name (see
            [`quantize_rowwise`][embedding_equivalence.quantize_rowwise]).

    Returns:
        The candidate's output.

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    extra = {"scale": scale, "zero_point": zero_point}
    call = _Call(input, qweight, extra=extra, output_dtype_of="scale", weight_name="qweight")
    return _check_tensors(candidate, _QuantizedOracle.factory(scheme), call, clone_ids=True)[0]


def assert_runs_agree(
    candidate: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    /,
    *args: Any,
    grad_output: torch.Tensor | None = None,
    **kwargs: Any,
) -> None:
    """Assert that two runs of ``candidate(input, weight, *args, **kwargs)`` agree bit for bit.

    What ``deterministic=True`` asks of every example of a verification. Each run gets fresh
    tensors (clones of ``input``, of ``weight`` and of ``per_sample_weights``, leaves when
    ``grad_output`` is given); compared are the output and, with ``grad_output``, the
    gradients of the table and of ``per_sample_weights``.

    Args:
        candidate: the candidate, with ``F.embedding``'s (or ``F.embedding_bag``'s) signature.
        input: the ids.
        weight: the ``(V, D)`` table.
        *args: more positional arguments (``F.embedding_bag``'s ``offsets``).
        grad_output: the upstream gradient of a backward pass, or ``None`` (forward only).
        **kwargs: options passed to ``candidate``.

    Raises:
        EquivalenceError: the first element where the runs differ.
    """
    __tracebackhide__ = True
    given = _Call(input, weight, kwargs, args[0] if args else None, grad_output)
    runs = [[_check.run_in_process(candidate, _fresh(given, ids=True))] for _ in range(2)]
    call = _fresh(given, ids=True)
    name = _repro.describe_call(candidate, call)
    _check.check_runs_agree(runs, name, _repro.call_source(candidate, call))


def assert_case_equivalent(
    candidate: Callable[..., Any], case: _EmbeddingCase, /, *, backward: bool = True
) -> float:
    """Check ``candidate`` on a drawn case.

    The case is an [`EmbeddingCase`][embedding_equivalence.strategies.EmbeddingCase].

    A valid case is checked like [`assert_backward_equivalent`][] (or the forward only);
    an invalid case (``case.invalid`` is set) must make ``candidate`` raise. The repro snippet
    rebuilds the case's tensors exactly, layouts included.

    Args:
        candidate: the candidate, with ``F.embedding``'s signature.
        case: a drawn case.
        backward: also check the gradient.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    return _check.check_case(candidate, case, _EmbeddingOracle.for_call, backward=backward)


def assert_bag_forward_equivalent(
    candidate: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    /,
    **kwargs: Any,
) -> torch.Tensor:
    """Assert that ``candidate(input, weight[, offsets], **kwargs)`` is the bag reduction.

    The reduction is ``F.embedding_bag``'s.

    Checks the output's shape ``(B, D)``, dtype and device, and its values against the exact
    float64 reduction within [`embedding_bag_error_bound`][] (exactly for ``mode="max"``;
    empty bags exactly zero). With ``max_norm``, also the in-place renorm of every row the
    input references (within [`renorm_error_bound`][]) and that the other rows are
    untouched. ``candidate`` runs on a clone of ``weight``; ``offsets`` is passed positionally when
    given, everything else by keyword.

    Args:
        candidate: the candidate, with ``F.embedding_bag``'s signature.
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without.
        weight: ``(V, D)`` floating table.
        offsets: bag starts, or ``None`` for a 2-D input.
        **kwargs: options passed to ``candidate`` (``mode`` -- pass it, its default is
            ``"mean"`` --, ``per_sample_weights``, ``padding_idx``, ...).

    Returns:
        The candidate's output.

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    return _check_tensors(candidate, _BagOracle.for_call, _Call(input, weight, kwargs, offsets))[0]


def assert_bag_backward_equivalent(
    candidate: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    grad_output: torch.Tensor,
    /,
    **kwargs: Any,
) -> float:
    """Assert the forward (as [`assert_bag_forward_equivalent`][]) and the gradients.

    After ``candidate(...).backward(grad_output)`` on fresh leaves (clones of ``weight`` and of
    ``per_sample_weights``), ``weight.grad`` must lie within
    [`embedding_bag_gradient_error_bound`][] of the exact gradient (the padding row, rows in
    no bag and rows after the last offset exactly zero; ``scale_grad_by_freq`` divides by the
    counts; ``sparse=True`` gives a sparse COO gradient). In ``max`` mode, where rows tie for
    a bag's maximum, any assignment of the bag's gradient to one of them is accepted.
    ``per_sample_weights.grad`` must match too.

    Args:
        candidate: the candidate, with ``F.embedding_bag``'s signature.
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without.
        weight: ``(V, D)`` floating table.
        offsets: bag starts, or ``None`` for a 2-D input.
        grad_output: upstream gradient ``(B, D)``.
        **kwargs: options passed to ``candidate``.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    call = _Call(input, weight, kwargs, offsets, grad_output)
    return _check_tensors(candidate, _BagOracle.for_call, call)[1]


def assert_bag_case_equivalent(
    candidate: Callable[..., Any], case: _EmbeddingBagCase, /, *, backward: bool = True
) -> float:
    """Check ``candidate`` on a drawn ``EmbeddingBagCase``.

    The bag counterpart of [`assert_case_equivalent`][], with the same arguments, return
    value and errors; ``candidate`` has ``F.embedding_bag``'s signature, and ``backward`` checks the
    gradients of the table and of ``per_sample_weights``. A valid case is checked like
    [`assert_bag_backward_equivalent`][] (or the forward only); an invalid case
    (``case.invalid`` is set) must make ``candidate`` raise. The call is
    ``candidate(input, weight[, offsets], mode=..., **options)``; the repro snippet rebuilds the
    case's tensors exactly, layouts included.
    """
    __tracebackhide__ = True
    return _check.check_case(candidate, case, _BagOracle.for_call, backward=backward)
