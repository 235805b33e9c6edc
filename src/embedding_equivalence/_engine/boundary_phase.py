"""The boundary phase: check the boundary examples in order, narrow the first failure down.

[`run_boundaries`][] is what every verifier runs before its random examples (through
``run_verification``); the examples themselves are data, in
[`embedding_equivalence._draw.boundaries`][].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .._draw.boundary_data import Boundary


@dataclass
class BoundaryFailure:
    """The first boundary example that failed, narrowed down.

    Attributes:
        case: the smallest failing case found.
        error: its failure.
        crossed: which boundary it crossed, e.g. ``"fails from N = 769; passes at 768"``.
    """

    case: Any
    error: AssertionError
    crossed: str


def _without(case: Any, name: str) -> Any | None:
    """``case`` with option ``name`` removed (``norm_type`` goes with ``max_norm``)."""
    kwargs = dict(getattr(case, "kwargs", {}))
    if name not in kwargs:
        return None
    del kwargs[name]
    if name == "max_norm":
        kwargs.pop("norm_type", None)
    return dataclasses.replace(case, kwargs=kwargs)


def run_boundaries(
    boundaries: Iterable[Boundary], check: Callable[[Any], None]
) -> BoundaryFailure | None:
    """Check the boundary examples in order; narrow the first failure down.

    On a size axis the failure is bisected between the largest size that passes (in the same
    dtype, layout and options) and the failing one; then the options of the failing case are
    dropped one at a time while it still fails (but a value example's, which are part of it).

    Args:
        boundaries: the examples, in order.
        check: checks one case; raises ``AssertionError`` on a failure.

    Returns:
        ``None`` when every example passed, else the narrowed failure.
    """

    def fails(case: Any) -> AssertionError | None:
        try:
            check(case)
        except AssertionError as exc:
            return exc
        return None

    passed: dict[str, int] = {}
    for boundary in boundaries:
        error = fails(boundary.case)
        if error is None:
            if boundary.value is not None:
                passed[boundary.axis] = boundary.value
            continue
        case, crossed = boundary.case, f"fails at {boundary.label}"
        if boundary.value is not None and boundary.make is not None:
            case, error, crossed = _bisect(boundary, error, passed.get(boundary.axis), fails)
        # A value example keeps its options: without scale_grad_by_freq a sum meant to be
        # divided would leave the dtype's range, which no result can match.
        for name in list(getattr(case, "kwargs", {})) if boundary.axis != "value" else ():
            smaller = _without(case, name)
            smaller_error = None if smaller is None else fails(smaller)
            if smaller_error is not None:
                case, error = smaller, smaller_error
        return BoundaryFailure(case, error, crossed)
    return None


def _bisect(
    boundary: Boundary,
    error: AssertionError,
    below: int | None,
    fails: Callable[[Any], AssertionError | None],
) -> tuple[Any, AssertionError, str]:
    """The smallest failing size of ``boundary``'s axis, between ``below`` and its value."""
    assert boundary.value is not None
    assert boundary.make is not None
    make, axis = boundary.make, boundary.axis
    hi, hi_case, hi_error = boundary.value, boundary.case, error
    lo = below if below is not None and below < hi else 0
    # The size that passed may have been checked in another dtype: check it in this one, and
    # move down (halving) until a size passes or the axis starts.
    while lo >= 1:
        case = make(lo)
        lo_error = fails(case)
        if lo_error is None:
            break
        hi, hi_case, hi_error = lo, case, lo_error
        lo //= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        case = make(mid)
        mid_error = fails(case)
        if mid_error is None:
            lo = mid
        else:
            hi, hi_case, hi_error = mid, case, mid_error
    if lo < 1:
        return hi_case, hi_error, f"fails at {axis} = {hi:,}, the smallest size on this axis"
    return hi_case, hi_error, f"fails from {axis} = {hi:,}; passes at {lo:,}"
