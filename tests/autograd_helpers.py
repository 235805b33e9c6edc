"""Helpers of ``test_autograd_modes.py``: the forms, one runner per autograd mode, exact answers.

- :data:`EMBEDDING_FORMS` and :data:`BAG_FORMS`: every form of the registry as
  ``pytest.param(fn, options, id=name)``; the embedding list adds ``MatmulEmbedding``, called
  through ``torch.func.functional_call`` (the way ``torch.func`` calls a module).
- :func:`embedding_call` and :func:`bag_call` turn a drawn case into a function of the table
  alone (``fn(weight) -> out``) and a fresh table; the runners (:func:`backward`,
  :func:`forward_ad`, :func:`func_grad`, :func:`func_jvp`, :func:`jacobian`, :func:`over_tables`,
  :func:`double_backward`) apply one autograd mode to such a function, so that a form and
  ``F.embedding`` go through exactly the same steps.
- Exact answers where torch has none: the tangent and the double backward of a bag (the oracle
  applied to the tangent as if it were a table; a selection for ``max``), the double backward
  of an embedding (a gather, exact in float64), the Jacobian of a bag (the oracle's gradient for
  each basis vector of the output).
- :func:`assert_same` (``torch.equal``) and :func:`assert_within` (the derived bound) fail with
  the mode, the form, the first differing position, both values and the case's repro snippet.

All randomness comes from drawn seeds (:func:`randn`); nothing touches the global RNG.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.testing import (
    compare_exact_or_bounded,
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    gradient_error_bound,
    reference_embedding_bag,
    reference_embedding_bag_grad,
    reference_embedding_grad,
)
from registry import form_params

__all__ = [
    "BAG_FORMS",
    "EMBEDDING_FORMS",
    "Outcome",
    "assert_same",
    "assert_within",
    "backward",
    "bag_call",
    "bag_double_backward_exact",
    "bag_gradient_exact",
    "bag_jacobian_exact",
    "bag_output_exact",
    "bag_positions",
    "bag_tables_after",
    "bag_tangent_exact",
    "double_backward",
    "embedding_call",
    "embedding_double_backward_exact",
    "embedding_gradient_exact",
    "forward_ad",
    "func_grad",
    "func_jvp",
    "jacobian",
    "matmul_embedding_module",
    "over_tables",
    "randn",
    "torch_kernels_may_fall_back",
]

Fn = Callable[[torch.Tensor], torch.Tensor]


def matmul_embedding_module(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """``MatmulEmbedding``'s forward on ``weight``, with ``F.embedding``'s signature.

    The module holds a meta table (no initial draw: the global RNG is untouched, and no random
    operation runs under ``vmap``) and is called with ``torch.func.functional_call``, which puts
    ``weight`` in place of the parameter: the way ``torch.func`` transforms a module.
    """
    v, d = weight.shape
    placeholder = torch.empty((v, d), dtype=weight.dtype, device="meta")
    module = ee.MatmulEmbedding(
        v, d, padding_idx, max_norm, norm_type, scale_grad_by_freq, _weight=placeholder
    )
    return torch.func.functional_call(module, {"weight": weight}, (input,))


#: Every embedding form of the registry, and ``MatmulEmbedding``, with the options each takes.
EMBEDDING_FORMS: list[Any] = [
    *form_params("embedding", with_options=True),
    pytest.param(
        matmul_embedding_module,
        tuple(o for o in ees.EMBEDDING_OPTIONS if o != "sparse"),
        id="MatmulEmbedding",
    ),
]
#: Every bag form of the registry, with the options each takes.
BAG_FORMS: list[Any] = form_params("bag", with_options=True)

#: Forms that call torch's own embedding kernels; under ``vmap`` some of those kernels
#: (``embedding_renorm_``, ``_embedding_bag`` and its backward) have no batching rule and run
#: as a loop, with a UserWarning. The package's own forms must not fall back.
_TORCH_KERNELS = (F.embedding, F.embedding_bag, ee.lookup_embedding, ee.lookup_embedding_bag)


@contextlib.contextmanager
def torch_kernels_may_fall_back(form: Callable[..., Any]) -> Iterator[None]:
    """For torch's own kernels only: accept the warning that a vmap ran as a loop."""
    if form not in _TORCH_KERNELS:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r"There is a performance drop because we have not yet implemented the "
            r"batching rule for aten::(embedding_renorm_|_?embedding_bag\w*)\b",
            category=UserWarning,
        )
        yield


