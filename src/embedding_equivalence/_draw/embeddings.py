"""Drawing whole ``F.embedding`` calls, and the parts that ``F.embedding_bag`` calls share.

A bag call is an embedding call plus bags: ``_draw.bags`` draws its options, its
``padding_idx`` and its bad ids with the helpers here, so that both strategies follow one
rule. An option named in ``options`` is present 3 times in 4 and absent when shrunk
([`option_drawn`][]), and only ever with a mode that accepts it (``option_applies`` of
``forms.options``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from hypothesis import note
from hypothesis import strategies as st

from ..forms.options import option_applies, option_excluded
from .cases import EmbeddingCase
from .recipes import IdsRecipe
from .tensors import SEEDS, Basics, Looks, Ranges, draw_basics, draw_ids, draw_weight

#: Kinds of bad input that both ``F.embedding`` and ``F.embedding_bag`` refuse.
LOOKUP_INVALID_KINDS: tuple[str, ...] = (
    "id too large",
    "negative id",
    "floating ids",
    "padding_idx out of range",
)
#: Values of ``max_norm`` (0 included: every row that a call looks up is zeroed) and of
#: ``norm_type``, each in shrinking order.
_MAX_NORMS = (1.0, 0.5, 2.0, 0.0, 3.5)
_NORM_TYPES = (2.0, 1.0, math.inf, 3.0)


def option_drawn(
    draw: st.DrawFn, options: Sequence[str], name: str, mode: str | None = None
) -> bool:
    """Whether option ``name`` is present in a drawn call: 3 times in 4 when requested.

    The draw shrinks to 0, absent. It is made whenever ``name`` is in ``options``, even where
    ``mode`` refuses the option, so that no mode and no combination takes fewer choices than
    another and survives shrinking for that reason alone.

    Args:
        draw: the ``draw`` of the calling composite.
        options: the options that the strategy was asked to exercise.
        name: the option.
        mode: the bag's mode, or ``None`` for ``F.embedding`` (which takes every option).

    Returns:
        True when ``name`` is requested, drawn present, and accepted with ``mode``.
    """
    if name not in options:
        return False
    present = draw(st.integers(0, 3), label=f"use {name}") > 0
    return present and (mode is None or option_applies(name, mode))


def _draw_padding_idx(
    draw: st.DrawFn, vocab_size: int, ids: Sequence[int], preferred: Sequence[int] = ()
) -> int:
    """A ``padding_idx``: a row that some id names 3 times in 4, negative half the time.

    A padding row that no id names changes nothing, so an id of the input is drawn, one of
    ``preferred`` when there are any (a bag call prefers ids that share a bag with another id,
    where padding changes the count). Shrinks to the first id, non-negative.
    """
    used = sorted(set(ids))
    if used and draw(st.integers(0, 3), label="padding_idx source") < 3:
        row = draw(st.sampled_from(list(preferred) or used), label="padding id")
    else:
        row = draw(st.integers(0, vocab_size - 1), label="padding row")
    if draw(st.booleans(), label="negative padding_idx"):
        row -= vocab_size
    return row


def draw_lookup_options(
    draw: st.DrawFn,
    options: Sequence[str],
    vocab_size: int,
    ids: Sequence[int],
    preferred: Sequence[int] = (),
    mode: str | None = None,
) -> dict[str, Any]:
    """The keyword options that ``F.embedding`` and ``F.embedding_bag`` share, drawn.

    Each of ``padding_idx`` (see [`_draw_padding_idx`][]), ``max_norm`` (with a
    ``norm_type``), ``scale_grad_by_freq`` and ``sparse`` that ``options`` names is drawn with
    [`option_drawn`][]. ``sparse`` is dropped when ``scale_grad_by_freq`` is on: torch's
    sparse backward cannot scale, so the pair is never combined.
    """
    kwargs: dict[str, Any] = {}
    if option_drawn(draw, options, "padding_idx", mode):
        kwargs["padding_idx"] = _draw_padding_idx(draw, vocab_size, ids, preferred)
    if option_drawn(draw, options, "max_norm", mode):
        kwargs["max_norm"] = draw(st.sampled_from(_MAX_NORMS), label="max_norm")
        kwargs["norm_type"] = draw(st.sampled_from(_NORM_TYPES), label="norm_type")
    if option_drawn(draw, options, "scale_grad_by_freq", mode):
        kwargs["scale_grad_by_freq"] = True
    # Drawn even when scale_grad_by_freq is on: otherwise scale_grad_by_freq=True takes fewer
    # choices than False and survives shrinking.
    if option_drawn(draw, options, "sparse", mode) and not option_excluded("sparse", kwargs):
        kwargs["sparse"] = True
    return kwargs


def draw_some_ids(draw: st.DrawFn, ids: Sequence[int], vocab_size: int) -> list[int]:
    """``ids`` as a list, or one drawn id if there are none (bad input needs an id to spoil)."""
    return list(ids) or [draw(st.integers(0, vocab_size - 1), label="an id")]


class BadLookup(NamedTuple):
    """A call spoilt in one of the [`LOOKUP_INVALID_KINDS`][]."""

    #: The ids, with the bad one in place.
    values: tuple[int, ...]
    #: The ids' dtype: float32 for ``"floating ids"``.
    dtype: torch.dtype
    #: Where the bad id stands, for ``"id too large"`` and ``"negative id"``.
    position: int | None
    #: The out-of-range ``padding_idx``, for ``"padding_idx out of range"``.
    padding_idx: int | None
    #: Why the reference refuses the embedding call, e.g. ``"negative id -2"``.
    reason: str


def draw_bad_lookup(
    draw: st.DrawFn, kind: str, ids: Sequence[int], vocab_size: int, dtype: torch.dtype
) -> BadLookup:
    """Spoil a call (its non-empty ``ids`` of ``dtype``) in the way ``kind`` names."""
    values = list(ids)
    position = padding_idx = None
    if kind in ("id too large", "negative id"):
        position = draw(st.integers(0, len(values) - 1), label="bad position")
        lo, hi = (vocab_size, vocab_size + 3) if kind == "id too large" else (-3, -1)
        bad_id = values[position] = draw(st.integers(lo, hi), label="bad id")
        reason = f"id {bad_id} >= V = {vocab_size}" if bad_id >= 0 else f"negative id {bad_id}"
    elif kind == "floating ids":
        dtype, reason = torch.float32, "floating-point ids"
    else:  # "padding_idx out of range"
        padding_idx = draw(st.sampled_from([vocab_size, -vocab_size - 1]), label="bad padding_idx")
        reason = f"padding_idx={padding_idx} outside [-{vocab_size}, {vocab_size})"
    return BadLookup(tuple(values), dtype, position, padding_idx, reason)


def draw_call_ids(
    draw: st.DrawFn, ranges: Ranges, looks: Looks, basics: Basics, max_numel: int
) -> IdsRecipe:
    """The ids of a call: the caller's ``num_ids`` as a 1-D input, else up to ``max_numel``."""
    if ranges.num_ids is None:
        return draw_ids(draw, looks, basics, None, max_numel)
    n = draw(ranges.num_ids, label="N")
    return draw_ids(draw, looks, basics, (n,), max(n, 1))


