"""Runs that leave no trace: the global state kept, and the replays of a diagnosis.

[`preserved_global_state`][] restores what a candidate may change globally (around a whole
verification, and around each replay); [`replay_fails`][] runs a failing case through the
engine again, quietly ([`quiet_replay`][]): on torch's own function, to tell torch's defects
apart, and for the limits of Triton's interpreter.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .check import (
    CheckableCase,
    EquivalenceError,
    OracleFactory,
    check_case,
)
from .purity import set_deterministic


@contextlib.contextmanager
def preserved_global_state() -> Iterator[None]:
    """Restore torch's and Python's global state on exit, whatever the candidate changed.

    Covers grad mode, the default dtype, the CPU and CUDA RNG states, Python's ``random``,
    deterministic-algorithm flags, the TF32 flags and the float32 matmul precision.
    """
    grad = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    tf32_matmul = torch.backends.cuda.matmul.allow_tf32
    tf32_cudnn = torch.backends.cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    py_state = random.getstate()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            torch.set_grad_enabled(grad)
            torch.set_default_dtype(default_dtype)
            set_deterministic(det, warn_only=det_warn)
            torch.backends.cuda.matmul.allow_tf32 = tf32_matmul
            torch.backends.cudnn.allow_tf32 = tf32_cudnn
            torch.set_float32_matmul_precision(precision)
            random.setstate(py_state)


@contextlib.contextmanager
def quiet_replay() -> Iterator[None]:
    """Run a diagnosis's replay of a failing case: global state kept, warnings silent.

    Grad mode is on inside: a caller under ``no_grad`` must not make a replayed output look
    disconnected.
    """
    with preserved_global_state(), warnings.catch_warnings(), torch.enable_grad():
        warnings.simplefilter("ignore")
        yield


def replay_fails(
    candidate: Callable[..., Any], case: CheckableCase, oracle: OracleFactory, backward: bool
) -> bool | None:
    """Whether ``candidate`` fails ``case`` in the engine, replayed in [`quiet_replay`][].

    The one replay of a diagnosis (torch's own defects, the limits of Triton's interpreter).

    Returns:
        True when the checks fail, False when they pass, ``None`` when the replay itself
        broke (the oracle or the case): no verdict.
    """
    try:
        with quiet_replay():
            check_case(candidate, case, oracle, backward=backward)
    except EquivalenceError:
        return True
    except Exception:  # the oracle or the case broke: no verdict
        return None
    return False
