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
- **values** at the limits of each dtype (``boundary_data.value_sets``): table entries and
  upstream gradients at the largest finite value and the smallest normal and subnormal
  ones, ``+x`` and ``-x`` on one row, a ``-0.0``, sums past a narrower dtype's range and,
  under ``scale_grad_by_freq``, a float16 sum past its range before the division; through
  every bag mode; quantized scales at their limits with stored values and zero points at
  theirs. Each is a ``(3, 2)`` table, cheap, before the sizes: a kernel that accumulates in a
  narrower dtype, flushes subnormals or divides after an overflowing sum fails here at once;
- **bad input** at its edges (CPU only): id ``-1``, id ``V``, the most negative id of the
  index dtype, a bad id in the last position of a long input, floating ids, ``padding_idx``
  at ``-V - 1`` and ``V``;
- **axes**, one at a time while the others stay small: the count of one repeated id, the
  width ``D``, the number of ids ``N`` and the vocabulary ``V`` at ``2**k - 1``, ``2**k`` and
  ``2**k + 1`` up to ``boundary_data.LIMITS``, ids ``0`` and ``V - 1`` included.

The dtypes (and devices) requested take turns along each axis, so that the phase stays cheap
and every dtype meets sizes past every power of two; past ``NATIVE_ELEMENTS`` (``2**20``) rows
the ``V`` axis takes the narrowest requested dtypes only (``_Turns.narrowest``): such a table
costs its bytes at every pass over it, and the row count, not the dtype, is what it tests
(an id past ``2**k`` on a table of one column). The lists are data, here, read by every
verifier: they are in ``boundary_data.py``, and [`embedding_boundaries`][], [`bag_boundaries`][]
and [`quantized_boundaries`][] (and ``distributed._boundaries`` for sharded tables) turn them
into cases, and
[`run_boundaries`][embedding_equivalence._engine.boundary_phase.run_boundaries] checks them in
order.
A failure on an axis is narrowed down to the first failing size by bisection (``fails from
N = 769; passes at 768``), and the options of the failing case are dropped one by one while it
still fails.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import torch

from ..forms.dtypes import dtype_name
from ..forms.options import option_applies
from ..forms.quantized import check_scheme
from . import boundary_data as bd
from .cases import EmbeddingBagCase, EmbeddingCase
from .recipes import Entries, IdsRecipe, IdsRun

#: The edges of ``boundary_data._EDGES`` that a quantized lookup meets: its ids'.
_QUANTIZED_EDGES = ("0-d ids", "empty ids", "2-d ids", "transposed ids", "sliced ids")

#: Rows past which the ``V`` axis runs without ``max_norm``: beyond them the oracle knows the
#: table before the renorm by a digest of every row, a pass over the table before and after
#: each call (seconds at 2**24 rows), and the renorm of large tables is
#: ``verify_embedding(vocab_sizes=...)``'s.
RENORM_ROWS = 1 << 22


def _past_renorm_copies(options: Sequence[str], rows: int) -> tuple[str, ...]:
    """``options`` without ``max_norm`` for tables past [`RENORM_ROWS`][]."""
    return tuple(o for o in options if rows <= RENORM_ROWS or o != "max_norm")


def _edges(
    turns: bd._Turns, edges: Sequence[tuple[Any, ...]], make: Callable[..., Any]
) -> Iterator[bd.Boundary]:
    """Each edge ``(what, *parts)`` in every dtype: ``make(*parts, dtype, index, device)``.

    The index dtypes and devices take turns along the edges.
    """
    for i, (what, *parts) in enumerate(edges):
        for j, dtype in enumerate(turns.dtypes):
            _, index, device = turns.at(i + j)
            case = make(*parts, dtype, index, device)
            yield bd.Boundary("edge", None, f"{what} ({dtype_name(dtype)})", case)


def _value_boundaries(
    turns: bd._Turns, sets: Callable[[torch.dtype], list[Any]], make: Callable[..., Any], label: str
) -> Iterator[bd.Boundary]:
    """Each value example of each dtype: ``make(dtype, index, device, values=(table, gradient))``.

    The index dtypes and devices take turns along the examples; ``label`` follows ``what``.
    """
    turn = itertools.count()
    for dtype in turns.dtypes:
        for what, table, grads in sets(dtype):
            _, index, device = turns.at(next(turn))
            case = make(dtype, index, device, values=(table, grads))
            yield bd.Boundary("value", None, f"{what} ({label}{dtype_name(dtype)})", case)


