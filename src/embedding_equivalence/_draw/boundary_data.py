"""The data of the boundary phase, and the parts that every generator of it builds from.

The largest size of each axis ([`LIMITS`][]), the sizes walked along it
([`around_powers_of_two`][]), the fixed tables, inputs and seeds, the edges every lookup meets,
and the parts shared by the generators of ``boundaries.py`` and ``distributed._boundaries``:
the turns that dtypes, index dtypes and devices take, a size axis, bad input at its edges. A
[`Boundary`][] is one example and where it stands. Nothing here draws: the phase is the same
under every seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..forms.dtypes import dtype_name
from ..forms.options import EXCLUSIVE_OPTIONS
from .cases import EmbeddingCase
from .recipes import Entries, IdsRecipe, IdsRun, WeightRecipe

#: The largest size of each axis, the sizes users run: ids in one call, width, rows, repeats
#: of one id, ids in one bag, bags in one call and empty bags at each end of the bags.
LIMITS: dict[str, int] = {
    "N": 2**17,
    "D": 2**13,
    "V": 2**24,
    "repeats": 2**16,
    # A bag of 2**16 ids, 2**17 bags of one id (N = 2**17), and 2**16 empty bags before and
    # after two short ones: the bag oracle sums bags and rows over slices, in tenths of a second
    # at these sizes.
    "bag length": 2**16,
    "bags": 2**17,
    "empty bags": 2**16,
    # A quantized table draws a scale and a zero point for every row: 2**24 rows take 5 s.
    "quantized V": 2**22,
}
#: Tables past this many elements are drawn in their own dtype (no float64 copy).
NATIVE_ELEMENTS = 1 << 20
#: Fixed seeds of the boundary tables and upstream gradients (the phase never draws).
_TABLE_SEED = 20_240_531
_GRAD_SEED = 7


def around_powers_of_two(limit: int) -> tuple[int, ...]:
    """``2**k - 1``, ``2**k`` and ``2**k + 1`` for every ``k``, from 1 up to ``limit``."""
    ks = range(1, limit.bit_length() + 1)
    values = {x for k in ks for x in ((1 << k) - 1, 1 << k, (1 << k) + 1) if x <= limit}
    return tuple(sorted(values | {1}))


@dataclass(frozen=True)
class Boundary:
    """One boundary example: a case, and where it stands.

    Attributes:
        axis: ``"N"``, ``"D"``, ``"V"``, ``"repeats"``, ``"bag length"``, ``"bags"``,
            ``"empty bags"`` for a size, or ``"edge"``, ``"options"``, ``"value"``, ``"bad
            input"`` for a named edge.
        value: the size on a size axis (``None`` on a named edge).
        what: the edge in words, e.g. ``"0-d ids"`` or ``"id -1"``.
        case: the case to check.
        make: rebuilds the case at another size of the same axis (bisection), or ``None``.
    """

    axis: str
    value: int | None
    what: str
    case: Any
    make: Callable[[int], Any] | None = None

    @property
    def label(self) -> str:
        """``N = 1,025`` on a size axis, else the edge's description."""
        return self.what if self.value is None else f"{self.axis} = {self.value:,}"


def option_sets(
    options: Sequence[str], exclusive: Sequence[tuple[str, str]] = EXCLUSIVE_OPTIONS
) -> list[tuple]:
    """Every non-empty combination of ``options``, but pairs that cannot be combined.

    Args:
        options: the requested options, in the order given.
        exclusive: pairs never combined (``sparse`` with ``scale_grad_by_freq``: by default
            ``EXCLUSIVE_OPTIONS``, the forms' table).

    Returns:
        The combinations, smallest first.
    """
    sizes = range(1, len(options) + 1)
    combos = [c for size in sizes for c in itertools.combinations(options, size)]
    return [c for c in combos if not any(a in c and b in c for a, b in exclusive)]


def _largest_set(options: Sequence[str]) -> tuple:
    """The requested options with the second of each exclusive pair left out."""
    dropped = {b for a, b in EXCLUSIVE_OPTIONS if a in options and b in options}
    return tuple(o for o in options if o not in dropped)


#: The norms ``max_norm`` takes besides the default 2: the 1-norm, an odd power and the
#: largest magnitude (a kernel that always takes the 2-norm fails each).
_OTHER_NORMS = (1.0, 3.0, math.inf)


