"""Boundary examples: the sizes and edges where embedding kernels break, checked in every run.

Real embedding kernels break past a size: a launch grid of ``numel // BLOCK`` programs drops
the last partial block, a column loop in vectors of 128 drops the tail of a width, a per-row
counter kept in a byte wraps at 256 repeats, a padding row learns only for inputs longer than
768 (pytorch#28716), lookups come back zero past a width of 1,024 (torchrec#3673). Random
small examples do not reach those sizes, so whether a run catches such a bug would depend on
its seed. Every verifier therefore runs this fixed phase first, the same under every seed:

- **edges**: 0-d, empty and multi-dimensional ids, non-contiguous ids and tables, in every
  dtype requested;
- **options**: each requested option and each combination of them, on a 0-d id (the padding
  row) and on a short input with repeats;
- **bad input** at its edges (CPU only): id ``-1``, id ``V``, the most negative id of the
  index dtype, a bad id in the last position of a long input, floating ids, ``padding_idx``
  at ``-V - 1`` and ``V``;
- **axes**, one at a time while the others stay small: the count of one repeated id, the
  width ``D``, the number of ids ``N`` and the vocabulary ``V`` at ``2**k - 1``, ``2**k`` and
  ``2**k + 1`` up to [`LIMITS`][], ids ``0`` and ``V - 1`` included.

The dtypes (and devices) requested take turns along each axis, so that the phase stays cheap
and every dtype meets sizes past every power of two. The lists are data, here, read by every
verifier: [`embedding_boundaries`][], [`bag_boundaries`][] and [`quantized_boundaries`][] (and
``distributed._boundaries`` for sharded tables) turn them into cases, and
[`run_boundaries`][embedding_equivalence._engine.boundary_phase.run_boundaries] checks them in
order.
A failure on an axis is narrowed down to the first failing size by bisection (``fails from
N = 769; passes at 768``), and the options of the failing case are dropped one by one while it
still fails.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..forms.options import option_applies
from ..forms.validation import dtype_name
from .cases import EmbeddingBagCase, EmbeddingCase, IdsRecipe, IdsRun, WeightRecipe

__all__ = [
    "LIMITS",
    "Boundary",
    "around_powers_of_two",
    "bag_boundaries",
    "embedding_boundaries",
    "option_sets",
    "quantized_boundaries",
]

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
    values = {1}
    k = 1
    while (1 << k) - 1 <= limit:
        values.update(x for x in ((1 << k) - 1, 1 << k, (1 << k) + 1) if x <= limit)
        k += 1
    return tuple(sorted(values))


@dataclass(frozen=True)
class Boundary:
    """One boundary example: a case, and where it stands.

    Attributes:
        axis: ``"N"``, ``"D"``, ``"V"``, ``"repeats"``, ``"bag length"``, ``"bags"``,
            ``"empty bags"`` for a size, or ``"edge"``, ``"options"``, ``"bad input"`` for a
            named edge.
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


def option_sets(options: Sequence[str], exclusive: Sequence[tuple[str, str]] = ()) -> list[tuple]:
    """Every non-empty combination of ``options``, but pairs that cannot be combined.

    Args:
        options: the requested options, in the order given.
        exclusive: pairs never combined (``sparse`` with ``scale_grad_by_freq``).

    Returns:
        The combinations, smallest first.
    """
    sets = []
    for size in range(1, len(options) + 1):
        for combo in itertools.combinations(options, size):
            if any(a in combo and b in combo for a, b in exclusive):
                continue
            sets.append(combo)
    return sets


def _largest_set(options: Sequence[str], exclusive: Sequence[tuple[str, str]]) -> tuple:
    """The requested options with the second of each exclusive pair left out."""
    dropped = {b for a, b in exclusive if a in options and b in options}
    return tuple(o for o in options if o not in dropped)


_EMBEDDING_EXCLUSIVE = (("scale_grad_by_freq", "sparse"),)


#: The norms ``max_norm`` takes besides the default 2: the 1-norm, an odd power and the
#: largest magnitude (a kernel that always takes the 2-norm fails each).
_OTHER_NORMS = (1.0, 3.0, math.inf)


