"""Comparing a candidate's tensor with the exact float64 reference, element by element.

[`compare_exact_or_bounded`][] compares whole tensors (exactly, signed zeros included, or
within a per-element bound); [`compare_rows`][] compares a ``(V, D)`` table or gradient that
is known exactly off the rows an input references, without a float64 copy of the whole
tensor. Both return the message of the first differing element (its position, both values,
the bound, how many elements differ) and the largest ``|error| / bound``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..oracle.expected import ExpectedRows, RowDigests, row_chunks
from .repro import format_float


def _elementwise(
    a: torch.Tensor, e: torch.Tensor, bound: torch.Tensor | None
) -> tuple[torch.Tensor, float]:
    """The mask of the elements of float64 ``a`` that pass against ``e``, and the worst ratio.

    The worst ratio is the largest ``|error| / bound``, as [`compare_exact_or_bounded`][]
    returns it.
    """
    same = (a == e) | (a.isnan() & e.isnan())
    diff = (a - e).abs()
    if bound is None:
        ok = same & ((a != 0) | (a.signbit() == e.signbit()))
        worst = 0.0 if bool(ok.all()) else math.inf
    else:
        ok = same | (diff <= bound)
        positive = bound > 0
        differs = positive & ~same
        worst = float((diff[differs] / bound[differs]).max()) if bool(differs.any()) else 0.0
        if not bool(ok.all()):
            worst = math.inf if not bool(ok[~positive].all()) else max(worst, 1.0 + 1e-16)
    return ok, worst


@dataclass
class _Difference:
    """The first element that fails a comparison, and how many fail."""

    index: tuple[int, ...]
    actual: float
    expected: float
    bound: float | None
    count: int

    def message(self, what: str, numel: int) -> str:
        pos = "[" + ", ".join(map(str, self.index)) + "]"
        actual, expected = _apart(self.actual, self.expected)
        off = abs(self.actual - self.expected)
        if self.bound is None:
            kind = "must match exactly"
        elif self.bound > 0 and math.isfinite(off):
            kind = f"{off / self.bound:.3g} times the bound {format_float(self.bound)}"
        else:
            kind = f"must match within {format_float(self.bound)}"
        return (
            f"{what}{pos} = {actual}, but the exact value is {expected} (off by "
            f"{format_float(off)}, {kind}; {self.count} of {numel} elements differ)"
        )


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits (9 to 17) that tell them apart."""
    for digits in (9, 12, 17):
        texts = [format_float(x) if not math.isfinite(x) else f"{x:.{digits}g}" for x in (a, b)]
        if texts[0] != texts[1]:
            break
    return texts[0], texts[1]


def _first_difference(
    ok: torch.Tensor, a: torch.Tensor, e: torch.Tensor, bound: torch.Tensor | None
) -> _Difference:
    index = tuple((~ok).nonzero()[0].tolist())
    b = None if bound is None else float(bound[index])
    return _Difference(index, float(a[index]), float(e[index]), b, int((~ok).sum()))


def compare_exact_or_bounded(
    what: str, actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor | None
) -> tuple[str | None, float]:
    """Compare ``actual`` with the float64 ``expected`` elementwise.

    With ``bound=None`` the comparison is exact, signed zeros included (``-0.0`` differs from
    ``0.0``); two NaNs are equal. With a bound, ``|actual - expected| <= bound`` must hold
    (equal infinities and two NaNs pass).

    Args:
        what: name used in the message, e.g. ``"out"`` or ``"weight.grad"``.
        actual: the candidate's tensor (any dtype/device).
        expected: the reference (float64, CPU).
        bound: per-element bound or ``None`` for an exact check.

    Returns:
        ``(message, worst)``: ``message`` is ``None`` when every element passes; ``worst`` is
        the largest ``|error| / bound`` over elements with a positive bound.
    """
    a = actual.detach().to(device="cpu", dtype=torch.float64)
    e = expected.to(torch.float64)
    ok, worst = _elementwise(a, e, bound)
    if bool(ok.all()):
        return None, worst
    return _first_difference(ok, a, e, bound).message(what, ok.numel()), worst


def _nonzero_count(t: torch.Tensor, words: bool) -> int:
    """Nonzero entries of ``t``: 8-byte words of a contiguous ``t`` (``words``), else elements.

    Counting words is several times faster (no conversion of float16); it sees ``-0.0`` as
    nonzero, which the judge then compares again, exactly.
    """
    if words:
        return int(torch.count_nonzero(t.reshape(-1).view(torch.int64)))
    return int(torch.count_nonzero(t))


def _by_words(t: torch.Tensor) -> bool:
    """Whether the rows of ``t`` are whole 8-byte words that a view can count."""
    if t.dim() != 2 or not t.is_contiguous() or (t.shape[1] * t.element_size()) % 8:
        return False
    try:
        t[:1].reshape(-1).view(torch.int64)
    except RuntimeError:  # a storage offset that is not a whole word
        return False
    return True


