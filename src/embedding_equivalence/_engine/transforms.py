"""Opt-in checks beyond reverse mode: forward-mode AD (``jvp``) and ``vmap``.

The embedding is linear in its table, so both transforms have exact references:

- **jvp**: the tangent of the output along a tangent table ``T`` is the same call on ``T``:
  ``jvp(lambda w: f(ids, w), (W,), (T,))[1] == f(ids, T)`` (a lookup of ``T``'s rows, or the
  bag's reduction of them with the same weights). ``max_norm``'s renorm happens outside
  autograd, as in torch, so it does not scale the tangent; ``padding_idx`` and
  ``scale_grad_by_freq`` shape only the reverse pass. A bag of ``mode="max"`` is left out: its
  tangent is taken at the primal's arg-max, which the reference does not model.
- **vmap**: a batch of two tables ``[W, T]`` gives the two calls' outputs, each judged
  against its own exact reference (without ``max_norm``, whose in-place renorm of a batched
  table has no meaning).

The tangent table is drawn from the case's upstream-gradient seed plus one, so a failure
replays; the snippet that the report carries rebuilds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._draw.recipes import _randn, _randn_source
from ..oracle.call import Call
from .check import CheckableCase, EquivalenceError, OracleFactory
from .compare import compare_exact_or_bounded

#: The transforms a verifier can be asked to check, in the order they run.
TRANSFORMS: tuple[str, ...] = ("jvp", "vmap")


def check_transforms_argument(transforms: Sequence[str]) -> tuple[str, ...]:
    """``transforms`` as a tuple, or ``InvalidArgument`` naming what is unknown."""
    from hypothesis.errors import InvalidArgument

    if isinstance(transforms, str):
        raise InvalidArgument(f"transforms={transforms!r} must be a sequence, e.g. ('jvp',)")
    unknown = [t for t in transforms if t not in TRANSFORMS]
    if unknown:
        raise InvalidArgument(f"transforms: unknown {unknown}; choose from {list(TRANSFORMS)}")
    return tuple(transforms)


def _tangent(case: Any) -> tuple[tuple[int, int], int, torch.dtype, str]:
    """The tangent table's draw: its shape, seed, dtype and device."""
    return (case.num_embeddings, case.embedding_dim), case.grad_seed + 1, case.dtype, case.device


def _without_max_norm(call: Call, table: torch.Tensor | None = None) -> Call:
    """``call`` without ``max_norm`` (and ``norm_type``), on ``table`` if given."""
    kwargs = {k: v for k, v in call.kwargs.items() if k not in ("max_norm", "norm_type")}
    return Call(call.input, call.weight if table is None else table, kwargs, call.offsets)


def _function_of_the_table(candidate: Callable[..., Any], call: Call) -> Callable[..., Any]:
    return lambda table: candidate(*dataclasses.replace(call, weight=table).args, **call.kwargs)


def _snippet(case: CheckableCase, preamble: str, transform: str) -> str:
    lines = case.source("candidate", backward=False, preamble=preamble).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("out = candidate("))
    arguments = lines[at][len("out = candidate(") : -1].replace("weight", "table", 1)
    body = [f"f = lambda table: candidate({arguments})", _randn_source("tangent", *_tangent(case))]
    if transform == "jvp":
        body += [
            "out, tangent_out = torch.func.jvp(f, (weight.detach(),), (tangent,))",
            "print(tangent_out)  # the reference: f(tangent), without max_norm",
        ]
    else:
        body += [
            "outs = torch.func.vmap(f)(torch.stack([weight.detach(), tangent]))",
            "print(outs[0], outs[1])  # the references: f(weight), f(tangent)",
        ]
    return "\n".join([*lines[:at], *body])


def check_transforms(
    candidate: Callable[..., Any],
    case: CheckableCase,
    oracle_factory: OracleFactory,
    transforms: Sequence[str],
    preamble: str,
) -> None:
    """Check ``candidate`` under each of ``transforms`` on a valid case.

    Args:
        candidate: the kernel under test.
        case: a valid drawn case (``EmbeddingCase`` or ``EmbeddingBagCase``).
        oracle_factory: builds the exact reference of a call.
        transforms: names from [`TRANSFORMS`][].
        preamble: the snippet's line that binds ``candidate``.

    Raises:
        EquivalenceError: a transform raised, or its result differs from the reference.
    """
    __tracebackhide__ = True
    for transform in transforms:
        if transform == "jvp" and getattr(case, "mode", None) == "max":
            continue
        call = case.call(backward=False)  # fresh tensors: max_norm renorms them in place
        call = _without_max_norm(call) if transform == "vmap" else call
        fn = _function_of_the_table(candidate, call)
        tangent = _randn(*_tangent(case))
        repro = _snippet(case, preamble, transform)
        try:
            if transform == "jvp":
                result = torch.func.jvp(fn, (call.weight.detach(),), (tangent,))[1]
                results = [("tangent_out", result, tangent)]
            else:
                outs = torch.func.vmap(fn)(torch.stack([call.weight.detach(), tangent]))
                results = [("vmap out[0]", outs[0], call.weight), ("vmap out[1]", outs[1], tangent)]
        except Exception as exc:
            raise EquivalenceError(
                f"{transform} of the candidate raised {type(exc).__name__}: {exc}", repro
            ) from exc
        for what, actual, table in results:
            reference = oracle_factory(_without_max_norm(call, table.detach()))
            expected, bound = reference.output()
            if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape:
                raise EquivalenceError(
                    f"{what}: {transform} returned {getattr(actual, 'shape', actual)!r}, "
                    f"expected shape {tuple(expected.shape)}",
                    repro,
                )
            msg, _ = compare_exact_or_bounded(what, actual, expected, bound)
            if msg:
                raise EquivalenceError(f"{msg} [{transform} along a tangent table]", repro)
