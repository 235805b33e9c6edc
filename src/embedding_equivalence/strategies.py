"""Hypothesis strategies for embedding tables, token ids and whole embedding (bag) calls.

Shaped like ``hypothesis.extra.numpy``: plural nouns, arguments that take a value or a
strategy, keyword-only ``min_*``/``max_*`` bounds where ``None`` means a sensible default, and
:class:`~hypothesis.errors.InvalidArgument` raised before anything is drawn.

Every tensor is built from drawn values only: ids are drawn one by one, and a table is drawn
as a seed for a ``torch.Generator`` plus drawn structure (shape, dtype, layout, special
entries). A failure therefore replays exactly and shrinks toward small ``V``, ``D`` and ``N``,
float32, the CPU, contiguous layouts and no options. :func:`embedding_bag_cases` does the same
for ``F.embedding_bag`` calls: bags, offsets, modes and per-sample weights.

Example:
    ```python
    from hypothesis import given
    import embedding_equivalence as ee
    from embedding_equivalence import strategies as ees, testing as eet

    @given(ees.embedding_cases(options=("padding_idx", "scale_grad_by_freq")))
    def test_my_kernel(case):
        eet.assert_case_equivalent(my_embedding, case)
    ```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

import torch
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ._cases import (
    IDS_LAYOUTS,
    WEIGHT_LAYOUTS,
    BagTensors,
    EmbeddingBagCase,
    EmbeddingCase,
    IdsRecipe,
    WeightRecipe,
)

__all__ = [
    "BAG_INVALID_KINDS",
    "BAG_MODES",
    "BAG_OPTIONS",
    "BagTensors",
    "CRASHING_BAG_INVALID_KINDS",
    "EMBEDDING_OPTIONS",
    "EmbeddingBagCase",
    "EmbeddingCase",
    "IDS_LAYOUTS",
    "IdsRecipe",
    "REAL_VOCAB_SIZES",
    "WEIGHT_LAYOUTS",
    "WeightRecipe",
    "available_devices",
    "devices",
    "embedding_bag_cases",
    "embedding_cases",
    "embedding_dims",
    "embedding_weights",
    "float_dtypes",
    "index_dtypes",
    "supported_float_dtypes",
    "token_ids",
    "vocab_sizes",
]

_T = TypeVar("_T")

#: Vocabulary sizes of real tokenizers, reached by :func:`vocab_sizes` when the bounds allow.
REAL_VOCAB_SIZES: tuple[int, ...] = (32_000, 50_257, 65_537, 128_256, 262_144)
#: Keyword options of ``F.embedding`` that :func:`embedding_cases` can exercise.
EMBEDDING_OPTIONS: tuple[str, ...] = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")
#: Float dtypes in shrinking order: float32 first.
_FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
)
_INDEX_DTYPES: tuple[torch.dtype, ...] = (torch.int64, torch.int32)
#: Default budget per drawn tensor: keeps every example within a few MB.
_DEFAULT_MAX_ELEMENTS = 1 << 19


def _check_bounds(name: str, lo: int, hi: int, floor: int) -> None:
    if isinstance(lo, bool) or not isinstance(lo, int):
        raise InvalidArgument(f"min_{name}={lo!r} must be an int")
    if isinstance(hi, bool) or not isinstance(hi, int):
        raise InvalidArgument(f"max_{name}={hi!r} must be an int")
    if lo < floor:
        raise InvalidArgument(f"min_{name}={lo} must be at least {floor}")
    if hi < lo:
        raise InvalidArgument(f"max_{name}={hi} must be at least min_{name}={lo}")


def _check_size(name: str, value: object) -> None:
    if isinstance(value, st.SearchStrategy):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int or a strategy of ints")
    if value < 1:
        raise InvalidArgument(f"{name}={value} must be at least 1")


def _as_strategy(value: _T | st.SearchStrategy[_T], name: str) -> st.SearchStrategy[_T]:
    if isinstance(value, st.SearchStrategy):
        return value
    return st.just(value)


def available_devices() -> list[str]:
    """Device kinds present on this machine, CPU first (``"cpu"``, then ``"cuda"``, ``"mps"``)."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def supported_float_dtypes(device: str | torch.device) -> list[torch.dtype]:
    """Floating dtypes usable on ``device`` (no float64 on MPS), in shrinking order."""
    kind = torch.device(device).type
    return [d for d in _FLOAT_DTYPES if not (kind == "mps" and d == torch.float64)]


def vocab_sizes(*, min_value: int = 1, max_value: int = 262_144) -> st.SearchStrategy[int]:
    """Vocabulary sizes ``V``: small ones most often, up to the largest real tokenizers.

    Draws mix three sources: ``V`` up to 64 (where duplicates and the first and last row are
    common), any ``V`` in the bounds, and the sizes of real tokenizers
    (:data:`REAL_VOCAB_SIZES`: GPT-2's 50,257, Llama 3's 128,256, 262,144) that lie in the
    bounds. Shrinks toward ``min_value``.

    Args:
        min_value: smallest ``V``, at least 1.
        max_value: largest ``V``.

    Returns:
        A strategy of ints in ``[min_value, max_value]``.

    Raises:
        InvalidArgument: bounds that are not ints, ``min_value < 1`` or ``max_value < min_value``.
    """
    _check_bounds("value", min_value, max_value, 1)
    small = st.integers(min_value, min(max_value, max(min_value, 64)))
    real = [v for v in REAL_VOCAB_SIZES if min_value <= v <= max_value]
    options: list[st.SearchStrategy[int]] = [small, st.integers(min_value, max_value)]
    if real:
        options.append(st.sampled_from(real))
    return st.one_of(*options)


