r"""Rounding: the unit roundoff, Higham's gamma, exact sums, and the bounds built from them.

Every tolerance of the verifier is derived here from the dtype's unit roundoff and the length
of the sum (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and
eq. 4.4); the derivations are in [`embedding_equivalence.oracle.embedding`][] (the lookup)
and [`embedding_equivalence.oracle.bag`][] (bags). Nothing here is tuned by hand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import torch

#: Unit roundoff of float64: the oracle's own rounding per operation.
U64 = 2.0**-53


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff ``u = eps / 2`` of a floating dtype: the largest relative rounding error.

    Args:
        dtype: a floating ``torch.dtype``.

    Returns:
        ``2**-11`` for float16, ``2**-8`` for bfloat16, ``2**-24`` for float32, ``2**-53`` for
        float64.

    Raises:
        TypeError: ``dtype`` is not floating point.
    """
    if not dtype.is_floating_point:
        raise TypeError(f"unit_roundoff: {dtype} is not a floating dtype")
    return torch.finfo(dtype).eps / 2


def gamma(k: int, u: float) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``; ``inf`` when ``k u >= 1`` (no bound exists).

    Args:
        k: number of roundings.
        u: unit roundoff.

    Returns:
        The constant of the recursive-summation bound.
    """
    ku = k * u
    return math.inf if ku >= 1 else ku / (1 - ku)


def gammas(k: torch.Tensor, u: float) -> torch.Tensor:
    """[`gamma`][] of each count in ``k``, as float64 (the same roundings, so the same values)."""
    ku = k.to(torch.float64) * u
    return torch.where(ku < 1, ku / (1 - ku), torch.full_like(ku, math.inf))


def subnormal_loss(dtype: torch.dtype) -> float:
    """``eta``: the most a rounding into the subnormal range of ``dtype`` can lose (half its step).

    In the subnormal range the values of ``dtype`` are the multiples of its smallest subnormal
    ``s``, so a rounding to nearest there moves a result by at most ``s / 2``, whatever its
    magnitude. For float16, bfloat16 and float32 that is ``s / 2`` itself (``2**-25``,
    ``2**-134``, ``2**-150``: float64 numbers). For float64 ``s / 2 = 2**-1075`` is not a
    float64 (it rounds to 0, which would judge every subnormal rounding as exact), so ``eta``
    is ``s = 2**-1074`` there, still a bound: the candidate's ``m`` roundings lose at most
    ``m s / 2``, and the float64 oracle's own roundings, at most as many as the candidate's
    (a sum, a division), at most as much again; the two together stay within ``m s``. The
    bounds are compared with ``|actual - expected|``, a multiple of ``s`` there, exactly.

    Args:
        dtype: a floating ``torch.dtype``.

    Returns:
        Half the smallest subnormal of ``dtype``; for float64, its smallest subnormal
        ``2**-1074``.
    """
    info = torch.finfo(dtype)
    return max(float(info.smallest_normal) * info.eps / 2, math.ulp(0.0))


def exact_sum(values: Iterable[float]) -> float:
    """The correctly rounded sum; ``nan`` for ``inf - inf``, ``+-inf`` beyond float64's range."""
    vals = values if isinstance(values, list) else list(values)
    try:
        return math.fsum(vals)
    except ValueError:  # inf + -inf
        return math.nan
    except OverflowError:  # an intermediate sum left float64's range: redo it exactly
        special = {x for x in vals if not math.isfinite(x)}  # fsum raised before it saw them
        if special:  # nan, inf - inf, or one infinity
            return special.pop() if len(special) == 1 else math.nan
        total = sum((Fraction(x) for x in vals), Fraction(0))
        try:
            return float(total)
        except OverflowError:
            return math.inf if total > 0 else -math.inf


