"""Assertion helpers for your own embedding properties (pytest-friendly).

Each helper runs a candidate with ``F.embedding``'s signature, compares it with the exact
float64 oracle, and on failure raises :class:`EquivalenceError` (an ``AssertionError``) whose
message names the function, the arguments, the first differing position, both values and
the bound, followed by a runnable repro snippet. Tracebacks hide the helpers' own frames.

Example:
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

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ._cases import EmbeddingCase as _EmbeddingCase
from ._cases import dtype_source as _dtype_source
from ._cases import float_source as _float_source
from ._oracle import (
    gamma,
    gradient_error_bound,
    reference_embedding,
    reference_embedding_grad,
    renorm_error_bound,
    unit_roundoff,
)

__all__ = [
    "EquivalenceError",
    "assert_backward_equivalent",
    "assert_case_equivalent",
    "assert_forward_equivalent",
    "compare_exact_or_bounded",
    "gamma",
    "gradient_error_bound",
    "reference_embedding",
    "reference_embedding_grad",
    "renorm_error_bound",
    "unit_roundoff",
]

#: The largest tensor that a repro snippet spells out element by element.
_MAX_LITERAL = 4096


class EquivalenceError(AssertionError):
    """A candidate's output, gradient or side effect differs from the exact reference.

    Attributes:
        worst: the largest ``|error| / bound`` seen (``inf`` for an exact check that failed).
        repro: a runnable Python snippet that reproduces the failure.
    """

    def __init__(self, message: str, repro: str = "", worst: float = math.inf) -> None:
        super().__init__(message + (f"\n\nRepro:\n{repro}" if repro else ""))
        self.repro = repro
        self.worst = worst


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _short(t: torch.Tensor) -> str:
    if t.numel() <= 8:
        return repr(t.detach().cpu()).replace("\n", " ")
    return f"tensor(shape={tuple(t.shape)}, dtype={_dtype_source(t.dtype)})"


def _call_str(
    fn: Callable[..., Any], input: torch.Tensor, weight: torch.Tensor, kwargs: Mapping[str, Any]
) -> str:
    parts = [f"input={_short(input)}", f"weight={_short(weight)}"]
    for key, value in kwargs.items():
        parts.append(f"{key}={_float_source(value) if isinstance(value, float) else value!r}")
    return f"{_name(fn)}({', '.join(parts)})"


def _tensor_source(name: str, t: torch.Tensor) -> str:
    t = t.detach()
    if t.numel() > _MAX_LITERAL:
        return f"{name} = ...  # {tuple(t.shape)} {t.dtype} tensor, too large to inline"
    values = t.cpu()
    if values.dtype.is_floating_point:
        flat = values.to(torch.float64).reshape(-1).tolist()
        literal = "[" + ", ".join(_float_source(x) for x in flat) + "]"
        src = f"torch.tensor({literal}, dtype=torch.float64).to({_dtype_source(t.dtype)})"
    else:
        src = f"torch.tensor({values.reshape(-1).tolist()!r}, dtype={_dtype_source(t.dtype)})"
    src += f".reshape({tuple(t.shape)!r})"
    if t.device.type != "cpu":
        src += f".to({str(t.device)!r})"
    line = f"{name} = {src}"
    if not t.is_contiguous() and t.dim() > 0:
        line += f"  # the original had strides {t.stride()}"
    return line


def _repro(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    kwargs: Mapping[str, Any],
    grad_output: torch.Tensor | None,
) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", "candidate")
    lines = ["import torch"]
    if module and module != "__main__" and name != "<lambda>":
        lines.append(f"from {module} import {name} as candidate")
    else:
        lines.append("candidate = ...  # the function under test")
    lines.append(_tensor_source("input", input))
    lines.append(_tensor_source("weight", weight) + "\nweight.requires_grad_(True)")
    kw = "".join(
        f", {k}={_float_source(v) if isinstance(v, float) else repr(v)}" for k, v in kwargs.items()
    )
    lines.append(f"out = candidate(input, weight{kw})")
    if grad_output is not None:
        lines.append(_tensor_source("grad_output", grad_output))
        lines.append("out.backward(grad_output)\nprint(weight.grad)")
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return _float_source(x) if not math.isfinite(x) else f"{x:.9g}"


def compare_exact_or_bounded(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    bound: torch.Tensor | None,
) -> tuple[str | None, float]:
    """Compare ``actual`` with the float64 ``expected`` elementwise.

    With ``bound=None`` the comparison is exact, signed zeros included (``-0.0`` differs from
    ``0.0``); two NaNs are equal. With a bound, ``|actual - expected| <= bound`` must hold
    (equal infinities and two NaNs pass).

    Args:
        what: name used in the message, e.g. ``"out"`` or ``"weight.grad"``.
        actual: the candidate's tensor (any dtype/device).
        expected: the reference (float64, CPU).
        bound: per-element bound or ``None`` for an exact check.

    Returns:
        ``(message, worst)``: ``message`` is ``None`` when every element passes; ``worst`` is
        the largest ``|error| / bound`` over elements with a positive bound.
    """
    a = actual.detach().to(device="cpu", dtype=torch.float64)
    e = expected.to(torch.float64)
    both_nan = a.isnan() & e.isnan()
    same = (a == e) | both_nan
    diff = (a - e).abs()
    if bound is None:
        ok = same & ((a != 0) | (a.signbit() == e.signbit()))
        worst = 0.0 if bool(ok.all()) else math.inf
    else:
        ok = same | (diff <= bound)
        positive = bound > 0
        worst = (
            float((diff[positive & ~same] / bound[positive & ~same]).max())
            if bool((positive & ~same).any())
            else 0.0
        )
        if not bool(ok.all()):
            worst = math.inf if not bool(ok[~positive].all()) else max(worst, 1.0 + 1e-16)
    if bool(ok.all()):
        return None, worst
    index = tuple((~ok).nonzero()[0].tolist())
    pos = "[" + ", ".join(map(str, index)) + "]"
    av, ev = float(a[index]), float(e[index])
    b = 0.0 if bound is None else float(bound[index])
    kind = "exactly" if bound is None else f"within {_fmt(b)}"
    count = int((~ok).sum())
    return (
        f"{what}{pos} = {_fmt(av)}, but the exact value is {_fmt(ev)} (must match {kind}; "
        f"{count} of {ok.numel()} elements differ)",
        worst,
    )


def _check_meta(fn_call: str, out: object, input: torch.Tensor, weight: torch.Tensor) -> None:
    if not isinstance(out, torch.Tensor):
        raise EquivalenceError(f"{fn_call} returned {type(out).__name__}, not a torch.Tensor")
    shape = (*input.shape, weight.shape[1])
    if tuple(out.shape) != shape:
        raise EquivalenceError(
            f"{fn_call} returned shape {tuple(out.shape)}, expected (*input.shape, D) = {shape}"
        )
    if out.dtype != weight.dtype:
        raise EquivalenceError(
            f"{fn_call} returned dtype {out.dtype}, expected the weight's dtype {weight.dtype}"
        )
    if out.device != weight.device:
        raise EquivalenceError(
            f"{fn_call} returned a tensor on {out.device}, expected the weight's device "
            f"{weight.device}"
        )


def _run_forward(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    kwargs: Mapping[str, Any],
    repro: str,
) -> tuple[torch.Tensor, float]:
    """Call ``fn`` on ``weight`` (modified in place by max_norm) and check the forward."""
    original = weight.detach().clone()
    call = _call_str(fn, input, original, kwargs)
    fwd_kwargs = {k: v for k, v in kwargs.items() if k in ("padding_idx", "max_norm", "norm_type")}
    expected, table = reference_embedding(input, original, **fwd_kwargs)
    try:
        out = fn(input, weight, **kwargs)
    except Exception as exc:  # the candidate must accept every valid call
        raise EquivalenceError(
            f"{call} raised {type(exc).__name__}: {exc}, but the call is valid (the reference "
            f"returns a tensor of shape {tuple(expected.shape)})",
            repro,
        ) from exc
    _check_meta(call, out, input, weight)
    max_norm = kwargs.get("max_norm")
    bound = None
    if max_norm is not None:
        table_bound = renorm_error_bound(original, max_norm)
        flat = input.reshape(-1).long().cpu()
        bound = table_bound[flat].reshape(expected.shape) if flat.numel() else None
        msg, _ = compare_exact_or_bounded(
            "weight (after max_norm)", weight, table, _referenced_bound(table_bound, flat)
        )
        if msg:
            raise EquivalenceError(f"{msg} [{call}]", repro)
        if flat.numel() == 0:
            bound = None
    msg, worst = compare_exact_or_bounded("out", out, expected, bound)
    if msg:
        raise EquivalenceError(f"{msg} [{call}]", repro)
    return out, worst


def _referenced_bound(table_bound: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """Renorm bound on referenced rows; zero (exact: untouched) on the other rows."""
    bound = torch.zeros_like(table_bound)
    if flat.numel():
        rows = torch.unique(flat)
        bound[rows] = table_bound[rows]
    return bound


def assert_forward_equivalent(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    /,
    **kwargs: Any,
) -> torch.Tensor:
    """Assert that ``fn(input, weight, **kwargs)`` is the exact lookup ``weight[input]``.

    Checks the output's shape ``(*input.shape, D)``, dtype and device, and its values exactly
    (signed zeros included). With ``max_norm``, also the in-place renorm of the referenced
    rows (within :func:`renorm_error_bound`) and that the other rows are untouched. ``fn``
    runs on a clone of ``weight``; the caller's tensor is not modified.

    Args:
        fn: the candidate, with ``F.embedding``'s signature.
        input: ids of any shape, all in ``[0, V)``.
        weight: ``(V, D)`` floating table.
        **kwargs: options passed to ``fn`` (``padding_idx``, ``max_norm``, ...).

    Returns:
        The candidate's output.

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    w = weight.detach().clone()
    out, _ = _run_forward(fn, input, w, kwargs, _repro(fn, input, weight, kwargs, None))
    return out