def embedding_dims(*, min_value: int = 1, max_value: int = 64) -> st.SearchStrategy[int]:
    """Embedding dimensions ``D``, shrinking toward ``min_value``.

    Args:
        min_value: smallest ``D``, at least 1.
        max_value: largest ``D``.

    Returns:
        A strategy of ints in ``[min_value, max_value]``.

    Raises:
        InvalidArgument: bounds that are not ints, ``min_value < 1`` or ``max_value < min_value``.
    """
    _check_bounds("value", min_value, max_value, 1)
    return st.integers(min_value, max_value)


def float_dtypes(*, device: str | torch.device | None = None) -> st.SearchStrategy[torch.dtype]:
    """Floating dtypes of the table: float32, float64, float16, bfloat16 (shrinks to float32).

    Args:
        device: if given, only the dtypes that device supports (no float64 on MPS).

    Returns:
        A strategy of ``torch.dtype``.
    """
    return st.sampled_from(supported_float_dtypes(device or "cpu"))


def index_dtypes() -> st.SearchStrategy[torch.dtype]:
    """Index dtypes accepted by ``F.embedding``: int64 (first) and int32."""
    return st.sampled_from(_INDEX_DTYPES)


def devices(*, include_meta: bool = False) -> st.SearchStrategy[str]:
    """Device kinds present on this machine, CPU first; ``"meta"`` on request.

    The ``meta`` device carries shapes and dtypes but no values: use it for shape-only
    properties.

    Args:
        include_meta: also draw ``"meta"``.

    Returns:
        A strategy of device strings.
    """
    found = available_devices()
    if include_meta:
        found.append("meta")
    return st.sampled_from(found)


def _check_device(device: str) -> None:
    if device == "meta":
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as e:
        raise InvalidArgument(f"device={device!r} is not a device: {e}") from None
    if kind not in available_devices():
        raise InvalidArgument(
            f"device={device!r} is not available here; available: {available_devices()}"
        )