def segment_sums(values: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Exactly rounded column sums of consecutive groups of rows of ``values``.

    Args:
        values: ``(M, L)`` float64, the rows of each group next to each other.
        counts: ``(S,)`` rows in each group (``counts.sum() == M``; zeros allowed).

    Returns:
        ``(S, L)``: row ``s`` is the correctly rounded sum of group ``s``'s rows, column by
        column (as ``exact_sum``: ``nan`` for ``inf - inf``); an empty group sums to zero.
        A group of one row is that row and a group of two is one float64 addition, which is
        correctly rounded; only longer groups are summed in Python, by ``exact_sum``
        (``math.fsum``) over each column's slice.
    """
    out = torch.zeros(counts.shape[0], values.shape[1], dtype=torch.float64)
    if values.shape[0] == 0:
        return out
    starts = torch.cumsum(counts, 0) - counts
    one = counts == 1
    out[one] = values[starts[one]]
    two = counts == 2
    out[two] = values[starts[two]] + values[starts[two] + 1]
    many = torch.nonzero(counts > 2).reshape(-1)
    if many.numel():
        columns = values.t().tolist()  # columns[j]: column j of every row, in order
        lows, highs = starts[many].tolist(), (starts + counts)[many].tolist()
        sums = [[exact_sum(c[lo:hi]) for c in columns] for lo, hi in zip(lows, highs, strict=True)]
        out[many] = torch.tensor(sums, dtype=torch.float64).reshape(-1, values.shape[1])
    return out


def grouped_sums(
    keys: torch.Tensor, terms: torch.Tensor, groups: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exactly rounded sums of the rows of ``terms`` and of their magnitudes, by group.

    The rows are sorted by group (a stable sort) and each group summed by
    [`segment_sums`][]: no Python loop over the rows.

    Args:
        keys: ``(M,)`` int64, the group of each row, in ``[0, groups)``.
        terms: ``(M, L)`` float64.
        groups: ``S``, the number of groups.

    Returns:
        ``(sums, magnitudes, counts)``: ``(S, L)`` sums of each group's rows and of their
        absolute values, and the ``(S,)`` rows of each group.
    """
    order = torch.sort(keys, stable=True).indices
    counts = torch.bincount(keys, minlength=groups)
    grouped = terms[order]
    return segment_sums(grouped, counts), segment_sums(grouped.abs(), counts), counts


def zero_where_not_finite(bound: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """A non-finite exact value must be matched exactly: bound zero there."""
    return torch.where(torch.isfinite(value), bound, torch.zeros_like(bound))


def row_sums(values: torch.Tensor) -> torch.Tensor:
    """``(M,)`` exactly rounded sums of the rows of an ``(M, L)`` float64 tensor."""
    m, length = values.shape
    counts = torch.full((m,), length, dtype=torch.int64)
    return segment_sums(values.reshape(-1, 1), counts)[:, 0]


def sum_and_bound(terms: list[float], s: int, u: float, eta: float) -> tuple[float, float]:
    """Exact sum of ``terms`` and its bound ``(gamma_{k+s}(u) + gamma_{s+1}(u64)) A + k eta``."""
    k = len(terms)
    value = exact_sum(terms)
    if not math.isfinite(value):
        return value, 0.0
    mag = exact_sum(abs(t) for t in terms)
    return value, (gamma(k + s, u) + gamma(s + 1, U64)) * mag + (k + s) * eta


def within(actual: float, expected: float, bound: float) -> bool:
    """Whether ``|actual - expected| <= bound`` (equal values and two NaNs pass)."""
    if math.isnan(actual) and math.isnan(expected):
        return True
    return actual == expected or abs(actual - expected) <= bound


def renorm_error_bound(
    weight: torch.Tensor, max_norm: float, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Per-element bound on a row renormalized by ``max_norm`` (relative to the original row).

    The candidate computes ``||r||_p`` with at most ``D`` roundings in the accumulation and one
    to the dtype (relative error ``gamma_{D+1}``), then multiplies by the scale (one more
    rounding, and one for the scale itself): ``gamma_{D+3}(u) |r|``. When ``||r||_p`` lies
    within that error of ``max_norm`` the candidate and the oracle may disagree on whether to
    rescale at all; the scale then differs from 1 by at most that error plus
    ``1e-7 / max_norm``, which is added. Plus ``2 u_64`` for the oracle's own roundings.

    Args:
        weight: the ``(V, D)`` table before the renorm.
        max_norm: the renorm threshold.
        dtype: dtype the candidate works in (default: the weight's).

    Returns:
        ``(V, D)`` float64 bounds on the CPU.
    """
    rel = gamma(weight.shape[1] + 3, unit_roundoff(dtype or weight.dtype)) + 2 * U64
    if max_norm > 0:
        rel += 1e-7 / max_norm
    w = weight.detach().to(device="cpu", dtype=torch.float64).abs()
    if math.isinf(rel):  # (D + 3) u >= 1: no bound exists (and inf * 0 would be nan)
        return torch.full_like(w, math.inf)
    return rel * w