def _check_backward(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    kwargs: Mapping[str, Any],
    repro: str,
) -> float:
    original = weight.detach().clone()
    call = _call_str(fn, input, original, kwargs)
    out, worst = _run_forward(fn, input, weight, kwargs, repro)
    if not out.requires_grad:
        raise EquivalenceError(
            f"{call} returned a tensor that does not require grad: the result is not connected "
            f"to the weight in the autograd graph",
            repro,
        )
    try:
        out.backward(grad_output)
    except Exception as exc:
        raise EquivalenceError(
            f"backward of {call} raised {type(exc).__name__}: {exc}", repro
        ) from exc
    grad = weight.grad
    if grad is None:
        raise EquivalenceError(f"{call}: weight.grad is None after backward", repro)
    sparse = bool(kwargs.get("sparse", False))
    if sparse and grad.layout != torch.sparse_coo:
        raise EquivalenceError(
            f"{call}: sparse=True must give a sparse COO gradient, got layout {grad.layout}",
            repro,
        )
    if not sparse and grad.layout != torch.strided:
        raise EquivalenceError(
            f"{call}: the gradient must be dense without sparse=True, got layout {grad.layout}",
            repro,
        )
    dense = grad.to_dense() if grad.layout != torch.strided else grad
    if tuple(dense.shape) != tuple(weight.shape):
        raise EquivalenceError(
            f"{call}: weight.grad has shape {tuple(dense.shape)}, expected {tuple(weight.shape)}",
            repro,
        )
    num_embeddings = weight.shape[0]
    padding_idx = kwargs.get("padding_idx")
    freq = bool(kwargs.get("scale_grad_by_freq", False))
    expected, _, _ = reference_embedding_grad(input, grad_output, num_embeddings, padding_idx, freq)
    bound = gradient_error_bound(
        input, grad_output, num_embeddings, weight.dtype, padding_idx, freq
    )
    msg, worst_grad = compare_exact_or_bounded("weight.grad", dense, expected, bound)
    if msg:
        raise EquivalenceError(f"{msg} [{call}]", repro, worst_grad)
    return max(worst, worst_grad)