def zero_off_rows(a: torch.Tensor, index: torch.Tensor) -> bool:
    """Whether every nonzero entry of a ``(rows, D)`` tensor ``a`` lies in its rows ``index``.

    Two counts of nonzero entries (of the whole, of the rows ``index``, which must not repeat
    a row): one pass, no temporary of ``a``'s size. The counts are of 8-byte words where the
    rows are whole words of a contiguous tensor (see ``_nonzero_count``), else of elements.
    """
    words = _by_words(a)
    return _nonzero_count(a, words) == _nonzero_count(a[index.to(a.device)], words)


def _rest_unchanged(a: torch.Tensor, expected: ExpectedRows, index: torch.Tensor) -> bool:
    """Whether every row of ``a`` off ``expected.rows`` holds what ``expected.rest`` says.

    Reads ``a`` once, without a ``(V, D)`` temporary: a count of nonzero words (rest zero),
    or a chunk at a time (rest a tensor). A rest of row digests ([`RowDigests`][]) is
    [`compare_rows`][]'s other path (``_compare_digested``).
    """
    rest = expected.rest
    if rest is None:
        return zero_off_rows(a, index)
    assert not isinstance(rest, RowDigests)
    r = rest.detach()
    if tuple(r.shape) != tuple(a.shape):
        return False
    changed = torch.zeros(a.shape[0], dtype=torch.bool)
    for lo, hi in row_chunks(a.shape[0], a.shape[1]):
        x, y = a[lo:hi], r[lo:hi].to(a.device)
        changed[lo:hi] = (x.ne(y) & ~(x.isnan() & y.isnan())).any(dim=1).cpu()
    changed[index.cpu()] = False
    return not bool(changed.any())


def _compare_whole(what: str, a: torch.Tensor, expected: ExpectedRows) -> tuple[str | None, float]:
    """[`compare_exact_or_bounded`][] of ``a`` with every row of ``expected``, in chunks.

    The same message and worst ratio as one comparison of the whole tensor, with the true
    first position, in the memory of a chunk (see [`row_chunks`][]).
    """
    first: _Difference | None = None
    count, worst = 0, 0.0
    for lo, hi in row_chunks(a.shape[0], a.shape[1]):
        values, bound = expected.full(lo, hi)
        chunk = a[lo:hi].to(device="cpu", dtype=torch.float64)
        ok, chunk_worst = _elementwise(chunk, values, bound)
        worst = max(worst, chunk_worst)
        if bool(ok.all()):
            continue
        found = _first_difference(ok, chunk, values, bound)
        count += found.count
        if first is None:
            found.index = (lo + found.index[0], *found.index[1:])
            first = found
    if first is None:
        return None, worst
    first.count = count
    return first.message(what, a.numel()), worst


def _compare_digested(
    what: str, a: torch.Tensor, expected: ExpectedRows, index: torch.Tensor
) -> tuple[str | None, float]:
    """The first difference of ``a`` where ``expected.rest`` holds digests only.

    The rows on ``expected.rows`` are compared elementwise; any other row whose digest
    changed is named as a whole (its values before the call are not kept).
    """
    assert isinstance(expected.rest, RowDigests)
    rows = a[index].to(device="cpu", dtype=torch.float64)
    ok, worst = _elementwise(rows, expected.values, expected.bound)
    changed = expected.rest.changed(a)
    changed[index.cpu()] = False
    moved = changed.nonzero().flatten().tolist()
    found = None if bool(ok.all()) else _first_difference(ok, rows, expected.values, expected.bound)
    if found is not None:
        found.index = (expected.rows[found.index[0]], *found.index[1:])
    if moved and (found is None or moved[0] < found.index[0]):
        row = moved[0]
        return (
            f"{what}[{row}, :] changed, but no id references row {row}: every row that the "
            f"input does not name must be left exactly as it was ({len(moved)} such rows "
            f"changed; the table of {a.numel()} elements is compared by a digest of each row)",
            worst,
        )
    if found is None:
        return None, worst
    text = found.message(what, a.numel())
    if moved:
        text += f"; {len(moved)} rows that no id references changed too"
    return text, worst


def compare_rows(
    what: str, actual: torch.Tensor, expected: ExpectedRows
) -> tuple[str | None, float]:
    """[`compare_exact_or_bounded`][] for a ``(V, D)`` tensor known exactly off its rows.

    A fast pass in ``actual``'s own dtype checks the rows off ``expected.rows`` (a table of
    262,144 rows would otherwise be converted to float64 a few times per example), and the
    bounded comparison runs on the rows only. Any failure is compared again on the whole
    tensor, a chunk at a time, so that the message names the true first position without a
    float64 copy of the tensor (a table past ``2**31`` elements takes 16 GiB in float64).
    """
    a = actual.detach()
    index = torch.tensor(expected.rows, dtype=torch.int64, device=a.device)
    if isinstance(expected.rest, RowDigests):
        return _compare_digested(what, a, expected, index)
    if _rest_unchanged(a, expected, index):
        msg, worst = compare_exact_or_bounded(what, a[index], expected.values, expected.bound)
        if msg is None:
            return None, worst
    return _compare_whole(what, a, expected)
