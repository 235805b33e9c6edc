"""How a candidate and a call are written down: in failure messages and in replay snippets.

One naming rule serves every verifier and helper ([`candidate_source`][]): the snippet
imports the candidate by its qualified name only when that import gives back the very same
object. A lambda, a function defined inside another, a function of the script being run
(``__main__``), a bound method, a ``functools.partial`` or a wrapper that copied another
function's ``__module__`` and ``__qualname__`` (``functools.wraps``, ``torch.compile``) cannot be
imported that way; the snippet says so and why, and still rebuilds every tensor of the call.
It never imports a different object that happens to share a name.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from typing import Any

import torch

from .._draw.cases import Call, dtype_source, float_source, kwargs_source
from .triton import interpreter_preamble

__all__ = [
    "MAX_LITERAL",
    "call_source",
    "candidate_name",
    "candidate_source",
    "compiled_original",
    "compiled_source",
    "describe_call",
    "format_float",
    "is_compiled",
    "tensor_source",
    "why_not_importable",
]

#: The largest tensor that a repro snippet spells out element by element.
MAX_LITERAL = 4096


def candidate_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of ``fn`` (its ``repr`` when it has neither), for reports.

    A compiled candidate is named ``torch.compile(module.qualname)`` after what it wraps.
    """
    if is_compiled(fn):
        return f"torch.compile({candidate_name(compiled_original(fn))})"
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module else name


def _short_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def import_reference(reference: str) -> Any:
    """The object that ``"module:qualname"`` names (``qualname`` may be dotted).

    The one reader of such references: the CLI's ``--candidate``, the sharded verifier's
    string candidates and its ranks, and the check that a candidate is importable by name.

    Raises:
        ValueError: a reference not of the form ``module:qualname``, a module that cannot be
            imported, or a name the module does not have; the message says which.
    """
    module, sep, qualname = reference.partition(":")
    if not sep or not module or not qualname:
        raise ValueError("expected MODULE:FUNCTION, e.g. mypkg.kernels:embed")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module!r} ({exc})") from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module!r} has no {qualname!r}")
        obj = getattr(obj, part)
    return obj


