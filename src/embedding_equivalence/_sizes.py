"""The verifiers' size knobs: ``vocab_sizes=``, ``dims=`` and ``num_ids=``.

Each knob is ``None`` (the strategies' defaults: many small tables and the sizes of real
tokenizers, within a budget of a few MB an example), an int, an inclusive ``(min, max)`` range,
or a Hypothesis strategy. With ints and ranges the largest example is known before anything is
drawn, so its memory is estimated then, and a run whose largest example would not fit is
refused with an error that names the size, as the forms refuse a one-hot that would not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from . import strategies as ees
from ._draw_tensors import DEFAULT_MAX_ELEMENTS
from .forms.validation import available_memory_bytes, format_bytes

__all__ = ["SizeSpec", "case_sizes", "example_bytes"]

#: A size knob: ``None``, an int, an inclusive ``(min, max)`` range, or a strategy of ints.
SizeSpec = Union[int, tuple[int, int], st.SearchStrategy[int], None]  # noqa: UP007 - py3.10 alias

#: The most ids the default strategies put in one call (three dims of at most 8).
_DEFAULT_MAX_IDS = 512


def _resolve(
    name: str, spec: SizeSpec, ranged: Callable[[int, int], st.SearchStrategy[int]]
) -> tuple[int | st.SearchStrategy[int] | None, int | None]:
    """The knob as a strategy argument, and its largest value when it is known."""
    if spec is None or isinstance(spec, st.SearchStrategy):
        return spec, None
    if isinstance(spec, tuple):
        if len(spec) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in spec):
            raise InvalidArgument(f"{name}={spec!r} must be an int, (min, max) or a strategy")
        lo, hi = spec
        if not 1 <= lo <= hi:
            raise InvalidArgument(f"{name}={spec!r} must satisfy 1 <= min <= max")
        return ranged(lo, hi), hi
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 1:
        raise InvalidArgument(
            f"{name}={spec!r} must be a positive int, an inclusive (min, max) range or a "
            f"strategy of ints, e.g. {name}=(1000, 4000)"
        )
    return spec, spec


def example_bytes(vocab: int, dim: int, num_ids: int, dtype: torch.dtype) -> tuple[int, int]:
    """Peak bytes of one example: ``(on the host, on the example's device)``.

    On the host the table is drawn in float64 (``8 V D``) and the exact references hold the
    referenced rows in float64 a few times (``6 * 8 N D``, with the upstream gradient). On the
    device the table, its dense gradient and the copy kept for ``max_norm`` take ``3 V D``
    elements of ``dtype``, plus the output and upstream gradient (``2 N D``).

    Args:
        vocab: ``V``.
        dim: ``D``.
        num_ids: ``N``.
        dtype: the table's dtype.

    Returns:
        ``(host_bytes, device_bytes)``.
    """
    size = torch.empty((), dtype=dtype).element_size()
    device = (3 * vocab * dim + 2 * num_ids * dim) * size
    host = 8 * vocab * dim + 6 * 8 * num_ids * dim
    return host, device


def case_sizes(
    fn: str,
    *,
    vocab_sizes: SizeSpec,
    dims: SizeSpec,
    num_ids: SizeSpec = None,
    dtypes: Sequence[torch.dtype],
    devices: Sequence[str],
) -> dict[str, Any]:
    """Keyword arguments for the case strategies, after checking that the largest case fits.

    Args:
        fn: the verifier's name, for the messages.
        vocab_sizes: the ``V`` knob.
        dims: the ``D`` knob.
        num_ids: the ``N`` knob (``None`` for the bag verifier, which draws its own bags).
        dtypes: the dtypes the run draws.
        devices: the devices the run draws.

    Returns:
        ``vocab_size``, ``embedding_dim``, ``num_ids`` and ``max_elements`` for
        [`embedding_cases`][embedding_equivalence.strategies.embedding_cases] (the bag strategy
        takes all but ``num_ids``); empty when every knob is ``None``.

    Raises:
        InvalidArgument: a malformed knob, or a largest example that would not fit in memory.
    """
    vocab, v_max = _resolve(
        "vocab_sizes", vocab_sizes, lambda lo, hi: ees.vocab_sizes(min_value=lo, max_value=hi)
    )
    dim, d_max = _resolve(
        "dims", dims, lambda lo, hi: ees.embedding_dims(min_value=lo, max_value=hi)
    )
    ids, n_max = _resolve("num_ids", num_ids, lambda lo, hi: st.integers(lo, hi))
    if vocab is None and dim is None and ids is None:
        return {}
    sizes: dict[str, Any] = {"vocab_size": vocab, "embedding_dim": dim}
    if ids is not None:
        sizes["num_ids"] = ids
    known_v = v_max if v_max is not None else (None if vocab is not None else 262_144)
    known_d = d_max if d_max is not None else (None if dim is not None else 64)
    if known_v is None or known_d is None:  # a strategy: its largest draw is not known
        sizes["max_elements"] = 1 << 62
        return sizes
    sizes["max_elements"] = max(DEFAULT_MAX_ELEMENTS, known_v * known_d)
    n = n_max if n_max is not None else (None if ids is not None else _DEFAULT_MAX_IDS)
    if n is None:
        return sizes
    for dtype in dtypes:
        host, on_device = example_bytes(known_v, known_d, n, dtype)
        needs = {"cpu": host}
        for d in devices:
            needs[d] = needs.get(d, 0) + on_device
        for where, need in needs.items():
            have = available_memory_bytes(torch.device(where))
            if have is not None and need > have:
                raise InvalidArgument(
                    f"{fn}: the largest example (V={known_v}, D={known_d}, N={n}, {dtype}) "
                    f"needs about {format_bytes(need)} on {where}, more than the "
                    f"{format_bytes(have)} available there; lower vocab_sizes, dims or num_ids"
                )
    return sizes
