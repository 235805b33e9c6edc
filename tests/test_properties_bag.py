"""EmbeddingBag as properties: both forms == the float64 oracle, for every mode and option.

Four groups:

- the forms against the oracle (forward, gradients, renorm, bad input), per mode and device;
- the relation ``EmbeddingBag(ids, offsets) == reduce(Embedding(ids))`` bag by bag;
- the strategy ``embedding_bag_cases`` itself: invalid calls, "every draw satisfies",
  "can reach", replay;
- ``F.embedding_bag``'s own defects (torch 2.13, CPU), each pinned by a strict xfail with a
  minimal repro, and found by ``verify_embedding_bag``, which is checked against the oracle
  and never against torch's kernel.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import Phase, find, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.forms import form
from embedding_equivalence.testing import (
    EquivalenceError,
    assert_bag_backward_equivalent,
    assert_bag_case_equivalent,
    assert_bag_forward_equivalent,
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    reference_embedding_bag,
    reference_embedding_bag_grad,
)
from registry import form_params

TORCH = torch.__version__
MODES = list(ees.BAG_MODES)
FORMS = form_params("bag", with_options=True)

# find() settings: derandomized, so that a "can reach" test never flakes; no shrinking.
FIRST_HIT = settings(
    database=None, derandomize=True, deadline=None, max_examples=2000, phases=[Phase.generate]
)
MINIMAL = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=300,
    phases=[Phase.generate, Phase.shrink],
)


def _options_for(mode: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """The options that F.embedding_bag accepts with ``mode``."""
    refused = {"sum": (), "mean": ("per_sample_weights",)}.get(
        mode, ("per_sample_weights", "scale_grad_by_freq", "sparse")
    )
    return tuple(o for o in options if o not in refused)


def _bounds(case: ees.EmbeddingBagCase) -> list[tuple[int, int]]:
    """``(start, end)`` of each bag of a valid case, in the flat ids."""
    if case.offsets is None:
        count, length = case.ids.shape
        return [(b * length, (b + 1) * length) for b in range(count)]
    ilo = case.kwargs.get("include_last_offset", False)
    starts = list(case.offsets[:-1] if ilo else case.offsets)
    end = case.offsets[-1] if ilo else case.ids.shape[0]
    return list(zip(starts, [*starts[1:], end] if starts else [], strict=True))


def _bags(case: ees.EmbeddingBagCase) -> list[list[int]]:
    return [list(case.ids.values[lo:hi]) for lo, hi in _bounds(case)]


# --------------------------------------------------------------------------------------------
# The forms against the oracle
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("form", "options"), FORMS)
def test_form_matches_oracle(
    form: Callable[..., Any], options: tuple[str, ...], mode: str, embedding_device: str
) -> None:
    """Forward within the derived bound (max exact), gradients, renorm, for every option."""

    @settings(max_examples=30)
    @given(
        case=ees.embedding_bag_cases(
            modes=(mode,), options=_options_for(mode, options), device=embedding_device
        )
    )
    def check(case: ees.EmbeddingBagCase) -> None:
        assert_bag_case_equivalent(form, case)

    check()


@pytest.mark.parametrize(("form", "options"), FORMS)
def test_forms_reject_bad_input_alike(form: Callable[..., Any], options: tuple[str, ...]) -> None:
    """Every kind of bad input, the crashing ones included: the same exception type as the
    lookup, with the form's own name first in the message."""
    kinds = tuple(
        kind
        for kind in ees.BAG_INVALID_KINDS + ees.CRASHING_BAG_INVALID_KINDS
        if "sparse" in options or not kind.startswith("sparse")  # matmul takes no sparse
    )

    @settings(max_examples=30)
    @given(case=ees.embedding_bag_cases(options=options, device="cpu", invalid=kinds))
    def check(case: ees.EmbeddingBagCase) -> None:
        args, kwargs = case.arguments(case.build(requires_grad=False))
        with pytest.raises(Exception) as reference:  # noqa: PT011 - the type is compared below
            ee.lookup_embedding_bag(*args, **kwargs)
        with pytest.raises(reference.type, match=f"^{form.__name__}: "):
            form(*args, **kwargs)

    check()


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=30)
@given(data=st.data())
def test_bag_is_a_reduction_of_the_lookup(mode: str, data: st.DataObject) -> None:
    """``EmbeddingBag(ids, offsets)[b] == reduce(Embedding(ids)[bag b])``, bag by bag.

    The lookup copies rows exactly; their per-bag reduction is computed exactly (``fsum``),
    so the bag form must lie within its derived bound of it, and max must equal it.
    """
    options = _options_for(mode, ("padding_idx", "per_sample_weights", "include_last_offset"))
    case = data.draw(ees.embedding_bag_cases(modes=(mode,), options=options), label="case")
    tensors = case.build(requires_grad=False)
    args, kwargs = case.arguments(tensors)
    bag = ee.lookup_embedding_bag(*args, **kwargs)
    rows = ee.lookup_embedding(tensors.input, tensors.weight).reshape(-1, case.embedding_dim)
    rows64 = rows.double().tolist()
    psw = tensors.per_sample_weights
    coef = [1.0] * len(rows64) if psw is None else psw.double().reshape(-1).tolist()
    padding = case.kwargs.get("padding_idx")
    padding = None if padding is None else padding % case.num_embeddings
    reduced = []
    for lo, hi in _bounds(case):
        keep = [i for i in range(lo, hi) if case.ids.values[i] != padding]
        if not keep:
            reduced.append([0.0] * case.embedding_dim)
        elif mode == "max":
            reduced.append([max(col) for col in zip(*(rows64[i] for i in keep), strict=True)])
        else:
            terms = [[coef[i] * x for x in rows64[i]] for i in keep]
            sums = [math.fsum(col) for col in zip(*terms, strict=True)]
            reduced.append([x / len(keep) if mode == "mean" else x for x in sums])
    expected = torch.tensor(reduced, dtype=torch.float64).reshape(-1, case.embedding_dim)
    if mode == "max":
        assert torch.equal(bag.double(), expected)
    else:
        bound = embedding_bag_error_bound(*args, **kwargs)
        assert bool(((bag.double() - expected).abs() <= bound).all())