def _lookup_kwargs(
    options: Sequence[str], padding_row: int, norm_type: float = 2.0
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if "padding_idx" in options:
        kwargs["padding_idx"] = padding_row
    if "max_norm" in options:
        kwargs["max_norm"] = 1.0
        kwargs["norm_type"] = norm_type
    if "scale_grad_by_freq" in options:
        kwargs["scale_grad_by_freq"] = True
    if "sparse" in options:
        kwargs["sparse"] = True
    return kwargs


def _table(
    v: int, d: int, dtype: torch.dtype, device: str, layout: str = "contiguous"
) -> WeightRecipe:
    native = v * d > NATIVE_ELEMENTS
    return WeightRecipe(v, d, dtype, device, _TABLE_SEED + v + d, (), layout, native)


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
) -> EmbeddingCase:
    ids = IdsRecipe.from_runs(runs, shape, index, device, ids_layout)
    table = _table(v, d, dtype, device, table_layout)
    return EmbeddingCase(ids, table, kwargs, _GRAD_SEED, invalid)


def _size_axis(
    axis: str,
    turns: _Turns,
    make: Callable[[int, torch.dtype, torch.dtype, str], Any],
    values: Sequence[int] | None = None,
) -> Iterator[Boundary]:
    for i, value in enumerate(values if values is not None else around_powers_of_two(LIMITS[axis])):
        dtype, index, device = turns.at(i)

        def remake(x: int, dtype=dtype, index=index, device=device) -> Any:
            return make(x, dtype, index, device)

        yield Boundary(axis, value, "", make(value, dtype, index, device), remake)