def draw_spoilt_ids(
    draw: st.DrawFn, kinds: Sequence[str], ids: IdsRecipe, vocab_size: int
) -> tuple[IdsRecipe, BadLookup, str]:
    """A call's ``ids`` spoilt in one of ``kinds``: the ids, the spoilt call and the reason."""
    kind = draw(st.sampled_from(kinds), label="invalid kind")
    values = draw_some_ids(draw, ids.values, vocab_size)
    bad = draw_bad_lookup(draw, kind, values, vocab_size, ids.dtype)
    spoilt = IdsRecipe(bad.values, ids.shape if ids.values else (1,), bad.dtype, ids.device)
    return spoilt, bad, bad.reason


@st.composite
def embedding_case(
    draw: st.DrawFn, ranges: Ranges, looks: Looks, options: tuple[str, ...], invalid: bool
) -> EmbeddingCase:
    """An [`EmbeddingCase`][], valid or (``invalid``) one that the reference refuses."""
    b = draw_basics(draw, ranges)
    v = b.vocab_size
    # The dense one-hot has N * V entries: keep it within the same budget as the table.
    ids = draw_call_ids(
        draw, ranges, looks, b, max(1, min(ranges.max_ids, ranges.max_elements // v))
    )
    weight = draw_weight(draw, looks, b)
    kwargs = draw_lookup_options(draw, options, v, ids.values)
    grad_seed = draw(SEEDS, label="grad seed")
    reason = None
    if invalid:  # a bad padding_idx only where it is named: nothing unnamed reaches the kernel
        kinds = [k for k in LOOKUP_INVALID_KINDS if "padding_idx" in options or "padding" not in k]
        ids, bad, reason = draw_spoilt_ids(draw, kinds, ids, v)
        if bad.padding_idx is not None:
            kwargs["padding_idx"] = bad.padding_idx
    note(
        f"case: V={v}, D={b.embedding_dim}, dtype={b.dtype}, device={b.device}, ids shape="
        f"{ids.shape}, layouts=({weight.layout}, {ids.layout}), kwargs={kwargs}"
    )
    return EmbeddingCase(ids, weight, kwargs, grad_seed, reason)
