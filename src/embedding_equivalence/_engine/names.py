"""How a candidate is named and found again: its qualified name, an import by name, compiled.

[`import_reference`][] is the one reader of ``"module:qualname"`` and
``"path/to/file.py:qualname"`` references (the CLI's ``--candidate``, the sharded verifier's
string candidates and its ranks);
[`why_not_importable`][] says why an object cannot be imported back by its own name;
[`is_compiled`][] and [`compiled_source`][] recognise and rebuild ``torch.compile``'s
wrappers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from importlib import import_module
from importlib.util import module_from_spec, spec_from_file_location
from types import ModuleType
from typing import Any


def candidate_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of ``fn`` (its ``repr`` when it has neither), for reports.

    A compiled candidate is named ``torch.compile(module.qualname)`` after what it wraps.
    """
    if is_compiled(fn):
        return f"torch.compile({candidate_name(compiled_original(fn))})"
    module = getattr(fn, "__module__", None)
    return f"{module}.{short_name(fn)}" if module else short_name(fn)


def short_name(fn: Callable[..., Any]) -> str:
    """``fn``'s qualified name without its module (its ``repr`` when it has no name)."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def import_reference(reference: str) -> Any:
    """The object that ``"module:qualname"`` or ``"path/to/file.py:qualname"`` names.

    The one reader of such references: the CLI's ``--candidate``, the sharded verifier's
    string candidates and its ranks (which read the file form too), and the check that a
    candidate is importable by name. ``qualname`` may be dotted. A file is imported as the
    module named by its stem, kept in ``sys.modules`` (as ``python file.py`` and pytest's
    node ids do), so that its functions pickle and a repro imports them from beside it.

    Raises:
        ValueError: a reference of neither form, a module or file that cannot be imported
            (missing, or raising while it runs), or a name it does not have; the message
            says which, and why.
    """
    module, sep, qualname = reference.rpartition(":")
    if not sep or not module or not qualname:
        raise ValueError("expected MODULE:FUNCTION or FILE.py:FUNCTION, e.g. mypkg.kernels:embed")
    try:
        obj: Any = _import_file(module) if module.endswith(".py") else import_module(module)
    except Exception as exc:  # missing, or an error while the module runs: say which
        reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        raise ValueError(f"cannot import module {module!r} ({reason})") from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module!r} has no {qualname!r}")
        obj = getattr(obj, part)
    return obj


def _import_file(path: str) -> ModuleType:
    """The module of the file ``path``, imported once under its stem, its folder importable."""
    file = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(file))[0]
    if (loaded := sys.modules.get(name)) is not None:
        if os.path.abspath(getattr(loaded, "__file__", None) or "") == file:
            return loaded
        raise ImportError(f"a module {name!r} is imported already, from {loaded.__file__}")
    spec = spec_from_file_location(name, file) if os.path.isfile(file) else None
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no Python file {file}")
    module = module_from_spec(spec)
    sys.modules[name] = module
    try:
        with importable_from(os.path.dirname(file)):  # its neighbours, as a script's
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@contextlib.contextmanager
def importable_from(folder: str) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while the block runs, as Python puts a script's."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)


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