def why_not_importable(fn: Callable[..., Any]) -> str | None:
    """``None`` if ``from module import qualname`` gives ``fn`` itself, else the reason."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return f"{fn!r} has no __module__ and __qualname__"
    if module == "__main__":
        return f"{qualname} is defined in the script being run (__main__)"
    if "<lambda>" in qualname or "<locals>" in qualname:
        return f"{module}.{qualname} is a lambda or is defined inside a function"
    try:
        obj = import_reference(f"{module}:{qualname}")
    except Exception:  # any import-time error means: not importable by that name
        return f"{module}.{qualname} cannot be imported"
    if obj is not fn:
        return (
            f"importing {module}.{qualname} gives a different object (the candidate wraps it, "
            f"or is a bound method or a partial)"
        )
    return None


def is_compiled(fn: object) -> bool:
    """Whether ``fn`` was made by ``torch.compile`` (a compiled function or module)."""
    if "torch._dynamo" not in sys.modules:  # nothing was compiled without dynamo loaded
        return False
    from torch._dynamo.eval_frame import OptimizedModule

    return isinstance(fn, OptimizedModule) or hasattr(fn, "_torchdynamo_orig_callable")


def compiled_original(fn: object) -> Any:
    """The function or module that ``torch.compile`` wrapped."""
    from torch._dynamo.eval_frame import OptimizedModule

    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_torchdynamo_orig_callable", None)


def compiled_source(original_source: str | None) -> str:
    """Python that rebuilds a compiled candidate, or says plainly that it cannot.

    Args:
        original_source: ``from module import name as original`` when the wrapped function
            imports as itself, else ``None``.

    Returns:
        Lines that bind ``candidate``.
    """
    note = (
        "# The candidate was made by torch.compile. Its compile options are not recorded on "
        "the compiled object:\n# this rebuilds it with torch.compile's defaults; pass yours "
        "(backend, mode, dynamic, ...) if they differ."
    )
    if original_source is not None:
        return f"{note}\n{original_source}\ncandidate = torch.compile(original)"
    return (
        f"{note}\n# The function it wraps cannot be imported by its qualified name either.\n"
        f"candidate = torch.compile(...)  # the function or module under test"
    )


def _import_source(fn: Any, name: str) -> str:
    """``from module import qualname as name`` (two lines for a nested qualified name)."""
    module, qualname = fn.__module__, fn.__qualname__
    if "." in qualname:
        return f"from {module} import {qualname.split('.')[0]}\n{name} = {qualname}"
    return f"from {module} import {qualname} as {name}"


def candidate_source(fn: Callable[..., Any]) -> str:
    """Python that binds the name ``candidate`` to ``fn``, or says plainly that it cannot.

    Args:
        fn: the candidate.

    Returns:
        ``from module import name as candidate`` (``from module import Outer`` then
        ``candidate = Outer.name`` for a nested qualified name) when that gives ``fn`` back;
        otherwise a comment with the reason and a ``candidate = ...`` line to fill in.
    """
    if is_compiled(fn):
        # torch.compile wraps a function in an inner function of dynamo (functools.wraps):
        # the first object along __wrapped__ that imports as itself is the one to compile.
        original = compiled_original(fn)
        while original is not None and why_not_importable(original) is not None:
            original = getattr(original, "__wrapped__", None)
        return compiled_source(None if original is None else _import_source(original, "original"))
    reason = why_not_importable(fn)
    if reason is None:
        # A Triton kernel verified under the interpreter: switched on before the import.
        preamble = interpreter_preamble()
        return (preamble + "\n" if preamble else "") + _import_source(fn, "candidate")
    return (
        f"# The candidate cannot be imported by its qualified name: {reason}.\n"
        f"candidate = ...  # the function under test"
    )


def format_float(x: float) -> str:
    """A float for a message: 9 significant digits, or ``float('nan')`` and the like."""
    return float_source(x) if not math.isfinite(x) else f"{x:.9g}"


def _short(t: torch.Tensor) -> str:
    if t.numel() <= 8:
        return repr(t.detach().cpu()).replace("\n", " ")
    return f"tensor(shape={tuple(t.shape)}, dtype={dtype_source(t.dtype)})"


def _value_text(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return _short(value)
    return float_source(value) if isinstance(value, float) else repr(value)


def describe_call(fn: Callable[..., Any], call: Call, weight: torch.Tensor | None = None) -> str:
    """The call in one line for messages: ``name(input=..., weight=..., key=value)``.

    Args:
        fn: the candidate.
        call: the call.
        weight: the table to show (default ``call.weight``; pass the table as it was before
            the call when the candidate modifies it in place).

    Returns:
        The description, with small tensors spelled out and large ones by shape and dtype.
    """
    parts = [
        f"input={_short(call.input)}",
        f"{call.weight_name}={_short(call.weight if weight is None else weight)}",
    ]
    if call.offsets is not None:
        parts.append(f"offsets={_short(call.offsets)}")
    parts += [f"{key}={_value_text(value)}" for key, value in call.extra.items()]
    parts += [f"{key}={_value_text(value)}" for key, value in call.kwargs.items()]
    return f"{_short_name(fn)}({', '.join(parts)})"


def tensor_source(name: str, t: torch.Tensor) -> str:
    """Python that rebuilds ``t``'s values, dtype, shape and device (up to [`MAX_LITERAL`][]).

    Args:
        name: the variable to assign.
        t: the tensor.

    Returns:
        One assignment (a comment notes the original strides of a non-contiguous tensor).
    """
    t = t.detach()
    if t.numel() > MAX_LITERAL:
        return f"{name} = ...  # {tuple(t.shape)} {t.dtype} tensor, too large to inline"
    values = t.cpu()
    if values.dtype.is_floating_point:
        flat = values.to(torch.float64).reshape(-1).tolist()
        literal = "[" + ", ".join(float_source(x) for x in flat) + "]"
        src = f"torch.tensor({literal}, dtype=torch.float64).to({dtype_source(t.dtype)})"
    else:
        src = f"torch.tensor({values.reshape(-1).tolist()!r}, dtype={dtype_source(t.dtype)})"
    src += f".reshape({tuple(t.shape)!r})"
    if t.device.type != "cpu":
        src += f".to({str(t.device)!r})"
    line = f"{name} = {src}"
    if not t.is_contiguous() and t.dim() > 0:
        line += f"  # the original had strides {t.stride()}"
    return line


def call_source(fn: Callable[..., Any], call: Call) -> str:
    """A runnable snippet that spells out ``call``'s tensors and calls the candidate on them.

    Used for calls given as tensors (the [`testing`][embedding_equivalence.testing] helpers); a
    drawn case writes its own, shorter snippet from its recipe.

    Args:
        fn: the candidate.
        call: the call; its ``grad_output``, if set, is spelled out and backpropagated.

    Returns:
        Python source.
    """
    lines = ["import torch", candidate_source(fn), tensor_source("input", call.input)]
    lines.append(tensor_source("weight", call.weight) + "\nweight.requires_grad_(True)")
    arguments = "input, weight"
    if call.offsets is not None:
        lines.append(tensor_source("offsets", call.offsets))
        arguments += ", offsets"
    plain: dict[str, Any] = {}
    for key, value in call.kwargs.items():
        if isinstance(value, torch.Tensor):
            lines.append(tensor_source(key, value) + f"\n{key}.requires_grad_(True)")
            arguments += f", {key}={key}"
        else:
            plain[key] = value
    lines.append(f"out = candidate({arguments}{kwargs_source(plain)})")
    if call.grad_output is not None:
        lines.append(tensor_source("grad_output", call.grad_output))
        lines.append("out.backward(grad_output)\nprint(weight.grad)")
    return "\n".join(lines)
