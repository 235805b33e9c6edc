"""Hypothesis strategies for embedding tables, token ids and whole embedding calls.

Shaped like ``hypothesis.extra.numpy``: plural nouns, arguments that take a value or a
strategy, keyword-only ``min_*``/``max_*`` bounds where ``None`` means a sensible default, and
:class:`~hypothesis.errors.InvalidArgument` raised before anything is drawn.

Every tensor is built from drawn values only: ids are drawn one by one, and a table is drawn
as a seed for a ``torch.Generator`` plus drawn structure (shape, dtype, layout, special
entries). A failure therefore replays exactly and shrinks toward small ``V``, ``D`` and ``N``,
float32, the CPU, contiguous layouts and no options.

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

from ._cases import IDS_LAYOUTS, WEIGHT_LAYOUTS, EmbeddingCase, IdsRecipe, WeightRecipe

__all__ = [
    "EMBEDDING_OPTIONS",
    "EmbeddingCase",
    "IDS_LAYOUTS",
    "IdsRecipe",
    "REAL_VOCAB_SIZES",
    "WEIGHT_LAYOUTS",
    "WeightRecipe",
    "available_devices",
    "devices",
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
    kind = torch.device(device).type
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
            st.one_of(st.sampled_from(sorted({0, vocab_size - 1})), st.integers(0, vocab_size - 1)),
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
    if layout == "expanded" and len(shape) >= 1 and shape[0] > 0:
        row = draw(_id_values(vocab_size, numel // shape[0]), label="expanded row")
        values = row * shape[0]
    else:
        values = draw(_id_values(vocab_size, numel), label="ids")
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
    if isinstance(vocab_size, int) and vocab_size < 1:
        raise InvalidArgument(f"vocab_size={vocab_size} must be at least 1")

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
    if "padding_idx" in options and draw(st.booleans(), label="use padding_idx"):
        kwargs["padding_idx"] = draw(st.integers(-v, v - 1), label="padding_idx")
    if "max_norm" in options and draw(st.booleans(), label="use max_norm"):
        kwargs["max_norm"] = draw(st.sampled_from([1.0, 0.5, 2.0, 0.0, 3.5]), label="max_norm")
        kwargs["norm_type"] = draw(st.sampled_from([2.0, 1.0, math.inf, 3.0]), label="norm_type")
    if "scale_grad_by_freq" in options and draw(st.booleans(), label="scale_grad_by_freq"):
        kwargs["scale_grad_by_freq"] = True
    if (
        "sparse" in options
        and not kwargs.get("scale_grad_by_freq")  # torch's sparse backward cannot scale
        and draw(st.booleans(), label="sparse")
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
    return _embedding_case(
        tuple(options),
        _as_strategy(vocab_size, "vocab_size") if vocab_size is not None else vocab_sizes(),
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
