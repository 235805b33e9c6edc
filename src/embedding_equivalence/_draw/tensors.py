"""Drawing ids and tables as recipes, and the argument checks that every strategy shares.

The private half of [`embedding_equivalence.strategies`][] for single tensors: which devices
and dtypes exist here, the checks that raise ``InvalidArgument`` before anything is drawn,
and the composites that draw ``IdsRecipe`` and ``WeightRecipe``. ``Ranges``, ``Looks`` and
``draw_basics`` are what both case strategies (embedding and bag) draw a table and its ids
from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..forms.dtypes import FLOAT_DTYPE_NAMES, FLOAT_DTYPES, INDEX_DTYPES
from ..forms.quantized import Scheme, check_scheme
from .recipes import IDS_LAYOUTS, WEIGHT_LAYOUTS, IdsRecipe, WeightRecipe

T = TypeVar("T")

#: Default budget per drawn tensor: keeps every example within a few MB.
DEFAULT_MAX_ELEMENTS = 1 << 19
#: The largest ``V`` drawn by default: that of the largest real tokenizer (see
#: ``REAL_VOCAB_SIZES`` in ``_draw.strategies``).
DEFAULT_MAX_VOCAB = 262_144
#: The largest ``D`` drawn by default.
DEFAULT_MAX_DIM = 64
#: Tables of at least this many elements are large: drawn in their own dtype (no float64
#: copy), contiguous (a non-contiguous layout would copy them), and every input of theirs
#: names their last row (see [`edge_rows`][]). A module attribute, so that tests can lower it.
LARGE_TABLE_ELEMENTS = 1 << 22
#: Elements past which the offset ``id * D`` of a row no longer fits an int32.
INT32_ELEMENTS = 1 << 31
#: Seeds of the generators that fill tables, upstream gradients and per-sample weights.
SEEDS: st.SearchStrategy[int] = st.integers(0, 2**32 - 1)
_NONFINITE = (math.inf, -math.inf, math.nan)


def available_devices() -> list[str]:
    """Device kinds present on this machine, CPU first (``"cpu"``, then ``"cuda"``, ``"mps"``)."""
    mps = getattr(torch.backends, "mps", None)
    present = {"cuda": torch.cuda.is_available(), "mps": mps is not None and mps.is_available()}
    return ["cpu", *(kind for kind, here in present.items() if here)]


def supported_float_dtypes(device: str | torch.device) -> list[torch.dtype]:
    """Floating dtypes usable on ``device`` (no float64 on MPS), in shrinking order."""
    kind = torch.device(device).type
    return [d for d in FLOAT_DTYPES if not (kind == "mps" and d == torch.float64)]


def dtypes_on(
    device: str | torch.device, dtypes: Sequence[torch.dtype] | None = None
) -> tuple[torch.dtype, ...]:
    """Those of ``dtypes`` that ``device`` supports, in their order; by default all it supports.

    The one default of a run's dtypes on a device: the verifiers and the CLI draw these.
    """
    supported = supported_float_dtypes(device)
    return tuple(supported if dtypes is None else (d for d in dtypes if d in supported))


# --- Argument checks --------------------------------------------------------------------------


def check_bounds(name: str, lo: int, hi: int, floor: int) -> None:
    """Refuse ``min_<name>=lo``/``max_<name>=hi`` unless both are ints, ``floor <= lo <= hi``."""
    for end, value in (("min", lo), ("max", hi)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{end}_{name}={value!r} must be an int")
    if lo < floor:
        raise InvalidArgument(f"min_{name}={lo} must be at least {floor}")
    if hi < lo:
        raise InvalidArgument(f"max_{name}={hi} must be at least min_{name}={lo}")


def check_size(name: str, value: object) -> None:
    """Refuse a size that is neither a strategy nor an int of at least 1."""
    if isinstance(value, st.SearchStrategy):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int or a strategy of ints")
    if value < 1:
        raise InvalidArgument(f"{name}={value} must be at least 1")


def device_problem(device: str | torch.device) -> str | None:
    """What is wrong with a device, in words after its name, or ``None`` when it is present.

    The one check of a device: the strategies, the verifiers and the CLI word their errors
    around it (``device='cuda:7' is not available here ...``).
    """
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        return "is not a device name (e.g. cpu, cuda, cuda:1)"
    if kind not in available_devices():
        return f"is not available here (available: {', '.join(available_devices())})"
    return None


def check_device(device: object) -> None:
    """Refuse a device string that is malformed or absent here (strategies are drawn later)."""
    problem = device_problem(device) if isinstance(device, str) and device != "meta" else None
    if problem is not None:
        raise InvalidArgument(f"device={device!r} {problem}")


def float_dtypes(value: object, name: str) -> tuple[torch.dtype, ...]:
    """A sequence of floating dtypes, each a ``torch.dtype`` or its name (``"float32"``).

    The one reader of a ``dtypes`` argument: the verifiers take both forms, as the CLI's
    ``--dtypes`` takes names.

    Args:
        value: the argument.
        name: how the caller names it in messages (``"dtypes"`` or ``"--dtypes"``).

    Raises:
        InvalidArgument: a single dtype instead of a sequence, an unknown name, or a dtype
            that is not floating; the message names the value and the right call.
    """
    names = FLOAT_DTYPE_NAMES
    if isinstance(value, torch.dtype | str):
        raise InvalidArgument(
            f"{name}={value!r} must be a sequence of dtypes, e.g. {name}=[{value!r}]"
        )
    try:
        items = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"{name}={value!r} must be a sequence of dtypes") from None
    found: list[torch.dtype] = []
    for item in items:
        if isinstance(item, str) and item not in names:
            raise InvalidArgument(f"{name}: unknown dtype {item!r}; choose from {', '.join(names)}")
        dtype = names.get(item) if isinstance(item, str) else item
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise InvalidArgument(
                f"{name} contains {item!r}, which is not a floating dtype; choose from "
                f"{', '.join(names)} (as torch dtypes or by name)"
            )
        found.append(dtype)
    return tuple(found)


def check_float_dtype(dtype: object) -> None:
    """Refuse a table dtype that is not floating (strategies are drawn later)."""
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise InvalidArgument(f"dtype={dtype} must be a floating dtype")


def check_index_dtype(name: str, dtype: object) -> None:
    """Refuse an ids dtype other than int64 and int32 (strategies are drawn later)."""
    if isinstance(dtype, torch.dtype) and dtype not in INDEX_DTYPES:
        raise InvalidArgument(f"{name}={dtype} must be torch.int64 or torch.int32")


def check_layouts(layouts: Sequence[str], allowed: Sequence[str], name: str) -> None:
    """Refuse a bare string, an empty sequence or an unknown layout."""
    if isinstance(layouts, str) or not layouts:
        raise InvalidArgument(f"{name}={layouts!r} must be a non-empty sequence of {allowed}")
    if unknown := [x for x in layouts if x not in allowed]:
        raise InvalidArgument(f"{name} has unknown entries {unknown}; choose from {allowed}")


def check_options(options: Sequence[str], allowed: Sequence[str]) -> None:
    """Refuse a bare string or an option name outside ``allowed``."""
    if isinstance(options, str):
        raise InvalidArgument(
            f"options={options!r} must be a sequence of names, e.g. options=({options!r},)"
        )
    check_known("options", options, allowed)


def check_known(what: str, names: Sequence[str], allowed: Sequence[str]) -> None:
    """Refuse the names outside ``allowed``: ``unknown <what> [...]; choose from [...]``."""
    if unknown := [x for x in names if x not in allowed]:
        raise InvalidArgument(f"unknown {what} {unknown}; choose from {list(allowed)}")


def check_scheme_argument(scheme: object, fn: str) -> Scheme:
    """The quantization scheme named ``scheme``; an unknown one raises ``InvalidArgument``."""
    try:
        return check_scheme(scheme, fn)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def as_strategy(value: T | st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``value`` itself if it is a strategy, else the strategy that always draws it."""
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


