"""The candidate against the calls it will get: its signature and one probe, before any example.

[`check_candidate`][] refuses as a usage error (``InvalidArgument``) what is the caller's
mistake and not the kernel's bug, so that it is never reported as a finding:

- a signature that cannot take the verifier's call, or an option that ``options`` names (a
  candidate with ``**kwargs``, or whose signature cannot be read, is accepted);
- a ``@triton.jit`` function itself, where the function that launches it belongs;
- a probe, one tiny valid call on the CPU (ids ``[1]`` into a ``2 x 4`` float32 table; a bag
  of them; for a quantized verifier, that table quantized), run under ``no_grad`` with the
  global state restored. Its failure is a usage error only where it shows one: a compiled
  Triton kernel run on the CPU without Triton's interpreter; a candidate that takes
  ``(weight, input)`` (the call with the first two arguments swapped returns the lookup's
  shape); an ``F.embedding`` kernel given a quantized table (it takes the float table).
  Any other failure is left to the examples, which judge it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from hypothesis.errors import InvalidArgument

from ..forms.options import BAG_OPTIONS, EMBEDDING_OPTIONS
from ..forms.quantized import quantize_rowwise
from .names import is_compiled, short_name
from .replay import quiet_replay

_EMBEDDING = "F.embedding's (input, weight, **options)"
_OTHER = ", or verify it with verify_embedding (on the command line: drop {})"
#: Per verifier: its call in words, its positional arguments, the keywords of every call, the
#: options it takes, and the other verifier that its kernel may be meant for.
_CALLS: dict[str, tuple[str, int, tuple[str, ...], tuple[str, ...], str]] = {
    "verify_embedding": (_EMBEDDING, 2, (), EMBEDDING_OPTIONS, ""),
    "verify_sharded_embedding": (_EMBEDDING, 2, (), EMBEDDING_OPTIONS, ""),
    "verify_embedding_bag": (
        "F.embedding_bag's (input, weight, offsets, mode=..., **options)", 3, ("mode",),
        BAG_OPTIONS, _OTHER.format("--bag"),
    ),
    "verify_quantized_embedding": (
        "(input, qweight, scale, zero_point)", 4, (), (), _OTHER.format("--scheme")
    ),
}  # fmt: skip
#: What triton raises when a compiled kernel meets the CPU: no GPU driver, or a CPU tensor.
_NO_GPU = ("active drivers", "cpu tensor?")


def check_candidate(
    verifier: str,
    candidate: Any,
    options: Sequence[str],
    devices: Sequence[str],
    scheme: str | None = None,
) -> None:
    """Refuse a candidate whose signature or probe shows a usage mistake (see the module).

    Args:
        verifier: the verifier's name; any other name than the four verifiers' is not checked.
        candidate: the kernel.
        options: the options named (those the verifier does not know are left to its checks).
        devices: the run's devices: the probe runs where they include the CPU.
        scheme: the quantized scheme (the quantized probe runs only with it).

    Raises:
        InvalidArgument: the mistake, with the candidate's parameters or the right call.
    """
    if verifier not in _CALLS:
        return
    call, positional, fixed, known, other = _CALLS[verifier]
    name = short_name(candidate)
    if type(candidate).__name__ in ("JITFunction", "InterpretedFunction"):  # triton's
        raise InvalidArgument(
            f"candidate {name} is a @triton.jit kernel, which runs only when launched "
            f"(kernel[grid](...)); pass the function that launches it, with {call}"
        )
    named = [o for o in dict.fromkeys(options) if o in known]
    _check_signature(candidate, call, other, positional, fixed, named)
    quantized = verifier == "verify_quantized_embedding"
    sharded = verifier == "verify_sharded_embedding"  # its kernels take a DTensor table
    if "cpu" not in devices or is_compiled(candidate) or sharded or (quantized and not scheme):
        return  # (a compiled candidate would compile for the probe)
    ids, table = torch.tensor([1]), torch.tensor([[0.5, -1.0, 2.0, 0.0], [0.25, 4.0, -8.0, 1.5]])
    args: tuple[Any, ...] = (ids, table, torch.tensor([0]))[:positional]
    if quantized:
        args = (ids, *quantize_rowwise(table, scheme or "")[:3])
    keywords = {"mode": "mean"} if fixed else {}
    out = _attempt(candidate, args, keywords)
    raised = isinstance(out, Exception)
    stored = quantized and isinstance(out, torch.Tensor) and out.dtype == args[1].dtype
    if not raised and not stored:
        return  # it ran: the examples judge what it returned
    what = (f"raised {type(out).__name__}: {out}" if raised else f"returned {out.dtype}").strip()
    what = what.splitlines()[0]
    if raised and any(text in str(out) for text in _NO_GPU):
        raise InvalidArgument(
            f"candidate {name} launches a compiled Triton kernel, which cannot run on the CPU "
            f"(it {what}): verify it on the CPU under Triton's interpreter, with "
            f"TRITON_INTERPRET=1 set before triton is imported (on the command line: "
            f"--triton-interpret), or on a GPU only: devices=['cuda'] (--devices cuda)"
        )
    if raised and _is_lookup(_attempt(candidate, (args[1], args[0], *args[2:]), keywords)):
        rest, fn = ", *args" if positional > 2 else "", getattr(candidate, "__name__", "fn")
        raise InvalidArgument(
            f"candidate {name} takes (weight, input): called as {call} it {what}, and with "
            f"its first two arguments swapped it returned the lookup; wrap it: "
            f"lambda input, weight{rest}, **kw: {fn}(weight, input{rest}, **kw)"
        )
    if quantized and _is_lookup(_attempt(candidate, (ids, table), {})):
        raise InvalidArgument(
            f"candidate {name} looks a float table up (it takes F.embedding's (input, weight)), "
            f"not a quantized one: called as {call} it {what}; pass a quantized kernel{other}"
        )


def _check_signature(
    candidate: Any, call: str, other: str, positional: int, fixed: tuple[str, ...], named: list[str]
) -> None:
    """Refuse a candidate that cannot be called as ``call``, or with the options ``named``."""
    try:
        signature = inspect.signature(candidate)
    except (TypeError, ValueError):  # a builtin without one: the probe and the examples tell
        return
    empty = inspect.Parameter.empty  # the parameters shown without their annotations
    parameters = [p.replace(annotation=empty) for p in signature.parameters.values()]
    signature = signature.replace(parameters=parameters, return_annotation=empty)
    shown = f"{short_name(candidate)}{signature}"
    keywords = [*named, *(["norm_type"] if "max_norm" in named else [])]
    for given in ([], keywords):
        try:
            signature.bind(*range(positional), **dict.fromkeys([*fixed, *given]))
        except TypeError as exc:
            if not given:
                raise InvalidArgument(
                    f"candidate {shown} cannot be called as {call} ({exc}); pass a kernel with "
                    f"that signature{other}"
                ) from None
            lacking = ", ".join([k for k in given if k not in signature.parameters] or given)
            raise InvalidArgument(
                f"options={tuple(named)!r} pass {lacking} to the candidate by keyword, but "
                f"{shown} takes no {lacking} ({exc}); add the parameters (or **kwargs) to it, "
                f"or do not name the options"
            ) from None


def _attempt(candidate: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The candidate's result on the probe, or the exception it raised (warnings silenced)."""
    with quiet_replay(), torch.no_grad():
        try:
            return candidate(*args, **kwargs)
        except Exception as exc:  # the probe's caller reads what was raised
            return exc


def _is_lookup(out: Any) -> bool:
    """Whether ``out`` has the probe's lookup shape: one row of ``D = 4``."""
    return isinstance(out, torch.Tensor) and tuple(out.shape) == (1, 4)