@st.composite
def _shapes(
    draw: st.DrawFn, min_dims: int, max_dims: int, min_side: int, max_side: int, max_numel: int
) -> tuple[int, ...]:
    ndim = draw(st.integers(min_dims, max_dims), label="ndim")
    shape: list[int] = []
    budget = max_numel
    for _ in range(ndim):
        hi = max(min_side, min(max_side, budget))
        side = draw(st.integers(min_side, hi))
        shape.append(side)
        budget = max(1, budget // max(side, 1))
    return tuple(shape)


@st.composite
def _id_values(draw: st.DrawFn, vocab_size: int, count: int) -> list[int]:
    """Ids in ``[0, V)`` that often repeat and often hit row 0 and row V - 1."""
    if count == 0:
        return []
    pool = draw(
        st.lists(
            st.one_of(st.sampled_from([0, vocab_size - 1]), st.integers(0, vocab_size - 1)),
            min_size=1,
            max_size=min(count, 8),
        ),
        label="id pool",
    )
    if draw(st.booleans(), label="ids from pool"):
        return [draw(st.sampled_from(pool)) for _ in range(count)]
    return [draw(st.integers(0, vocab_size - 1)) for _ in range(count)]


@st.composite
def _ids_recipes(
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
) -> IdsRecipe:
    if shape is None:
        shape = draw(_shapes(min_dims, max_dims, min_side, max_side, max_numel), label="shape")
    layout = draw(st.sampled_from(list(layouts)), label="ids layout")
    numel = math.prod(shape)
    values = draw(_id_values(vocab_size, numel), label="ids")
    if layout == "expanded" and len(shape) >= 1 and shape[0] > 0:
        # Every layout draws all numel values, so that no layout takes fewer choices than
        # "contiguous" and shrinking never prefers a stride-0 view.
        values = values[: numel // shape[0]] * shape[0]
    return IdsRecipe(tuple(values), tuple(shape), dtype, device, layout)


def _check_layouts(layouts: Sequence[str], allowed: Sequence[str], name: str) -> None:
    if isinstance(layouts, str) or not layouts:
        raise InvalidArgument(f"{name}={layouts!r} must be a non-empty sequence of {allowed}")
    unknown = [x for x in layouts if x not in allowed]
    if unknown:
        raise InvalidArgument(f"{name} has unknown entries {unknown}; choose from {allowed}")


def token_ids(
    vocab_size: int | st.SearchStrategy[int],
    *,
    shape: tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] = torch.int64,
    device: str | st.SearchStrategy[str] = "cpu",
    min_dims: int = 0,
    max_dims: int = 3,
    min_side: int = 0,
    max_side: int = 8,
    layouts: Sequence[str] = IDS_LAYOUTS,
) -> st.SearchStrategy[torch.Tensor]:
    """Integer id tensors in ``[0, V)``: 0-d, empty and multi-dim, often with duplicates.

    Ids are drawn one by one, half the time from a small pool so that duplicates are common,
    and the first and last rows are favoured. Layouts include non-contiguous views
    (``"transposed"``, ``"sliced"``, ``"expanded"``), because hand-written kernels break on
    strides.

    Args:
        vocab_size: ``V`` (value or strategy).
        shape: fixed shape (value or strategy); ``None`` draws one from the dims/side bounds.
        dtype: ``torch.int64`` or ``torch.int32`` (value or strategy).
        device: device string (value or strategy).
        min_dims: smallest rank when the shape is drawn.
        max_dims: largest rank when the shape is drawn.
        min_side: smallest size of each dim.
        max_side: largest size of each dim.
        layouts: the layouts to draw from (shrinks toward the first).

    Returns:
        A strategy of integer tensors.

    Raises:
        InvalidArgument: bad bounds, an unknown layout, a non-index dtype, or an absent device.
    """
    _check_bounds("dims", min_dims, max_dims, 0)
    _check_bounds("side", min_side, max_side, 0)
    _check_layouts(layouts, IDS_LAYOUTS, "layouts")
    if isinstance(dtype, torch.dtype) and dtype not in _INDEX_DTYPES:
        raise InvalidArgument(f"dtype={dtype} must be torch.int64 or torch.int32")
    if isinstance(device, str):
        _check_device(device)
    _check_size("vocab_size", vocab_size)

    @st.composite
    def build(draw: st.DrawFn) -> torch.Tensor:
        v = draw(_as_strategy(vocab_size, "vocab_size"), label="vocab_size")
        shp = draw(_as_strategy(shape, "shape"), label="shape") if shape is not None else None
        dt = draw(_as_strategy(dtype, "dtype"), label="dtype")
        dev = draw(_as_strategy(device, "device"), label="device")
        recipe = draw(
            _ids_recipes(v, shp, dt, dev, min_dims, max_dims, min_side, max_side, layouts, 1 << 16)
        )
        return recipe.build()

    return build()


_NONFINITE = (math.inf, -math.inf, math.nan)


@st.composite
def _weight_recipes(
    draw: st.DrawFn,
    vocab_size: int,
    embedding_dim: int,
    dtype: torch.dtype,
    device: str,
    layouts: Sequence[str],
    allow_nonfinite: bool,
    allow_signed_zeros: bool,
) -> WeightRecipe:
    seed = draw(st.integers(0, 2**32 - 1), label="weight seed")
    layout = draw(st.sampled_from(list(layouts)), label="weight layout")
    specials_values: list[float] = []
    if allow_nonfinite:
        specials_values += _NONFINITE
    if allow_signed_zeros:
        specials_values.append(-0.0)
    specials: list[tuple[int, int, float]] = []
    if specials_values:
        specials = draw(
            st.lists(
                st.tuples(
                    st.integers(0, vocab_size - 1),
                    st.integers(0, embedding_dim - 1),
                    st.sampled_from(specials_values),
                ),
                max_size=3,
            ),
            label="special entries",
        )
    return WeightRecipe(vocab_size, embedding_dim, dtype, device, seed, tuple(specials), layout)


def embedding_weights(
    vocab_size: int | st.SearchStrategy[int],
    embedding_dim: int | st.SearchStrategy[int],
    *,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] = torch.float32,
    device: str | st.SearchStrategy[str] = "cpu",
    layouts: Sequence[str] = WEIGHT_LAYOUTS,
    allow_nonfinite: bool = False,
    allow_signed_zeros: bool = False,
    requires_grad: bool = False,
) -> st.SearchStrategy[torch.Tensor]:
    """``(V, D)`` tables: ``N(0, 1)`` values from a drawn seed, in a drawn layout.

    Finite by default. ``allow_nonfinite`` writes up to three drawn entries with ``inf``,
    ``-inf`` or ``nan``; ``allow_signed_zeros`` can write ``-0.0``. Layouts include
    non-contiguous views: ``"transposed"`` (strides ``(1, V)``), ``"sliced"`` (every other
    column) and ``"offset"`` (a view at a non-zero storage offset).

    Args:
        vocab_size: ``V`` (value or strategy).
        embedding_dim: ``D`` (value or strategy).
        dtype: floating dtype (value or strategy).
        device: device string (value or strategy).
        layouts: layouts to draw from (shrinks toward the first).
        allow_nonfinite: allow ``inf``/``-inf``/``nan`` entries.
        allow_signed_zeros: allow ``-0.0`` entries.
        requires_grad: return leaves that require grad.

    Returns:
        A strategy of floating ``(V, D)`` tensors.

    Raises:
        InvalidArgument: a non-floating dtype, an unknown layout or an absent device.
    """
    _check_size("vocab_size", vocab_size)
    _check_size("embedding_dim", embedding_dim)
    _check_layouts(layouts, WEIGHT_LAYOUTS, "layouts")
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise InvalidArgument(f"dtype={dtype} must be a floating dtype")
    if isinstance(device, str):
        _check_device(device)

    @st.composite
    def build(draw: st.DrawFn) -> torch.Tensor:
        v = draw(_as_strategy(vocab_size, "vocab_size"), label="vocab_size")
        d = draw(_as_strategy(embedding_dim, "embedding_dim"), label="embedding_dim")
        dt = draw(_as_strategy(dtype, "dtype"), label="dtype")
        dev = draw(_as_strategy(device, "device"), label="device")
        recipe = draw(_weight_recipes(v, d, dt, dev, layouts, allow_nonfinite, allow_signed_zeros))
        return recipe.build(requires_grad=requires_grad)

    return build()


def _check_options(options: Sequence[str], allowed: Sequence[str]) -> None:
    if isinstance(options, str):
        raise InvalidArgument(
            f"options={options!r} must be a sequence of names, e.g. options=({options!r},)"
        )
    unknown = [o for o in options if o not in allowed]
    if unknown:
        raise InvalidArgument(f"unknown options {unknown}; choose from {list(allowed)}")


_INVALID_KINDS = ("id too large", "negative id", "floating ids", "padding_idx out of range")


def _option_drawn(draw: st.DrawFn, name: str) -> bool:
    """Whether a requested option is present: 3 times in 4, absent when shrunk (0)."""
    return draw(st.integers(0, 3), label=f"use {name}") > 0


