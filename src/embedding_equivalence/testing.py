"""Assertion helpers for your own embedding properties (pytest-friendly).

Each helper runs a candidate with ``F.embedding``'s signature (the ``assert_bag_*`` helpers:
``F.embedding_bag``'s), compares it with the exact float64 oracle, and on failure raises
:class:`EquivalenceError` (an ``AssertionError``) whose message names the function, the
arguments, the first differing position, both values and the bound, followed by a runnable
repro snippet. Tracebacks hide the helpers' own frames.

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

from ._cases import EmbeddingBagCase as _EmbeddingBagCase
from ._cases import EmbeddingCase as _EmbeddingCase
from ._cases import dtype_source as _dtype_source
from ._cases import float_source as _float_source
from ._oracle import (
    BagGradients,
    _BagProblem,
    _bound_from_sums,
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    gamma,
    gradient_error_bound,
    reference_embedding,
    reference_embedding_bag,
    reference_embedding_bag_grad,
    reference_embedding_grad,
    renorm_error_bound,
    unit_roundoff,
)

__all__ = [
    "BagGradients",
    "EquivalenceError",
    "assert_backward_equivalent",
    "assert_bag_backward_equivalent",
    "assert_bag_case_equivalent",
    "assert_bag_forward_equivalent",
    "assert_case_equivalent",
    "assert_forward_equivalent",
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


def _check_meta(
    fn_call: str, out: object, input: torch.Tensor, weight: torch.Tensor, repro: str
) -> None:
    if not isinstance(out, torch.Tensor):
        raise EquivalenceError(
            f"{fn_call} returned {type(out).__name__}, not a torch.Tensor", repro
        )
    shape = (*input.shape, weight.shape[1])
    if tuple(out.shape) != shape:
        raise EquivalenceError(
            f"{fn_call} returned shape {tuple(out.shape)}, expected (*input.shape, D) = {shape}",
            repro,
        )
    if out.dtype != weight.dtype:
        raise EquivalenceError(
            f"{fn_call} returned dtype {out.dtype}, expected the weight's dtype {weight.dtype}",
            repro,
        )
    if out.device != weight.device:
        raise EquivalenceError(
            f"{fn_call} returned a tensor on {out.device}, expected the weight's device "
            f"{weight.device}",
            repro,
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
    _check_meta(call, out, input, weight, repro)
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


def _dense_weight_grad(
    out: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    kwargs: Mapping[str, Any],
    call: str,
    repro: str,
) -> torch.Tensor:
    """Run the backward and return ``weight.grad`` as a dense tensor, checking its layout."""
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
    return dense


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
    dense = _dense_weight_grad(out, weight, grad_output, kwargs, call, repro)
    num_embeddings = weight.shape[0]
    padding_idx = kwargs.get("padding_idx")
    freq = bool(kwargs.get("scale_grad_by_freq", False))
    expected, abs_sum, count = reference_embedding_grad(
        input, grad_output, num_embeddings, padding_idx, freq
    )
    bound = _bound_from_sums(abs_sum, count, weight.dtype, padding_idx, freq)
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


# --- EmbeddingBag ---------------------------------------------------------------------------

#: The keyword options of ``F.embedding_bag`` that the oracle reads.
_BAG_ORACLE_KEYS = (
    "max_norm",
    "norm_type",
    "scale_grad_by_freq",
    "mode",
    "per_sample_weights",
    "include_last_offset",
    "padding_idx",
)


def _bag_call_str(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    kwargs: Mapping[str, Any],
) -> str:
    parts = [f"input={_short(input)}", f"weight={_short(weight)}"]
    if offsets is not None:
        parts.append(f"offsets={_short(offsets)}")
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            text = _short(value)
        else:
            text = _float_source(value) if isinstance(value, float) else repr(value)
        parts.append(f"{key}={text}")
    return f"{_name(fn)}({', '.join(parts)})"


def _candidate_import(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", "candidate")
    qualname = getattr(fn, "__qualname__", name)
    if module and module != "__main__" and name != "<lambda>" and "." not in qualname:
        return f"from {module} import {name} as candidate"
    return "candidate = ...  # the function under test"


def _bag_repro(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    kwargs: Mapping[str, Any],
    grad_output: torch.Tensor | None,
) -> str:
    lines = ["import torch", _candidate_import(fn)]
    lines.append(_tensor_source("input", input))
    lines.append(_tensor_source("weight", weight) + "\nweight.requires_grad_(True)")
    args = "input, weight"
    if offsets is not None:
        lines.append(_tensor_source("offsets", offsets))
        args += ", offsets"
    kw = ""
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            lines.append(_tensor_source(key, value) + f"\n{key}.requires_grad_(True)")
            kw += f", {key}={key}"
        else:
            kw += f", {key}={_float_source(value) if isinstance(value, float) else repr(value)}"
    lines.append(f"out = candidate({args}{kw})")
    if grad_output is not None:
        lines.append(_tensor_source("grad_output", grad_output))
        lines.append("out.backward(grad_output)\nprint(weight.grad)")
    return "\n".join(lines)


def _bag_problem(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    kwargs: Mapping[str, Any],
) -> _BagProblem:
    known = {k: v for k, v in kwargs.items() if k in _BAG_ORACLE_KEYS}
    psw = known.get("per_sample_weights")
    return _BagProblem(
        input,
        weight,
        offsets,
        known.get("max_norm"),
        known.get("norm_type", 2.0),
        bool(known.get("scale_grad_by_freq", False)),
        known.get("mode", "mean"),
        None if psw is None else psw.detach(),
        bool(known.get("include_last_offset", False)),
        known.get("padding_idx"),
        None,
    )


def _compare_rows(
    what: str,
    actual: torch.Tensor,
    rows: list[int],
    expected: torch.Tensor,
    bound: torch.Tensor,
    full: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    rest: torch.Tensor | None = None,
) -> tuple[str | None, float]:
    """:func:`compare_exact_or_bounded` for a ``(V, D)`` tensor known exactly off ``rows``.

    ``expected`` and ``bound`` hold the ``(R, D)`` values of ``rows``; off them the bound is
    zero and the exact value is ``rest`` (``None``: zeros). A fast pass in ``actual``'s own
    dtype checks the rows off ``rows`` (a table of 262,144 rows would otherwise be converted
    to float64 a few times per example) and the bounded comparison runs on ``rows`` only.
    Any failure is compared again on the whole tensor (``full()`` gives the ``(V, D)``
    expected values and bounds), so that the message names the true position.
    """
    a = actual.detach()
    index = torch.tensor(rows, dtype=torch.int64, device=a.device)
    if rest is None:  # count_nonzero: one pass, no (V, D) temporaries; -0.0 is a zero
        rest_ok = int(torch.count_nonzero(a)) == int(torch.count_nonzero(a[index]))
    else:
        r = rest.detach().to(a.device)
        differs = (a.ne(r) & ~(a.isnan() & r.isnan())).any(dim=1).cpu()
        differs[index.cpu()] = False
        rest_ok = not bool(differs.any())
    if rest_ok:
        msg, worst = compare_exact_or_bounded(what, a[index], expected, bound)
        if msg is None:
            return None, worst
    return compare_exact_or_bounded(what, a, *full())


def _check_bag(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    kwargs: Mapping[str, Any],
    grad_output: torch.Tensor | None,
    repro: str,
) -> tuple[torch.Tensor, float]:
    """Run ``fn`` once on ``weight`` (a leaf if ``grad_output`` is given) and check everything."""
    max_norm = kwargs.get("max_norm")
    # The in-place renorm of max_norm is checked against the table as it was before the call.
    original = weight.detach().clone() if max_norm is not None else weight.detach()
    call = _bag_call_str(fn, input, original, offsets, kwargs)
    problem = _bag_problem(input, original, offsets, kwargs)
    expected, bound = problem.forward()
    args = (input, weight) if offsets is None else (input, weight, offsets)
    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # the candidate must accept every valid call
        raise EquivalenceError(
            f"{call} raised {type(exc).__name__}: {exc}, but the call is valid (the reference "
            f"returns a tensor of shape {tuple(expected.shape)})",
            repro,
        ) from exc
    if not isinstance(out, torch.Tensor):
        raise EquivalenceError(f"{call} returned {type(out).__name__}, not a torch.Tensor", repro)
    shape = tuple(expected.shape)
    for what, got, want in (
        ("shape", tuple(out.shape), shape),
        ("dtype", out.dtype, weight.dtype),
        ("device", out.device, weight.device),
    ):
        if got != want:
            expectation = "(B, D)" if what == "shape" else f"the weight's {what}"
            raise EquivalenceError(
                f"{call} returned {what} {got}, expected {expectation} = {want}", repro
            )
    if max_norm is not None:
        renormed = sorted(set(problem.ids))
        index = torch.tensor(renormed, dtype=torch.int64)
        table = problem.table
        row_bound = renorm_error_bound(original[index.to(original.device)], max_norm)

        def full_table() -> tuple[torch.Tensor, torch.Tensor]:
            return table, problem.full(renormed, row_bound)[0]

        msg, _ = _compare_rows(
            "weight (after max_norm)", weight, renormed, table[index], row_bound, full_table,
            original,
        )  # fmt: skip
        if msg:
            raise EquivalenceError(f"{msg} [{call}]", repro)
    msg, worst = compare_exact_or_bounded("out", out, expected, bound)
    if msg:
        raise EquivalenceError(f"{msg} [{call}]", repro, worst)
    if grad_output is None:
        return out, worst
    dense = _dense_weight_grad(out, weight, grad_output, kwargs, call, repro)
    rows, expected_grad, grad_bound = problem.weight_grad_rows(grad_output)

    def full_grad() -> tuple[torch.Tensor, torch.Tensor]:
        full_expected, full_bound = problem.full(rows, expected_grad, grad_bound)
        return full_expected, full_bound

    msg, worst_grad = _compare_rows(
        "weight.grad", dense, rows, expected_grad, grad_bound, full_grad
    )
    if msg and problem.mode == "max":
        # Ties: any maximizing row may take a bag's gradient; find the assignment that fits.
        index = torch.tensor(rows, dtype=torch.int64, device=dense.device)
        rows, expected_grad, grad_bound = problem.max_grad_matching(grad_output, dense[index])
        msg, worst_grad = _compare_rows(
            "weight.grad", dense, rows, expected_grad, grad_bound, full_grad
        )
        if msg:
            msg += (
                " (in max mode any maximizing row of a bag may take its gradient; no such "
                "choice explains this one)"
            )
    if msg:
        raise EquivalenceError(f"{msg} [{call}]", repro, worst_grad)
    worst = max(worst, worst_grad)
    psw = kwargs.get("per_sample_weights")
    if isinstance(psw, torch.Tensor) and psw.requires_grad:
        expected_psw, psw_bound = problem.psw_grad(grad_output)
        if psw.grad is None and bool((expected_psw != 0).any()):
            raise EquivalenceError(
                f"{call}: per_sample_weights.grad is None after backward, but the exact gradient "
                f"is not zero: the result is not connected to per_sample_weights in the "
                f"autograd graph",
                repro,
            )
        # None is autograd's zero gradient (no weight was used: no bags, or padding only).
        actual_psw = torch.zeros_like(psw) if psw.grad is None else psw.grad
        msg, worst_psw = compare_exact_or_bounded(
            "per_sample_weights.grad", actual_psw, expected_psw, psw_bound
        )
        if msg:
            raise EquivalenceError(f"{msg} [{call}]", repro, worst_psw)
        worst = max(worst, worst_psw)
    return out, worst


def _fresh_kwargs(kwargs: Mapping[str, Any], requires_grad: bool) -> dict[str, Any]:
    fresh = dict(kwargs)
    psw = fresh.get("per_sample_weights")
    if isinstance(psw, torch.Tensor):
        fresh["per_sample_weights"] = psw.detach().clone().requires_grad_(requires_grad)
    return fresh


def assert_bag_forward_equivalent(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    /,
    **kwargs: Any,
) -> torch.Tensor:
    """Assert that ``fn(input, weight[, offsets], **kwargs)`` is ``F.embedding_bag``'s reduction.

    Checks the output's shape ``(B, D)``, dtype and device, and its values against the exact
    float64 reduction within :func:`embedding_bag_error_bound` (exactly for ``mode="max"``;
    empty bags exactly zero). With ``max_norm``, also the in-place renorm of every row the
    input references (within :func:`renorm_error_bound`) and that the other rows are
    untouched. ``fn`` runs on a clone of ``weight``; ``offsets`` is passed positionally when
    given, everything else by keyword.

    Args:
        fn: the candidate, with ``F.embedding_bag``'s signature.
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without.
        weight: ``(V, D)`` floating table.
        offsets: bag starts, or ``None`` for a 2-D input.
        **kwargs: options passed to ``fn`` (``mode`` -- pass it, its default is ``"mean"`` --,
            ``per_sample_weights``, ``padding_idx``, ...).

    Returns:
        The candidate's output.

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    kw = _fresh_kwargs(kwargs, False)
    repro = _bag_repro(fn, input, weight, offsets, kwargs, None)
    out, _ = _check_bag(fn, input, weight.detach().clone(), offsets, kw, None, repro)
    return out