def embedding_value_boundaries(
    turns: bd._Turns, options: Sequence[str], label: str = ""
) -> Iterator[bd.Boundary]:
    """The value examples of a lookup: ``value_sets`` of each dtype on a ``(3, 2)`` table.

    The options are on but those left out at the values (``_NOT_AT_VALUES``, both of
    ``boundary_data``); padding row 0 is not looked up. ``label`` follows what each example is
    (a sharded phase names the ranks there).
    """
    at_values = [o for o in options if o not in bd._NOT_AT_VALUES]
    yield from _value_boundaries(
        turns,
        lambda dt: bd.value_sets(dt, "scale_grad_by_freq" in at_values),
        partial(bd._embedding, bd._VALUE_IDS, 3, 2, bd._lookup_kwargs(at_values, 0)),
        label,
    )


def embedding_boundaries(
    options: Sequence[str], dtypes: Sequence[torch.dtype], devices: Sequence[str]
) -> Iterator[bd.Boundary]:
    """The boundary examples of ``F.embedding``, in the order they run.

    Args:
        options: the requested options (``padding_idx``, ``max_norm``, ...).
        dtypes: the table dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        ``Boundary`` examples: edges, options, values, bad input, then the size axes.
    """
    turns = bd._Turns(tuple(dtypes), tuple(devices))
    all_options = bd._largest_set(options)

    def lookup(runs: Any, v: int, d: int, padding: int, *turn: Any, **kw: Any) -> EmbeddingCase:
        """A lookup with every requested option on (``padding``: the padding row)."""
        kwargs = bd._lookup_kwargs(_past_renorm_copies(all_options, v), padding)
        return bd._embedding(runs, v, d, kwargs, *turn, **kw)

    # Edges, in every dtype: shapes and layouts of the ids, layouts of the table.
    def edge(runs: Any, shape: Any, ids_layout: str, table_layout: str, *turn: Any) -> Any:
        return lookup(runs, 5, 3, 2, *turn, shape=shape, ids_layout=ids_layout,
                      table_layout=table_layout)  # fmt: skip

    yield from _edges(turns, bd._EDGES, edge)
    # Each combination of the options, on a 0-d padding id and a short input with repeats.
    for k, combo in enumerate(bd.option_sets(options)):
        for j, dtype in enumerate(turns.dtypes):
            _, index, device = turns.at(k + j)
            for padding, runs, shape in ((1, (IdsRun(1, 1),), ()), (-1, bd._REPEATS, None)):
                kwargs = bd._lookup_kwargs(combo, padding)
                case = bd._embedding(runs, 3, 4, kwargs, dtype, index, device, shape=shape)
                ids = "0-d id" if shape == () else "ids [2, 0, 0, 1, 0]"
                what = f"{', '.join(combo)} on {ids} ({dtype_name(dtype)})"
                yield bd.Boundary("options", None, what, case)
    # max_norm in the other norms, every requested option on.
    if "max_norm" in options:
        for k, norm in enumerate(bd._OTHER_NORMS):
            dtype, index, device = turns.at(k)
            kwargs = bd._lookup_kwargs(all_options, -1, norm)
            case = bd._embedding(bd._REPEATS, 3, 4, kwargs, dtype, index, device)
            what = f"max_norm with norm_type={norm} on ids [2, 0, 0, 1, 0] ({dtype_name(dtype)})"
            yield bd.Boundary("options", None, what, case)
    yield from embedding_value_boundaries(turns, all_options)
    yield from bd._bad_lookups(
        options, turns,
        lambda runs, v, kwargs, index, why: bd._embedding(
            runs, v, 1, kwargs, torch.float32, index, "cpu", invalid=why
        ),
    )  # fmt: skip
    # The size axes, one at a time, every requested option on: N first (its ids repeat at most
    # 252 times, so a failure there is not the repeats'), D on ids 0, 3, 1, 4 (the first and
    # the last row), row 1 k times then row 2 once, V past the renorm's rows without max_norm.
    axes: dict[str, Callable[..., EmbeddingCase]] = {
        "N": lambda n, *turn: lookup((IdsRun(0, n, 1, bd._N_ROWS),), bd._N_ROWS, 3, 1, *turn),
        "D": lambda d, *turn: lookup((IdsRun(0, 4, 3, 5),), 5, d, 3, *turn),
        "repeats": lambda k, *turn: lookup((IdsRun(1, k, 0), IdsRun(2, 1)), 3, 2, 2, *turn),
        "V": lambda v, *turn: lookup(_vocab_ids(v), v, 1, v // 2, *turn),
    }
    for axis, make in axes.items():
        yield from bd._size_axis(axis, turns.at, make, large=turns.narrowest)


def _vocab_ids(v: int) -> tuple[IdsRun, ...]:
    """The ids of the ``V`` axis: the first row, the last (twice) and the middle one."""
    return (IdsRun(0, 1), IdsRun(v - 1, 1), IdsRun(v // 2, 1), IdsRun(v - 1, 1))


# --- bags -------------------------------------------------------------------------------------


def _bag_kwargs(options: Sequence[str], mode: str, padding_row: int) -> tuple[dict[str, Any], bool]:
    """The keyword options of ``options`` that ``mode`` accepts, and whether to weight ids."""
    usable = [o for o in options if option_applies(o, mode)]
    kwargs = bd._lookup_kwargs([o for o in usable if o != "per_sample_weights"], padding_row)
    if "include_last_offset" in usable:
        kwargs["include_last_offset"] = True
    return kwargs, "per_sample_weights" in usable


def _bag(
    runs: tuple[IdsRun, ...],
    starts: tuple[int, ...] | None,
    v: int,
    d: int,
    options: Sequence[str],
    padding_row: int,
    mode: str,
    dtype: torch.dtype,
    index: torch.dtype,
    device: str,
    *,
    shape: tuple[int, ...] | None = None,
    invalid: str | None = None,
    raw: dict[str, Any] | None = None,
    values: tuple[Entries, Entries] = ((), ()),
) -> EmbeddingBagCase:
    """A bag call: ids ``runs``, bags starting at ``starts`` (``None``: a 2-D input).

    The keyword options are those of ``options`` that ``_bag_kwargs`` keeps (without
    ``max_norm`` past [`RENORM_ROWS`][]), and under ``include_last_offset`` the end of the input
    is appended to the offsets; or, with ``raw``, the keyword options ``raw`` and the offsets
    ``starts`` as they are (ids after the last offset then belong to no bag). ``values``: the
    entries of the table and of the upstream gradient to place (those of its rows).
    """
    options = _past_renorm_copies(options, v)
    kwargs, weighted = (raw, False) if raw is not None else _bag_kwargs(options, mode, padding_row)
    ids = IdsRecipe.from_runs(runs, shape, index, device)
    offsets = starts
    if starts is not None and raw is None and kwargs.get("include_last_offset"):
        offsets = (*starts, len(ids.values))
    psw = bd._GRAD_SEED + 1 if weighted else None
    table = bd._table(v, d, dtype, device, at=values[0])
    grads = tuple(e for e in values[1] if e[0] < len(starts or ()))
    return EmbeddingBagCase(
        ids, table, offsets, index, mode, kwargs, psw, bd._GRAD_SEED, invalid, grads
    )


def bag_boundaries(
    options: Sequence[str],
    modes: Sequence[str],
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
) -> Iterator[bd.Boundary]:
    """The boundary examples of ``F.embedding_bag``, in the order they run.

    The modes take turns with the dtypes: every mode meets every axis past every power of
    two. Bags at their edges: an empty bag first, last, all bags empty, no bags at all, 2-D
    inputs (one of ``(B, 0)``), ids after the last offset under ``include_last_offset``; the
    value examples in every mode and dtype; bad offsets (not starting at 0, decreasing, past
    the end);
    then the length of one bag (first or last), the number of bags, the number of empty bags
    at the start and at the end (around two short bags), ``D`` and ``V``.

    Args:
        options: the requested options.
        modes: the requested modes.
        dtypes: the table dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        ``Boundary`` examples.
    """
    turns = bd._Turns(tuple(dtypes), tuple(devices))
    all_options = bd._largest_set(options)

    def moded(turn: Callable[[int], tuple[Any, ...]]) -> Callable[[int], tuple[Any, ...]]:
        """``turn`` with the modes taking turns first: ``(mode, dtype, index dtype, device)``."""
        return lambda i: (modes[i % len(modes)], *turn(i // len(modes)))

    at = moded(turns.at)

    # (what, ids, starts (None: 2-D), shape)
    edges: list[tuple[str, tuple[IdsRun, ...], Any, Any]] = [
        ("an empty bag first", (IdsRun(1, 2), IdsRun(0, 1)), (0, 0, 2), None),
        ("an empty bag last", (IdsRun(1, 2), IdsRun(0, 1)), (0, 2, 3), None),
        ("every bag empty", (), (0, 0), None),
        ("no bags", (), (), None),
        ("2-d input", (IdsRun(0, 6, 1, 3),), None, (3, 2)),
        ("2-d input of shape (3, 0)", (), None, (3, 0)),
        ("2-d input of shape (0, 3)", (), None, (0, 3)),
    ]
    turn = itertools.count()  # the turns go on from one group of examples to the next
    for what, runs, starts, shape in edges:
        for _ in modes:
            mode, dtype, index, device = at(next(turn))
            case = _bag(runs, starts, 3, 2, all_options, 2, mode, dtype, index, device, shape=shape)
            yield bd.Boundary("edge", None, f"{what} (mode={mode!r}, {dtype_name(dtype)})", case)
    if "include_last_offset" in options:
        for mode in modes:
            _, dtype, index, device = at(next(turn))
            raw = {"include_last_offset": True}
            case = _bag((IdsRun(0, 3),), (0, 1), 3, 2, (), 2, mode, dtype, index, device, raw=raw)
            yield bd.Boundary("edge", None, f"an id after the last offset (mode={mode!r})", case)
    for combo in bd.option_sets(options):
        for mode in [m for m in modes if all(option_applies(o, m) for o in combo)]:
            _, dtype, index, device = at(next(turn))
            case = _bag(bd._REPEATS, (0, 2), 3, 4, combo, -1, mode, dtype, index, device)
            what = f"{', '.join(combo)} on bags [2, 0], [0, 1, 0]"
            yield bd.Boundary("options", None, f"{what} (mode={mode!r}, {dtype_name(dtype)})", case)
    at_values = [o for o in all_options if o not in bd._NOT_IN_VALUE_BAGS]
    for mode in modes:
        make = partial(_bag, bd._VALUE_IDS, (0, 2), 3, 2, at_values, 0, mode)
        yield from _value_boundaries(turns, bd.value_sets, make, f"mode={mode!r}, ")
    if "cpu" in turns.devices:
        yield from bd._bad_lookups(
            options, turns,
            lambda runs, v, kwargs, index, why: _bag(
                runs, (0,), v, 1, (), 0, modes[0], torch.float32, index, "cpu", invalid=why,
                raw=kwargs,
            ),
        )  # fmt: skip
        bad_offsets = [
            ("offsets not starting at 0", (1, 2)),
            ("decreasing offsets", (0, 2, 1)),
            ("last offset past the end", (0, 4)),
        ]
        for what, starts in bad_offsets:
            for mode in modes:
                why = f"{what} (offsets={list(starts)})"
                case = _bag((IdsRun(0, 3),), starts, 3, 1, (), 0, mode, torch.float32,
                            torch.int64, "cpu", invalid=why)  # fmt: skip
                yield bd.Boundary("bad input", None, f"{what} (mode={mode!r})", case)

    def length(n: int, *turn: Any) -> EmbeddingBagCase:
        # One bag of n ids, first for even n and last for odd n, beside a bag of two.
        long, short = IdsRun(0, n, 1, 7), IdsRun(5, 2, 1)
        runs, starts = ((long, short), (0, n)) if n % 2 == 0 else ((short, long), (0, 2))
        return _bag(runs, starts, 7, 2, all_options, 3, *turn)

    def count(b: int, *turn: Any) -> EmbeddingBagCase:
        runs = (IdsRun(0, b, 1, bd._N_ROWS),)  # b bags of one id each
        return _bag(runs, tuple(range(b)), bd._N_ROWS, 2, all_options, 1, *turn)

    def empty(e: int, *turn: Any) -> EmbeddingBagCase:
        # e empty bags, bags [0, 1, 2] and [5, 6] (2 the padding row), e empty bags.
        starts = (0,) * e + (0, 3) + (5,) * e
        return _bag((IdsRun(0, 3, 1, 7), IdsRun(5, 2, 1)), starts, 7, 2, all_options, 2, *turn)

    def width(d: int, *turn: Any) -> EmbeddingBagCase:
        return _bag((IdsRun(0, 4, 3, 5),), (0, 2), 5, d, all_options, 3, *turn)

    def vocab(v: int, *turn: Any) -> EmbeddingBagCase:
        return _bag(_vocab_ids(v), (0, 2), v, 1, all_options, v // 2, *turn)

    axes = {"bag length": length, "bags": count, "empty bags": empty, "D": width, "V": vocab}
    for axis, make in axes.items():
        yield from bd._size_axis(axis, at, make, large=moded(turns.narrowest))


# --- quantized tables ---------------------------------------------------------------------------


def _stored_limits(scheme: str, symmetric: bool) -> tuple[tuple[int, int], ...]:
    """``(code, zero point)`` of the stored value 1, of the largest and of the most negative.

    The largest ``q - zp`` is ``qmax - qmin`` with the zero point at ``qmin`` (255 for int8),
    the most negative ``qmin - qmax``; symmetric int8 has ``-128`` and ``127``; float8 stores
    ``1.0`` and its largest finite value of either sign (codes as bytes).
    """
    s = check_scheme(scheme, "quantized_boundaries")
    if s.is_float8:
        top = float(torch.finfo(s.storage).max)
        byte = [int(torch.tensor(x, dtype=s.storage).view(torch.uint8)) for x in (1.0, top, -top)]
        return tuple((b, 0) for b in byte)
    if symmetric:
        return (1, 0), (s.qmin, 0), (s.qmax, 0)
    return (1, 0), (s.qmax, s.qmin), (s.qmin, s.qmax)


def quantized_boundaries(
    scheme: str, symmetric: bool, dtypes: Sequence[torch.dtype], devices: Sequence[str]
) -> Iterator[bd.Boundary]:
    """The boundary examples of a quantized lookup, in the order they run.

    Edges of the ids (0-d, empty, 2-D, non-contiguous), scales, stored values and zero points
    at their limits, bad ids at their edges, then ``N``, ``D`` (even values for ``"uint4"``,
    two columns a byte) and ``V``.

    Args:
        scheme: the quantization scheme.
        symmetric: ``"int8"`` without zero points.
        dtypes: the scale dtypes requested.
        devices: the devices requested (bad input only on the CPU).

    Yields:
        ``Boundary`` examples.
    """
    from .quantized import QuantizedEmbeddingCase, QuantizedTableRecipe

    turns = bd._Turns(tuple(dtypes), tuple(devices))
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
        **values: Any,
    ) -> QuantizedEmbeddingCase:
        ids = IdsRecipe.from_runs(runs, shape, index, device, layout)
        table = QuantizedTableRecipe(scheme, v, d + d % 2 if packed else d, dtype, device,
                                     bd._TABLE_SEED + v + d, (-2, 2), symmetric,
                                     **values)  # fmt: skip
        return QuantizedEmbeddingCase(ids, table, invalid)

    # The edges of the ids (the table is stored contiguous).
    edges = [e for e in bd._EDGES if e[0] in _QUANTIZED_EDGES]
    yield from _edges(
        turns, edges,
        lambda runs, shape, layout, _, dt, ix, dev: case(runs, 5, 4, dt, ix, dev, shape, layout),
    )  # fmt: skip

    # Values at their limits, in every dtype: scales at the largest finite value (rows that
    # stay finite, overflow, are zero) and at the smallest subnormal and normal values, stored
    # values at both ends of their range with zero points at theirs; float32's limits for
    # float64 scales, as they are drawn.
    unit, top, bottom = _stored_limits(scheme, symmetric)

    def limits_of(dtype: torch.dtype) -> list[tuple[str, dict[str, Any], Entries]]:
        big, tiny, sub = bd.value_limits(dtype if dtype.itemsize <= 4 else torch.float32)
        zero = (None, bottom[1])  # a row of zero points: zeros
        sets = (("the largest finite scale", ((big, unit), (big, top), (big, zero))),
                ("the smallest subnormal and normal scales", ((sub, top), (sub, bottom),
                                                              (tiny, unit))))  # fmt: skip
        return [(what, {
            "limits": tuple((r, scale, zp) for r, (scale, (_, zp)) in enumerate(rows)),
            "constant_rows": tuple((r, c) for r, (_, (c, _)) in enumerate(rows) if c is not None),
            "zero_rows": tuple(r for r, (_, (c, _)) in enumerate(rows) if c is None),
        }, ()) for what, rows in sets]  # fmt: skip

    yield from _value_boundaries(
        turns, limits_of, lambda *turn, values: case((IdsRun(0, 3),), 3, 2, *turn, **values[0]), ""
    )

    # Bad ids on the CPU (no options: a quantized lookup has no padding_idx).
    yield from bd._bad_lookups(
        (),
        turns,
        lambda runs, v, _, index, why: case(runs, v, 2, turns.dtypes[0], index, "cpu", invalid=why),
    )
    axes: dict[str, Callable[..., QuantizedEmbeddingCase]] = {
        "D": lambda d, dt, ix, dev: case((IdsRun(0, 4, 3, 5),), 5, d, dt, ix, dev),
        "N": lambda n, dt, ix, dev: case(
            (IdsRun(0, n, 1, bd._N_ROWS),), bd._N_ROWS, 2, dt, ix, dev
        ),
        # The ids of the other V axes, but the last row once.
        "V": lambda v, dt, ix, dev: case(_vocab_ids(v)[:3], v, 2, dt, ix, dev),
    }
    for name, make in axes.items():
        values = bd.around_powers_of_two(bd.LIMITS["quantized V" if name == "V" else name])
        if packed and name == "D":
            values = tuple(sorted({x + x % 2 for x in values}))
        yield from bd._size_axis(name, turns.at, make, values)