@st.composite
def _embedding_case(
    draw: st.DrawFn,
    options: tuple[str, ...],
    vocab_size: st.SearchStrategy[int],
    embedding_dim: st.SearchStrategy[int] | None,
    dtype: st.SearchStrategy[torch.dtype] | None,
    device: st.SearchStrategy[str],
    index_dtype: st.SearchStrategy[torch.dtype],
    weight_layouts: Sequence[str],
    ids_layouts: Sequence[str],
    allow_nonfinite: bool,
    allow_signed_zeros: bool,
    max_ids: int,
    max_elements: int,
    invalid: bool,
) -> EmbeddingCase:
    dev = draw(device, label="device")
    dt = draw(dtype if dtype is not None else float_dtypes(device=dev), label="dtype")
    v = draw(vocab_size, label="V")
    d_cap = max(1, min(64, max_elements // v))
    if embedding_dim is None:
        d = draw(st.integers(1, d_cap), label="D")
    else:
        d = draw(embedding_dim, label="D")
    # The dense one-hot has N * V entries: keep it within the same budget as the table.
    n_cap = max(1, min(max_ids, max_elements // v))
    ids_recipe = draw(
        _ids_recipes(
            v, None, draw(index_dtype, label="index dtype"), dev, 0, 3, 0, 8, ids_layouts, n_cap
        ),
        label="ids",
    )
    weight_recipe = draw(
        _weight_recipes(v, d, dt, dev, weight_layouts, allow_nonfinite, allow_signed_zeros),
        label="weight",
    )
    kwargs: dict[str, Any] = {}
    if "padding_idx" in options and _option_drawn(draw, "padding_idx"):
        # A row that some id names 3 times in 4 (a padding row no id names changes nothing),
        # written in its negative form half of those times.
        used = sorted(set(ids_recipe.values))
        source = draw(st.integers(0, 3), label="padding_idx source")
        if used and source < 3:
            row = draw(st.sampled_from(used), label="padding row")
            kwargs["padding_idx"] = row - v if source == 2 else row
        else:
            kwargs["padding_idx"] = draw(st.integers(-v, v - 1), label="padding_idx")
    if "max_norm" in options and _option_drawn(draw, "max_norm"):
        kwargs["max_norm"] = draw(st.sampled_from([1.0, 0.5, 2.0, 0.0, 3.5]), label="max_norm")
        kwargs["norm_type"] = draw(st.sampled_from([2.0, 1.0, math.inf, 3.0]), label="norm_type")
    if "scale_grad_by_freq" in options and _option_drawn(draw, "scale_grad_by_freq"):
        kwargs["scale_grad_by_freq"] = True
    # Drawn even when scale_grad_by_freq is on (torch's sparse backward cannot scale, so the
    # pair is never combined): otherwise scale_grad_by_freq=True takes fewer choices than
    # False and survives shrinking.
    if (
        "sparse" in options
        and _option_drawn(draw, "sparse")
        and not kwargs.get("scale_grad_by_freq")
    ):
        kwargs["sparse"] = True
    grad_seed = draw(st.integers(0, 2**32 - 1), label="grad seed")
    reason = None
    if invalid:
        kind = draw(st.sampled_from(_INVALID_KINDS), label="invalid kind")
        values = list(ids_recipe.values) or [0]
        shape = ids_recipe.shape if ids_recipe.values else (1,)
        pos = draw(st.integers(0, len(values) - 1), label="bad position")
        if kind == "id too large":
            values[pos] = draw(st.integers(v, v + 3), label="bad id")
            reason = f"id {values[pos]} >= V = {v}"
        elif kind == "negative id":
            values[pos] = draw(st.integers(-3, -1), label="bad id")
            reason = f"negative id {values[pos]}"
        elif kind == "floating ids":
            reason = "floating-point ids"
        else:
            kwargs["padding_idx"] = draw(st.sampled_from([v, -v - 1]), label="bad padding_idx")
            reason = f"padding_idx={kwargs['padding_idx']} outside [-{v}, {v})"
        ids_dtype = torch.float32 if kind == "floating ids" else ids_recipe.dtype
        layout = "contiguous"
        ids_recipe = IdsRecipe(tuple(values), tuple(shape), ids_dtype, dev, layout)
    case = EmbeddingCase(ids_recipe, weight_recipe, kwargs, grad_seed, reason)
    note(
        f"case: V={v}, D={d}, dtype={dt}, device={dev}, ids shape={ids_recipe.shape}, "
        f"layouts=({weight_recipe.layout}, {ids_recipe.layout}), kwargs={kwargs}"
    )
    return case


def embedding_cases(
    *,
    options: Sequence[str] = (),
    vocab_size: int | st.SearchStrategy[int] | None = None,
    embedding_dim: int | st.SearchStrategy[int] | None = None,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    device: str | st.SearchStrategy[str] | None = None,
    index_dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    weight_layouts: Sequence[str] = WEIGHT_LAYOUTS,
    ids_layouts: Sequence[str] = IDS_LAYOUTS,
    allow_nonfinite: bool = False,
    allow_signed_zeros: bool = False,
    max_ids: int = 64,
    max_elements: int = _DEFAULT_MAX_ELEMENTS,
    invalid: bool = False,
) -> st.SearchStrategy[EmbeddingCase]:
    """Whole embedding calls (ids, table, options, upstream gradient) as :class:`EmbeddingCase`.

    Each option named in ``options`` is drawn independently (present or absent), so shrinking
    removes the options that do not matter. ``V * D`` and ``N * V`` stay within
    ``max_elements`` (``D`` and ``N`` are kept small when ``V`` is large), so a single example
    with ``V = 262,144`` takes a few MB.

    Args:
        options: names from :data:`EMBEDDING_OPTIONS` to exercise.
        vocab_size: ``V`` (value or strategy); default :func:`vocab_sizes`.
        embedding_dim: ``D`` (value or strategy); default :func:`embedding_dims`.
        dtype: floating dtype (value or strategy); default every dtype the device supports.
        device: device (value or strategy); default every device present.
        index_dtype: int64 or int32 (value or strategy); default both.
        weight_layouts: layouts of the table (see :func:`embedding_weights`).
        ids_layouts: layouts of the ids (see :func:`token_ids`).
        allow_nonfinite: allow ``inf``/``nan`` entries in the table.
        allow_signed_zeros: allow ``-0.0`` entries in the table.
        max_ids: the most ids in one call.
        max_elements: budget for ``V * D`` and ``N * V``.
        invalid: draw calls that the reference must reject (an id out of range, a negative
            id, floating ids, ``padding_idx`` out of range); the case's ``invalid`` says why.

    Returns:
        A strategy of :class:`EmbeddingCase`.

    Raises:
        InvalidArgument: unknown options or layouts, or bad bounds.
    """
    _check_options(options, EMBEDDING_OPTIONS)
    _check_layouts(weight_layouts, WEIGHT_LAYOUTS, "weight_layouts")
    _check_layouts(ids_layouts, IDS_LAYOUTS, "ids_layouts")
    _check_bounds("ids", 1, max_ids, 1)
    _check_bounds("elements", 1, max_elements, 1)
    if isinstance(device, str):
        _check_device(device)
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise InvalidArgument(f"dtype={dtype} must be a floating dtype")
    if isinstance(index_dtype, torch.dtype) and index_dtype not in _INDEX_DTYPES:
        raise InvalidArgument(f"index_dtype={index_dtype} must be torch.int64 or torch.int32")
    for name, size in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim)):
        if size is not None:
            _check_size(name, size)
    if isinstance(vocab_size, int) and vocab_size > max_elements:
        raise InvalidArgument(f"vocab_size={vocab_size} exceeds max_elements={max_elements}")
    if (
        isinstance(vocab_size, int)
        and isinstance(embedding_dim, int)
        and vocab_size * embedding_dim > max_elements
    ):
        raise InvalidArgument(
            f"vocab_size * embedding_dim = {vocab_size * embedding_dim} exceeds "
            f"max_elements={max_elements}"
        )
    return _embedding_case(
        tuple(options),
        _as_strategy(vocab_size, "vocab_size")
        if vocab_size is not None
        else vocab_sizes(max_value=min(262_144, max_elements)),
        _as_strategy(embedding_dim, "embedding_dim") if embedding_dim is not None else None,
        _as_strategy(dtype, "dtype") if dtype is not None else None,
        _as_strategy(device, "device") if device is not None else devices(),
        _as_strategy(index_dtype, "index_dtype") if index_dtype is not None else index_dtypes(),
        weight_layouts,
        ids_layouts,
        allow_nonfinite,
        allow_signed_zeros,
        max_ids,
        max_elements,
        invalid,
    )


# --- EmbeddingBag -----------------------------------------------------------------------------

#: The reductions of ``F.embedding_bag``, in shrinking order.
BAG_MODES: tuple[str, ...] = ("sum", "mean", "max")
#: Keyword options of ``F.embedding_bag`` that :func:`embedding_bag_cases` can exercise.
BAG_OPTIONS: tuple[str, ...] = (
    "padding_idx",
    "max_norm",
    "scale_grad_by_freq",
    "sparse",
    "per_sample_weights",
    "include_last_offset",
)
#: Kinds of bad input drawn by ``embedding_bag_cases(invalid=True)``: every one of them makes
#: ``F.embedding_bag`` (torch 2.13, CPU) raise or return, never crash.
BAG_INVALID_KINDS: tuple[str, ...] = (
    "id too large",
    "negative id",
    "floating ids",
    "offsets not starting at 0",
    "decreasing offsets",
    "last offset past the end",
    "1-D input without offsets",
    "2-D input with offsets",
    "padding_idx out of range",
    "per_sample_weights without mode='sum'",
    "scale_grad_by_freq with mode='max'",
    "sparse with mode='max'",
    "include_last_offset without offsets",
)
#: Kinds of bad input on which ``F.embedding_bag`` (torch 2.13, CPU) reads out of bounds and
#: can crash the process (segmentation fault): drawn only when named in ``invalid=``, for
#: candidates that validate their input (this package's functions refuse all of them).
CRASHING_BAG_INVALID_KINDS: tuple[str, ...] = (
    "negative offset",
    "offsets empty but ids present",
    "offset past the end before the last",
)
#: Which option (if any) and which modes each kind of bad input needs to be drawn by default.
_INVALID_NEEDS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "padding_idx out of range": ("padding_idx", BAG_MODES),
    "per_sample_weights without mode='sum'": ("per_sample_weights", ("mean", "max")),
    "scale_grad_by_freq with mode='max'": ("scale_grad_by_freq", ("max",)),
    "sparse with mode='max'": ("sparse", ("max",)),
    "include_last_offset without offsets": ("include_last_offset", BAG_MODES),
}
#: The largest number of ids in one bag drawn by default (larger ones stay possible up to
#: ``max_ids``, through a second, rarer branch).
_SMALL_BAG = 4


def _check_modes(modes: Sequence[str]) -> None:
    if isinstance(modes, str) or not modes:
        raise InvalidArgument(
            f"modes={modes!r} must be a non-empty sequence of names from {list(BAG_MODES)}, "
            f"e.g. modes=({modes!r},)"
            if isinstance(modes, str)
            else f"modes={modes!r} must be a non-empty sequence of names from {list(BAG_MODES)}"
        )
    unknown = [m for m in modes if m not in BAG_MODES]
    if unknown:
        raise InvalidArgument(f"unknown modes {unknown}; choose from {list(BAG_MODES)}")
    if len(set(modes)) != len(modes):
        raise InvalidArgument(f"modes={modes!r} names a mode twice")


def _check_bag_options(options: Sequence[str], modes: Sequence[str]) -> None:
    _check_options(options, BAG_OPTIONS)
    needs = {
        "per_sample_weights": ("sum",),
        "scale_grad_by_freq": ("sum", "mean"),
        "sparse": ("sum", "mean"),
    }
    for option, allowed in needs.items():
        if option in options and not set(allowed) & set(modes):
            raise InvalidArgument(
                f"option {option!r} needs mode {' or '.join(map(repr, allowed))} (as in "
                f"F.embedding_bag), but modes={tuple(modes)!r} never draws it"
            )


def _default_invalid_kinds(options: Sequence[str], modes: Sequence[str]) -> tuple[str, ...]:
    kinds = []
    for kind in BAG_INVALID_KINDS:
        option, kind_modes = _INVALID_NEEDS.get(kind, (None, BAG_MODES))
        if option is not None and option not in options:
            continue
        if not set(kind_modes) & set(modes):
            continue
        kinds.append(kind)
    return tuple(kinds)


def _check_invalid(invalid: bool | Sequence[str]) -> tuple[str, ...] | None:
    """``None`` for valid cases, ``()`` for the default kinds, else the named kinds."""
    if isinstance(invalid, bool):
        return () if invalid else None
    if isinstance(invalid, str) or not isinstance(invalid, Sequence) or not invalid:
        raise InvalidArgument(
            f"invalid={invalid!r} must be a bool or a non-empty sequence of kinds from "
            f"BAG_INVALID_KINDS + CRASHING_BAG_INVALID_KINDS"
        )
    known = BAG_INVALID_KINDS + CRASHING_BAG_INVALID_KINDS
    unknown = [k for k in invalid if k not in known]
    if unknown:
        raise InvalidArgument(f"unknown invalid kinds {unknown}; choose from {list(known)}")
    return tuple(invalid)


@st.composite
def _bag_size(draw: st.DrawFn, max_ids: int) -> int:
    """One bag's size: empty 3 times in 10, 1 to 4 ids 6 times in 10, up to ``max_ids`` once.

    Shrinks toward an empty bag.
    """
    kind = draw(st.integers(0, 9), label="bag kind")
    if kind < 3:
        return 0
    if kind < 9:
        return draw(st.integers(1, max(1, min(_SMALL_BAG, max_ids))), label="small bag")
    return draw(st.integers(0, max_ids), label="large bag")


@st.composite
def _bag_sizes(draw: st.DrawFn, max_bags: int, max_ids: int) -> list[int]:
    """Sizes of the bags, cut to ``max_ids`` ids in all."""
    # Zero bags once in 10 (an edge case, not the rule); else a list that Hypothesis shrinks
    # by deleting bags.
    if draw(st.integers(0, 9), label="zero bags") == 9:
        return []
    sizes = draw(st.lists(_bag_size(max_ids), min_size=1, max_size=max_bags), label="sizes")
    budget = max_ids
    for i, size in enumerate(sizes):
        sizes[i] = min(size, budget)
        budget -= sizes[i]
    return sizes


@st.composite
def _embedding_bag_case(
    draw: st.DrawFn,
    modes: tuple[str, ...],
    options: tuple[str, ...],
    vocab_size: st.SearchStrategy[int],
    embedding_dim: st.SearchStrategy[int] | None,
    dtype: st.SearchStrategy[torch.dtype] | None,
    device: st.SearchStrategy[str],
    index_dtype: st.SearchStrategy[torch.dtype],
    weight_layouts: Sequence[str],
    ids_layouts: Sequence[str],
    allow_nonfinite: bool,
    max_bags: int,
    max_ids: int,
    max_elements: int,
    invalid: tuple[str, ...] | None,
) -> EmbeddingBagCase:
    dev = draw(device, label="device")
    dt = draw(dtype if dtype is not None else float_dtypes(device=dev), label="dtype")
    mode = draw(st.sampled_from(modes), label="mode")
    v = draw(vocab_size, label="V")
    d_cap = max(1, min(64, max_elements // v))
    d = draw(embedding_dim if embedding_dim is not None else st.integers(1, d_cap), label="D")
    idt = draw(index_dtype, label="index dtype")
    # The matmul form builds a dense (B, V) bag-count matrix: keep it within the budget.
    b_cap = max(1, min(max_bags, max_elements // v))
    ilo = "include_last_offset" in options and draw(st.booleans(), label="include_last_offset")
    offsets: tuple[int, ...] | None
    if draw(st.integers(0, 3), label="2-D input") == 3:  # 1-D with offsets 3 times in 4
        b = draw(st.integers(0, b_cap), label="B")
        length = draw(st.integers(0, max(0, min(16, max_ids // max(b, 1)))), label="L")
        shape: tuple[int, ...] = (b, length)
        offsets = None
    else:
        sizes = draw(_bag_sizes(b_cap, max_ids), label="bag sizes")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        end = sum(sizes)
        # Ids after the last offset belong to no bag. Never with zero bags: F.embedding_bag
        # (torch 2.13, CPU) crashes on offsets=[0] with include_last_offset=True and ids.
        trailing = 0
        if ilo and sizes:
            trailing = draw(st.integers(0, min(3, max_ids - end)), label="ids after the end")
        offsets = (*starts, end) if ilo else tuple(starts)
        if ilo and not sizes:
            offsets = (0,)
        shape = (end + trailing,)
    ids_recipe = draw(
        _ids_recipes(v, shape, idt, dev, 0, 0, 0, 0, ids_layouts, max(1, max_ids)), label="ids"
    )
    weight_recipe = draw(
        _weight_recipes(v, d, dt, dev, weight_layouts, allow_nonfinite, False), label="weight"
    )
    kwargs: dict[str, Any] = {}
    if "padding_idx" in options and draw(st.booleans(), label="use padding_idx"):
        used = sorted(set(ids_recipe.values))
        # An id of the input 3 times in 4 (a padding row that no id names changes nothing),
        # preferably one that shares a bag with other ids (where padding changes the count).
        mixed = _ids_sharing_a_bag(ids_recipe.values, shape, offsets, ilo)
        if used and draw(st.integers(0, 3), label="padding_idx is not an id") < 3:
            pad = draw(st.sampled_from(mixed or used), label="padding id")
        else:
            pad = draw(st.integers(0, v - 1), label="padding row")
        if draw(st.booleans(), label="negative padding_idx"):
            pad -= v
        kwargs["padding_idx"] = pad
    if "max_norm" in options and draw(st.booleans(), label="use max_norm"):
        kwargs["max_norm"] = draw(st.sampled_from([1.0, 0.5, 2.0, 0.0, 3.5]), label="max_norm")
        kwargs["norm_type"] = draw(st.sampled_from([2.0, 1.0, math.inf, 3.0]), label="norm_type")
    if (
        "scale_grad_by_freq" in options
        and mode != "max"  # refused by F.embedding_bag
        and draw(st.booleans(), label="scale_grad_by_freq")
    ):
        kwargs["scale_grad_by_freq"] = True
    if (
        "sparse" in options
        and mode != "max"  # refused by F.embedding_bag
        and not kwargs.get("scale_grad_by_freq")  # torch's sparse backward cannot scale
        and draw(st.booleans(), label="sparse")
    ):
        kwargs["sparse"] = True
    if ilo:
        kwargs["include_last_offset"] = True
    psw_seed = None
    if (
        "per_sample_weights" in options
        and mode == "sum"  # refused by F.embedding_bag in the other modes
        and draw(st.booleans(), label="per_sample_weights")
    ):
        psw_seed = draw(st.integers(0, 2**32 - 1), label="per_sample_weights seed")
    grad_seed = draw(st.integers(0, 2**32 - 1), label="grad seed")
    case = EmbeddingBagCase(
        ids_recipe, weight_recipe, offsets, idt, mode, kwargs, psw_seed, grad_seed, None
    )
    if invalid is not None:
        kinds = invalid or _default_invalid_kinds(options, modes)
        case = draw(_make_invalid(case, kinds), label="invalid case")
    note(
        f"bag case: V={v}, D={d}, dtype={dt}, device={dev}, mode={case.mode}, ids shape="
        f"{case.ids.shape}, offsets={case.offsets}, layouts=({weight_recipe.layout}, "
        f"{case.ids.layout}), kwargs={dict(case.kwargs)}, per_sample_weights="
        f"{case.per_sample_weights_seed is not None}, invalid={case.invalid}"
    )
    return case


def _ids_sharing_a_bag(
    values: Sequence[int],
    shape: tuple[int, ...],
    offsets: tuple[int, ...] | None,
    include_last_offset: bool,
) -> list[int]:
    """The ids that occur in a bag together with a different id, sorted."""
    if offsets is None:
        count, length = shape
        bounds = [(b * length, (b + 1) * length) for b in range(count)]
    else:
        starts = list(offsets[:-1] if include_last_offset else offsets)
        end = offsets[-1] if include_last_offset else len(values)
        bounds = list(zip(starts, [*starts[1:], end] if starts else [], strict=True))
    found: set[int] = set()
    for lo, hi in bounds:
        bag = set(values[lo:hi])
        if len(bag) > 1:
            found |= bag
    return sorted(found)


@st.composite
def _make_invalid(
    draw: st.DrawFn, case: EmbeddingBagCase, kinds: tuple[str, ...]
) -> EmbeddingBagCase:
    """Turn a valid case into one that the reference refuses, with the reason."""
    kind = draw(st.sampled_from(kinds), label="invalid kind")
    v = case.num_embeddings
    dev = case.device
    values = list(case.ids.values)
    n = len(values)
    if n == 0:
        values, n = [draw(st.integers(0, v - 1), label="an id")], 1
    kwargs = dict(case.kwargs)
    offsets: tuple[int, ...] | None = (0,)
    mode = case.mode
    psw = case.per_sample_weights_seed
    shape: tuple[int, ...] = (n,)
    ids_dtype = case.offsets_dtype
    detail = ""
    if kind in ("id too large", "negative id"):
        pos = draw(st.integers(0, n - 1), label="bad position")
        lo, hi = (v, v + 3) if kind == "id too large" else (-3, -1)
        values[pos] = draw(st.integers(lo, hi), label="bad id")
        detail = f"input[{pos}] = {values[pos]}, V = {v}"
    elif kind == "floating ids":
        ids_dtype = torch.float32
    elif kind == "offsets not starting at 0":
        first = draw(st.integers(1, n), label="first offset")
        offsets = (first, draw(st.integers(first, n), label="second offset"))
        detail = f"offsets={list(offsets)}"
    elif kind == "decreasing offsets":
        # Within [0, N]: F.embedding_bag refuses these or returns, but does not crash.
        high = draw(st.integers(1, n), label="high offset")
        offsets = (0, high, draw(st.integers(0, high - 1), label="lower offset"))
        detail = f"offsets={list(offsets)}"
    elif kind == "last offset past the end":
        offsets = (0, n + draw(st.integers(1, 3), label="past the end by"))
        detail = f"offsets={list(offsets)} with {n} ids"
    elif kind == "1-D input without offsets":
        offsets = None
    elif kind == "2-D input with offsets":
        shape = (1, n)
    elif kind == "padding_idx out of range":
        kwargs["padding_idx"] = draw(st.sampled_from([v, -v - 1]), label="bad padding_idx")
        detail = f"padding_idx={kwargs['padding_idx']}, V = {v}"
    elif kind == "per_sample_weights without mode='sum'":
        mode = draw(st.sampled_from(["mean", "max"]), label="mode")
        psw = draw(st.integers(0, 2**32 - 1), label="per_sample_weights seed")
        detail = f"mode={mode!r}"
    elif kind in ("scale_grad_by_freq with mode='max'", "sparse with mode='max'"):
        mode = "max"
        kwargs = {k: x for k, x in kwargs.items() if k not in ("scale_grad_by_freq", "sparse")}
        kwargs["scale_grad_by_freq" if kind.startswith("scale") else "sparse"] = True
        psw = None
    elif kind == "include_last_offset without offsets":
        offsets = ()
    elif kind == "negative offset":
        offsets = (0, draw(st.integers(-3, -1), label="negative offset"))
        detail = f"offsets={list(offsets)}"
    elif kind == "offsets empty but ids present":
        offsets = ()
    else:  # "offset past the end before the last"
        offsets = (0, n + draw(st.integers(1, 3), label="past the end by"), n)
        detail = f"offsets={list(offsets)} with {n} ids"
    if kind != "include_last_offset without offsets" and offsets is not None:
        kwargs.pop("include_last_offset", None)  # offsets above are starts only
    elif kind == "include_last_offset without offsets":
        kwargs["include_last_offset"] = True
    if kind != "per_sample_weights without mode='sum'" and mode != "sum":
        psw = None
    ids = IdsRecipe(tuple(values), shape, ids_dtype, dev, "contiguous")
    offsets_dtype = case.offsets_dtype
    reason = f"{kind} ({detail})" if detail else kind
    return EmbeddingBagCase(
        ids, case.weight, offsets, offsets_dtype, mode, kwargs, psw, case.grad_seed, reason
    )


def embedding_bag_cases(
    *,
    modes: Sequence[str] = BAG_MODES,
    options: Sequence[str] = (),
    vocab_size: int | st.SearchStrategy[int] | None = None,
    embedding_dim: int | st.SearchStrategy[int] | None = None,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    device: str | st.SearchStrategy[str] | None = None,
    index_dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    weight_layouts: Sequence[str] = WEIGHT_LAYOUTS,
    ids_layouts: Sequence[str] = IDS_LAYOUTS,
    allow_nonfinite: bool = False,
    max_bags: int = 16,
    max_ids: int = 64,
    max_elements: int = _DEFAULT_MAX_ELEMENTS,
    invalid: bool | Sequence[str] = False,
) -> st.SearchStrategy[EmbeddingBagCase]:
    """Whole ``F.embedding_bag`` calls (ids, offsets, table, options, upstream gradient).

    Draws a 1-D input with ``offsets`` (bags of drawn sizes, often empty, with duplicate ids
    inside a bag) or a 2-D input ``(B, L)``, a mode from ``modes``, and each option named in
    ``options`` independently, but only in the combinations ``F.embedding_bag`` accepts:
    ``per_sample_weights`` only with ``mode="sum"``, ``scale_grad_by_freq`` and ``sparse``
    never with ``"max"``, ``sparse`` never with ``scale_grad_by_freq``. With
    ``include_last_offset`` the offsets end with the end of the last bag and up to three ids
    may follow it (they belong to no bag; never when there are zero bags, where
    ``F.embedding_bag`` crashes). ``padding_idx`` names an id of the input half the time, and
    is negative half the time. Shrinks toward ``"sum"`` (the first of ``modes``), few and
    small bags, a 1-D input, float32, the CPU and no options.

    ``V * D`` and ``B * V`` (the dense bag-count matrix of a matmul form) stay within
    ``max_elements``.

    Args:
        modes: reductions to draw from (shrinks toward the first).
        options: names from :data:`BAG_OPTIONS` to exercise.
        vocab_size: ``V`` (value or strategy); default :func:`vocab_sizes` up to
            ``max_elements``.
        embedding_dim: ``D`` (value or strategy); default up to 64 within the budget.
        dtype: floating dtype (value or strategy); default every dtype the device supports.
        device: device (value or strategy); default every device present.
        index_dtype: int64 or int32 (value or strategy) of the ids and the offsets.
        weight_layouts: layouts of the table (see :func:`embedding_weights`).
        ids_layouts: layouts of the ids (see :func:`token_ids`).
        allow_nonfinite: allow ``inf``/``nan`` entries in the table.
        max_bags: the most bags in one call.
        max_ids: the most ids in one call.
        max_elements: budget for ``V * D`` and ``B * V``.
        invalid: ``True`` draws calls that the reference must reject, of the kinds in
            :data:`BAG_INVALID_KINDS` that ``options`` and ``modes`` allow (bad ids, bad
            offsets, missing or extra offsets, options with a mode that refuses them); a
            sequence of kind names draws those kinds, including
            :data:`CRASHING_BAG_INVALID_KINDS`. The case's ``invalid`` says why.

    Returns:
        A strategy of :class:`EmbeddingBagCase`.

    Raises:
        InvalidArgument: unknown modes, options, layouts or invalid kinds, an option that
            ``modes`` can never draw, or bad bounds.
    """
    _check_modes(modes)
    _check_bag_options(options, modes)
    _check_layouts(weight_layouts, WEIGHT_LAYOUTS, "weight_layouts")
    _check_layouts(ids_layouts, IDS_LAYOUTS, "ids_layouts")
    _check_bounds("bags", 1, max_bags, 1)
    _check_bounds("ids", 1, max_ids, 1)
    _check_bounds("elements", 1, max_elements, 1)
    kinds = _check_invalid(invalid)
    if kinds == () and not _default_invalid_kinds(options, modes):  # pragma: no cover
        raise InvalidArgument("no kind of invalid input applies to these options and modes")
    if isinstance(device, str):
        _check_device(device)
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        raise InvalidArgument(f"dtype={dtype} must be a floating dtype")
    if isinstance(index_dtype, torch.dtype) and index_dtype not in _INDEX_DTYPES:
        raise InvalidArgument(f"index_dtype={index_dtype} must be torch.int64 or torch.int32")
    if isinstance(vocab_size, int) and vocab_size < 1:
        raise InvalidArgument(f"vocab_size={vocab_size} must be at least 1")
    if isinstance(embedding_dim, int) and embedding_dim < 1:
        raise InvalidArgument(f"embedding_dim={embedding_dim} must be at least 1")
    default_vocab = vocab_sizes(max_value=max(1, min(262_144, max_elements)))
    return _embedding_bag_case(
        tuple(modes),
        tuple(options),
        _as_strategy(vocab_size, "vocab_size") if vocab_size is not None else default_vocab,
        _as_strategy(embedding_dim, "embedding_dim") if embedding_dim is not None else None,
        _as_strategy(dtype, "dtype") if dtype is not None else None,
        _as_strategy(device, "device") if device is not None else devices(),
        _as_strategy(index_dtype, "index_dtype") if index_dtype is not None else index_dtypes(),
        weight_layouts,
        ids_layouts,
        allow_nonfinite,
        max_bags,
        max_ids,
        max_elements,
        kinds,
    )