def randn(seed: int, shape: Sequence[int]) -> torch.Tensor:
    """``N(0, 1)`` float64 values of ``shape`` from a generator seeded with a drawn ``seed``."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)  # fmt: skip


def name_of(form: Callable[..., Any]) -> str:
    """The name a message gives the form."""
    return "MatmulEmbedding" if form is matmul_embedding_module else form.__name__


# --------------------------------------------------------------------------------------------
# A drawn call as a function of the table
# --------------------------------------------------------------------------------------------


def _without_sparse(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != "sparse"}


def embedding_call(
    form: Callable[..., torch.Tensor], case: ees.EmbeddingCase, *, sparse: bool = True
) -> tuple[Fn, torch.Tensor]:
    """``(fn, weight)``: ``fn(w) = form(ids, w, **options)`` and a fresh table.

    Args:
        form: a callable with ``F.embedding``'s signature.
        case: the drawn call.
        sparse: pass ``sparse`` on (else it is dropped: the forward is the same).
    """
    ids, weight = case.build(requires_grad=False)
    kwargs = dict(case.kwargs) if sparse else _without_sparse(dict(case.kwargs))
    return (lambda w: form(ids, w, **kwargs)), weight


def bag_call(
    form: Callable[..., torch.Tensor], case: ees.EmbeddingBagCase, *, sparse: bool = True
) -> tuple[Fn, torch.Tensor]:
    """``(fn, weight)``: ``fn(w)`` calls ``form`` with the case's arguments and table ``w``."""
    tensors = case.build(requires_grad=False)
    args, kwargs = case.arguments(tensors)
    if not sparse:
        kwargs = _without_sparse(kwargs)
    rest = args[2:]
    return (lambda w: form(args[0], w, *rest, **kwargs)), tensors.weight


# --------------------------------------------------------------------------------------------
# The autograd modes
# --------------------------------------------------------------------------------------------


class Outcome(NamedTuple):
    """What one autograd mode gives: the output, the table after the call, the derivative."""

    out: torch.Tensor
    table: torch.Tensor
    result: torch.Tensor


def _dense(t: torch.Tensor) -> torch.Tensor:
    return t.to_dense() if t.layout != torch.strided else t


def backward(fn: Fn, weight: torch.Tensor, grad_output: torch.Tensor) -> Outcome:
    """Reverse mode: ``fn(weight).backward(grad_output)``; the result is ``weight.grad``."""
    weight.requires_grad_(True)
    out = fn(weight)
    out.backward(grad_output)
    grad = torch.zeros_like(weight) if weight.grad is None else _dense(weight.grad)
    return Outcome(out.detach(), weight.detach(), grad)


def forward_ad(fn: Fn, weight: torch.Tensor, tangent: torch.Tensor) -> Outcome:
    """Forward mode with dual numbers (``torch.autograd.forward_ad``); the result is the tangent."""
    with fwAD.dual_level():
        out = fn(fwAD.make_dual(weight, tangent))
        primal, out_tangent = fwAD.unpack_dual(out)
        if out_tangent is None:  # an output that does not depend on the table
            out_tangent = torch.zeros_like(primal)
        return Outcome(primal.clone(), weight, out_tangent.clone())


