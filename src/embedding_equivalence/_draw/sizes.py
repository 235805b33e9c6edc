"""The verifiers' size knobs: ``vocab_sizes=``, ``embedding_dims=`` and ``num_ids=``.

Each knob is ``None`` (the strategies' defaults: many small tables and the sizes of real
tokenizers, within a budget of a few MB an example), an int, an inclusive ``(min, max)`` range,
or a Hypothesis strategy. With ints and ranges the largest example is known before anything is
drawn, so its memory is estimated then, and a run whose largest example would not fit is
refused with an error that names the size, as the forms refuse a one-hot that would not fit.

The estimate counts what an example allocates ([`example_bytes`][]): a large table (see
``LARGE_TABLE_ELEMENTS`` in ``_draw.tensors``) in its own dtype and contiguous, its dense
gradient, the output and upstream gradient, and the oracle's referenced rows; so a table
past ``2**31`` elements (4 GiB in float16, [`large_table_sizes`][]) runs on a machine with
24 GiB, and one that cannot fit is refused before anything is drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..forms.memory import available_memory_bytes, format_bytes
from ..oracle.expected import CHUNK_ELEMENTS
from . import strategies as ees
from .tensors import (
    DEFAULT_MAX_DIM,
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_VOCAB,
    INT32_ELEMENTS,
    check_scheme_argument,
    is_large_table,
)

#: A size knob: ``None``, an int, an inclusive ``(min, max)`` range, or a strategy of ints.
SizeSpec = Union[int, tuple[int, int], st.SearchStrategy[int], None]  # noqa: UP007 - py3.10 alias

#: The most ids the default strategies put in one call (three dims of at most 8).
_DEFAULT_MAX_IDS = 512
#: The kinds of call a verifier makes: ``F.embedding``, ``F.embedding_bag``, a quantized lookup.
KINDS = ("embedding", "bag", "quantized")
#: ``D`` of [`large_table_sizes`][]: a width of real models, a multiple of every vector width.
LARGE_TABLE_DIM = 1024
#: Rows past 2**31 elements in [`large_table_sizes`][]: a few, so that the last rows' offsets
#: wrap in an int32 while the rows before 2**31 still read right.
_ROWS_PAST = 8


def large_table_sizes(
    dtype: torch.dtype = torch.float16, kind: str = "embedding", *, scheme: str = "int8"
) -> tuple[int, int]:
    """``(V, D)`` of a table just past ``2**31`` elements: its last rows' offsets overflow int32.

    ``D = 1024`` and ``V = 2**21 + 8``: ``V * D = 2**31 + 8,192``, so the last 8 rows lie
    past ``2**31`` (a kernel that computes the offset in int32 reads them wrapped, or faults).
    The element count decides the overflow whatever the dtype: the table takes 4 GiB in
    float16 or bfloat16, 8 GiB in float32 (16 GiB in float64, which the memory check of a
    verifier refuses on most machines, naming the size). A quantized table stores one byte an
    element (2 GiB for ``"int8"`` and float8); ``"uint4"`` packs two elements a byte, so its
    byte offsets ``id * D / 2`` pass ``2**31`` at ``V = 2**22 + 8`` (still 2 GiB).

    Args:
        dtype: the table's dtype (the scales' for ``kind="quantized"``); floating.
        kind: ``"embedding"``, ``"bag"`` or ``"quantized"``.
        scheme: for ``kind="quantized"``, the scheme's name.

    Returns:
        ``(V, D)``, for ``vocab_sizes=V, embedding_dims=D``.

    Raises:
        InvalidArgument: an unknown kind or scheme, or a dtype that is not floating.

    Examples:
        >>> import torch
        >>> large_table_sizes(torch.float16)
        (2097160, 1024)
        >>> large_table_sizes(torch.float32, "quantized", scheme="uint4")
        (4194312, 1024)
    """
    if kind not in KINDS:
        raise InvalidArgument(f"kind={kind!r} must be one of {KINDS}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidArgument(f"dtype={dtype!r} must be a floating torch.dtype")
    packed = kind == "quantized" and check_scheme_argument(scheme, "large_table_sizes").packed
    return (2 if packed else 1) * INT32_ELEMENTS // LARGE_TABLE_DIM + _ROWS_PAST, LARGE_TABLE_DIM


def _resolve(
    name: str, spec: SizeSpec, ranged: Callable[..., st.SearchStrategy[int]], default: int
) -> tuple[int | st.SearchStrategy[int] | None, int | None]:
    """The knob as a strategy argument, and its largest value when it is known.

    A range becomes ``ranged(min_value=lo, max_value=hi)``; ``None`` is the strategies'
    default, whose largest value is ``default``; a strategy's is not known.
    """
    if spec is None or isinstance(spec, st.SearchStrategy):
        return spec, None if spec is not None else default
    if isinstance(spec, tuple):
        if len(spec) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in spec):
            raise InvalidArgument(f"{name}={spec!r} must be an int, (min, max) or a strategy")
        lo, hi = spec
        if not 1 <= lo <= hi:
            raise InvalidArgument(f"{name}={spec!r} must satisfy 1 <= min <= max")
        return ranged(min_value=lo, max_value=hi), hi
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 1:
        raise InvalidArgument(
            f"{name}={spec!r} must be a positive int, an inclusive (min, max) range or a "
            f"strategy of ints, e.g. {name}=(1000, 4000)"
        )
    return spec, spec


def example_bytes(
    vocab: int,
    dim: int,
    num_ids: int,
    dtype: torch.dtype,
    *,
    kind: str = "embedding",
    backward: bool = True,
) -> tuple[int, int]:
    """Peak bytes of one example: ``(on the host, on the example's device)``.

    What one example allocates, with ``s`` the dtype's size:

    - the table: ``V D s``. A large table (at least ``LARGE_TABLE_ELEMENTS``) is drawn in
      its own dtype and contiguous; a smaller one is drawn in float64 on the host
      (``8 V D``) and may sit in a layout twice as wide (``2 V D s``);
    - its dense gradient (``backward``): ``V D s``;
    - for ``max_norm``, what the oracle keeps of the table as it was: a copy of a small one
      (``V D s``), a digest of each row of a large one (``8 V`` on the host), which with the
      chunks that a large table is read in (``48`` bytes per element of a chunk) stays
      below the size of a copy;
    - the output and the upstream gradient: ``2 N D s``;
    - the oracle's referenced rows, sums and bounds, float64 on the host: ``6 * 8 N D``.

    A quantized table (``kind="quantized"``, forward only; ``dtype`` is the scales') stores
    one byte an element, with a scale (``s``) and a zero point (4 bytes) per row, drawn
    through float64 and int64 (``16 V`` on the host).

    Args:
        vocab: ``V``.
        dim: ``D``.
        num_ids: ``N``.
        dtype: the table's dtype (the scales' for a quantized table).
        kind: ``"embedding"``, ``"bag"`` or ``"quantized"``.
        backward: whether the gradient is computed (never for ``"quantized"``).

    Returns:
        ``(host_bytes, device_bytes)``.
    """
    size = torch.empty((), dtype=dtype).element_size()
    elements = vocab * dim
    host = 6 * 8 * num_ids * dim
    if kind == "quantized":
        return host + 16 * vocab, elements + (size + 4) * vocab + num_ids * dim * size
    table = elements * size
    device = (2 if backward else 1) * table + 2 * num_ids * dim * size
    if is_large_table(vocab, dim):
        host += 8 * vocab + 48 * min(elements, CHUNK_ELEMENTS)
    else:
        host += 8 * elements  # the float64 draw
        device += 2 * table  # a layout twice as wide, or the copy kept for max_norm
    return host, device


def case_sizes(
    fn: str,
    *,
    vocab_sizes: SizeSpec,
    embedding_dims: SizeSpec,
    num_ids: SizeSpec = None,
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
    kind: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for the case strategies, after checking that the largest case fits.

    Args:
        fn: the verifier's name, for the messages (and the kind of call: ``"quantized"`` or
            ``"bag"`` when it names one).
        vocab_sizes: the ``V`` knob.
        embedding_dims: the ``D`` knob.
        num_ids: the ``N`` knob.
        dtypes: the dtypes the run draws.
        devices: the devices the run draws.
        kind: the kind of call, from [`KINDS`][] (default: read from ``fn``), which
            [`example_bytes`][] counts.

    Returns:
        ``vocab_size``, ``embedding_dim``, ``num_ids`` and ``max_elements`` for
        [`embedding_cases`][embedding_equivalence.strategies.embedding_cases] and
        [`embedding_bag_cases`][embedding_equivalence.strategies.embedding_bag_cases]; empty when
        every knob is ``None``.

    Raises:
        InvalidArgument: a malformed knob, or a largest example that would not fit in memory.
    """
    vocab, known_v = _resolve("vocab_sizes", vocab_sizes, ees.vocab_sizes, DEFAULT_MAX_VOCAB)
    dim, known_d = _resolve("embedding_dims", embedding_dims, ees.embedding_dims, DEFAULT_MAX_DIM)
    ids, n = _resolve("num_ids", num_ids, st.integers, _DEFAULT_MAX_IDS)
    if vocab is None and dim is None and ids is None:
        return {}
    sizes: dict[str, Any] = {"vocab_size": vocab, "embedding_dim": dim}
    if ids is not None:
        sizes["num_ids"] = ids
    if known_v is None or known_d is None:  # a strategy: its largest draw is not known
        return {**sizes, "max_elements": 1 << 62}
    sizes["max_elements"] = max(DEFAULT_MAX_ELEMENTS, known_v * known_d)
    if n is None:
        return sizes
    if kind is None:
        kind = next((k for k in KINDS[1:] if k in fn), "embedding")
    for dtype in dtypes:
        host, on_device = example_bytes(known_v, known_d, n, dtype, kind=kind)
        size = 1 if kind == "quantized" else torch.empty((), dtype=dtype).element_size()
        needs = {"cpu": host}
        for d in devices:
            needs[d] = needs.get(d, 0) + on_device
            if torch.device(d).type != "cpu":  # the table is drawn on the host, then moved
                needs["cpu"] += known_v * known_d * size
        for where, need in needs.items():
            have = available_memory_bytes(torch.device(where))
            if have is not None and need > have:
                raise InvalidArgument(
                    f"{fn}: the largest example (V={known_v}, D={known_d}, N={n}, {dtype}) "
                    f"needs about {format_bytes(need)} on {where}, more than the "
                    f"{format_bytes(have)} available there; lower vocab_sizes, embedding_dims "
                    f"or num_ids"
                )
    return sizes