# --- Ids and tables ---------------------------------------------------------------------------


@st.composite
def _shapes(
    draw: st.DrawFn, min_dims: int, max_dims: int, min_side: int, max_side: int, max_numel: int
) -> tuple[int, ...]:
    ndim = draw(st.integers(min_dims, max_dims), label="ndim")
    shape: list[int] = []
    budget = max_numel
    for _ in range(ndim):
        side = draw(st.integers(min_side, max(min_side, min(max_side, budget))))
        shape.append(side)
        budget = max(1, budget // max(side, 1))
    return tuple(shape)


@st.composite
def _id_values(draw: st.DrawFn, vocab_size: int, count: int) -> list[int]:
    """Ids in ``[0, V)`` that often repeat and often hit row 0 and row V - 1."""
    if count == 0:
        return []
    any_id = st.integers(0, vocab_size - 1)
    ids = st.one_of(st.sampled_from([0, vocab_size - 1]), any_id)
    pool = draw(st.lists(ids, min_size=1, max_size=min(count, 8)), label="id pool")
    each = st.sampled_from(pool) if draw(st.booleans(), label="ids from pool") else any_id
    return [draw(each) for _ in range(count)]


@st.composite
def ids_recipes(
    draw: st.DrawFn,
    vocab_size: int,
    shape: tuple[int, ...] | None,
    dtype: torch.dtype,
    device: str,
    min_dims: int,
    max_dims: int,
    min_side: int,
    max_side: int,
    layouts: Sequence[str],
    max_numel: int,
    edge: Sequence[int] = (),
) -> IdsRecipe:
    """Ids of ``shape`` (drawn from the dims/side bounds when ``None``) in a drawn layout.

    ``edge`` rows (see [`edge_rows`][]) take the first positions, in order, as many as there
    are ids: they are in the first row of an ``"expanded"`` input too, so that every layout
    looks them up.
    """
    if shape is None:
        shape = draw(_shapes(min_dims, max_dims, min_side, max_side, max_numel), label="shape")
    layout = draw(st.sampled_from(list(layouts)), label="ids layout")
    numel = math.prod(shape)
    values = draw(_id_values(vocab_size, numel), label="ids")
    values[: len(edge)] = list(edge)[:numel]
    if layout == "expanded" and len(shape) >= 1 and shape[0] > 0:
        # Every layout draws all numel values, so that no layout takes fewer choices than
        # "contiguous" and shrinking never prefers a stride-0 view.
        values = values[: numel // shape[0]] * shape[0]
    return IdsRecipe(tuple(values), tuple(shape), dtype, device, layout)


def is_large_table(vocab_size: int, embedding_dim: int) -> bool:
    """Whether a ``(V, D)`` table is large: at least [`LARGE_TABLE_ELEMENTS`][] elements."""
    return vocab_size * embedding_dim >= LARGE_TABLE_ELEMENTS


def edge_rows(vocab_size: int, embedding_dim: int) -> tuple[int, ...]:
    """The rows that every input of a large table looks up: where offsets overflow.

    The last row ``V - 1`` (its offset ``(V - 1) * D`` is the largest: past ``2**31`` elements
    it wraps in an int32), the first row ``0``, and the first row whose offset reaches
    ``2**31`` when the table holds more than that and it is neither of the others. Empty for a
    table that is not large (see [`is_large_table`][]), whose ids are drawn freely.

    Args:
        vocab_size: ``V``.
        embedding_dim: ``D``.

    Returns:
        Distinct rows, the last row first.
    """
    if not is_large_table(vocab_size, embedding_dim):
        return ()
    rows = [vocab_size - 1, 0]
    crossing = -(-INT32_ELEMENTS // embedding_dim)  # ceil(2**31 / D)
    if crossing < vocab_size - 1:
        rows.append(crossing)
    return tuple(dict.fromkeys(rows))


@st.composite
def weight_recipes(
    draw: st.DrawFn,
    vocab_size: int,
    embedding_dim: int,
    dtype: torch.dtype,
    device: str,
    looks: Looks,
) -> WeightRecipe:
    """A table from a drawn seed, in a drawn layout, with up to three drawn special entries.

    The layouts and the special values allowed are those of ``looks`` (its ``ids_layouts``
    are not read). A large table (see [`is_large_table`][]) is drawn in its own dtype
    (``native=True``: no float64 copy) and contiguous when ``looks.weight_layouts`` allows
    it: every other layout copies the table once more, and the size of a large table is
    what the run is about.
    """
    seed = draw(SEEDS, label="weight seed")
    large = is_large_table(vocab_size, embedding_dim)
    if large and "contiguous" in looks.weight_layouts:
        layout = "contiguous"
    else:
        layout = draw(st.sampled_from(list(looks.weight_layouts)), label="weight layout")
    # inf, -inf and nan if allowed, -0.0 if allowed
    values = [*_NONFINITE] * looks.allow_nonfinite + [-0.0] * looks.allow_signed_zeros
    specials: list[tuple[int, int, float]] = []
    if values:
        rows, cols = st.integers(0, vocab_size - 1), st.integers(0, embedding_dim - 1)
        entries = st.lists(st.tuples(rows, cols, st.sampled_from(values)), max_size=3)
        specials = draw(entries, label="special entries")
    return WeightRecipe(
        vocab_size, embedding_dim, dtype, device, seed, tuple(specials), layout, native=large
    )


# --- What both case strategies draw a table and its ids from ---------------------------------


class Ranges(NamedTuple):
    """Where ``V``, ``D``, the dtypes and the device of a call come from, and the budgets.

    ``embedding_dim`` and ``dtype`` are ``None`` for the defaults that depend on an earlier
    draw: ``D`` within the element budget for the drawn ``V``, and the dtypes that the drawn
    device supports. ``num_ids`` is ``None`` for ids of up to three dims, or draws the length
    of a 1-D input.
    """

    vocab_size: st.SearchStrategy[int]
    embedding_dim: st.SearchStrategy[int] | None
    dtype: st.SearchStrategy[torch.dtype] | None
    device: st.SearchStrategy[str]
    index_dtype: st.SearchStrategy[torch.dtype]
    max_ids: int
    max_elements: int
    num_ids: st.SearchStrategy[int] | None = None


class Looks(NamedTuple):
    """How the drawn table and ids may look: their layouts and special values."""

    weight_layouts: tuple[str, ...]
    ids_layouts: tuple[str, ...]
    allow_nonfinite: bool
    allow_signed_zeros: bool


def looks(
    weight_layouts: Sequence[str],
    ids_layouts: Sequence[str],
    allow_nonfinite: bool,
    allow_signed_zeros: bool,
) -> Looks:
    """Check the layouts of a case strategy and bundle them with its special values.

    Raises:
        InvalidArgument: a bare string, an empty sequence or an unknown layout.
    """
    check_layouts(weight_layouts, WEIGHT_LAYOUTS, "weight_layouts")
    check_layouts(ids_layouts, IDS_LAYOUTS, "ids_layouts")
    return Looks(tuple(weight_layouts), tuple(ids_layouts), allow_nonfinite, allow_signed_zeros)


class Basics(NamedTuple):
    """The first draws of a call: the device, the table's dtype and size, the ids' dtype."""

    device: str
    dtype: torch.dtype
    vocab_size: int
    embedding_dim: int
    index_dtype: torch.dtype


def draw_basics(draw: st.DrawFn, ranges: Ranges) -> Basics:
    """Draw the device, then a dtype it supports, ``V``, ``D`` within the budget, the ids' dtype."""
    device = draw(ranges.device, label="device")
    supported = st.sampled_from(supported_float_dtypes(device))
    dtype = draw(supported if ranges.dtype is None else ranges.dtype, label="dtype")
    v = draw(ranges.vocab_size, label="V")
    within = st.integers(1, max(1, min(DEFAULT_MAX_DIM, ranges.max_elements // v)))
    d = draw(within if ranges.embedding_dim is None else ranges.embedding_dim, label="D")
    return Basics(device, dtype, v, d, draw(ranges.index_dtype, label="index dtype"))


def draw_ids(
    draw: st.DrawFn, looks: Looks, basics: Basics, shape: tuple[int, ...] | None, max_numel: int
) -> IdsRecipe:
    """Draw the ids of a call: of ``shape``, or of up to three dims of at most 8 ids each.

    The ids of a large table start with its [`edge_rows`][] (its last row first), and a
    drawn shape holds at least one id.
    """
    b = basics
    edge = edge_rows(b.vocab_size, b.embedding_dim)
    recipes = ids_recipes(
        b.vocab_size, shape, b.index_dtype, b.device, 0, 3, 1 if edge else 0, 8, looks.ids_layouts,
        max_numel, edge,
    )  # fmt: skip
    return draw(recipes, label="ids")


def draw_weight(draw: st.DrawFn, looks: Looks, basics: Basics) -> WeightRecipe:
    """Draw the table of a call."""
    b = basics
    recipes = weight_recipes(b.vocab_size, b.embedding_dim, b.dtype, b.device, looks)
    return draw(recipes, label="weight")
