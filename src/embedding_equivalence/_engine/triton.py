"""Triton's interpreter: switched on before triton is imported, and named in repro snippets.

Triton's interpreter (``TRITON_INTERPRET=1``) runs a Triton kernel's programs one after
another, in numpy, on CPU tensors, so the verifiers can check a Triton kernel on any machine.
It must be on before the kernel's module is imported: ``@triton.jit`` decides, when it
decorates a kernel, whether the kernel is compiled for a GPU or interpreted. Hence the rule:
set it before anything imports triton, and no kernel can have been decorated without it.
[`switch_interpreter_on`][] does so, and refuses when triton was imported without it (the
command line's ``--triton-interpret``); a repro snippet of a run under the interpreter
switches it on before it imports the kernel ([`interpreter_preamble`][]). What the
interpreter cannot run is told apart from a kernel's bugs by
[`embedding_equivalence._engine.triton_limits`][].
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

#: The environment variable that switches Triton's interpreter on.
INTERPRETER_ENV = "TRITON_INTERPRET"
#: The values triton reads as "on" (any case).
_ON = frozenset({"1", "true", "on", "yes", "y"})


def interpreter_on() -> bool:
    """Whether ``TRITON_INTERPRET`` is on in this process's environment."""
    return os.environ.get(INTERPRETER_ENV, "").strip().lower() in _ON


def triton_version() -> str | None:
    """The installed triton's version, or ``None`` without triton."""
    version = getattr(sys.modules.get("triton"), "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def switch_interpreter_on() -> None:
    """Set ``TRITON_INTERPRET=1`` for the kernels imported from now on.

    Raises:
        RuntimeError: triton was imported before, without the interpreter: the kernels
            decorated since then are compiled for a GPU. The message says to set the
            variable before the program starts instead.
    """
    if "triton" in sys.modules and not interpreter_on():
        raise RuntimeError(
            f"triton was imported before Triton's interpreter could be switched on: set "
            f"{INTERPRETER_ENV}=1 in the environment before the program starts (e.g. "
            f"{INTERPRETER_ENV}=1 embedding-equivalence verify --candidate ...)"
        )
    os.environ[INTERPRETER_ENV] = "1"


def interpreter_preamble() -> str:
    """Lines a repro snippet puts before it imports the candidate, when this run interprets.

    Empty unless triton is imported and the interpreter is on: a repro of a Triton kernel
    verified on the CPU must switch the interpreter on before it imports the kernel.
    """
    if "triton" not in sys.modules or not interpreter_on():
        return ""
    return (
        "import os\n"
        f'os.environ.setdefault("{INTERPRETER_ENV}", "1")  # Triton\'s interpreter, as in the '
        "run: before triton is imported"
    )
