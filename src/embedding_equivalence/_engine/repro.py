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
import __future__

import ast
import builtins
import dis
import functools
import importlib
import inspect
import math
import sys
import textwrap
import types
import weakref
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


def compiled_source(original_source: str | None, paste: str = "") -> str:
    """Python that rebuilds a compiled candidate, or says plainly that it cannot.

    Args:
        original_source: lines that bind ``original`` to the function ``torch.compile`` wraps
            (``from module import name as original`` when it imports as itself, its source
            when it is a function of the script), else ``None``.
        paste: when ``original_source`` is ``None``, comment lines that say why the wrapped
            function cannot be rebuilt and what to paste where.

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
        + (f"{paste}\n" if paste else "")
        + "candidate = torch.compile(...)  # the function or module under test"
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
        else, for a plain function of the script being run (or of a module that cannot be
        imported by name), its source and what it uses, then ``candidate = name``; otherwise
        a comment with the reason and what to paste where, and a ``candidate = ...`` line to
        fill in.
    """
    if is_compiled(fn):
        # torch.compile wraps a function in an inner function of dynamo (functools.wraps):
        # the first object along __wrapped__ that imports as itself is the one to compile.
        original = compiled_original(fn)
        while original is not None and why_not_importable(original) is not None:
            original = getattr(original, "__wrapped__", None)
        if original is not None:
            return compiled_source(_import_source(original, "original"))
        original = compiled_original(fn)
        reason = why_not_importable(original)
        try:
            return _script_source(fn)
        except _NotWritable as exc:
            reason = f"{reason}; {exc}" if exc.args[0] else reason
        return compiled_source(None, _paste_comment(original, reason, "torch.compile(...)"))
    reason = why_not_importable(fn)
    if reason is None:
        # A Triton kernel verified under the interpreter: switched on before the import.
        preamble = interpreter_preamble()
        return (preamble + "\n" if preamble else "") + _import_source(fn, "candidate")
    try:
        return _script_source(fn)
    except _NotWritable as exc:
        reason = f"{reason}; {exc}" if exc.args[0] else reason
    return (
        f"# The candidate cannot be imported by its qualified name: {reason}.\n"
        + _paste_comment(fn, None, "...")
        + "\ncandidate = ...  # the function under test"
    )


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
        what = (
            f"paste what the partial needs above this line and replace {blank} with the "
            f"functools.partial({candidate_name(fn.func)}, ...) that was verified"
        )
    elif inspect.ismethod(fn):
        owner = type(fn.__self__).__qualname__
        what = (
            f"paste the class {owner}{at} and the code that builds the object above this line "
            f"and replace {blank} with that object's .{fn.__name__}"
        )
    elif isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
        what = f"paste what the lambda uses above this line and replace {blank} with the lambda{at}"
    elif isinstance(fn, types.FunctionType) and fn.__closure__ and ".<locals>." in str(qualname):
        outer = str(qualname).rsplit(".<locals>.", 1)[0]
        what = (
            f"paste the definition of {outer} above this line and replace {blank} with the "
            f"call of {outer} that made the candidate ({fn.__name__}{at}, a closure over "
            f"{', '.join(fn.__code__.co_freevars)})"
        )
    elif isinstance(fn, types.FunctionType) and hasattr(fn, "__wrapped__"):
        wrapped = candidate_name(vars(fn)["__wrapped__"])
        what = (
            f"paste the code that makes the candidate ({fn.__name__}{at}, a wrapper of "
            f"{wrapped}) above this line and replace {blank} with it"
        )
    elif isinstance(fn, types.FunctionType):
        what = (
            f"paste the definition of {fn.__name__}{at} (and what it uses) above this line "
            f"and replace {blank} with {fn.__name__}"
        )
    elif not isinstance(fn, type) and callable(fn):
        owner = type(fn).__qualname__
        what = (
            f"paste the class {owner} and the code that builds the object above this line "
            f"and replace {blank} with that object"
        )
    else:
        what = (
            f"paste the code that makes the candidate above this line and replace {blank} with it"
        )
    lines = [f"# {reason}." if reason else "", f"# To run this snippet, {what}."]
    return "\n".join(line for line in lines if line)


class _NotWritable(Exception):
    """Why a function cannot be written into a snippet by its source (the message says)."""


#: The ``from __future__`` flags a function was compiled with, to compile its source alike.
_FUTURE_FLAGS = functools.reduce(
    lambda a, b: a | b,
    (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names),
)

#: The loads of a global name, by Python version.
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})

#: The longest constant written out by its ``repr``.
_MAX_CONSTANT = 2000

