"""How a candidate and a call are written down: in failure messages and in replay snippets.

One naming rule serves every verifier and helper ([`candidate_source`][]): the snippet
imports the candidate by its qualified name only when that import gives back the very same
object. It never imports a different object that happens to share a name.

A plain function of the script being run (``__main__``), or of another module that no import
by name gives back (a file run by path), is written into the snippet by its source instead,
with what it uses from its module: its modules as ``import`` lines, its functions and classes
by their source (each once, dependencies first), its simple constants as assignments; a name
that cannot be written out (a tensor, a lambda, any other object) is named in a comment that
says where to paste its definition. ``torch.compile`` of such a function is rebuilt the same
way.

A lambda, a closure, a function defined inside a function of an importable module, a bound
method, a ``functools.partial``, a module object or a wrapper that copied another function's
``__module__`` and ``__qualname__`` (``functools.wraps``) can be neither imported nor written
out: the snippet says so and why, says exactly what to paste and where, and still rebuilds
every tensor of the call.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
from collections.abc import Callable
from typing import Any

import torch

from .._draw.recipes import device_source, dtype_source, float_source, kwargs_source
from ..oracle.call import Call
from .names import (
    candidate_name,
    compiled_original,
    compiled_source,
    is_compiled,
    short_name,
    why_not_importable,
)
from .script_source import NotWritable, script_source
from .triton import interpreter_preamble

#: The largest tensor that a repro snippet spells out element by element.
MAX_LITERAL = 4096


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
        else, for a plain function of the script being run (or of a module that cannot be
        imported by name), its source and what it uses, then ``candidate = name``; otherwise
        a comment with the reason and what to paste where, and a ``candidate = ...`` line to
        fill in.
    """
    if is_compiled(fn):
        # torch.compile wraps a function in an inner function of dynamo (functools.wraps):
        # the first object along __wrapped__ that imports as itself is the one to compile.
        original = wrapped = compiled_original(fn)
        while wrapped is not None and why_not_importable(wrapped) is not None:
            wrapped = getattr(wrapped, "__wrapped__", None)
        if wrapped is not None:
            return compiled_source(_import_source(wrapped, "original"))
        source, reason = _script_source(fn, why_not_importable(original))
        return source or compiled_source(
            None, _paste_comment(original, reason, "torch.compile(...)")
        )
    if (reason := why_not_importable(fn)) is None:
        # A Triton kernel verified under the interpreter: switched on before the import.
        preamble = interpreter_preamble()
        return (preamble + "\n" if preamble else "") + _import_source(fn, "candidate")
    source, reason = _script_source(fn, reason)
    return source or (
        f"# The candidate cannot be imported by its qualified name: {reason}.\n"
        + _paste_comment(fn, None, "...")
        + "\ncandidate = ...  # the function under test"
    )


def _script_source(fn: Any, reason: str | None) -> tuple[str, str | None]:
    """``fn``'s script source and ``reason``, or ``""`` and ``reason`` with why it is not one."""
    try:
        return script_source(fn), reason
    except NotWritable as exc:
        return "", f"{reason}; {exc}" if exc.args[0] else reason


def _where(fn: Any) -> str:
    """``file, line n`` of a function's definition, or ``""``."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return ""
    return f"{code.co_filename}, line {code.co_firstlineno}"


def _paste_comment(fn: Any, reason: str | None, blank: str) -> str:
    """Comment lines: what to paste above the ``candidate = ...`` line, and what in the blank.

    Args:
        fn: the candidate (for a compiled one: the function or module it wraps).
        reason: why it cannot be rebuilt, to state first; ``None`` when already stated.
        blank: how the blank appears in the line below (``...``, ``torch.compile(...)``).

    Returns:
        One or two comment lines.
    """
    blank = f"the `...` in `{blank}` below" if blank != "..." else "the `...` below"
    where = _where(getattr(fn, "__func__", fn))
    at = f" ({where})" if where else ""
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(fn, functools.partial):
        paste = "what the partial needs"
        put = f"the functools.partial({candidate_name(fn.func)}, ...) that was verified"
    elif inspect.ismethod(fn):
        owner = type(fn.__self__).__qualname__
        paste = f"the class {owner}{at} and the code that builds the object"
        put = f"that object's .{fn.__name__}"
    elif isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
        paste, put = "what the lambda uses", f"the lambda{at}"
    elif isinstance(fn, types.FunctionType) and fn.__closure__ and ".<locals>." in str(qualname):
        outer = str(qualname).rsplit(".<locals>.", 1)[0]
        closure = f"{fn.__name__}{at}, a closure over {', '.join(fn.__code__.co_freevars)}"
        paste = f"the definition of {outer}"
        put = f"the call of {outer} that made the candidate ({closure})"
    elif isinstance(fn, types.FunctionType) and hasattr(fn, "__wrapped__"):
        wrapped = candidate_name(vars(fn)["__wrapped__"])
        paste = f"the code that makes the candidate ({fn.__name__}{at}, a wrapper of {wrapped})"
        put = "it"
    elif isinstance(fn, types.FunctionType):
        paste, put = f"the definition of {fn.__name__}{at} (and what it uses)", fn.__name__
    elif not isinstance(fn, type) and callable(fn):
        paste = f"the class {type(fn).__qualname__} and the code that builds the object"
        put = "that object"
    else:
        paste, put = "the code that makes the candidate", "it"
    what = f"paste {paste} above this line and replace {blank} with {put}"
    lines = [f"# {reason}." if reason else "", f"# To run this snippet, {what}."]
    return "\n".join(line for line in lines if line)


def format_float(x: float) -> str:
    """A float for a message: 9 significant digits, or ``float('nan')`` and the like."""
    return float_source(x) if not math.isfinite(x) else f"{x:.9g}"


def _value_text(value: object) -> str:
    """A value for a message: a small tensor spelled out, a large one by shape and dtype."""
    if not isinstance(value, torch.Tensor):
        return float_source(value) if isinstance(value, float) else repr(value)
    if value.numel() <= 8:
        return repr(value.detach().cpu()).replace("\n", " ")
    return f"tensor(shape={tuple(value.shape)}, dtype={dtype_source(value.dtype)})"


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
    table = call.weight if weight is None else weight
    shown: dict[str, Any] = {"input": call.input, call.weight_name: table}
    if call.offsets is not None:
        shown["offsets"] = call.offsets
    shown |= call.extra | call.kwargs
    parts = ", ".join(f"{key}={_value_text(value)}" for key, value in shown.items())
    return f"{short_name(fn)}({parts})"


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
    src += f".reshape({tuple(t.shape)!r}){device_source(str(t.device))}"
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
    table = call.weight_name
    lines.append(tensor_source(table, call.weight))
    if call.grad_output is not None:
        lines.append(f"{table}.requires_grad_(True)")
    arguments = f"input, {table}"
    if call.offsets is not None:
        lines.append(tensor_source("offsets", call.offsets))
        arguments += ", offsets"
    for key, value in call.extra.items():  # a quantized table's scales and zero points
        lines.append(f"{key} = None" if value is None else tensor_source(key, value))
        arguments += f", {key}"
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
        lines.append(f"out.backward(grad_output)\nprint({table}.grad)")
    return "\n".join(lines)
