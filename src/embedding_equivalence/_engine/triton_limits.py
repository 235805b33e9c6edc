"""The limits of Triton's interpreter, told apart from a kernel's bugs.

Triton's interpreter (see [`embedding_equivalence._engine.triton`][]) runs most of Triton's
language, but not all of it. A kernel that fails only because of a limit of the interpreter
has no bug there, and has not passed either: the verifiers say so, with the triton version,
as they do for torch's own defects ([`embedding_equivalence._engine.torch_defects`][]).
[`interpreter_limit_behind`][] decides it for the minimal failing case by behaviour, never by
the kernel's name:

1. triton is imported and the interpreter is on, and the candidate is run again on the case:
   it raises triton's ``InterpreterError`` (the interpreter's wrapper of an error raised while
   it ran a program; a kernel's own host code raises its own errors), or it raises nothing;
2. the first entry of [`INTERPRETER_LIMITS`][] that matches the error the interpreter
   wrapped (or, for a limit that raises nothing, the case and a probe of the interpreter)
   names the limit;
3. an entry about a dtype the interpreter cannot run is confirmed by replaying the very same
   case in float32, which the interpreter runs in full, through the same engine and oracle:
   only when the candidate passes that replay is the failure the interpreter's. A kernel
   that fails in float32 too is reported as failing, whatever its error says.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..forms.dtypes import dtype_name
from .check import CheckableCase, OracleFactory, run_in_process
from .replay import quiet_replay, replay_fails
from .triton import INTERPRETER_ENV, interpreter_on, triton_version

# --- the limits ---------------------------------------------------------------------------------


def _wrapped(error: BaseException) -> BaseException:
    """The error that the interpreter wrapped (its ``__cause__``), else ``error`` itself."""
    return error.__cause__ or error


def _unsupported_dtype(error: BaseException | None, case: CheckableCase) -> bool:
    return error is not None and "Unsupported data type" in str(_wrapped(error))


def _not_in_interpreter_mode(error: BaseException | None, case: CheckableCase) -> bool:
    inner = None if error is None else _wrapped(error)
    return isinstance(inner, NotImplementedError) and "interpreter mode" in str(inner)


#: The smallest bfloat16 subnormal: the interpreter's cast to float32 makes it 0.
_BFLOAT16_TINY = 2.0**-133


@functools.lru_cache(maxsize=1)
def _bfloat16_subnormals_miscast() -> bool:
    """Whether this triton's interpreter casts bfloat16 subnormals to float32 wrongly.

    A probe: one program loads the smallest bfloat16 subnormal and stores it as float32.
    """
    import triton
    import triton.language as tl

    @triton.jit
    def cast(x_ptr, y_ptr):  # a Triton kernel: its arguments are pointers
        tl.store(y_ptr, tl.load(x_ptr).to(tl.float32))

    x = torch.tensor([_BFLOAT16_TINY], dtype=torch.bfloat16)
    y = torch.zeros(1, dtype=torch.float32)
    cast[(1,)](x, y)
    return float(y) != _BFLOAT16_TINY


def _bfloat16_subnormal_cast(error: BaseException | None, case: CheckableCase) -> bool:
    if error is not None or getattr(case, "dtype", None) != torch.bfloat16:
        return False
    try:
        return _bfloat16_subnormals_miscast()
    except Exception:  # the probe could not run: no verdict
        return False


@dataclass(frozen=True)
class InterpreterLimit:
    """Something that Triton's interpreter cannot run, which a GPU runs.

    Attributes:
        id: a short unique name, e.g. ``"atomic-dtype"``.
        summary: what the interpreter cannot do, in one line.
        reference: where it is documented or tracked.
        replay_in_float32: whether the limit is a dtype's: the case is replayed in float32
            to confirm that the kernel computes where the interpreter can run it.
        matches: ``(error, case) -> bool``: whether the interpreter's error (``None`` when the
            replay raised nothing) is this limit's, read from the error it wrapped, the case
            and probes of the interpreter; never from a name of the kernel.
    """

    id: str
    summary: str
    reference: str
    replay_in_float32: bool
    matches: Callable[[BaseException | None, CheckableCase], bool] = field(
        compare=False, repr=False
    )


#: The limits of Triton's interpreter that a verification can meet, in the order they are
#: tried.
INTERPRETER_LIMITS: tuple[InterpreterLimit, ...] = (
    InterpreterLimit(
        id="atomic-dtype",
        summary="the interpreter's atomics (tl.atomic_add and the others) do not take every "
        "dtype a GPU's do, bfloat16 among them: they raise ValueError('Unsupported data type')",
        reference="https://github.com/triton-lang/triton/issues/1387, "
        "https://github.com/triton-lang/triton/issues/5894",
        replay_in_float32=True,
        matches=_unsupported_dtype,
    ),
    InterpreterLimit(
        id="gpu-only-operation",
        summary="the kernel takes a path that only a GPU runs (inline assembly, or an extern "
        "function declared with extern_elementwise): the interpreter raises "
        "NotImplementedError",
        reference="triton/runtime/interpreter.py (inline_asm, extern_elementwise)",
        replay_in_float32=False,
        matches=_not_in_interpreter_mode,
    ),
    InterpreterLimit(
        id="bfloat16-subnormal-cast",
        summary="the interpreter's cast of bfloat16 subnormals to float32 is wrong (the "
        "smallest, 2**-133, becomes 0; 3 * 2**-133 becomes 2**-127), where a GPU casts them "
        "exactly; nothing is raised",
        reference="triton/runtime/interpreter.py (_convert_float)",
        replay_in_float32=True,
        matches=_bfloat16_subnormal_cast,
    ),
)


def _passes_in_float32(
    candidate: Callable[..., Any], case: CheckableCase, oracle: OracleFactory, backward: bool
) -> bool:
    weight = getattr(case, "weight", None)
    if weight is None or not dataclasses.is_dataclass(case) or weight.dtype == torch.float32:
        return False
    wide = dataclasses.replace(case, weight=dataclasses.replace(weight, dtype=torch.float32))
    return replay_fails(candidate, wide, oracle, backward) is False  # None: no verdict


def interpreter_limit_behind(
    candidate: Callable[..., Any], case: CheckableCase, oracle: OracleFactory, backward: bool
) -> InterpreterLimit | None:
    """The limit of Triton's interpreter behind a failing case, decided by running it again.

    Args:
        candidate: the kernel under test.
        case: the minimal failing case of a verification.
        oracle: the verification's oracle factory (for the float32 replay).
        backward: whether the verification checked gradients (as it ran).

    Returns:
        ``None`` when the failure is the candidate's (or triton is not imported, or the
        interpreter is off); otherwise the first entry of [`INTERPRETER_LIMITS`][] that
        matches the interpreter's error, once its float32 replay (for a dtype's limit) passed.
    """
    if "triton" not in sys.modules or not interpreter_on() or case.invalid is not None:
        return None
    try:  # the candidate, run again: the interpreter's error, or none
        from triton.runtime.errors import InterpreterError

        with quiet_replay():
            error = run_in_process(candidate, case.call(backward=backward)).error
    except Exception:  # a triton without the interpreter, or the replay could not run
        return None
    if error is not None and not isinstance(error, InterpreterError):  # the kernel's own error
        return None
    for limit in INTERPRETER_LIMITS:
        if not limit.matches(error, case):
            continue
        if limit.replay_in_float32 and not _passes_in_float32(candidate, case, oracle, backward):
            return None
        return limit
    return None


def describe(limit: InterpreterLimit, case: CheckableCase) -> str:
    """The sentence a report adds for ``limit``.

    Args:
        limit: what [`interpreter_limit_behind`][] returned.
        case: the failing case.

    Returns:
        E.g. ``"Triton's interpreter (triton 3.9.0, TRITON_INTERPRET=1) cannot run this call
        in bfloat16: this is a limit of the interpreter, not a bug of your kernel, and not a
        pass: <summary> (<reference>). The same call in float32 passes. ..."``.
    """
    dtype = getattr(case, "dtype", None)
    name = dtype_name(dtype) if isinstance(dtype, torch.dtype) else ""
    where = f" in {name}" if limit.replay_in_float32 and name else ""
    text = (
        f"Triton's interpreter (triton {triton_version()}, {INTERPRETER_ENV}=1) cannot run "
        f"this call{where}: this is a limit of the interpreter, not a bug of your kernel, and "
        f"not a pass: {limit.summary} ({limit.reference})."
    )
    if limit.replay_in_float32:
        text += (
            f" The same call in float32 passes. Verify {name or 'that dtype'} on a GPU, and "
            f"the other dtypes here (leave {name or 'it'} out of dtypes)."
        )
    else:
        text += " Verify this kernel on a GPU."
    return text