#: The source a script function was written as, per function: every example of a run writes
#: its snippet, and a function's source and what it uses are looked up once.
_written: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _in_a_script(fn: Any) -> bool:
    """Whether ``fn``'s module is ``__main__`` or another one that no import by name gives."""
    module = getattr(fn, "__module__", None)
    if module == "__main__":
        return True
    if not isinstance(module, str):
        return False
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(fn, "__globals__", None) is vars(loaded):
        return False  # a module imported by name
    try:
        importlib.import_module(module)
    except Exception:  # any import-time error means: not importable by that name
        return True
    return False


def _plain_function(obj: Any) -> types.FunctionType | None:
    """The Python function whose source defines ``obj`` (what a compile or a Triton jit wraps)."""
    if is_compiled(obj):
        obj = compiled_original(obj)
    while not isinstance(obj, types.FunctionType) and type(obj).__module__.startswith("triton"):
        obj = getattr(obj, "fn", None)  # triton.jit, triton.autotune: the function is .fn
    return obj if isinstance(obj, types.FunctionType) else None


def _not_writable(fn: types.FunctionType) -> str | None:
    """What ``fn`` is, when its source alone cannot rebuild it (``a lambda``), else ``None``."""
    if fn.__name__ == "<lambda>":
        return "a lambda"
    if fn.__closure__:
        variables = ", ".join(fn.__code__.co_freevars)
        return f"a closure over {variables} (variables of the function that defines it)"
    wrapped = vars(fn).get("__wrapped__")
    if wrapped is not None:
        return f"a wrapper of {candidate_name(wrapped)}"
    return None


def _script_source(candidate: Any) -> str:
    """The source of a script's function and what it uses, binding ``candidate``.

    Raises:
        _NotWritable: not a plain function of a script, or one that its source cannot
            rebuild; the message says why (empty when it is not a script's function at all).
    """
    fn = _plain_function(candidate)
    if fn is None:
        raise _NotWritable("")
    key = candidate if isinstance(candidate, types.FunctionType) else fn
    if key in _written:
        return _written[key]
    if not _in_a_script(fn):
        raise _NotWritable("")
    reason = _not_writable(fn)
    if reason is not None:
        raise _NotWritable(f"its source cannot be written out: it is {reason}")
    name = fn.__name__
    bound = fn.__globals__.get(name)
    writer = _ScriptWriter(fn.__globals__)
    writer.done.add(name)
    try:
        writer.define(name, fn, keep_decorators=bound is candidate or bound is fn)
    except _NotWritable as exc:
        raise _NotWritable(f"its source cannot be written out: {exc}") from None
    module = fn.__module__
    where = (
        "the script being run (__main__)"
        if module == "__main__"
        else f"{module} ({fn.__code__.co_filename}), which cannot be imported by name"
    )
    lines = [f"# The candidate is defined in {where}: its source, and what it uses from there."]
    preamble = interpreter_preamble()  # a Triton kernel under the interpreter: before the import
    lines += [preamble] if preamble else []
    lines += writer.imports + writer.constants
    if writer.missing:
        names = ", ".join(writer.missing)
        what = "; ".join(f"{key} is {what}" for key, what in writer.missing.items())
        lines.append(
            f"# Paste the definitions of {names} here: the script defines them, but they "
            f"cannot be written out ({what})."
        )
    lines += ["", *writer.definitions]  # a blank line, as between the definitions
    if bound is candidate or not is_compiled(candidate):
        source = "\n".join([*lines, f"candidate = {name}"])
    else:  # the script compiled it by a call: compiled again here, with the defaults
        source = compiled_source("\n".join([*lines, f"original = {name}"]))
    _written[key] = source
    return source


