"""A function of the script being run, written into a repro by its source.

A plain function that no import by name gives back (defined in ``__main__``, or in a file run
by path) is written out with what it uses from its module: its modules as ``import`` lines,
its functions and classes by their source (each once, dependencies first), its simple
constants as assignments; a name that cannot be written out is named in a comment that says
where to paste its definition. [`script_source`][] raises [`NotWritable`][] with the reason
when the function's source alone cannot rebuild it.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import cmath
import dis
import functools
import importlib
import inspect
import sys
import textwrap
import types
import weakref
from typing import Any

import torch

from .._draw.recipes import dtype_source, float_source
from .names import candidate_name, compiled_original, compiled_source, is_compiled
from .triton import interpreter_preamble


class NotWritable(Exception):
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
    if (wrapped := vars(fn).get("__wrapped__")) is not None:
        return f"a wrapper of {candidate_name(wrapped)}"
    return None


def script_source(candidate: Any) -> str:
    """The source of a script's function and what it uses, binding ``candidate``.

    Raises:
        NotWritable: not a plain function of a script, or one that its source cannot
            rebuild; the message says why (empty when it is not a script's function at all).
    """
    if (fn := _plain_function(candidate)) is None:
        raise NotWritable("")
    key = candidate if isinstance(candidate, types.FunctionType) else fn
    if key in _written:
        return _written[key]
    if not _in_a_script(fn):
        raise NotWritable("")
    if (reason := _not_writable(fn)) is not None:
        raise NotWritable(f"its source cannot be written out: it is {reason}")
    name = fn.__name__
    bound = fn.__globals__.get(name)
    writer = _ScriptWriter(fn.__globals__)
    writer.done.add(name)
    try:
        writer.define(name, fn, keep_decorators=bound is candidate or bound is fn)
    except NotWritable as exc:
        raise NotWritable(f"its source cannot be written out: {exc}") from None
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
    if kind is complex and cmath.isfinite(value):  # both parts finite
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
    header, body = set[str](), set[str]()

    def walk(code: types.CodeType, names: set[str]) -> None:
        for instruction in dis.get_instructions(code):
            if instruction.opname in _GLOBAL_LOADS and isinstance(instruction.argval, str):
                names.add(instruction.argval)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const, body)

    walk(compile(source, "<repro>", "exec", dont_inherit=True), header)
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
            NotWritable: no source, or a source that does not define ``obj``.
        """
        try:
            source = textwrap.dedent(inspect.getsource(obj))
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError) as exc:
            raise NotWritable(f"the source of {name} is not available ({exc})") from None
        node = tree.body[0] if len(tree.body) == 1 else None
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if not isinstance(node, defs) or node.name != name:
            raise NotWritable(f"the source found for {name} does not define it alone")
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
                raise NotWritable(f"the source of {name} has changed since it ran")
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
        if (literal := _literal(value)) is not None:
            if isinstance(value, torch.dtype | torch.device) and "import torch" not in self.imports:
                self.imports.append("import torch")
            if len(literal) > _MAX_CONSTANT:
                self.missing[name] = f"a constant too long to write out ({len(literal)} chars)"
            else:
                self.constants.append(f"{name} = {literal}")
            return
        if (imported := _imported_as(name, value)) is not None:
            self.imports.append(imported)
            return
        fn = _plain_function(value)
        if fn is not None and fn.__globals__ is self.namespace:
            if (reason := _not_writable(fn)) is not None:
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
        except NotWritable as exc:
            self.missing[name] = str(exc)