def func_grad(fn: Fn, weight: torch.Tensor, grad_output: torch.Tensor) -> Outcome:
    """``torch.func.grad`` of ``sum(fn(w) * grad_output)``: the vector-Jacobian product."""

    def loss(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = fn(w)
        return torch.sum(out * grad_output), out

    grad, out = torch.func.grad(loss, has_aux=True)(weight)
    return Outcome(out, weight, grad)


def func_jvp(fn: Fn, weight: torch.Tensor, tangent: torch.Tensor) -> Outcome:
    """``torch.func.jvp``; the result is the output's tangent."""
    out, out_tangent = torch.func.jvp(fn, (weight,), (tangent,))
    return Outcome(out, weight, out_tangent)


def jacobian(fn: Fn, weight: torch.Tensor, how: str) -> Outcome:
    """``torch.func.jacrev`` or ``jacfwd`` (``how``); the result is ``(*out.shape, V, D)``."""
    transform = {"jacrev": torch.func.jacrev, "jacfwd": torch.func.jacfwd}[how]

    def with_output(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = fn(w)
        return out, out

    jac, out = transform(with_output, has_aux=True)(weight)
    return Outcome(out, weight, jac)


def over_tables(fn: Fn, tables: torch.Tensor, grad_output: torch.Tensor | None = None) -> Outcome:
    """``torch.func.vmap`` over a ``(T, V, D)`` batch of tables: of ``fn``, or of its gradient.

    With ``grad_output`` the result is ``vmap(grad(sum(fn(w) * grad_output)))``, the gradient
    of every table (an ensemble); else it is the batch of outputs.
    """
    if grad_output is None:
        out = torch.func.vmap(fn)(tables)
        return Outcome(out, tables, out)
    grads = torch.func.vmap(lambda w: func_grad(fn, w, grad_output).result)(tables)
    return Outcome(grads, tables, grads)


def double_backward(
    fn: Fn, weight: torch.Tensor, grad_output: torch.Tensor, tangent: torch.Tensor
) -> Outcome:
    """The derivative of the backward pass: ``d<weight.grad(G), tangent>/dG``, of ``G``'s shape.

    The backward is linear in ``G``: ``weight.grad = A^T G`` for the call's matrix ``A``
    (one-hot or bag-count, with the options' scaling and masks), so this is ``A tangent``.
    """
    weight.requires_grad_(True)
    grad_output = grad_output.clone().requires_grad_(True)
    out = fn(weight)
    (grad,) = torch.autograd.grad(out, weight, grad_output, create_graph=True)
    result = None
    if grad.requires_grad:
        (result,) = torch.autograd.grad(grad, grad_output, tangent, allow_unused=True)
    if result is None:  # no id: the gradient does not depend on G
        result = torch.zeros_like(grad_output)
    return Outcome(out.detach(), weight.detach(), result)


# --------------------------------------------------------------------------------------------
# Exact answers
# --------------------------------------------------------------------------------------------


def _padding(kwargs: Any, num_embeddings: int) -> int | None:
    padding = kwargs.get("padding_idx")
    return None if padding is None else padding % num_embeddings


def _scaled(tangent: torch.Tensor, ids: torch.Tensor, kwargs: Any) -> torch.Tensor:
    """The tangent as the adjoint of the backward sees it: divided by the counts, padding row 0.

    Each entry is one correctly rounded float64 division ``T[v] / count(v)``: the exact
    quotient rounded once, which a backward that divides by the count reproduces bit for bit.
    """
    v = tangent.shape[0]
    if kwargs.get("scale_grad_by_freq"):
        counts = torch.bincount(ids.reshape(-1).long(), minlength=v).clamp(min=1)
        tangent = tangent / counts.to(torch.float64)[:, None]
    padding = _padding(kwargs, v)
    if padding is not None:
        tangent = tangent.clone()
        tangent[padding] = 0.0
    return tangent


def embedding_gradient_exact(
    case: ees.EmbeddingCase, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(exact, bound)``: the table's exact gradient for ``grad_output`` and its float64 bound."""
    ids = case.ids.build()
    v = case.num_embeddings
    padding = case.kwargs.get("padding_idx")
    scale = bool(case.kwargs.get("scale_grad_by_freq", False))
    exact, _, _ = reference_embedding_grad(ids, grad_output, v, padding, scale)
    bound = gradient_error_bound(ids, grad_output, v, torch.float64, padding, scale)
    return exact, bound


def embedding_double_backward_exact(case: ees.EmbeddingCase, tangent: torch.Tensor) -> torch.Tensor:
    """``A tangent`` for an embedding: row ``n`` is ``tangent[ids[n]] / count``, 0 at padding.

    The gather is exact; with ``scale_grad_by_freq`` each entry is one correctly rounded
    division, so in float64 this is the exact answer rounded once.
    """
    ids = case.ids.build()
    return _scaled(tangent, ids, case.kwargs)[ids.long()]


def bag_positions(case: ees.EmbeddingBagCase) -> list[range]:
    """The positions of each bag's ids in the flat input (padding ids included)."""
    if case.offsets is None:
        count, length = case.ids.shape
        return [range(b * length, (b + 1) * length) for b in range(count)]
    ilo = case.kwargs.get("include_last_offset", False)
    starts = list(case.offsets[:-1] if ilo else case.offsets)
    end = case.offsets[-1] if ilo else len(case.ids.values)
    ends = [*starts[1:], end] if starts else []
    return [range(lo, hi) for lo, hi in zip(starts, ends, strict=True)]


def _counted_positions(case: ees.EmbeddingBagCase) -> list[list[int]]:
    """The positions of each bag's ids, padding ids left out."""
    padding = _padding(case.kwargs, case.num_embeddings)
    ids = case.ids.values
    return [[i for i in bag if ids[i] != padding] for bag in bag_positions(case)]


def _ids_in_bags(case: ees.EmbeddingBagCase) -> torch.Tensor:
    """Every id that lies in a bag (not those after the last offset), padding included."""
    end = len(case.ids.values)
    if case.offsets is not None and case.kwargs.get("include_last_offset", False):
        end = case.offsets[-1]
    return torch.tensor(case.ids.values[:end], dtype=torch.int64)


def _oracle_arguments(case: ees.EmbeddingBagCase) -> tuple[dict[str, Any], torch.Tensor | None]:
    """The keyword arguments of the oracle for the case's call, and its offsets tensor."""
    tensors = case.build(requires_grad=False)
    kwargs: dict[str, Any] = {"mode": case.mode, **case.kwargs}
    kwargs.pop("sparse", None)
    if tensors.per_sample_weights is not None:
        kwargs["per_sample_weights"] = tensors.per_sample_weights
    return kwargs, tensors.offsets


def bag_tangent_exact(
    case: ees.EmbeddingBagCase, tangent: torch.Tensor, table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(exact, bound)``: the output's tangent of a bag call for the table's ``tangent``.

    ``sum`` and ``mean`` are linear in the table (``out = A W``), so their tangent is
    ``A tangent``: the oracle's bag reduction of ``tangent`` as if it were the table (without
    ``max_norm``, whose renorm is outside autograd), held to the oracle's float64 bound.
    ``max`` picks, per bag and column, the first id whose entry of ``table`` (the table after
    the call, renormalized) is the bag's maximum: its tangent is that id's entry of
    ``tangent``, exactly (``bound`` is ``None``). An empty bag gives zeros.
    """
    ids = case.ids.build()
    if case.mode == "max":
        d = tangent.shape[1]
        values = list(case.ids.values)
        out = torch.zeros((case.num_bags, d), dtype=torch.float64)
        for b, positions in enumerate(_counted_positions(case)):
            for col in range(d):
                column = [float(table[values[i], col]) for i in positions]
                if column:
                    first = positions[column.index(max(column))]
                    out[b, col] = tangent[values[first], col]
        return out, None
    kwargs, offsets = _oracle_arguments(case)
    kwargs.pop("max_norm", None)
    kwargs.pop("norm_type", None)
    exact, _ = reference_embedding_bag(ids, tangent, offsets, **kwargs)
    bound = embedding_bag_error_bound(ids, tangent, offsets, **kwargs, dtype=torch.float64)
    return exact, bound


def bag_double_backward_exact(
    case: ees.EmbeddingBagCase, tangent: torch.Tensor, table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``A tangent'`` for a bag: :func:`bag_tangent_exact` of the tangent divided by the counts
    (``scale_grad_by_freq``, counted over the bags) with the padding row zeroed."""
    scaled = _scaled(tangent, _ids_in_bags(case), case.kwargs)
    return bag_tangent_exact(case, scaled, table)


def bag_gradient_exact(
    case: ees.EmbeddingBagCase,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    *,
    scaled: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(exact, bound)``: the table's exact gradient of a bag call, and its float64 bound.

    Args:
        case: the drawn call.
        weight: the table before the call (``max`` and ``max_norm`` need its values).
        grad_output: the upstream gradient ``(B, D)``.
        scaled: apply ``scale_grad_by_freq`` (a rule of the gradient); ``False`` gives the
            derivative itself, the transpose of what forward mode computes.
    """
    ids = case.ids.build()
    kwargs, offsets = _oracle_arguments(case)
    if not scaled:
        kwargs.pop("scale_grad_by_freq", None)
    exact = reference_embedding_bag_grad(ids, weight, grad_output, offsets, **kwargs).weight
    bound = embedding_bag_gradient_error_bound(
        ids, weight, grad_output, offsets, **kwargs, dtype=torch.float64
    ).weight
    return exact, bound


def bag_jacobian_exact(
    case: ees.EmbeddingBagCase, weight: torch.Tensor, *, reverse: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(exact, bound)`` of the ``(B, D, V, D)`` Jacobian: one exact gradient per output entry.

    Row ``(b, d)`` of the Jacobian is the table's gradient for the upstream gradient that is 1
    at ``(b, d)`` and 0 elsewhere, so the oracle's gradient and bound give it exactly. In
    reverse mode (``jacrev``) that gradient follows ``scale_grad_by_freq``; forward mode
    (``jacfwd``) differentiates the output itself, which the option does not change.
    """
    b, d = case.num_bags, case.embedding_dim
    exact = torch.zeros((b, d, *weight.shape), dtype=torch.float64)
    bound = torch.zeros_like(exact)
    for i in range(b):
        for j in range(d):
            basis = torch.zeros((b, d), dtype=torch.float64)
            basis[i, j] = 1.0
            exact[i, j], bound[i, j] = bag_gradient_exact(case, weight, basis, scaled=reverse)
    return exact, bound


def bag_output_exact(
    case: ees.EmbeddingBagCase, table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(exact, bound)``: the case's call on ``table`` (before any renorm), and its bound."""
    ids = case.ids.build()
    kwargs, offsets = _oracle_arguments(case)
    exact, _ = reference_embedding_bag(ids, table, offsets, **kwargs)
    bound = embedding_bag_error_bound(ids, table, offsets, **kwargs, dtype=torch.float64)
    return exact, bound


def bag_tables_after(case: ees.EmbeddingBagCase, tables: torch.Tensor) -> torch.Tensor:
    """The tables as ``F.embedding_bag`` leaves them: each renormalized by torch's own kernel
    over every id of the input."""
    tables = tables.clone()
    max_norm = case.kwargs.get("max_norm")
    if max_norm is not None:
        ids = case.ids.build().reshape(-1)
        for table in tables:
            torch.embedding_renorm_(table, ids, max_norm, case.kwargs.get("norm_type", 2.0))
    return tables


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def _where(mode: str, form: Callable[..., Any], case: Any) -> str:
    return f"[{mode} of {name_of(form)}]\n{case.source(name_of(form), backward=False)}"


def assert_same(
    what: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    mode: str,
    form: Callable[..., Any],
    case: Any,
) -> None:
    """``torch.equal(actual, expected)``, same shape and dtype; the message names the first
    differing position, both values, the mode, the form and the case's repro snippet."""
    __tracebackhide__ = True
    actual = _dense(actual.detach())
    expected = _dense(expected.detach())
    if (
        actual.shape == expected.shape
        and actual.dtype == expected.dtype
        and torch.equal(actual, expected)
    ):
        return
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        detail = (
            f"{what} has shape {tuple(actual.shape)} and dtype {actual.dtype}, but the expected "
            f"{tuple(expected.shape)} and {expected.dtype}"
        )
    else:
        index = tuple((actual != expected).nonzero()[0].tolist())
        detail = (
            f"{what}{list(index)} = {float(actual[index])!r}, but the expected value is "
            f"{float(expected[index])!r} (must be equal)"
        )
    raise AssertionError(f"{detail} {_where(mode, form, case)}")


def assert_within(
    what: str,
    actual: torch.Tensor,
    exact: torch.Tensor,
    bound: torch.Tensor | None,
    mode: str,
    form: Callable[..., Any],
    case: Any,
) -> None:
    """``|actual - exact| <= bound`` elementwise (exact equality where ``bound`` is None)."""
    __tracebackhide__ = True
    actual = _dense(actual.detach())
    if actual.shape != exact.shape:
        raise AssertionError(
            f"{what} has shape {tuple(actual.shape)}, but the exact answer has "
            f"{tuple(exact.shape)} {_where(mode, form, case)}"
        )
    message, _ = compare_exact_or_bounded(what, actual, exact, bound)
    if message is not None:
        raise AssertionError(f"{message} {_where(mode, form, case)}")