def _lookup_kwargs(
    options: Sequence[str], padding_row: int, norm_type: float = 2.0
) -> dict[str, Any]:
    by_option: dict[str, dict[str, Any]] = {
        "padding_idx": {"padding_idx": padding_row},
        "max_norm": {"max_norm": 1.0, "norm_type": norm_type},
        "scale_grad_by_freq": {"scale_grad_by_freq": True},
        "sparse": {"sparse": True},
    }
    return {k: x for option, kw in by_option.items() if option in options for k, x in kw.items()}


def _table(
    v: int, d: int, dtype: torch.dtype, device: str, layout: str = "contiguous", at: Entries = ()
) -> WeightRecipe:
    native = v * d > NATIVE_ELEMENTS
    return WeightRecipe(v, d, dtype, device, _TABLE_SEED + v + d, at, layout, native)


@dataclass(frozen=True)
class _Turns:
    """Who takes the next example's turn: the dtypes, index dtypes and devices in rotation."""

    dtypes: tuple[torch.dtype, ...]
    devices: tuple[str, ...]

    def at(self, i: int) -> tuple[torch.dtype, torch.dtype, str]:
        dtype = self.dtypes[i % len(self.dtypes)]
        index = (torch.int64, torch.int32)[(i // len(self.dtypes)) % 2]
        device = self.devices[(i // (2 * len(self.dtypes))) % len(self.devices)]
        return dtype, index, device

    def narrowest(self, i: int) -> tuple[torch.dtype, torch.dtype, str]:
        """``at(i)``, with the dtype taken in turn among the narrowest requested.

        A table past ``NATIVE_ELEMENTS`` rows costs its bytes at every pass over it (drawn,
        copied, compared, its gradient zeroed), and the row count, not the dtype, is what it
        tests.
        """
        width = min(t.itemsize for t in self.dtypes)
        narrow = [t for t in self.dtypes if t.itemsize == width]
        _, index, device = self.at(i)
        return narrow[i % len(narrow)], index, device


def _embedding(
    runs: tuple[IdsRun, ...],
    v: int,
    d: int,
    kwargs: dict[str, Any],
    dtype: torch.dtype,
    index: torch.dtype,
    device: str,
    *,
    shape: tuple[int, ...] | None = None,
    ids_layout: str = "contiguous",
    table_layout: str = "contiguous",
    invalid: str | None = None,
    values: tuple[Entries, Entries] = ((), ()),
) -> EmbeddingCase:
    """A lookup; ``values``: the entries of the table and of the upstream gradient to place."""
    ids = IdsRecipe.from_runs(runs, shape, index, device, ids_layout)
    table = _table(v, d, dtype, device, table_layout, values[0])
    return EmbeddingCase(ids, table, kwargs, _GRAD_SEED, invalid, values[1])


def _size_axis(
    axis: str,
    at: Callable[[int], tuple[Any, ...]],
    make: Callable[..., Any],
    values: Sequence[int] | None = None,
    large: Callable[[int], tuple[Any, ...]] | None = None,
) -> Iterator[Boundary]:
    """One size axis: ``make(value, *turn)`` at each value (default: around the powers of two).

    The ``i``-th example's turn is ``at(i)``: its dtype, index dtype and device by
    ``_Turns.at`` (a bag generator passes a function of ``i`` that puts the mode first); past
    ``NATIVE_ELEMENTS`` it is ``large(i)`` where given (the ``V`` axis: ``_Turns.narrowest``).
    A failure is bisected in its own turn.
    """
    for i, value in enumerate(values if values is not None else around_powers_of_two(LIMITS[axis])):
        turn = large(i) if large is not None and value > NATIVE_ELEMENTS else at(i)
        yield Boundary(axis, value, "", make(value, *turn), lambda x, t=turn: make(x, *t))


#: The edges of the ids and of the table that every lookup meets, in every dtype: ``(what,
#: ids, shape (None: 1-D), ids layout, table layout)``.
_EDGES: tuple[tuple[str, tuple[IdsRun, ...], tuple[int, ...] | None, str, str], ...] = (
    ("0-d ids", (IdsRun(2, 1),), (), "contiguous", "contiguous"),
    ("empty ids", (), (0,), "contiguous", "contiguous"),
    ("empty 2-d ids", (), (0, 3), "contiguous", "contiguous"),
    ("2-d ids", (IdsRun(0, 6, 1, 3),), (2, 3), "contiguous", "contiguous"),
    ("3-d ids", (IdsRun(0, 12, 2, 5),), (2, 2, 3), "contiguous", "contiguous"),
    ("transposed ids", (IdsRun(0, 15, 1, 5),), (3, 5), "transposed", "contiguous"),
    ("sliced ids", (IdsRun(4, 9, -1, 5),), None, "sliced", "contiguous"),
    ("expanded ids", (IdsRun(3, 12, 0),), (4, 3), "expanded", "contiguous"),
    ("transposed table", (IdsRun(0, 7, 3, 5),), None, "contiguous", "transposed"),
    ("sliced table", (IdsRun(0, 7, 3, 5),), None, "contiguous", "sliced"),
    ("offset table", (IdsRun(0, 7, 3, 5),), None, "contiguous", "offset"),
)


#: Rows of the table on the ``N`` axis: a prime, so that no block size divides the pattern;
#: enough that no id repeats 256 times in 2**17 ids (at most 252), few enough that rows
#: repeat and that a one-hot of 2**17 ids stays at 68 M entries.
_N_ROWS = 521
#: A short input with repeats over 3 rows, ids 2, 0, 0, 1, 0: the repeated row is the first
#: in sorted order, where a backward that mixes up the counts of sorted groups goes wrong.
_REPEATS = (IdsRun(2, 1), IdsRun(0, 2, 0), IdsRun(1, 1), IdsRun(0, 1))


def _bad_lookups(
    options: Sequence[str],
    turns: _Turns,
    make: Callable[[tuple[IdsRun, ...], int, dict[str, Any], torch.dtype, str], Any],
    v: int = 1,
) -> Iterator[Boundary]:
    """Bad input at its edges, on the CPU only (on CUDA it is a device-side assert).

    ``v`` is the table's rows: 1, the smallest table, where a failure is already minimal; a
    sharded table takes a row per rank, so that no rank's shard is empty (an empty shard
    fails on its own, and would pass for a refusal).
    """
    if "cpu" not in turns.devices:
        return
    for index in (torch.int64, torch.int32):
        lowest = torch.iinfo(index).min
        tail = 2**8 + 1  # a bad id in the last position, past a block of 256
        bad_ids = [
            (f"id -1 ({dtype_name(index)})", (IdsRun(-1, 1),), "negative id -1"),
            (f"id V ({dtype_name(index)})", (IdsRun(v, 1),), f"id {v} >= V = {v}"),
            (f"the most negative id ({dtype_name(index)})", (IdsRun(lowest, 1),),
             f"negative id {lowest}"),
            (f"id V in position {tail - 1} of {tail} ({dtype_name(index)})",
             (IdsRun(0, tail - 1, 1, v), IdsRun(v, 1)), f"id {v} >= V = {v}"),
        ]  # fmt: skip
        for what, runs, why in bad_ids:
            yield Boundary("bad input", None, what, make(runs, v, {}, index, why))
    floating = make((IdsRun(0, 1), IdsRun(1, 1)), v, {}, torch.float32, "floating-point ids")
    yield Boundary("bad input", None, "floating ids", floating)
    if "padding_idx" in options:
        for padding in (v, -v - 1):
            why = f"padding_idx={padding} outside [-{v}, {v})"
            case = make((IdsRun(0, 2),), v, {"padding_idx": padding}, torch.int64, why)
            yield Boundary("bad input", None, f"padding_idx = {padding} with V = {v}", case)


# --- values at the limits of a dtype --------------------------------------------------------


def value_limits(dtype: torch.dtype) -> tuple[float, float, float]:
    """The largest finite value of ``dtype``, its smallest normal and its smallest subnormal."""
    info = torch.finfo(dtype)
    return float(info.max), float(info.smallest_normal), float(info.smallest_normal) * info.eps


def _fits_once(dtype: torch.dtype) -> float:
    """``0.75 * 2**e`` with ``2**e`` just past ``dtype``'s largest value: it fits, twice it not."""
    return math.ldexp(0.75, math.frexp(float(torch.finfo(dtype).max))[1])


def _pair(row: int, x: float) -> Entries:
    """``+x`` and ``-x`` in the two columns of ``row``."""
    return ((row, 0, x), (row, 1, -x))


#: The ids of every value example, ``[1, 2, 1]`` into a ``(3, 2)`` table (bags ``[1, 2]`` and
#: ``[1]`` at offsets ``(0, 2)``): row 1's gradient sums upstream rows 0 and 2 (bags 0 and 1).
_VALUE_IDS = (IdsRun(1, 2), IdsRun(1, 1))
#: Options left out of the value examples: a renorm's bound is relative to the row (it says
#: nothing at the largest values, where torch's own norm overflows), and drawn per-sample
#: weights above 1 would carry a bag past the largest value. Bags leave out
#: ``scale_grad_by_freq`` too: the value ids repeat row 1 beside row 2, where torch's own CPU
#: backward divides by another row's count (``bag-scale-grad-by-freq-count`` in
#: ``_engine.torch_defects``), which is not what these examples are about.
_NOT_AT_VALUES = ("max_norm", "per_sample_weights")
_NOT_IN_VALUE_BAGS = (*_NOT_AT_VALUES, "scale_grad_by_freq")


def value_sets(dtype: torch.dtype, scaled: bool = False) -> list[tuple[str, Entries, Entries]]:
    """The value examples of ``dtype``: ``(what, table entries, upstream gradient entries)``.

    Each crosses one boundary of magnitude on the ids ``[1, 2, 1]`` (bags ``[1, 2]``, ``[1]``),
    and every exact value, and every sum of terms of one sign, stays within ``dtype``'s range
    (the oracle holds a result to the exact value, never to an infinity); no two rows of a bag
    tie (``max``'s choice among ties is another boundary's):

    - the largest finite value ``M`` in the table and the gradients, ``+M`` and ``-M`` summed
      on one row (a bag ``[M, -M]``; a narrower copy or accumulator gives ``inf`` or NaN);
    - the smallest normal and subnormal values (a flush to zero loses them), and a ``-0.0``;
      a row or bag that sums or halves them gets even multiples of the smallest subnormal,
      so that every correct order of operations is exact;
    - sums past the largest value of a narrower dtype, the widest whose largest value is
      below half of ``dtype``'s (bfloat16 and float32 gradients, rows and bag sums past
      float16's 65,504; float64's past float32's range), each term within it;
    - with ``scaled`` (``scale_grad_by_freq``), where twice the dtype's largest value still
      fits float32 (float16): a row's gradient sum past the dtype's range whose quotient by
      its count is within it. Torch scales each occurrence; a kernel that sums first in the
      dtype overflows (a float32 accumulator does not).

    Args:
        dtype: the table's dtype.
        scaled: include the example of ``scale_grad_by_freq``.

    Returns:
        The examples, the entries as [`Entries`][embedding_equivalence._draw.recipes.Entries].
    """
    top, tiny, sub = value_limits(dtype)
    sets = [
        ("the largest finite values, +x and -x on one row", _pair(1, top) + _pair(2, -top),
         _pair(0, top) + _pair(1, -top) + _pair(2, -top)),
        ("the smallest normal and subnormal values",
         ((1, 0, tiny), (1, 1, -sub), (2, 0, 2 * sub), (2, 1, 3 * sub)),
         ((0, 0, 2 * sub), (0, 1, tiny), (1, 0, -sub), (1, 1, -0.0), (2, 0, 2 * sub),
          (2, 1, -2 * sub))),
    ]  # fmt: skip
    narrow = next((n for n in (torch.float32, torch.float16) if 2 * value_limits(n)[0] < top), None)
    if narrow is not None:
        x = _fits_once(narrow)
        what = f"sums past {dtype_name(narrow)}'s largest value"
        sets.append((what, _pair(1, x) + _pair(2, x / 2), _pair(0, x) + _pair(1, x) + _pair(2, x)))
    if scaled and 2 * top < value_limits(torch.float32)[0]:
        x = _fits_once(dtype)
        what = "a row's gradient sum past the largest value, before scale_grad_by_freq divides"
        sets.append((what, (), _pair(0, x) + _pair(2, x)))
    return sets
