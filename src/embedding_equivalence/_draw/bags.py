"""Drawing whole ``F.embedding_bag`` calls: bags, offsets, modes, per-sample weights, bad input.

The options, ``padding_idx`` and bad ids are drawn as for ``F.embedding`` (the helpers of
``_draw.embeddings``), with the bag's mode: which option a mode accepts is read from
``forms.options.OPTION_MODES`` through ``option_applies``, here as everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..forms.bag import bag_bounds
from ..forms.options import BAG_MODES, BAG_OPTIONS, option_applies
from .cases import EmbeddingBagCase
from .embeddings import (
    LOOKUP_INVALID_KINDS,
    draw_bad_lookup,
    draw_lookup_options,
    draw_some_ids,
    option_drawn,
)
from .recipes import IdsRecipe
from .tensors import (
    SEEDS,
    Looks,
    Ranges,
    check_known,
    check_options,
    draw_basics,
    draw_ids,
    draw_weight,
    is_large_table,
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
#: The kinds of bad input that pass an option with a mode that refuses it, and that option.
_REFUSED_BY_MODE: dict[str, str] = {
    "per_sample_weights without mode='sum'": "per_sample_weights",
    "scale_grad_by_freq with mode='max'": "scale_grad_by_freq",
    "sparse with mode='max'": "sparse",
}


def _refusing_modes(option: str) -> tuple[str, ...]:
    """The modes with which ``F.embedding_bag`` refuses ``option``, in shrinking order."""
    return tuple(m for m in BAG_MODES if not option_applies(option, m))


#: Which option (if any) and which modes each kind of bad input needs to be drawn by default.
_INVALID_NEEDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "padding_idx out of range": ("padding_idx", BAG_MODES),
    **{kind: (option, _refusing_modes(option)) for kind, option in _REFUSED_BY_MODE.items()},
    "include_last_offset without offsets": ("include_last_offset", BAG_MODES),
}
#: The largest number of ids in one bag drawn by default (larger ones stay possible up to
#: ``max_ids``, through a second, rarer branch).
_SMALL_BAG = 4


# --- Argument checks --------------------------------------------------------------------------


def check_modes(modes: Sequence[str]) -> None:
    """Refuse a bare string, no mode, an unknown mode or a mode named twice."""
    if isinstance(modes, str) or not modes:
        hint = f", e.g. modes=({modes!r},)" if isinstance(modes, str) else ""
        raise InvalidArgument(
            f"modes={modes!r} must be a non-empty sequence of names from {list(BAG_MODES)}{hint}"
        )
    check_known("modes", modes, BAG_MODES)
    if len(set(modes)) != len(modes):
        raise InvalidArgument(f"modes={modes!r} names a mode twice")


def check_bag_options(options: Sequence[str], modes: Sequence[str]) -> None:
    """Refuse unknown options, and an option that none of ``modes`` accepts."""
    check_options(options, BAG_OPTIONS)
    for option in dict.fromkeys(options):
        allowed = [m for m in BAG_MODES if option_applies(option, m)]
        if not set(allowed) & set(modes):
            raise InvalidArgument(
                f"option {option!r} needs mode {' or '.join(map(repr, allowed))} (as in "
                f"F.embedding_bag), but modes={tuple(modes)!r} never draws it"
            )


def _default_invalid_kinds(options: Sequence[str], modes: Sequence[str]) -> tuple[str, ...]:
    """The kinds of [`BAG_INVALID_KINDS`][] that ``options`` and ``modes`` can draw."""
    kinds = []
    for kind in BAG_INVALID_KINDS:
        option, kind_modes = _INVALID_NEEDS.get(kind, (None, BAG_MODES))
        if (option is None or option in options) and set(kind_modes) & set(modes):
            kinds.append(kind)
    return tuple(kinds)


def check_invalid(invalid: bool | Sequence[str]) -> tuple[str, ...] | None:
    """``None`` for valid cases, ``()`` for the default kinds, else the named kinds.

    The default kinds (those that the options and modes can draw) are never empty: they
    include bad ids, which every mode takes.

    Raises:
        InvalidArgument: neither a bool nor a non-empty sequence of known kinds.
    """
    if isinstance(invalid, bool):
        return () if invalid else None
    if isinstance(invalid, str) or not isinstance(invalid, Sequence) or not invalid:
        raise InvalidArgument(
            f"invalid={invalid!r} must be a bool or a non-empty sequence of kinds from "
            f"BAG_INVALID_KINDS + CRASHING_BAG_INVALID_KINDS"
        )
    check_known("invalid kinds", invalid, BAG_INVALID_KINDS + CRASHING_BAG_INVALID_KINDS)
    return tuple(invalid)


# --- Bags -------------------------------------------------------------------------------------


@st.composite
def _bag_size(draw: st.DrawFn, max_ids: int) -> int:
    """One bag's size: empty 3 times in 10, 1 to 4 ids 6 times in 10, up to ``max_ids`` once.

    Shrinks toward an empty bag.
    """
    branch = draw(st.integers(0, 9), label="bag size branch")
    if branch < 3:
        return 0
    if branch < 9:
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
def _bag_inputs(
    draw: st.DrawFn, max_bags: int, max_ids: int, include_last_offset: bool
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The shape of the ids and the offsets: 1-D ids in bags 3 times in 4, else ``(B, L)``.

    With ``include_last_offset`` the offsets end with the end of the last bag, and up to three
    ids may follow it: they belong to no bag.
    """
    if draw(st.integers(0, 3), label="2-D input") == 3:
        b = draw(st.integers(0, max_bags), label="B")
        length = draw(st.integers(0, max(0, min(16, max_ids // max(b, 1)))), label="L")
        return (b, length), None
    sizes = draw(_bag_sizes(max_bags, max_ids), label="bag sizes")
    starts = tuple(sum(sizes[:i]) for i in range(len(sizes)))
    end = sum(sizes)
    if not include_last_offset:
        return (end,), starts
    if not sizes:
        # No ids after zero bags: F.embedding_bag (torch 2.13, CPU) crashes on offsets=[0]
        # with include_last_offset=True and ids.
        return (0,), (0,)
    trailing = draw(st.integers(0, min(3, max_ids - end)), label="ids after the end")
    return (end + trailing,), (*starts, end)


@st.composite
def _bags_of(
    draw: st.DrawFn, n: int, max_bags: int, include_last_offset: bool
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``n`` ids (the caller's ``num_ids``) as a 1-D input cut into 1 to ``max_bags`` bags.

    The bags start at drawn offsets (equal ones make empty bags); shrinks toward one bag.
    """
    count = draw(st.integers(1, max_bags), label="bags")
    ends = draw(st.lists(st.integers(0, n), min_size=count - 1, max_size=count - 1), label="cuts")
    starts = (0, *sorted(ends))
    return (n,), ((*starts, n) if include_last_offset else starts)


def _one_id_at_least(
    shape: tuple[int, ...], offsets: tuple[int, ...] | None, include_last_offset: bool
) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The input unchanged if a bag holds an id, else one bag of one id.

    A large table's ids start with its edge rows (see ``edge_rows``), which only a bag
    looks up.
    """
    if any(lo < hi for lo, hi in bag_bounds(shape, offsets, include_last_offset)):
        return shape, offsets
    if offsets is None:
        return (1, 1), None
    return (1,), ((0, 1) if include_last_offset else (0,))


def _ids_sharing_a_bag(values: Sequence[int], bounds: Sequence[tuple[int, int]]) -> list[int]:
    """The ids that occur in a bag (of ``bounds``) together with a different id, sorted."""
    bags = [set(values[lo:hi]) for lo, hi in bounds]
    return sorted(set().union(*(bag for bag in bags if len(bag) > 1)))


@st.composite
def embedding_bag_case(
    draw: st.DrawFn,
    ranges: Ranges,
    looks: Looks,
    modes: tuple[str, ...],
    options: tuple[str, ...],
    max_bags: int,
    invalid: tuple[str, ...] | None,
) -> EmbeddingBagCase:
    """An [`EmbeddingBagCase`][]: valid, or of the ``invalid`` kinds (``()``: the default)."""
    b = draw_basics(draw, ranges)
    v = b.vocab_size
    mode = draw(st.sampled_from(modes), label="mode")
    ilo = option_drawn(draw, options, "include_last_offset", mode)
    # The matmul form builds a dense (B, V) bag-count matrix: keep it within the budget.
    b_cap = max(1, min(max_bags, ranges.max_elements // v))
    if ranges.num_ids is not None:  # the caller's own N, as a 1-D input in bags
        n = draw(ranges.num_ids, label="N")
        shape, offsets = draw(_bags_of(n, b_cap, ilo), label="input")
    else:
        shape, offsets = draw(_bag_inputs(b_cap, ranges.max_ids, ilo), label="input")
    if is_large_table(v, b.embedding_dim):
        shape, offsets = _one_id_at_least(shape, offsets, ilo)
    ids = draw_ids(draw, looks, b, shape, max(ranges.max_ids, shape[0]))
    weight = draw_weight(draw, looks, b)
    mixed = _ids_sharing_a_bag(ids.values, bag_bounds(shape, offsets, ilo))
    kwargs = draw_lookup_options(draw, options, v, ids.values, mixed, mode)
    if ilo:
        kwargs["include_last_offset"] = True
    psw_seed = None
    if option_drawn(draw, options, "per_sample_weights", mode):
        psw_seed = draw(SEEDS, label="per_sample_weights seed")
    grad_seed = draw(SEEDS, label="grad seed")
    case = EmbeddingBagCase(ids, weight, offsets, b.index_dtype, mode, kwargs, psw_seed, grad_seed)
    if invalid is not None:
        kinds = invalid or _default_invalid_kinds(options, modes)
        case = draw(_make_invalid(case, kinds), label="invalid case")
    note(
        f"bag case: V={v}, D={b.embedding_dim}, dtype={b.dtype}, device={b.device}, mode="
        f"{case.mode}, ids shape={case.ids.shape}, offsets={case.offsets}, layouts=("
        f"{weight.layout}, {case.ids.layout}), kwargs={dict(case.kwargs)}, per_sample_weights="
        f"{case.per_sample_weights_seed is not None}, invalid={case.invalid}"
    )
    return case


@st.composite
def _make_invalid(
    draw: st.DrawFn, case: EmbeddingBagCase, kinds: tuple[str, ...]
) -> EmbeddingBagCase:
    """Turn a valid case into one that the reference refuses, with the reason."""
    kind = draw(st.sampled_from(kinds), label="invalid kind")
    v = case.num_embeddings
    values = draw_some_ids(draw, case.ids.values, v)
    n = len(values)
    kwargs = dict(case.kwargs)
    offsets: tuple[int, ...] | None = (0,)
    mode, psw, ids_dtype = case.mode, case.per_sample_weights_seed, case.offsets_dtype
    shape: tuple[int, ...] = (n,)
    detail = ""
    if kind in LOOKUP_INVALID_KINDS:
        bad = draw_bad_lookup(draw, kind, values, v, ids_dtype)
        values, ids_dtype = list(bad.values), bad.dtype
        if bad.padding_idx is not None:
            kwargs["padding_idx"] = bad.padding_idx
            detail = f"padding_idx={bad.padding_idx}, V = {v}"
        elif bad.position is not None:
            detail = f"input[{bad.position}] = {values[bad.position]}, V = {v}"
    elif kind in _REFUSED_BY_MODE:
        option = _REFUSED_BY_MODE[kind]
        refusing = _refusing_modes(option)
        mode = draw(st.sampled_from(refusing), label="mode")
        kwargs = {k: x for k, x in kwargs.items() if option_applies(k, mode)}
        if option == "per_sample_weights":
            psw = draw(SEEDS, label="per_sample_weights seed")
        else:
            kwargs[option] = True
        if len(refusing) > 1:  # the kind's name does not say which mode
            detail = f"mode={mode!r}"
    elif kind == "offsets not starting at 0":
        first = draw(st.integers(1, n), label="first offset")
        offsets = (first, draw(st.integers(first, n), label="second offset"))
    elif kind == "decreasing offsets":
        # Within [0, N]: F.embedding_bag refuses these or returns, but does not crash.
        high = draw(st.integers(1, n), label="high offset")
        offsets = (0, high, draw(st.integers(0, high - 1), label="lower offset"))
    elif kind == "last offset past the end":
        offsets = (0, n + draw(st.integers(1, 3), label="past the end by"))
    elif kind == "1-D input without offsets":
        offsets = None
    elif kind == "2-D input with offsets":
        shape = (1, n)
    elif kind in ("include_last_offset without offsets", "offsets empty but ids present"):
        offsets = ()
    elif kind == "negative offset":
        offsets = (0, draw(st.integers(-3, -1), label="negative offset"))
    else:  # "offset past the end before the last"
        offsets = (0, n + draw(st.integers(1, 3), label="past the end by"), n)
    if offsets not in (None, (), (0,)):  # offsets drawn above (not a default): name them
        detail = f"offsets={list(offsets)}" + (f" with {n} ids" if "past the end" in kind else "")
    if kind == "include_last_offset without offsets":
        kwargs["include_last_offset"] = True
    elif offsets is not None:
        kwargs.pop("include_last_offset", None)  # offsets above are starts only
    keeps_psw = _REFUSED_BY_MODE.get(kind) == "per_sample_weights"
    if not keeps_psw and not option_applies("per_sample_weights", mode):
        psw = None
    ids = IdsRecipe(tuple(values), shape, ids_dtype, case.device, "contiguous")
    reason = f"{kind} ({detail})" if detail else kind
    return EmbeddingBagCase(
        ids, case.weight, offsets, case.offsets_dtype, mode, kwargs, psw, case.grad_seed, reason
    )