def embedding_boundaries(
    options: Sequence[str], dtypes: Sequence[torch.dtype], devices: Sequence[str]
) -> Iterator[Boundary]:
    """The boundary examples of ``F.embedding``, in the order they run.

    Args:
        options: the requested options (``padding_idx``, ``max_norm``, ...).
        dtypes: the table dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        [`Boundary`][] examples: edges, options, bad input, then the size axes.
    """
    turns = _Turns(tuple(dtypes), tuple(devices))
    all_options = _largest_set(options, _EMBEDDING_EXCLUSIVE)
    # Edges, in every dtype: shapes and layouts of the ids, layouts of the table.
    edges: list[tuple[str, tuple[IdsRun, ...], tuple[int, ...] | None, str, str]] = [
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
    ]
    for i, (what, runs, shape, ids_layout, table_layout) in enumerate(edges):
        for j, dtype in enumerate(turns.dtypes):
            _, index, device = turns.at(i + j)
            kwargs = _lookup_kwargs(all_options, 2)
            case = _embedding(
                runs, 5, 3, kwargs, dtype, index, device, shape=shape, ids_layout=ids_layout,
                table_layout=table_layout,
            )  # fmt: skip
            yield Boundary("edge", None, f"{what} ({dtype_name(dtype)})", case)
    # Each combination of the options, on a 0-d padding id and a short input with repeats.
    for k, combo in enumerate(option_sets(options, _EMBEDDING_EXCLUSIVE)):
        for j, dtype in enumerate(turns.dtypes):
            _, index, device = turns.at(k + j)
            for padding, runs, shape in ((1, (IdsRun(1, 1),), ()), (-1, _REPEATS, None)):
                kwargs = _lookup_kwargs(combo, padding)
                case = _embedding(runs, 3, 4, kwargs, dtype, index, device, shape=shape)
                ids = "0-d id" if shape == () else "ids [2, 0, 0, 1, 0]"
                what = f"{', '.join(combo)} on {ids} ({dtype_name(dtype)})"
                yield Boundary("options", None, what, case)
    # max_norm in the other norms, every requested option on.
    if "max_norm" in options:
        for k, norm in enumerate(_OTHER_NORMS):
            dtype, index, device = turns.at(k)
            kwargs = _lookup_kwargs(all_options, -1, norm)
            case = _embedding(_REPEATS, 3, 4, kwargs, dtype, index, device)
            what = f"max_norm with norm_type={norm} on ids [2, 0, 0, 1, 0] ({dtype_name(dtype)})"
            yield Boundary("options", None, what, case)
    yield from _bad_lookups(options, turns, _bad_embedding)
    # The size axes, one at a time, every requested option on.

    def repeats(k: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        runs = (IdsRun(1, k, 0), IdsRun(2, 1))  # row 1 k times, then row 2 once
        return _embedding(runs, 3, 2, _lookup_kwargs(all_options, 2), dtype, index, device)

    def width(d: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        runs = (IdsRun(0, 4, 3, 5),)  # 0, 3, 1, 4: the first and the last row
        return _embedding(runs, 5, d, _lookup_kwargs(all_options, 3), dtype, index, device)

    def count(n: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        runs = (IdsRun(0, n, 1, _N_ROWS),)  # at most 252 repeats of a row
        return _embedding(runs, _N_ROWS, 3, _lookup_kwargs(all_options, 1), dtype, index, device)

    def vocab(v: int, dtype: torch.dtype, index: torch.dtype, device: str) -> EmbeddingCase:
        runs = (IdsRun(0, 1), IdsRun(v - 1, 1), IdsRun(v // 2, 1), IdsRun(v - 1, 1))
        kwargs = _lookup_kwargs(_past_renorm_copies(all_options, v), v // 2)
        return _embedding(runs, v, 1, kwargs, dtype, index, device)

    # N first: its ids repeat at most 252 times, so a failure there is not the repeats'.
    yield from _size_axis("N", turns, count)
    yield from _size_axis("D", turns, width)
    yield from _size_axis("repeats", turns, repeats)
    yield from _size_axis("V", turns, vocab)


#: Rows of the table on the ``N`` axis: a prime, so that no block size divides the pattern;
#: enough that no id repeats 256 times in 2**17 ids (at most 252), few enough that rows
#: repeat and that a one-hot of 2**17 ids stays at 68 M entries.
_N_ROWS = 521
#: A short input with repeats over 3 rows, ids 2, 0, 0, 1, 0: the repeated row is the first
#: in sorted order, where a backward that mixes up the counts of sorted groups goes wrong.
_REPEATS = (IdsRun(2, 1), IdsRun(0, 2, 0), IdsRun(1, 1), IdsRun(0, 1))


#: Rows past which the ``V`` axis runs without ``max_norm``: beyond them the oracle knows the
#: table before the renorm by a digest of every row, a pass over the table before and after
#: each call (seconds at 2**24 rows), and the renorm of large tables is
#: ``verify_embedding(vocab_sizes=...)``'s.
RENORM_ROWS = 1 << 22


def _past_renorm_copies(options: Sequence[str], rows: int) -> tuple[str, ...]:
    """``options`` without ``max_norm`` for tables past [`RENORM_ROWS`][]."""
    return tuple(o for o in options if rows <= RENORM_ROWS or o != "max_norm")


def _bad_embedding(
    runs: tuple[IdsRun, ...], v: int, kwargs: dict[str, Any], index: torch.dtype, why: str
) -> EmbeddingCase:
    return _embedding(runs, v, 1, kwargs, torch.float32, index, "cpu", invalid=why)


def _bad_lookups(
    options: Sequence[str],
    turns: _Turns,
    make: Callable[[tuple[IdsRun, ...], int, dict[str, Any], torch.dtype, str], Any],
) -> Iterator[Boundary]:
    """Bad input at its edges, on the CPU only (on CUDA it is a device-side assert)."""
    if "cpu" not in turns.devices:
        return
    v = 1  # the smallest table: a failure here is already minimal
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


# --- bags -------------------------------------------------------------------------------------

_BAG_EXCLUSIVE = (("scale_grad_by_freq", "sparse"),)


def _bag_kwargs(options: Sequence[str], mode: str, padding_row: int) -> tuple[dict[str, Any], bool]:
    """The keyword options of ``options`` that ``mode`` accepts, and whether to weight ids."""
    usable = [o for o in options if option_applies(o, mode)]
    kwargs = _lookup_kwargs([o for o in usable if o != "per_sample_weights"], padding_row)
    if "include_last_offset" in usable:
        kwargs["include_last_offset"] = True
    return kwargs, "per_sample_weights" in usable


def _bag(
    runs: tuple[IdsRun, ...],
    starts: tuple[int, ...] | None,
    v: int,
    d: int,
    mode: str,
    options: Sequence[str],
    padding_row: int,
    dtype: torch.dtype,
    index: torch.dtype,
    device: str,
    *,
    shape: tuple[int, ...] | None = None,
    specials: tuple[tuple[int, int, float], ...] = (),
    invalid: str | None = None,
    raw: dict[str, Any] | None = None,
    end: bool = True,
) -> EmbeddingBagCase:
    """A bag call: ids ``runs``, bags starting at ``starts`` (``None``: a 2-D input).

    Under ``include_last_offset`` the end of the input is appended to the offsets, unless
    ``end`` is false (ids after the last offset then belong to no bag).
    """
    kwargs, weighted = _bag_kwargs(options, mode, padding_row)
    if raw is not None:
        kwargs = raw
    ids = IdsRecipe.from_runs(runs, shape, index, device)
    offsets = starts
    if starts is not None and end and kwargs.get("include_last_offset"):
        offsets = (*starts, len(ids.values))
    table = _table(v, d, dtype, device)
    if specials:
        table = dataclasses.replace(table, specials=specials)
    psw = _GRAD_SEED + 1 if weighted else None
    return EmbeddingBagCase(ids, table, offsets, index, mode, kwargs, psw, _GRAD_SEED, invalid)


def bag_boundaries(
    options: Sequence[str],
    modes: Sequence[str],
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
) -> Iterator[Boundary]:
    """The boundary examples of ``F.embedding_bag``, in the order they run.

    The modes take turns with the dtypes: every mode meets every axis past every power of
    two. Bags at their edges: an empty bag first, last, all bags empty, no bags at all, 2-D
    inputs (one of ``(B, 0)``), ids after the last offset under ``include_last_offset``; bad
    offsets (not starting at 0, decreasing, past the end);
    then the length of one bag (first or last), the number of bags, the number of empty bags
    at the start and at the end (around two short bags), ``D`` and ``V``.

    Args:
        options: the requested options.
        modes: the requested modes.
        dtypes: the table dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        [`Boundary`][] examples.
    """
    turns = _Turns(tuple(dtypes), tuple(devices))
    all_options = _largest_set(options, _BAG_EXCLUSIVE)
    n_modes = len(modes)

    def at(i: int) -> tuple[str, torch.dtype, torch.dtype, str]:
        dtype, index, device = turns.at(i // n_modes)
        return modes[i % n_modes], dtype, index, device

    # (what, ids, starts (None: 2-D), shape, specials)
    edges: list[tuple[str, tuple[IdsRun, ...], Any, Any, tuple]] = [
        ("an empty bag first", (IdsRun(1, 2), IdsRun(0, 1)), (0, 0, 2), None, ()),
        ("an empty bag last", (IdsRun(1, 2), IdsRun(0, 1)), (0, 2, 3), None, ()),
        ("every bag empty", (), (0, 0), None, ()),
        ("no bags", (), (), None, ()),
        ("2-d input", (IdsRun(0, 6, 1, 3),), None, (3, 2), ()),
        ("2-d input of shape (3, 0)", (), None, (3, 0), ()),
        ("2-d input of shape (0, 3)", (), None, (0, 3), ()),
    ]
    k = 0
    for what, runs, starts, shape, specials in edges:
        for m in range(n_modes):
            mode, dtype, index, device = at(k)
            mode = modes[m]
            k += 1
            case = _bag(runs, starts, 3, 2, mode, all_options, 2, dtype, index, device,
                        shape=shape, specials=specials)  # fmt: skip
            yield Boundary("edge", None, f"{what} (mode={mode!r}, {dtype_name(dtype)})", case)
    if "include_last_offset" in options:
        for mode in modes:
            _, dtype, index, device = at(k)
            k += 1
            raw = {"include_last_offset": True}
            case = _bag((IdsRun(0, 3),), (0, 1), 3, 2, mode, (), 2, dtype, index, device, raw=raw,
                        end=False)  # fmt: skip
            yield Boundary("edge", None, f"an id after the last offset (mode={mode!r})", case)
    for combo in option_sets(options, _BAG_EXCLUSIVE):
        for mode in modes:
            if not all(option_applies(o, mode) for o in combo):
                continue
            _, dtype, index, device = at(k)
            k += 1
            case = _bag(_REPEATS, (0, 2), 3, 4, mode, combo, -1, dtype, index, device)
            text = (
                f"{', '.join(combo)} on bags [2, 0], [0, 1, 0] (mode={mode!r}, {dtype_name(dtype)})"
            )
            yield Boundary("options", None, text, case)
    if "cpu" in turns.devices:

        def bad(
            runs: tuple[IdsRun, ...], v: int, kwargs: dict[str, Any], index: torch.dtype, why: str
        ) -> EmbeddingBagCase:
            return _bag(runs, (0,), v, 1, modes[0], (), 0, torch.float32, index, "cpu",
                        invalid=why, raw=kwargs)  # fmt: skip

        yield from _bad_lookups(options, turns, bad)
        bad_offsets = [
            ("offsets not starting at 0", (1, 2)),
            ("decreasing offsets", (0, 2, 1)),
            ("last offset past the end", (0, 4)),
        ]
        for what, starts in bad_offsets:
            for mode in modes:
                case = _bag((IdsRun(0, 3),), starts, 3, 1, mode, (), 0, torch.float32,
                            torch.int64, "cpu", invalid=f"{what} (offsets={list(starts)})",
                            raw={})  # fmt: skip
                yield Boundary("bad input", None, f"{what} (mode={mode!r})", case)

    def axis(name: str, build: Callable[..., EmbeddingBagCase]) -> Iterator[Boundary]:
        for i, value in enumerate(around_powers_of_two(LIMITS[name])):
            mode, dtype, index, device = at(i)

            def remake(x: int, mode=mode, dtype=dtype, index=index, device=device) -> Any:
                return build(x, mode, dtype, index, device)

            yield Boundary(name, value, "", build(value, mode, dtype, index, device), remake)

    def length(n: int, mode: str, dtype: torch.dtype, index: torch.dtype, device: str) -> Any:
        # One bag of n ids, first for even n and last for odd n, beside a bag of two.
        long, short = IdsRun(0, n, 1, 7), IdsRun(5, 2, 1)
        runs, starts = ((long, short), (0, n)) if n % 2 == 0 else ((short, long), (0, 2))
        return _bag(runs, starts, 7, 2, mode, all_options, 3, dtype, index, device)

    def count(b: int, mode: str, dtype: torch.dtype, index: torch.dtype, device: str) -> Any:
        runs = (IdsRun(0, b, 1, _N_ROWS),)  # b bags of one id each
        starts = tuple(range(b))
        return _bag(runs, starts, _N_ROWS, 2, mode, all_options, 1, dtype, index, device)

    def empty(e: int, mode: str, dtype: torch.dtype, index: torch.dtype, device: str) -> Any:
        # e empty bags, bags [0, 1, 2] and [5, 6] (2 the padding row), e empty bags.
        runs = (IdsRun(0, 3, 1, 7), IdsRun(5, 2, 1))
        starts = (0,) * e + (0, 3) + (5,) * e
        return _bag(runs, starts, 7, 2, mode, all_options, 2, dtype, index, device)

    def width(d: int, mode: str, dtype: torch.dtype, index: torch.dtype, device: str) -> Any:
        runs = (IdsRun(0, 4, 3, 5),)
        return _bag(runs, (0, 2), 5, d, mode, all_options, 3, dtype, index, device)

    def vocab(v: int, mode: str, dtype: torch.dtype, index: torch.dtype, device: str) -> Any:
        runs = (IdsRun(0, 1), IdsRun(v - 1, 1), IdsRun(v // 2, 1), IdsRun(v - 1, 1))
        options = _past_renorm_copies(all_options, v)
        return _bag(runs, (0, 2), v, 1, mode, options, v // 2, dtype, index, device)

    yield from axis("bag length", length)
    yield from axis("bags", count)
    yield from axis("empty bags", empty)
    yield from axis("D", width)
    yield from axis("V", vocab)


# --- quantized tables ---------------------------------------------------------------------------


def quantized_boundaries(
    scheme: str,
    symmetric: bool,
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
) -> Iterator[Boundary]:
    """The boundary examples of a quantized lookup, in the order they run.

    Edges of the ids (0-d, empty, 2-D, non-contiguous), bad ids at their edges, then ``N``,
    ``D`` (even values for ``"uint4"``, two columns a byte) and ``V``.

    Args:
        scheme: the quantization scheme.
        symmetric: ``"int8"`` without zero points.
        dtypes: the scale dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        [`Boundary`][] examples.
    """
    from .quantized import QuantizedEmbeddingCase, QuantizedTableRecipe

    turns = _Turns(tuple(dtypes), tuple(devices))
    packed = scheme == "uint4"

    def case(
        runs: tuple[IdsRun, ...],
        v: int,
        d: int,
        dtype: torch.dtype,
        index: torch.dtype,
        device: str,
        shape: tuple[int, ...] | None = None,
        layout: str = "contiguous",
        invalid: str | None = None,
    ) -> QuantizedEmbeddingCase:
        ids = IdsRecipe.from_runs(runs, shape, index, device, layout)
        table = QuantizedTableRecipe(scheme, v, d + d % 2 if packed else d, dtype, device,
                                     _TABLE_SEED + v + d, (-2, 2), symmetric)  # fmt: skip
        return QuantizedEmbeddingCase(ids, table, invalid)

    edges: list[tuple[str, tuple[IdsRun, ...], Any, str]] = [
        ("0-d ids", (IdsRun(2, 1),), (), "contiguous"),
        ("empty ids", (), (0,), "contiguous"),
        ("2-d ids", (IdsRun(0, 6, 1, 3),), (2, 3), "contiguous"),
        ("transposed ids", (IdsRun(0, 15, 1, 5),), (3, 5), "transposed"),
        ("sliced ids", (IdsRun(4, 9, -1, 5),), None, "sliced"),
    ]
    for i, (what, runs, shape, layout) in enumerate(edges):
        for j, dtype in enumerate(turns.dtypes):
            _, index, device = turns.at(i + j)
            made = case(runs, 5, 4, dtype, index, device, shape, layout)
            yield Boundary("edge", None, f"{what} ({dtype_name(dtype)})", made)

    def bad(
        runs: tuple[IdsRun, ...], v: int, kwargs: dict[str, Any], index: torch.dtype, why: str
    ) -> QuantizedEmbeddingCase:
        del kwargs  # a quantized lookup has no padding_idx
        return case(runs, v, 2, turns.dtypes[0], index, "cpu", invalid=why)

    yield from _bad_lookups((), turns, bad)
    axes: dict[str, Callable[..., QuantizedEmbeddingCase]] = {
        "D": lambda d, dt, ix, dev: case((IdsRun(0, 4, 3, 5),), 5, d, dt, ix, dev),
        "N": lambda n, dt, ix, dev: case((IdsRun(0, n, 1, _N_ROWS),), _N_ROWS, 2, dt, ix, dev),
        "V": lambda v, dt, ix, dev: case(
            (IdsRun(0, 1), IdsRun(v - 1, 1), IdsRun(v // 2, 1)), v, 2, dt, ix, dev
        ),
    }
    for name, make in axes.items():
        values = around_powers_of_two(LIMITS["quantized V" if name == "V" else name])
        if packed and name == "D":
            values = tuple(sorted({x + x % 2 for x in values}))
        yield from _size_axis(name, turns, make, values)