def _literal(value: Any) -> str | None:
    """Python source for a simple constant (numbers, strings, dtypes, tuples of them), or None."""
    kind = type(value)
    if value is None or kind in (bool, int, str, bytes):
        return repr(value)
    if kind is float:
        return float_source(value)
    if kind is complex and math.isfinite(value.real) and math.isfinite(value.imag):
        return repr(value)
    if isinstance(value, torch.dtype):
        return dtype_source(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if kind in (tuple, list):
        items = [_literal(item) for item in value]
        if any(item is None for item in items):
            return None
        inner = ", ".join(str(item) for item in items)
        if kind is list:
            return f"[{inner}]"
        return f"({inner},)" if len(items) == 1 else f"({inner})"
    return None


def _imported_as(name: str, value: Any) -> str | None:
    """``import m``/``from m import x`` lines that give ``value`` back under ``name``, or None."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if module == "__main__" or sys.modules.get(module) is not value:
            return None
        return f"import {module}" if module == name else f"import {module} as {name}"
    module = getattr(value, "__module__", None)
    if not isinstance(module, str) or module == "__main__" or module not in sys.modules:
        return None
    loaded = sys.modules[module]
    for attr in dict.fromkeys([name, getattr(value, "__qualname__", None)]):
        if isinstance(attr, str) and attr.isidentifier() and getattr(loaded, attr, None) is value:
            return f"from {module} import {attr}" + ("" if attr == name else f" as {name}")
    return None


def _fingerprint(code: types.CodeType) -> tuple[Any, ...]:
    """What a function's source fixes of its code: names, arguments, constants, nested code.

    Not the bytecode itself, which depends on the module around the source (Python 3.11 calls
    a method of an imported module another way).
    """
    consts = tuple(
        _fingerprint(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts
    )
    counts = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount)
    return (code.co_name, counts, code.co_varnames, frozenset(code.co_names), consts)


def _global_names(source: str) -> tuple[set[str], set[str]]:
    """The globals a definition reads: when it runs (header), and when it is called (body)."""
    header: set[str] = set()
    body: set[str] = set()
    top = compile(source, "<repro>", "exec", dont_inherit=True)

    def walk(code: types.CodeType, names: set[str]) -> None:
        for instruction in dis.get_instructions(code):
            if instruction.opname in _GLOBAL_LOADS and isinstance(instruction.argval, str):
                names.add(instruction.argval)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const, body)

    walk(top, header)
    return header, body


class _ScriptWriter:
    """Writes the definitions that a script's function needs, each once, dependencies first."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.imports: list[str] = []
        self.constants: list[str] = []
        self.definitions: list[str] = []
        self.missing: dict[str, str] = {}  # name: what it is
        self.done: set[str] = set()

    def define(self, name: str, obj: Any, *, keep_decorators: bool = True) -> None:
        """Write ``name``'s definition (a function's or a class's source), after its needs.

        Raises:
            _NotWritable: no source, or a source that does not define ``obj``.
        """
        try:
            source = textwrap.dedent(inspect.getsource(obj))
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError) as exc:
            raise _NotWritable(f"the source of {name} is not available ({exc})") from None
        node = tree.body[0] if len(tree.body) == 1 else None
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if not isinstance(node, defs) or node.name != name:
            raise _NotWritable(f"the source found for {name} does not define it alone")
        if not keep_decorators:
            source = "".join(source.splitlines(keepends=True)[node.lineno - 1 :])
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            flags = code.co_flags & _FUTURE_FLAGS
            compiled = compile(source, code.co_filename, "exec", flags=flags, dont_inherit=True)
            if not any(
                isinstance(c, types.CodeType) and _fingerprint(c) == _fingerprint(code)
                for c in compiled.co_consts
            ):
                raise _NotWritable(f"the source of {name} has changed since it ran")
        header, body = _global_names(source)
        for used in sorted(header | body):
            self.use(used, in_header=used in header)
        self.definitions.append(source.rstrip("\n") + "\n")

    def use(self, name: str, *, in_header: bool) -> None:
        """Write what ``name`` is bound to in the script (or note it as missing)."""
        if name in self.done or (name.startswith("__") and name.endswith("__")):
            return
        self.done.add(name)
        if name not in self.namespace:
            # Read when the definition runs, and neither a global nor a builtin: a variable of
            # the function that defined it.
            if in_header and not hasattr(builtins, name):
                self.missing[name] = "a variable of the function that defines it"
            return
        value = self.namespace[name]
        literal = _literal(value)
        if literal is not None:
            if (
                isinstance(value, (torch.dtype, torch.device))
                and "import torch" not in self.imports
            ):
                self.imports.append("import torch")
            self.constants.append(f"{name} = {literal}")
            if len(literal) > _MAX_CONSTANT:
                self.constants.pop()
                self.missing[name] = f"a constant too long to write out ({len(literal)} chars)"
            return
        imported = _imported_as(name, value)
        if imported is not None:
            self.imports.append(imported)
            return
        fn = _plain_function(value)
        if fn is not None and fn.__globals__ is self.namespace:
            reason = _not_writable(fn)
            if reason is not None:
                self.missing[name] = reason
                return
            if fn.__name__ != name:
                if fn is not value or self.namespace.get(fn.__name__) is not value:
                    self.missing[name] = f"made from {fn.__name__} by a call"
                    return
                self.use(fn.__name__, in_header=in_header)  # another name of a function
                self.definitions.append(f"{name} = {fn.__name__}")
                return
        elif not (isinstance(value, type) and value.__module__ == self.namespace.get("__name__")):
            self.missing[name] = f"a {type(value).__module__}.{type(value).__qualname__}"
            return
        try:
            self.define(name, value if fn is None else fn)
        except _NotWritable as exc:
            self.missing[name] = str(exc)


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