def assert_bag_backward_equivalent(
    fn: Callable[..., Any],
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    grad_output: torch.Tensor,
    /,
    **kwargs: Any,
) -> float:
    """Assert the forward (as :func:`assert_bag_forward_equivalent`) and the gradients.

    After ``fn(...).backward(grad_output)`` on fresh leaves (clones of ``weight`` and of
    ``per_sample_weights``), ``weight.grad`` must lie within
    :func:`embedding_bag_gradient_error_bound` of the exact gradient (the padding row, rows in
    no bag and rows after the last offset exactly zero; ``scale_grad_by_freq`` divides by the
    counts; ``sparse=True`` gives a sparse COO gradient). In ``max`` mode, where rows tie for
    a bag's maximum, any assignment of the bag's gradient to one of them is accepted.
    ``per_sample_weights.grad`` must match too.

    Args:
        fn: the candidate, with ``F.embedding_bag``'s signature.
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without.
        weight: ``(V, D)`` floating table.
        offsets: bag starts, or ``None`` for a 2-D input.
        grad_output: upstream gradient ``(B, D)``.
        **kwargs: options passed to ``fn``.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    kw = _fresh_kwargs(kwargs, True)
    w = weight.detach().clone().requires_grad_(True)
    repro = _bag_repro(fn, input, weight, offsets, kwargs, grad_output)
    _, worst = _check_bag(fn, input, w, offsets, kw, grad_output, repro)
    return worst


def assert_bag_case_equivalent(
    fn: Callable[..., Any], case: _EmbeddingBagCase, *, backward: bool = True
) -> float:
    """Check ``fn`` on a drawn :class:`~embedding_equivalence.strategies.EmbeddingBagCase`.

    A valid case is checked like :func:`assert_bag_backward_equivalent` (or the forward
    only); an invalid case (``case.invalid`` is set) must make ``fn`` raise. The call is
    ``fn(input, weight[, offsets], mode=..., **options)``; the repro snippet rebuilds the
    case's tensors exactly, layouts included.

    Args:
        fn: the candidate, with ``F.embedding_bag``'s signature.
        case: a drawn case.
        backward: also check the gradients.

    Returns:
        The largest ``|error| / bound`` (0 when exact).

    Raises:
        EquivalenceError: on any difference, with a repro snippet.
    """
    __tracebackhide__ = True
    repro = case.source("candidate", backward=backward, preamble=_candidate_import(fn))
    tensors = case.build(requires_grad=backward and case.invalid is None)
    args, kwargs = case.arguments(tensors)
    if case.invalid is not None:
        try:
            fn(*args, **kwargs)
        except Exception:
            return 0.0
        raise EquivalenceError(
            f"{_bag_call_str(fn, tensors.input, tensors.weight, tensors.offsets, kwargs)} "
            f"returned a result, but the call is invalid ({case.invalid}) and the reference "
            f"raises: bad input must be refused, not clamped, wrapped or read out of bounds",
            repro,
        )
    grad_output = case.grad_output() if backward else None
    _, worst = _check_bag(
        fn, tensors.input, tensors.weight, tensors.offsets, kwargs, grad_output, repro
    )
    return worst