def assert_backward_equivalent(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    /,
    **kwargs: Any,
) -> float:
    """Assert the forward (as :func:`assert_forward_equivalent`) and the weight's gradient.

    After ``fn(input, w, **kwargs).backward(grad_output)`` on a fresh leaf ``w`` (a clone of
    ``weight``), ``w.grad`` must lie within :func:`gradient_error_bound` of the exact
    gradient: duplicates accumulate, the padding row and unreferenced rows are exactly zero,
    ``scale_grad_by_freq`` divides by the counts, and ``sparse=True`` gives a sparse COO
    gradient.

    Args:
        fn: the candidate, with ``F.embedding``'s signature.
        input: ids of any shape, all in ``[0, V)``.
        weight: ``(V, D)`` floating table.
        grad_output: upstream gradient ``(*input.shape, D)``.
        **kwargs: options passed to ``fn``.

    Returns:
        The largest ``|error| / bound`` over the gradient (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    w = weight.detach().clone().requires_grad_(True)
    repro = _repro(fn, input, weight, kwargs, grad_output)
    return _check_backward(fn, input, w, grad_output, kwargs, repro)


def assert_case_equivalent(
    fn: Callable[..., Any], case: _EmbeddingCase, *, backward: bool = True
) -> float:
    """Check ``fn`` on a drawn :class:`~embedding_equivalence.strategies.EmbeddingCase`.

    A valid case is checked like :func:`assert_backward_equivalent` (or the forward only);
    an invalid case (``case.invalid`` is set) must make ``fn`` raise. The repro snippet
    rebuilds the case's tensors exactly, layouts included.

    Args:
        fn: the candidate, with ``F.embedding``'s signature.
        case: a drawn case.
        backward: also check the gradient.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    repro = _case_repro(fn, case, backward)
    input, weight = case.build(requires_grad=backward and case.invalid is None)
    if case.invalid is not None:
        try:
            fn(input, weight, **case.kwargs)
        except Exception:
            return 0.0
        raise EquivalenceError(
            f"{_call_str(fn, input, weight, case.kwargs)} returned a result, but the call is "
            f"invalid ({case.invalid}) and the reference raises: bad input must be refused, "
            f"not clamped or wrapped",
            repro,
        )
    if not backward:
        _, worst = _run_forward(fn, input, weight, case.kwargs, repro)
        return worst
    return _check_backward(fn, input, weight, case.grad_output(), case.kwargs, repro)


def _case_repro(fn: Callable[..., Any], case: _EmbeddingCase, backward: bool) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", "candidate")
    if module and module != "__main__" and name != "<lambda>":
        header = f"from {module} import {name} as candidate"
    else:
        header = "candidate = ...  # the function under test"
    return case.source("candidate", backward=backward, preamble=header)
