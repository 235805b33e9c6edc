"""The public strategies' implementations, in the drawing layer that the verifiers draw from.

``embedding_equivalence.strategies`` re-exports every public name defined here, with its
docstring (and the recipes, cases and constants from their own modules of this layer). The
layers below the public modules (the size knobs, the engine, the sharded verifier, the CLI)
import them from here, so that no layer imports a public module. The imports marked
"linked" are names that only a docstring links to: a link resolves in the module of its
docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..forms.options import BAG_MODES, BAG_OPTIONS, EMBEDDING_OPTIONS  # noqa: F401 - linked
from . import bags as _bags
from . import embeddings as _embeddings
from . import quantized as _quantized
from . import tensors as _tensors
from .bags import BAG_INVALID_KINDS, CRASHING_BAG_INVALID_KINDS  # noqa: F401 - linked
from .cases import EmbeddingBagCase, EmbeddingCase
from .quantized import QuantizedEmbeddingCase, QuantizedTableRecipe  # noqa: F401 - linked
from .recipes import IDS_LAYOUTS, WEIGHT_LAYOUTS
from .tensors import DEFAULT_MAX_DIM as _DEFAULT_MAX_DIM
from .tensors import DEFAULT_MAX_ELEMENTS as _DEFAULT_MAX_ELEMENTS
from .tensors import DEFAULT_MAX_VOCAB as _DEFAULT_MAX_VOCAB
from .tensors import available_devices, supported_float_dtypes

#: Vocabulary sizes of real tokenizers, reached by [`vocab_sizes`][] when the bounds allow.
REAL_VOCAB_SIZES: tuple[int, ...] = (32_000, 50_257, 65_537, 128_256, 262_144)


def vocab_sizes(
    *, min_value: int = 1, max_value: int = _DEFAULT_MAX_VOCAB
) -> st.SearchStrategy[int]:
    """Vocabulary sizes ``V``: small ones most often, up to the largest real tokenizers.

    Draws mix three sources: ``V`` up to 64 (where duplicates and the first and last row are
    common), any ``V`` in the bounds, and the sizes of real tokenizers
    ([`REAL_VOCAB_SIZES`][]: GPT-2's 50,257, Llama 3's 128,256, 262,144) that lie in the
    bounds. Shrinks toward ``min_value``.

    Args:
        min_value: smallest ``V``, at least 1.
        max_value: largest ``V`` (default 262,144).

    Returns:
        A strategy of ints in ``[min_value, max_value]``.

    Raises:
        InvalidArgument: bounds that are not ints, ``min_value < 1`` or ``max_value < min_value``.
    """
    _tensors.check_bounds("value", min_value, max_value, 1)
    small = st.integers(min_value, min(max_value, max(min_value, 64)))
    real = [v for v in REAL_VOCAB_SIZES if min_value <= v <= max_value]
    tokenizers = [st.sampled_from(real)] if real else []
    return st.one_of(small, st.integers(min_value, max_value), *tokenizers)


def embedding_dims(
    *, min_value: int = 1, max_value: int = _DEFAULT_MAX_DIM
) -> st.SearchStrategy[int]:
    """Embedding dimensions ``D`` in ``[min_value, max_value]``, shrinking toward ``min_value``.

    Args:
        min_value: smallest ``D``, at least 1.
        max_value: largest ``D`` (default 64).

    Returns:
        A strategy of ints.

    Raises:
        InvalidArgument: bad bounds, as for [`vocab_sizes`][].
    """
    _tensors.check_bounds("value", min_value, max_value, 1)
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
    return st.sampled_from(_tensors.INDEX_DTYPES)


def devices(*, include_meta: bool = False) -> st.SearchStrategy[str]:
    """Device kinds present on this machine, CPU first; ``"meta"`` on request.

    The ``meta`` device carries shapes and dtypes but no values: use it for shape-only
    properties.

    Args:
        include_meta: also draw ``"meta"``.

    Returns:
        A strategy of device strings.
    """
    return st.sampled_from(available_devices() + (["meta"] if include_meta else []))


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
    _tensors.check_bounds("dims", min_dims, max_dims, 0)
    _tensors.check_bounds("side", min_side, max_side, 0)
    _tensors.check_layouts(layouts, IDS_LAYOUTS, "layouts")
    _tensors.check_index_dtype("dtype", dtype)
    _tensors.check_device(device)
    _tensors.check_size("vocab_size", vocab_size)

    @st.composite
    def build(draw: st.DrawFn) -> torch.Tensor:
        v = draw(_tensors.as_strategy(vocab_size), label="vocab_size")
        shp = draw(_tensors.as_strategy(shape), label="shape") if shape is not None else None
        dt = draw(_tensors.as_strategy(dtype), label="dtype")
        dev = draw(_tensors.as_strategy(device), label="device")
        sizes = (min_dims, max_dims, min_side, max_side, layouts, 1 << 16)
        return draw(_tensors.ids_recipes(v, shp, dt, dev, *sizes)).build()

    return build()


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
    _tensors.check_size("vocab_size", vocab_size)
    _tensors.check_size("embedding_dim", embedding_dim)
    _tensors.check_layouts(layouts, WEIGHT_LAYOUTS, "layouts")
    _tensors.check_float_dtype(dtype)
    _tensors.check_device(device)

    @st.composite
    def build(draw: st.DrawFn) -> torch.Tensor:
        v = draw(_tensors.as_strategy(vocab_size), label="vocab_size")
        d = draw(_tensors.as_strategy(embedding_dim), label="embedding_dim")
        dt = draw(_tensors.as_strategy(dtype), label="dtype")
        dev = draw(_tensors.as_strategy(device), label="device")
        looks = _tensors.Looks(tuple(layouts), (), allow_nonfinite, allow_signed_zeros)
        recipe = draw(_tensors.weight_recipes(v, d, dt, dev, looks))
        return recipe.build(requires_grad=requires_grad)

    return build()


def _ranges(
    vocab_size: int | st.SearchStrategy[int] | None,
    embedding_dim: int | st.SearchStrategy[int] | None,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None,
    device: str | st.SearchStrategy[str] | None,
    index_dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None,
    max_ids: int,
    max_elements: int,
    num_ids: int | st.SearchStrategy[int] | None = None,
) -> _tensors.Ranges:
    """Check the arguments that both case strategies take, and resolve them to strategies.

    Raises:
        InvalidArgument: bad bounds, a bad dtype, size or device, or a fixed ``V`` or
            ``V * D`` over ``max_elements``.
    """
    _tensors.check_bounds("ids", 1, max_ids, 1)
    _tensors.check_bounds("elements", 1, max_elements, 1)
    _tensors.check_device(device)
    _tensors.check_float_dtype(dtype)
    _tensors.check_index_dtype("index_dtype", index_dtype)
    sizes = dict(vocab_size=vocab_size, embedding_dim=embedding_dim, num_ids=num_ids)
    for name, size in sizes.items():
        if size is not None:
            _tensors.check_size(name, size)
    if isinstance(vocab_size, int):
        if vocab_size > max_elements:
            raise InvalidArgument(f"vocab_size={vocab_size} exceeds max_elements={max_elements}")
        if isinstance(embedding_dim, int) and vocab_size * embedding_dim > max_elements:
            raise InvalidArgument(
                f"vocab_size * embedding_dim = {vocab_size * embedding_dim} exceeds "
                f"max_elements={max_elements}"
            )

    def strategy(value: Any, default: Any = None) -> Any:
        """``value`` as a strategy; ``default`` for ``None``."""
        return default if value is None else _tensors.as_strategy(value)

    return _tensors.Ranges(
        strategy(vocab_size, vocab_sizes(max_value=min(_DEFAULT_MAX_VOCAB, max_elements))),
        strategy(embedding_dim), strategy(dtype), strategy(device, devices()),
        strategy(index_dtype, index_dtypes()), max_ids, max_elements, strategy(num_ids),
    )  # fmt: skip


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
    num_ids: int | st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[EmbeddingCase]:
    """Whole embedding calls (ids, table, options, upstream gradient) as [`EmbeddingCase`][].

    Each option named in ``options`` is drawn independently, present 3 times in 4, so shrinking
    removes the options that do not matter. ``V * D`` and ``N * V`` stay within
    ``max_elements`` (``D`` and ``N`` are kept small when ``V`` is large), so a single example
    with ``V = 262,144`` takes a few MB.

    Args:
        options: names from [`EMBEDDING_OPTIONS`][] to exercise.
        vocab_size: ``V`` (value or strategy); default [`vocab_sizes`][].
        embedding_dim: ``D`` (value or strategy); default [`embedding_dims`][].
        dtype: floating dtype (value or strategy); default every dtype the device supports.
        device: device (value or strategy); default every device present.
        index_dtype: int64 or int32 (value or strategy); default both.
        weight_layouts: layouts of the table (see [`embedding_weights`][]).
        ids_layouts: layouts of the ids (see [`token_ids`][]).
        allow_nonfinite: allow ``inf``/``nan`` entries in the table.
        allow_signed_zeros: allow ``-0.0`` entries in the table.
        max_ids: the most ids in one call.
        max_elements: budget for ``V * D`` and ``N * V``.
        invalid: draw calls that the reference must reject (an id out of range, a negative
            id, floating ids, and ``padding_idx`` out of range where ``options`` names it:
            no option that ``options`` leaves out is passed); the case's ``invalid`` says why.
        num_ids: the number of ids ``N`` (value or strategy), drawn as a 1-D input of that
            length, beyond ``max_ids`` and the element budget; default ids of up to three dims
            within them.

    Returns:
        A strategy of [`EmbeddingCase`][].

    Raises:
        InvalidArgument: unknown options or layouts, bad bounds, or a fixed ``V`` or ``V * D``
            over ``max_elements``.
    """
    _tensors.check_options(options, EMBEDDING_OPTIONS)
    looks = _tensors.looks(weight_layouts, ids_layouts, allow_nonfinite, allow_signed_zeros)
    ranges = _ranges(
        vocab_size, embedding_dim, dtype, device, index_dtype, max_ids, max_elements, num_ids
    )
    return _embeddings.embedding_case(ranges, looks, tuple(options), invalid)


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
    num_ids: int | st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[EmbeddingBagCase]:
    """Whole ``F.embedding_bag`` calls (ids, offsets, table, options, upstream gradient).

    Draws a 1-D input with ``offsets`` (bags of drawn sizes, often empty, with duplicate ids
    inside a bag) or a 2-D input ``(B, L)``, a mode from ``modes``, and each option named in
    ``options`` independently (present 3 times in 4, as in [`embedding_cases`][]), but only
    in the combinations ``F.embedding_bag`` accepts: ``per_sample_weights`` only with
    ``mode="sum"``, ``scale_grad_by_freq`` and ``sparse`` never with ``"max"``, ``sparse``
    never with ``scale_grad_by_freq``. With ``include_last_offset`` the offsets end with the
    end of the last bag and up to three ids may follow it (they belong to no bag; never when
    there are zero bags, where ``F.embedding_bag`` crashes). ``padding_idx`` names an id of
    the input 3 times in 4 (preferably one that shares a bag with another id), and is
    negative half the time. Shrinks toward ``"sum"`` (the first of ``modes``), few and small
    bags, a 1-D input, float32, the CPU and no options.

    ``V * D`` and ``B * V`` (the dense bag-count matrix of a matmul form) stay within
    ``max_elements``.

    Args:
        modes: reductions to draw from (shrinks toward the first).
        options: names from [`BAG_OPTIONS`][] to exercise.
        vocab_size: ``V`` (value or strategy); default [`vocab_sizes`][] up to
            ``max_elements``.
        embedding_dim: ``D`` (value or strategy); default up to 64 within the budget.
        dtype: floating dtype (value or strategy); default every dtype the device supports.
        device: device (value or strategy); default every device present.
        index_dtype: int64 or int32 (value or strategy) of the ids and the offsets.
        weight_layouts: layouts of the table (see [`embedding_weights`][]).
        ids_layouts: layouts of the ids (see [`token_ids`][]).
        allow_nonfinite: allow ``inf``/``nan`` entries in the table.
        max_bags: the most bags in one call.
        max_ids: the most ids in one call.
        max_elements: budget for ``V * D`` and ``B * V``.
        invalid: ``True`` draws calls that the reference must reject, of the kinds in
            [`BAG_INVALID_KINDS`][] that ``options`` and ``modes`` allow (bad ids, bad
            offsets, missing or extra offsets, options with a mode that refuses them); a
            sequence of kind names draws those kinds, including
            [`CRASHING_BAG_INVALID_KINDS`][]. The case's ``invalid`` says why.
        num_ids: ``N``, the length of a 1-D input (value or strategy), cut into up to
            ``max_bags`` bags at drawn offsets (empty bags included); default inputs of up to
            ``max_ids`` ids, 1-D or 2-D.

    Returns:
        A strategy of [`EmbeddingBagCase`][].

    Raises:
        InvalidArgument: unknown modes, options, layouts or invalid kinds, an option that
            ``modes`` can never draw, bad bounds, or a fixed ``V`` or ``V * D`` over
            ``max_elements``.
    """
    _bags.check_modes(modes)
    _bags.check_bag_options(options, modes)
    _tensors.check_bounds("bags", 1, max_bags, 1)
    kinds = _bags.check_invalid(invalid)
    looks = _tensors.looks(weight_layouts, ids_layouts, allow_nonfinite, False)
    ranges = _ranges(
        vocab_size, embedding_dim, dtype, device, index_dtype, max_ids, max_elements, num_ids
    )
    return _bags.embedding_bag_case(ranges, looks, tuple(modes), tuple(options), max_bags, kinds)


#: The scale dtypes a quantized case draws by default: those of inference tables. float64 is
#: accepted when asked for; its scales are drawn within float32's range, the least precise
#: compute dtype the bound admits.
QUANTIZED_SCALE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def quantized_embedding_cases(
    scheme: str,
    *,
    symmetric: bool = False,
    vocab_size: int | st.SearchStrategy[int] | None = None,
    embedding_dim: int | st.SearchStrategy[int] | None = None,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    device: str | st.SearchStrategy[str] | None = None,
    index_dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    ids_layouts: Sequence[str] = IDS_LAYOUTS,
    allow_nonfinite: bool = True,
    max_ids: int = 64,
    max_elements: int = _DEFAULT_MAX_ELEMENTS,
    invalid: bool = False,
    num_ids: int | st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[QuantizedEmbeddingCase]:
    """Lookups of quantized tables, ``fn(input, qweight, scale, zero_point)``.

    The table is drawn as stored values, per-row scales and zero points (see
    [`QuantizedTableRecipe`][]) with wide magnitudes: scales from the subnormals to products
    that overflow the output dtype, constant rows and rows that dequantize to zero. A failure
    shrinks toward a small table of scales near 1.

    Args:
        scheme: ``"int8"``, ``"uint4"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.
        symmetric: ``"int8"`` only: no zero point (``zero_point=None``).
        vocab_size: ``V`` (value or strategy); default [`vocab_sizes`][].
        embedding_dim: ``D`` (value or strategy; odd values are made even for ``"uint4"``);
            default up to 64 within ``max_elements``.
        dtype: the scales' dtype, which is the output's (value or strategy); default
            float32, float16 and bfloat16, as the device supports them.
        device: device (value or strategy); default every device present.
        index_dtype: int64 or int32 (value or strategy); default both.
        ids_layouts: layouts of the ids (see [`token_ids`][]).
        allow_nonfinite: float8 tables may hold inf and nan codes.
        max_ids: most ids a call looks up.
        max_elements: budget for ``V * D``.
        invalid: draw calls the reference refuses (an id out of range, a negative id,
            floating ids) instead.
        num_ids: ``N``, the length of a 1-D input (value or strategy); default ids of up to
            three dims.

    Returns:
        A strategy of [`QuantizedEmbeddingCase`][].

    Raises:
        InvalidArgument: an unknown scheme, ``symmetric`` with a scheme other than
            ``"int8"``, an odd fixed ``D`` for ``"uint4"``, or the arguments that
            [`embedding_cases`][] refuses.
    """
    _tensors.check_scheme_argument(scheme, "quantized_embedding_cases")
    if symmetric and scheme != "int8":
        raise InvalidArgument(f"symmetric=True applies to scheme='int8' only, not {scheme!r}")
    if scheme == "uint4" and isinstance(embedding_dim, int) and embedding_dim % 2:
        raise InvalidArgument(
            f"embedding_dim={embedding_dim} is odd, but scheme='uint4' packs two columns a "
            f"byte; pass an even embedding_dim"
        )
    dtype = st.sampled_from(QUANTIZED_SCALE_DTYPES) if dtype is None else dtype
    looks = _tensors.looks(WEIGHT_LAYOUTS[:1], ids_layouts, allow_nonfinite, False)
    ranges = _ranges(
        vocab_size, embedding_dim, dtype, device, index_dtype, max_ids, max_elements, num_ids
    )
    return _quantized.quantized_case(scheme, symmetric, ranges, looks, invalid)