# --------------------------------------------------------------------------------------------
# The testing helpers on bags
# --------------------------------------------------------------------------------------------

W = torch.tensor([[1.0, 5.0], [3.0, 2.0], [3.0, 5.0], [0.5, -1.0]])
IDS = torch.tensor([0, 1, 2, 2, 1, 0, 3])
OFFS = torch.tensor([0, 3, 6])


def _max_with_last_tie(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
    """``max`` whose gradient goes to the *last* maximizing id (as a scatter kernel's may)."""
    bounds = [*offsets.tolist(), input.shape[0]]
    bags = [
        ee.lookup_embedding_bag(input[lo:hi].flip(0), weight, torch.tensor([0]), **kw)
        for lo, hi in itertools.pairwise(bounds)
    ]
    return torch.cat(bags)


G = torch.tensor([[1.0, -2.0], [0.5, 4.0], [3.0, 7.0]])


def test_max_ties_accept_any_maximizing_row() -> None:
    # Rows 1 and 2 tie in column 0 (3.0), rows 0 and 2 in column 1 (5.0): torch gives the
    # gradient to the first maximizing id, a scatter kernel to the last; both are right.
    assert assert_bag_backward_equivalent(F.embedding_bag, IDS, W, OFFS, G, mode="max") == 0
    assert assert_bag_backward_equivalent(_max_with_last_tie, IDS, W, OFFS, G, mode="max") == 0


def test_max_ties_refuse_a_doubled_gradient() -> None:
    def both_ends(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
        first = ee.lookup_embedding_bag(input, weight, offsets, **kw)
        last = _max_with_last_tie(input, weight, offsets, **kw)
        return first + last - last.detach()  # the right values; the gradient to both ends

    with pytest.raises(EquivalenceError, match=r"^weight\.grad\[\d, \d\] = .* exact value is"):
        assert_bag_backward_equivalent(both_ends, IDS, W, OFFS, G, mode="max")


def test_max_ties_in_every_bag() -> None:
    # Rows 0 and 1 are equal, and each of 24 bags holds both: 2**24 ways to give out the
    # gradient. Any one of them is accepted (first, last, alternating); a doubled one is not.
    weight = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]])
    n = 24
    ids, offsets = torch.tensor([0, 1] * n), torch.arange(n) * 2
    g = torch.randn(n, 2, generator=torch.Generator().manual_seed(0))

    def alternate(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
        bounds = [*offsets.tolist(), input.shape[0]]
        bags = [
            ee.lookup_embedding_bag(
                input[lo:hi].flip(0) if j % 2 else input[lo:hi], weight, torch.tensor([0]), **kw
            )
            for j, (lo, hi) in enumerate(itertools.pairwise(bounds))
        ]
        return torch.cat(bags)

    def both_ends(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
        last = _max_with_last_tie(input, weight, offsets, **kw)
        return ee.lookup_embedding_bag(input, weight, offsets, **kw) + last - last.detach()

    for candidate in (F.embedding_bag, _max_with_last_tie, alternate):
        assert_bag_backward_equivalent(candidate, ids, weight, offsets, g, mode="max")
    with pytest.raises(EquivalenceError, match="no such choice explains this one"):
        assert_bag_backward_equivalent(both_ends, ids, weight, offsets, g, mode="max")


def test_forward_helper_names_the_bag_and_the_call() -> None:
    def sums_for_mean(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
        return ee.lookup_embedding_bag(input, weight, offsets, **{**kw, "mode": "sum"})

    with pytest.raises(EquivalenceError) as info:
        assert_bag_forward_equivalent(sums_for_mean, IDS, W, OFFS, mode="mean")
    message = str(info.value)
    assert message.startswith("out[0, 0] = 7, but the exact value is 2.33333333")
    assert "sums_for_mean(input=tensor([0, 1, 2, 2, 1, 0, 3]), weight=" in message
    assert "offsets=tensor([0, 3, 6]), mode='mean')" in message
    assert "Repro:\nimport torch" in message


def test_per_sample_weights_gradient_is_checked() -> None:
    def detached(input: torch.Tensor, weight: torch.Tensor, offsets: Any, **kw: Any) -> Any:
        kw["per_sample_weights"] = kw["per_sample_weights"].detach()
        return ee.lookup_embedding_bag(input, weight, offsets, **kw)

    psw = torch.tensor([0.5, 2.0, -1.0, 1.0, 0.25, 3.0, 1.5])
    g = torch.ones(3, 2)
    kw = {"mode": "sum", "per_sample_weights": psw}
    assert assert_bag_backward_equivalent(F.embedding_bag, IDS, W, OFFS, g, **kw) <= 1.0
    with pytest.raises(EquivalenceError, match=r"per_sample_weights\.grad is None"):
        assert_bag_backward_equivalent(detached, IDS, W, OFFS, g, **kw)


def test_oracle_functions_agree_with_each_other() -> None:
    g = G
    out, table = reference_embedding_bag(IDS, W, OFFS, mode="mean", padding_idx=3)
    assert out.tolist() == [[7 / 3, 4.0], [7 / 3, 4.0], [0.0, 0.0]]  # bag 2 is padding only
    assert torch.equal(table, W.double())
    grads = reference_embedding_bag_grad(IDS, W, g, OFFS, mode="mean", padding_idx=3)
    assert grads.per_sample_weights is None
    assert grads.weight[3].tolist() == [0.0, 0.0]  # the padding row
    bounds = embedding_bag_gradient_error_bound(IDS, W, g, OFFS, mode="mean", padding_idx=3)
    assert bounds.weight[3].tolist() == [0.0, 0.0]
    assert bool((bounds.weight[:3] > 0).all())
    assert embedding_bag_error_bound(IDS, W, OFFS, mode="max").abs().sum() == 0  # exact


@pytest.mark.parametrize("row", [[1.0, math.nan], [math.nan, 1.0]], ids=["nan-last", "nan-first"])
def test_oracle_renorm_sees_nan_wherever_it_is(row: list[float]) -> None:
    # The inf-norm of a row holding NaN is NaN (torch.linalg.vector_norm), and NaN > max_norm
    # is false, so torch leaves the row alone; Python's max() would see NaN only when first.
    weight = torch.tensor([row])
    _, table = reference_embedding_bag(
        torch.tensor([0]), weight, torch.tensor([0]), max_norm=0.5, norm_type=math.inf, mode="sum"
    )
    torch_weight = weight.clone()
    ee.lookup_embedding_bag(
        torch.tensor([0]), torch_weight, torch.tensor([0]), max_norm=0.5, norm_type=math.inf
    )
    assert torch.equal(table.isnan(), torch_weight.isnan())
    assert (
        table.nan_to_num().tolist()
        == torch_weight.double().nan_to_num().tolist()
        == [[x if x == x else 0.0 for x in row]]
    )


# --------------------------------------------------------------------------------------------
# The strategy: invalid calls
# --------------------------------------------------------------------------------------------

_BAD_CALLS: list[Any] = [
    pytest.param({"modes": "sum"}, "modes='sum' must be a non-empty sequence", id="bare-mode"),
    pytest.param({"modes": ()}, "must be a non-empty sequence", id="no-modes"),
    pytest.param({"modes": ("min",)}, r"unknown modes \['min'\]", id="unknown-mode"),
    pytest.param({"modes": ("sum", "sum")}, "names a mode twice", id="repeated-mode"),
    pytest.param({"options": "padding_idx"}, "must be a sequence of names", id="bare-option"),
    pytest.param({"options": ("offsets",)}, r"unknown options \['offsets'\]", id="unknown-option"),
    pytest.param(
        {"options": ("per_sample_weights",), "modes": ("mean", "max")},
        "needs mode 'sum'",
        id="per_sample_weights-without-sum",
    ),
    pytest.param(
        {"options": ("scale_grad_by_freq",), "modes": ("max",)},
        "needs mode 'sum' or 'mean'",
        id="scale_grad_by_freq-max-only",
    ),
    pytest.param(
        {"options": ("sparse",), "modes": ("max",)}, "needs mode 'sum' or 'mean'", id="sparse-max"
    ),
    pytest.param({"max_bags": 0}, "min_bags=1 must be at least|max_bags=0", id="zero-bags"),
    pytest.param({"max_ids": 0}, "max_ids=0", id="zero-ids"),
    pytest.param({"max_elements": 0}, "max_elements=0", id="zero-budget"),
    pytest.param({"max_bags": 2.5}, "max_bags=2.5 must be an int", id="float-bags"),
    pytest.param({"dtype": torch.int64}, "must be a floating dtype", id="int-dtype"),
    pytest.param({"index_dtype": torch.int16}, "must be torch.int64 or", id="int16-ids"),
    pytest.param({"vocab_size": 0}, "vocab_size=0", id="zero-vocab"),
    pytest.param({"embedding_dim": 0}, "embedding_dim=0", id="zero-dim"),
    pytest.param({"weight_layouts": ("strided",)}, "unknown entries", id="unknown-layout"),
    pytest.param({"invalid": "negative id"}, "must be a bool or", id="bare-invalid-kind"),
    pytest.param({"invalid": ("bad offsets",)}, "unknown invalid kinds", id="unknown-kind"),
    pytest.param(
        {"device": "mps" if not torch.backends.mps.is_available() else "xla"},
        "not available here",
        id="absent-device",
    ),
]


@pytest.mark.parametrize(("kwargs", "match"), _BAD_CALLS)
def test_invalid_call_raises_invalid_argument(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        ees.embedding_bag_cases(**kwargs)  # raised at the call, before anything is drawn


@pytest.mark.parametrize(
    "kwargs",
    [{"options": ("dropout",)}, {"modes": ("min",)}, {"max_examples": 0}],
    ids=["unknown-option", "unknown-mode", "zero-examples"],
)
def test_verify_embedding_bag_refuses_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        ee.verify_embedding_bag(ee.lookup_embedding_bag, **kwargs)


# --------------------------------------------------------------------------------------------
# The strategy: every draw satisfies
# --------------------------------------------------------------------------------------------


@settings(max_examples=60)
@given(case=ees.embedding_bag_cases(options=ees.BAG_OPTIONS, max_elements=4096, max_bags=5))
def test_every_valid_draw_is_accepted_and_within_budget(case: ees.EmbeddingBagCase) -> None:
    assert case.invalid is None
    assert case.num_embeddings * case.embedding_dim <= 4096 or case.embedding_dim == 1
    assert case.num_bags <= 5
    assert case.num_bags * case.num_embeddings <= 4096 or case.num_bags <= 1
    # only the combinations F.embedding_bag accepts
    if case.per_sample_weights_seed is not None:
        assert case.mode == "sum"
    if case.mode == "max":
        assert not {"scale_grad_by_freq", "sparse"} & set(case.kwargs)
    assert not {"scale_grad_by_freq", "sparse"} <= set(case.kwargs)
    tensors = case.build()
    args, kwargs = case.arguments(tensors)
    out = ee.lookup_embedding_bag(*args, **kwargs)
    assert out.shape == (case.num_bags, case.embedding_dim)
    out.backward(case.grad_output())
    assert tensors.weight.grad is not None


@settings(max_examples=60)
@given(case=ees.embedding_bag_cases(options=ees.BAG_OPTIONS, invalid=True))
def test_every_invalid_draw_is_refused_by_the_reference(case: ees.EmbeddingBagCase) -> None:
    assert case.invalid
    tensors = case.build(requires_grad=False)
    args, kwargs = case.arguments(tensors)
    with pytest.raises((TypeError, ValueError, IndexError)):
        ee.lookup_embedding_bag(*args, **kwargs)


@settings(max_examples=40)
@given(
    case=st.one_of(
        ees.embedding_bag_cases(options=ees.BAG_OPTIONS, allow_nonfinite=True),
        ees.embedding_bag_cases(options=ees.BAG_OPTIONS, invalid=True),
    )
)
def test_source_rebuilds_the_case(case: ees.EmbeddingBagCase) -> None:
    calls: list[tuple[tuple[torch.Tensor, ...], dict[str, Any]]] = []

    def candidate(*args: torch.Tensor, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        if case.invalid:
            raise ValueError("refused")  # the script requires a bad call to raise
        return torch.zeros(case.num_bags, case.embedding_dim)

    # The tensors and the call are under test, not the script's exact check (its comment
    # line and the check's line, before the call).
    lines = case.source().split("\n")
    check = [i for i, line in enumerate(lines) if line.startswith("# The exact check")]
    source = "\n".join(lines[: check[0]] + lines[check[0] + 2 :] if check else lines)
    note(source)
    namespace: dict[str, Any] = {"candidate": candidate, "print": lambda *_: None}
    source = source.replace("out.backward(grad_output)", "")  # the stand-in has no graph
    exec(compile(source, "<case.source()>", "exec"), namespace)
    ((args, kwargs),) = calls
    ref_args, ref_kwargs = case.arguments(case.build())
    assert len(args) == len(ref_args)
    for actual, expected in zip(args, ref_args, strict=True):
        assert actual.dtype == expected.dtype
        assert actual.shape == expected.shape
        assert actual.stride() == expected.stride()
        assert torch.equal(_bits(actual), _bits(expected))
    assert set(kwargs) == set(ref_kwargs)
    for key, value in ref_kwargs.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(kwargs[key], value)
        else:
            assert kwargs[key] == value or (value != value and kwargs[key] != kwargs[key])
    if case.invalid is None:
        assert torch.equal(namespace["grad_output"], case.grad_output())


def test_cases_are_hashable_and_replayable() -> None:
    case = find(ees.embedding_bag_cases(options=ees.BAG_OPTIONS), lambda c: True, settings=MINIMAL)
    assert hash(case) == hash(dataclasses.replace(case))
    first, second = case.build(), case.build()
    assert torch.equal(first.weight, second.weight)
    assert first.weight is not second.weight


# --------------------------------------------------------------------------------------------
# The strategy: can reach
# --------------------------------------------------------------------------------------------


_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` reinterpreted as integers, so that ``torch.equal`` compares bit patterns."""
    t = t.detach()
    return t.view(_BITS[t.dtype]) if t.dtype.is_floating_point else t


def _has_empty_bag(c: ees.EmbeddingBagCase) -> bool:
    return any(lo == hi for lo, hi in _bounds(c))


def _duplicate_in_a_bag(c: ees.EmbeddingBagCase) -> bool:
    return any(len(set(bag)) < len(bag) for bag in _bags(c))


def _padding_shares_a_bag(c: ees.EmbeddingBagCase) -> bool:
    pad = c.kwargs.get("padding_idx")
    if pad is None:
        return False
    pad %= c.num_embeddings
    return any(pad in bag and any(i != pad for i in bag) for bag in _bags(c))


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(_has_empty_bag, id="empty-bag"),
        pytest.param(lambda c: c.num_bags == 0, id="zero-bags"),
        pytest.param(_duplicate_in_a_bag, id="duplicate-in-a-bag"),
        pytest.param(lambda c: len(c.ids.shape) == 2, id="2-D-input"),
        pytest.param(lambda c: len(c.ids.shape) == 2 and c.ids.shape[1] == 0, id="2-D-(B,0)"),
        pytest.param(lambda c: max(map(len, _bags(c)), default=0) > 16, id="bag-of-17+"),
        pytest.param(lambda c: c.per_sample_weights_seed is not None, id="per_sample_weights"),
        pytest.param(lambda c: "include_last_offset" in c.kwargs, id="include_last_offset"),
        pytest.param(
            lambda c: (
                c.offsets is not None
                and "include_last_offset" in c.kwargs
                and c.offsets[-1] < c.ids.shape[0]
            ),
            id="ids-after-the-last-offset",
        ),
        pytest.param(_padding_shares_a_bag, id="padding-shares-a-bag"),
        pytest.param(lambda c: c.kwargs.get("padding_idx", 0) < 0, id="negative-padding_idx"),
        pytest.param(lambda c: "max_norm" in c.kwargs, id="max_norm"),
        pytest.param(lambda c: "scale_grad_by_freq" in c.kwargs, id="scale_grad_by_freq"),
        pytest.param(lambda c: "sparse" in c.kwargs, id="sparse"),
        pytest.param(lambda c: c.num_embeddings == 262_144, id="V=262144"),
        pytest.param(lambda c: c.offsets_dtype == torch.int32, id="int32-offsets"),
        pytest.param(lambda c: not c.ids.build().is_contiguous(), id="non-contiguous-ids"),
        pytest.param(lambda c: not c.weight.build().is_contiguous(), id="non-contiguous-table"),
    ],
)
def test_cases_reach(condition: Callable[[ees.EmbeddingBagCase], bool]) -> None:
    find(ees.embedding_bag_cases(options=ees.BAG_OPTIONS), condition, settings=FIRST_HIT)


@pytest.mark.parametrize("mode", MODES)
def test_cases_reach_each_mode(mode: str) -> None:
    find(ees.embedding_bag_cases(), lambda c: c.mode == mode, settings=FIRST_HIT)


@pytest.mark.parametrize("kind", ees.BAG_INVALID_KINDS + ees.CRASHING_BAG_INVALID_KINDS)
def test_invalid_cases_reach_each_kind(kind: str) -> None:
    strategy = ees.embedding_bag_cases(
        options=ees.BAG_OPTIONS, invalid=True if kind in ees.BAG_INVALID_KINDS else (kind,)
    )
    find(
        strategy, lambda c: c.invalid is not None and c.invalid.startswith(kind), settings=FIRST_HIT
    )


def test_default_invalid_kinds_never_crash_torch() -> None:
    def crashing(c: ees.EmbeddingBagCase) -> bool:
        return any(c.invalid.startswith(k) for k in ees.CRASHING_BAG_INVALID_KINDS)  # type: ignore[union-attr]

    strategy = ees.embedding_bag_cases(options=ees.BAG_OPTIONS, invalid=True)

    @settings(max_examples=200, database=None, deadline=None, phases=[Phase.generate])
    @given(case=strategy)
    def check(case: ees.EmbeddingBagCase) -> None:
        assert not crashing(case)

    check()


def test_minimal_case_is_the_simplest() -> None:
    case = find(ees.embedding_bag_cases(options=ees.BAG_OPTIONS), lambda c: True, settings=MINIMAL)
    assert case.mode == "sum"
    assert (case.num_embeddings, case.embedding_dim) == (1, 1)
    assert case.dtype == torch.float32
    assert case.kwargs == {}
    assert case.per_sample_weights_seed is None
    assert len(case.ids.shape) == 1


def test_shrinks_to_a_minimal_duplicate_in_one_bag() -> None:
    case = find(ees.embedding_bag_cases(), _duplicate_in_a_bag, settings=MINIMAL)
    assert case.ids.values == (0, 0)
    assert _bags(case) == [[0, 0]]


# --------------------------------------------------------------------------------------------
# Defects of F.embedding_bag (torch 2.13, CPU), found by verify_embedding_bag
# --------------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: the CPU backward of scale_grad_by_freq divides a row by another "
    "row's count (pytorch/pytorch#190063)",
)
def test_torch_scale_grad_by_freq_divides_by_the_right_count() -> None:
    # Id 0 occurs twice and id 1 once: row 1's gradient must not be divided at all.
    weight = torch.ones(2, 1, requires_grad=True)
    F.embedding_bag(
        torch.tensor([0, 0, 1]), weight, torch.tensor([0]), mode="sum", scale_grad_by_freq=True
    ).backward(torch.ones(1, 1))
    assert weight.grad is not None
    assert weight.grad.flatten().tolist() == [1.0, 1.0]  # torch: [1.0, 0.5]


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: with include_last_offset and offsets[-1] < len(input), mean "
    "divides the last bag by len(input) - offsets[-2] (pytorch/pytorch#52851)",
)
def test_torch_include_last_offset_mean_ignores_ids_after_the_end() -> None:
    weight = torch.tensor([[1.0], [3.0]])
    out = F.embedding_bag(
        torch.tensor([0, 1]), weight, torch.tensor([0, 1]), mode="mean", include_last_offset=True
    )
    assert out.tolist() == [[1.0]]  # torch: [[0.5]]


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: with include_last_offset and offsets[-1] < len(input), max sends "
    "the gradient to an id after the end (sum reads uninitialised memory instead)",
)
def test_torch_include_last_offset_max_gradient() -> None:
    weight = torch.tensor([[1.0], [3.0], [5.0]], requires_grad=True)
    F.embedding_bag(
        torch.tensor([0, 1, 2]), weight, torch.tensor([0, 1]), mode="max",
        include_last_offset=True,
    ).backward(torch.ones(1, 1))  # fmt: skip
    assert weight.grad is not None
    assert weight.grad.flatten().tolist() == [1.0, 0.0, 0.0]  # torch: [0.0, 0.0, 1.0]


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: the CPU max keeps a NaN only when it comes first in its bag",
)
def test_torch_max_propagates_nan() -> None:
    weight = torch.tensor([[1.0], [math.nan]])
    out = F.embedding_bag(torch.tensor([0, 1]), weight, torch.tensor([0]), mode="max")
    assert out.isnan().all()  # torch: 1.0 (and NaN for the ids in the other order)


@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=f"torch {TORCH}: a 2-D input (B, 0) fails with 'step must be nonzero' instead of "
    "giving B empty bags",
)
def test_torch_2d_input_of_empty_bags() -> None:
    out = F.embedding_bag(torch.zeros(2, 0, dtype=torch.int64), torch.ones(3, 1), mode="sum")
    assert out.tolist() == [[0.0], [0.0]]


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: decreasing offsets are not checked on the CPU; max returns garbage",
)
def test_torch_refuses_decreasing_offsets() -> None:
    with pytest.raises(RuntimeError):
        F.embedding_bag(torch.tensor([0]), torch.ones(1, 1), torch.tensor([0, 1, 0]), mode="max")


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: zero bags (offsets=[0], include_last_offset=True) followed by ids "
    "crash the process (segmentation fault), so embedding_bag_cases never draws them",
)
def test_torch_zero_bags_with_ids_after_the_end_do_not_crash() -> None:
    code = textwrap.dedent(
        """
        import torch, torch.nn.functional as F
        F.embedding_bag(torch.tensor([0, 1]), torch.ones(2, 1), torch.tensor([0]),
                        mode="max", include_last_offset=True)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert proc.returncode == 0, f"exit status {proc.returncode}"


def _torch_bag_flat(
    input: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor | None = None, **kwargs: Any
) -> torch.Tensor:
    """F.embedding_bag with a 2-D input passed as flat ids and offsets (torch fails on
    (B, 0)), and bad input refused by the package's checks first (torch accepts decreasing
    offsets), so that verification reaches torch's gradient defects."""
    ee.lookup_embedding_bag(input, weight.detach().clone(), offsets, **kwargs)  # refuses bad input
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("a 2-D input takes no offsets")
        count, length = input.shape
        offsets = torch.arange(count, dtype=input.dtype, device=input.device) * length
        input = input.reshape(-1)
        psw = kwargs.get("per_sample_weights")
        if psw is not None:
            kwargs["per_sample_weights"] = psw.reshape(-1)
    return F.embedding_bag(input, weight, offsets, **kwargs)


@pytest.mark.slow  # a whole default run; test_torch_defects names this defect in the fast tier
def test_verify_embedding_bag_finds_the_torch_scale_grad_by_freq_bug() -> None:
    options, modes = ("scale_grad_by_freq",), ("sum",)
    report = ee.verify_embedding_bag(_torch_bag_flat, options=options, modes=modes, seed=0)
    assert not report.passed
    assert report.failure is not None
    assert re.match(r"weight\.grad\[1, 0\] = .*, but the exact value is", report.failure)
    assert "scale_grad_by_freq=True" in report.failure
    assert report.counterexample is not None
    # Caught by the boundary phase's option examples: the repeated row 0 first in sorted order.
    assert "torch.tensor([2, 0, 0, 1, 0]" in report.counterexample
    assert report.boundary is not None
    ours = ee.verify_embedding_bag(  # the package's own lookup passes the same boundary phase
        ee.lookup_embedding_bag, options=options, modes=modes, max_examples=1, seed=0
    )
    assert ours.passed, str(ours)


def test_verify_embedding_bag_reports_a_nondeterministic_candidate() -> None:
    calls = {"n": 0}

    def every_other_call_wrong(input: torch.Tensor, weight: torch.Tensor, *a: Any, **kw: Any):
        calls["n"] += 1
        out = ee.lookup_embedding_bag(input, weight, *a, **kw)
        return out + 1 if calls["n"] % 2 and out.numel() else out

    report = ee.verify_embedding_bag(every_other_call_wrong, modes=("sum",), max_examples=20)
    assert not report.passed
    assert report.failure is not None
    assert report.counterexample is not None


@pytest.mark.parametrize(
    # The product's boundary phase builds one-hots of up to 2**17 ids: the slow tier's.
    "boundaries",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["random", "phase"],
)
def test_verify_embedding_bag_report_of_the_package_forms(boundaries: bool) -> None:
    report = ee.verify_embedding_bag(
        ee.matmul_embedding_bag,
        options=form("matmul_embedding_bag").options,
        max_examples=30,
        seed=1,
        boundaries=boundaries,
    )
    assert report.passed, str(report)
    assert report.examples == 30 + report.boundary_examples
    assert 0.0 <= report.worst_error <= 1.0
    assert report.bag is not None
    assert report.bag.modes == ("sum", "mean", "max")
    assert f"PASSED after {report.examples} examples" in str(report)
