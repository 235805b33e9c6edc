"""Tests of the public Hypothesis strategies themselves, shaped like hypothesis's tests/array_api.

Four kinds of test:

- a table of invalid calls, each of which must raise ``InvalidArgument`` (at the call, or at
  the latest at the first draw);
- "every draw satisfies X": properties of every value a strategy produces;
- "can reach Y": ``find`` shows that the features kernels break on (duplicates, the last row,
  empty and 0-d ids, huge vocabularies, strides, non-finite entries, each option) are drawn;
- shrinking and replay: the minimal case is the simplest one, and a seed replays exactly.

The rows that once pinned gaps of the strategies (malformed devices, unchecked sizes, the
element budget, float16 underflow to -0.0, hashing, shrinking to stride-0 ids) now pass.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import Phase, find, given, note, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence._draw.embeddings import option_drawn
from embedding_equivalence.forms.dtypes import dtype_name
from embedding_equivalence.forms.options import option_applies

CUDA = torch.cuda.is_available()
MPS = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INDEX_DTYPES = [torch.int64, torch.int32]
#: Bit patterns of each float dtype, to compare tensors exactly (nan, inf and -0.0 included).
_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}

# find() settings. derandomize: the same examples on every run, so a "can reach" test never
# flakes. Without the explain phase: its random variations of the minimal example all satisfy
# an always-true condition and can replace the shrunk result that find() returns.
MINIMAL = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=200,
    phases=[Phase.generate, Phase.shrink],
)
# "Can reach" needs only the first hit: no shrinking.
FIRST_HIT = settings(MINIMAL, max_examples=2000, phases=[Phase.generate])


def _reach(strategy: st.SearchStrategy[Any], condition: Callable[[Any], bool]) -> Any:
    """The first drawn value that satisfies ``condition`` (NoSuchExample if none is drawn)."""
    return find(strategy, condition, settings=FIRST_HIT)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` reinterpreted as integers, so that ``torch.equal`` compares bit patterns."""
    t = t.detach()
    return t.view(_BITS[t.dtype]) if t.dtype.is_floating_point else t


def _assert_same_tensor(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Same dtype, device, shape, strides, storage offset and bits."""
    assert actual.dtype == expected.dtype
    assert actual.device == expected.device
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    assert actual.storage_offset() == expected.storage_offset()
    assert torch.equal(_bits(actual), _bits(expected))


def _is_negative_zero(t: torch.Tensor) -> torch.Tensor:
    return (t == 0) & torch.signbit(t)


# --------------------------------------------------------------------------------------------
# Invalid calls
# --------------------------------------------------------------------------------------------


def _bad(
    factory: Callable[..., st.SearchStrategy[Any]],
    kwargs: dict[str, Any],
    match: str | None,
    id: str,
    marks: Any = (),
) -> Any:
    return pytest.param(factory, kwargs, match, id=f"{factory.__name__}-{id}", marks=marks)


_NO_CUDA = pytest.mark.skipif(CUDA, reason="CUDA is present, so device='cuda' is valid here")
_NO_MPS = pytest.mark.skipif(MPS, reason="MPS is present, so device='mps' is valid here")
# Formerly gaps of the strategies (now fixed); the rows keep their ids.
_GAP_BOGUS_DEVICE = _GAP_WEIGHT_SIZES = _GAP_BUDGET = _GAP_CASES_D = ()
_GAP_CASES_VOCAB = _GAP_INDEX = ()

V = 10
W = {"vocab_size": V, "embedding_dim": 4}
BUDGET = {"max_elements": 1000}

INVALID_CALLS = [
    # vocab_sizes / embedding_dims: bounds.
    _bad(ees.vocab_sizes, {"min_value": 0}, "min_value=0", "min_value=0"),
    _bad(ees.vocab_sizes, {"min_value": -5}, "min_value=-5", "min_value<0"),
    _bad(ees.vocab_sizes, {"min_value": 10, "max_value": 5}, "max_value=5", "max<min"),
    _bad(ees.vocab_sizes, {"min_value": 1.5}, "must be an int", "float-min"),
    _bad(ees.vocab_sizes, {"max_value": "64"}, "must be an int", "str-max"),
    _bad(ees.vocab_sizes, {"max_value": True}, "must be an int", "bool-max"),
    _bad(ees.embedding_dims, {"min_value": 0}, "min_value=0", "min_value=0"),
    _bad(ees.embedding_dims, {"min_value": 8, "max_value": 4}, "max_value=4", "max<min"),
    _bad(ees.embedding_dims, {"max_value": 2.0}, "must be an int", "float-max"),
    # token_ids: dims, sides, layouts, dtype, device, V.
    _bad(ees.token_ids, {"vocab_size": 0}, "vocab_size=0", "vocab_size=0"),
    _bad(ees.token_ids, {"vocab_size": -3}, "vocab_size=-3", "vocab_size<0"),
    _bad(ees.token_ids, {"vocab_size": st.just(0)}, None, "vocab_size-strategy-of-0"),
    _bad(ees.token_ids, {"vocab_size": V, "min_dims": -1}, "min_dims=-1", "min_dims<0"),
    _bad(ees.token_ids, {"vocab_size": V, "min_dims": 3, "max_dims": 2}, "max_dims", "max<min"),
    _bad(ees.token_ids, {"vocab_size": V, "max_dims": 1.5}, "must be an int", "float-dims"),
    _bad(ees.token_ids, {"vocab_size": V, "min_side": -1}, "min_side=-1", "min_side<0"),
    _bad(ees.token_ids, {"vocab_size": V, "min_side": 4, "max_side": 2}, "max_side", "side"),
    _bad(ees.token_ids, {"vocab_size": V, "layouts": ("diagonal",)}, "diagonal", "layout"),
    _bad(ees.token_ids, {"vocab_size": V, "layouts": "sliced"}, "sequence", "bare-layout"),
    _bad(ees.token_ids, {"vocab_size": V, "layouts": ()}, "non-empty", "no-layouts"),
    _bad(ees.token_ids, {"vocab_size": V, "dtype": torch.float32}, "float32", "float32"),
    _bad(ees.token_ids, {"vocab_size": V, "dtype": torch.int16}, "int16", "int16"),
    _bad(ees.token_ids, {"vocab_size": V, "dtype": torch.bool}, "bool", "bool"),
    _bad(ees.token_ids, {"vocab_size": V, "device": "cuda"}, "cuda", "cuda", _NO_CUDA),
    _bad(ees.token_ids, {"vocab_size": V, "device": "mps"}, "mps", "mps", _NO_MPS),
    _bad(ees.token_ids, {"vocab_size": V, "device": "bogus"}, None, "bogus", _GAP_BOGUS_DEVICE),
    # embedding_weights: dtype, layouts, device, sizes.
    _bad(ees.embedding_weights, {**W, "dtype": torch.int64}, "int64", "int64"),
    _bad(ees.embedding_weights, {**W, "dtype": torch.bool}, "bool", "bool"),
    _bad(ees.embedding_weights, {**W, "layouts": ("diag",)}, "diag", "layout"),
    _bad(ees.embedding_weights, {**W, "layouts": "offset"}, "sequence", "bare-layout"),
    _bad(ees.embedding_weights, {**W, "device": "cuda"}, "cuda", "cuda", _NO_CUDA),
    _bad(ees.embedding_weights, {**W, "vocab_size": 0}, None, "V=0", _GAP_WEIGHT_SIZES),
    _bad(ees.embedding_weights, {**W, "embedding_dim": 0}, None, "D=0", _GAP_WEIGHT_SIZES),
    _bad(ees.embedding_weights, {**W, "embedding_dim": -1}, None, "D<0", _GAP_WEIGHT_SIZES),
    # embedding_cases: options, layouts, budgets, dtype, device.
    _bad(ees.embedding_cases, {"options": ("dropout",)}, "dropout", "unknown-option"),
    _bad(ees.embedding_cases, {"options": "padding_idx"}, r"\('padding_idx',\)", "bare-option"),
    _bad(ees.embedding_cases, {"weight_layouts": ("diag",)}, "diag", "weight-layout"),
    _bad(ees.embedding_cases, {"ids_layouts": ("diag",)}, "diag", "ids-layout"),
    _bad(ees.embedding_cases, {"ids_layouts": ()}, "non-empty", "no-ids-layouts"),
    _bad(ees.embedding_cases, {"max_ids": 0}, "max_ids=0", "max_ids=0"),
    _bad(ees.embedding_cases, {"max_ids": 2.5}, "must be an int", "float-max_ids"),
    _bad(ees.embedding_cases, {"max_elements": 0}, "max_elements=0", "max_elements=0"),
    _bad(ees.embedding_cases, {"dtype": torch.int32}, "int32", "int-dtype"),
    _bad(ees.embedding_cases, {"device": "cuda"}, "cuda", "cuda", _NO_CUDA),
    _bad(ees.embedding_cases, {"vocab_size": 0}, None, "V=0", _GAP_CASES_VOCAB),
    _bad(ees.embedding_cases, {"embedding_dim": 0}, None, "D=0", _GAP_CASES_D),
    _bad(ees.embedding_cases, {**BUDGET, "vocab_size": 2000}, None, "V>budget", _GAP_BUDGET),
    _bad(
        ees.embedding_cases,
        {**BUDGET, "vocab_size": 100, "embedding_dim": 64},
        None,
        "V*D>budget",
        _GAP_BUDGET,
    ),
    _bad(ees.embedding_cases, {"index_dtype": torch.float32}, None, "float-ids", _GAP_INDEX),
    # embedding_bag_cases: the same budget checks as embedding_cases (one function for both).
    _bad(ees.embedding_bag_cases, {**BUDGET, "vocab_size": 2000}, "exceeds", "V>budget"),
    _bad(
        ees.embedding_bag_cases,
        {**BUDGET, "vocab_size": 100, "embedding_dim": 64},
        r"vocab_size \* embedding_dim = 6400 exceeds",
        "V*D>budget",
    ),
    _bad(ees.embedding_bag_cases, {"vocab_size": 2.5}, "must be an int", "float-V"),
]


@pytest.mark.parametrize(("factory", "kwargs", "match"), INVALID_CALLS)
def test_invalid_call_raises_invalid_argument(
    factory: Callable[..., st.SearchStrategy[Any]], kwargs: dict[str, Any], match: str | None
) -> None:
    with pytest.raises(InvalidArgument, match=match):  # noqa: PT012 - call, validate, draw
        strategy = factory(**kwargs)
        strategy.validate()
        # Errors that depend on drawn values (a strategy argument) surface at the first draw.
        find(strategy, lambda _: True, settings=settings(MINIMAL, max_examples=1))


# --------------------------------------------------------------------------------------------
# Every draw satisfies X
# --------------------------------------------------------------------------------------------


@st.composite
def _token_ids_args(draw: st.DrawFn) -> dict[str, Any]:
    min_dims = draw(st.integers(0, 3), label="min_dims")
    min_side = draw(st.integers(0, 3), label="min_side")
    return {
        "vocab_size": draw(ees.vocab_sizes(), label="vocab_size"),
        "dtype": draw(ees.index_dtypes(), label="dtype"),
        "device": draw(ees.devices(), label="device"),
        "min_dims": min_dims,
        "max_dims": draw(st.integers(min_dims, 4), label="max_dims"),
        "min_side": min_side,
        "max_side": draw(st.integers(min_side, 6), label="max_side"),
        "layouts": tuple(
            draw(
                st.lists(st.sampled_from(ees.IDS_LAYOUTS), min_size=1, unique=True), label="layouts"
            )
        ),
    }


@given(data=st.data())
def test_token_ids_respect_their_arguments(data: st.DataObject) -> None:
    args = data.draw(_token_ids_args(), label="args")
    ids = data.draw(ees.token_ids(**args), label="ids")
    v = args["vocab_size"]
    assert ids.dtype == args["dtype"]
    assert ids.device.type == args["device"]
    assert args["min_dims"] <= ids.dim() <= args["max_dims"]
    assert all(args["min_side"] <= n <= args["max_side"] for n in ids.shape)
    if ids.numel():
        assert int(ids.min()) >= 0
        assert int(ids.max()) < v


@given(
    shape=st.lists(st.integers(0, 4), max_size=3).map(tuple),
    vocab_size=ees.vocab_sizes(max_value=100),
    data=st.data(),
)
def test_token_ids_with_a_fixed_shape(
    shape: tuple[int, ...], vocab_size: int, data: st.DataObject
) -> None:
    ids = data.draw(ees.token_ids(vocab_size, shape=shape), label="ids")
    assert tuple(ids.shape) == shape
    if ids.numel():
        assert int(ids.min()) >= 0
        assert int(ids.max()) < vocab_size


@pytest.mark.parametrize("layout", ees.IDS_LAYOUTS)
@given(data=st.data())
def test_token_ids_layout_strides(layout: str, data: st.DataObject) -> None:
    ids = data.draw(
        ees.token_ids(ees.vocab_sizes(max_value=100), layouts=(layout,), min_side=1), label="ids"
    )
    shape, stride = tuple(ids.shape), ids.stride()
    if layout == "contiguous":
        assert ids.is_contiguous()
    elif layout == "transposed" and ids.dim() >= 2 and shape[-1] > 1 and shape[-2] > 1:
        # Last two dims stored swapped.
        assert stride[-2] == 1
        assert stride[-1] == shape[-2]
        assert not ids.is_contiguous()
    elif layout == "sliced" and ids.dim() >= 1:
        assert stride[-1] == 2
    elif layout == "expanded" and ids.dim() >= 1 and shape[0] > 1:
        assert stride[0] == 0
        assert all(torch.equal(ids[i], ids[0]) for i in range(shape[0]))


@given(data=st.data())
def test_embedding_weights_respect_their_arguments(data: st.DataObject) -> None:
    # Small tables: see test_float16_underflow_gives_no_negative_zero for why.
    v = data.draw(st.integers(1, 64), label="V")
    d = data.draw(st.integers(1, 16), label="D")
    dtype = data.draw(ees.float_dtypes(), label="dtype")
    allow_nonfinite = data.draw(st.booleans(), label="allow_nonfinite")
    allow_signed_zeros = data.draw(st.booleans(), label="allow_signed_zeros")
    requires_grad = data.draw(st.booleans(), label="requires_grad")
    w = data.draw(
        ees.embedding_weights(
            v,
            d,
            dtype=dtype,
            allow_nonfinite=allow_nonfinite,
            allow_signed_zeros=allow_signed_zeros,
            requires_grad=requires_grad,
        ),
        label="weight",
    )
    assert tuple(w.shape) == (v, d)
    assert w.dtype == dtype
    assert w.device.type == "cpu"
    assert w.requires_grad == requires_grad
    assert w.is_leaf
    specials = int((~torch.isfinite(w)).sum()) + int(_is_negative_zero(w).sum())
    assert specials <= 3
    if not allow_nonfinite:
        assert bool(torch.isfinite(w).all())
    if not allow_signed_zeros:
        assert not bool(_is_negative_zero(w).any())


@pytest.mark.parametrize("layout", ees.WEIGHT_LAYOUTS)
@given(v=st.integers(1, 40), d=st.integers(1, 12), data=st.data())
def test_embedding_weights_layout_strides(layout: str, v: int, d: int, data: st.DataObject) -> None:
    w = data.draw(ees.embedding_weights(v, d, layouts=(layout,)), label="weight")
    if layout == "contiguous":
        assert (w.stride(), w.storage_offset()) == ((d, 1), 0)
    elif layout == "transposed":
        # A (V, D) view of a (D, V) tensor; for V == 1 or D == 1 that is contiguous anyway.
        expected = (1, v) if v > 1 and d > 1 else (d, 1)
        assert (w.stride(), w.storage_offset()) == (expected, 0)
    elif layout == "sliced":
        assert (w.stride(), w.storage_offset()) == ((2 * d, 2), 0)
    else:
        assert (w.stride(), w.storage_offset()) == ((d, 1), d)


@st.composite
def _budgeted_cases(draw: st.DrawFn, invalid: bool = False) -> tuple[ees.EmbeddingCase, dict]:
    max_elements = draw(st.integers(64, 1 << 19), label="max_elements")
    max_ids = draw(st.integers(1, 64), label="max_ids")
    options = tuple(
        draw(st.lists(st.sampled_from(ees.EMBEDDING_OPTIONS), unique=True), label="options")
    )
    args = {"max_elements": max_elements, "max_ids": max_ids, "options": options}
    case = draw(
        ees.embedding_cases(
            vocab_size=ees.vocab_sizes(max_value=max_elements), invalid=invalid, **args
        ),
        label="case",
    )
    return case, args


def _check_kwargs(case: ees.EmbeddingCase, options: tuple[str, ...]) -> None:
    v = case.num_embeddings
    kwargs = dict(case.kwargs)
    allowed = set(options) | ({"norm_type"} if "max_norm" in kwargs else set())
    assert set(kwargs) <= allowed
    if "padding_idx" in kwargs:
        assert -v <= kwargs["padding_idx"] < v
    if "max_norm" in kwargs:
        assert math.isfinite(kwargs["max_norm"])
        assert kwargs["max_norm"] >= 0
        assert kwargs["norm_type"] > 0
    assert kwargs.get("scale_grad_by_freq", True) is True
    assert kwargs.get("sparse", True) is True
    # torch's sparse backward cannot scale by frequency: never both in a valid case.
    assert not (kwargs.get("sparse") and kwargs.get("scale_grad_by_freq"))


@settings(max_examples=30)
@given(drawn=_budgeted_cases())
def test_embedding_cases_respect_budget_and_range(drawn: tuple[ees.EmbeddingCase, dict]) -> None:
    case, args = drawn
    v, d = case.num_embeddings, case.embedding_dim
    n = math.prod(case.ids.shape)
    assert v * d <= args["max_elements"]
    assert n * v <= args["max_elements"]
    assert n <= args["max_ids"]
    assert len(case.ids.values) == n
    assert all(0 <= i < v for i in case.ids.values)
    assert case.ids.dtype in INDEX_DTYPES
    assert case.dtype in FLOAT_DTYPES
    assert case.device in ees.available_devices()
    assert case.ids.device == case.device
    assert case.invalid is None
    _check_kwargs(case, args["options"])
    input, weight = case.build()
    assert tuple(input.shape) == case.ids.shape
    assert tuple(weight.shape) == (v, d)
    assert case.grad_output().shape == (*case.ids.shape, d)
    assert case.grad_output().dtype == case.dtype


@settings(max_examples=30)
@given(case=ees.embedding_cases(options=ees.EMBEDDING_OPTIONS))
def test_layouts_change_strides_not_values(case: ees.EmbeddingCase) -> None:
    ids = dataclasses.replace(case.ids, layout="contiguous").build()
    weight = dataclasses.replace(case.weight, layout="contiguous").build()
    assert torch.equal(case.ids.build(), ids)
    assert torch.equal(_bits(case.weight.build()), _bits(weight))


@settings(max_examples=30)
@given(data=st.data())
def test_reference_accepts_every_valid_case(data: st.DataObject) -> None:
    options = data.draw(st.lists(st.sampled_from(ees.EMBEDDING_OPTIONS), unique=True), label="opts")
    case = data.draw(ees.embedding_cases(options=tuple(options)), label="case")
    input, weight = case.build()
    out = ee.lookup_embedding(input, weight, **case.kwargs)
    assert out.shape == (*case.ids.shape, case.embedding_dim)
    out.backward(case.grad_output())
    assert weight.grad is not None


@settings(max_examples=30)
@given(drawn=_budgeted_cases(invalid=True))
def test_invalid_cases_are_refused_by_the_reference(
    drawn: tuple[ees.EmbeddingCase, dict],
) -> None:
    case, _ = drawn
    assert isinstance(case.invalid, str)
    assert case.invalid
    input, weight = case.build(requires_grad=False)
    with pytest.raises((TypeError, ValueError, IndexError)):
        ee.lookup_embedding(input, weight, **case.kwargs)


@settings(max_examples=30)
@given(case=ees.embedding_cases(options=("max_norm",)))
def test_build_gives_fresh_tensors(case: ees.EmbeddingCase) -> None:
    ref_ids, ref_weight = case.build()
    ref_grad = case.grad_output()
    ids, weight = case.build()
    grad = case.grad_output()
    # Overwrite every byte of every storage (0xFF: -1 for ints, nan for floats).
    for t in (ids, weight, grad):
        t.untyped_storage().fill_(0xFF)
    if weight.numel():
        assert not torch.equal(_bits(weight), _bits(ref_weight))  # the overwrite took effect
    again_ids, again_weight = case.build()
    _assert_same_tensor(again_ids, ref_ids)
    _assert_same_tensor(again_weight, ref_weight)
    _assert_same_tensor(case.grad_output(), ref_grad)
    assert again_weight.requires_grad
    assert again_weight.is_leaf
    assert not case.build(requires_grad=False)[1].requires_grad


@settings(max_examples=30)
@given(
    case=st.one_of(
        ees.embedding_cases(
            options=ees.EMBEDDING_OPTIONS, allow_nonfinite=True, allow_signed_zeros=True
        ),
        ees.embedding_cases(options=ees.EMBEDDING_OPTIONS, invalid=True),
    )
)
def test_source_rebuilds_the_case(case: ees.EmbeddingCase) -> None:
    calls: list[tuple[torch.Tensor, torch.Tensor, dict[str, Any]]] = []

    def candidate(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> Any:
        calls.append((input, weight, kwargs))
        if case.invalid:
            raise ValueError("refused")  # the script requires a bad call to raise
        # Something with the output's shape that backward works on (no options: the
        # snippet, not this stand-in, is under test).
        return F.embedding(input, weight)

    # The tensors and the call are under test, not the script's exact check (its comment
    # line and the check's line, before the call).
    lines = case.source().split("\n")
    check = [i for i, line in enumerate(lines) if line.startswith("# The exact check")]
    source = "\n".join(lines[: check[0]] + lines[check[0] + 2 :] if check else lines)
    note(source)
    namespace: dict[str, Any] = {"candidate": candidate, "print": lambda *_: None}
    exec(compile(source, "<case.source()>", "exec"), namespace)

    assert len(calls) == 1
    input, weight, kwargs = calls[0]
    ref_input, ref_weight = case.build()
    _assert_same_tensor(input, ref_input)
    _assert_same_tensor(weight, ref_weight)
    assert weight.requires_grad
    assert kwargs == dict(case.kwargs)
    if case.invalid is None:
        _assert_same_tensor(namespace["grad_output"], case.grad_output())
        assert weight.grad is not None
    else:
        assert "grad_output" not in namespace
    grad_namespace: dict[str, Any] = {"torch": torch}
    exec(case.grad_output_source("g"), grad_namespace)
    _assert_same_tensor(grad_namespace["g"], case.grad_output())


def test_float16_underflow_gives_no_negative_zero() -> None:
    # embedding_weights(8192, 64, dtype=torch.float16) can draw weight seed 78.
    weight = ees.WeightRecipe(8192, 64, torch.float16, seed=78).build()
    assert not bool(_is_negative_zero(weight).any())


@settings(max_examples=30)
@given(case=ees.embedding_cases(max_elements=1000))
def test_default_vocab_respects_a_small_budget(case: ees.EmbeddingCase) -> None:
    assert case.num_embeddings * case.embedding_dim <= 1000
    assert math.prod(case.ids.shape) * case.num_embeddings <= 1000


def test_cases_are_hashable() -> None:
    case = find(ees.embedding_cases(), lambda _: True, settings=MINIMAL)
    assert hash(case) == hash(dataclasses.replace(case))


# --------------------------------------------------------------------------------------------
# Can reach Y
# --------------------------------------------------------------------------------------------


def _has_duplicates(ids: torch.Tensor) -> bool:
    return ids.numel() > len(set(ids.flatten().tolist()))


def test_token_ids_reach_duplicates() -> None:
    _reach(ees.token_ids(ees.vocab_sizes()), _has_duplicates)


def test_token_ids_reach_first_and_last_row() -> None:
    with_v = ees.vocab_sizes(min_value=3).flatmap(lambda v: st.tuples(st.just(v), ees.token_ids(v)))
    _reach(with_v, lambda p: {0, p[0] - 1} <= set(p[1].flatten().tolist()))


def test_cases_reach_the_last_row_of_a_large_table() -> None:
    _reach(
        ees.embedding_cases(),
        lambda c: c.num_embeddings > 1000 and c.num_embeddings - 1 in c.ids.values,
    )


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda s: math.prod(s) == 0, id="empty-batch"),
        pytest.param(lambda s: s == (0,), id="empty-1-d"),
        pytest.param(lambda s: len(s) == 0, id="0-d"),
        pytest.param(lambda s: len(s) == 3 and math.prod(s) > 1, id="3-d"),
    ],
)
def test_cases_reach_id_shapes(condition: Callable[[tuple[int, ...]], bool]) -> None:
    _reach(ees.embedding_cases(), lambda c: condition(c.ids.shape))


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda ids: ids.numel() == 0, id="empty"),
        pytest.param(lambda ids: ids.dim() == 0, id="0-d"),
        pytest.param(lambda ids: ids.dim() == 3 and ids.numel() > 1, id="3-d"),
        pytest.param(lambda ids: not ids.is_contiguous(), id="non-contiguous"),
        pytest.param(
            lambda ids: any(s == 0 and n > 1 for s, n in zip(ids.stride(), ids.shape, strict=True)),
            id="expanded-stride-0",
        ),
        pytest.param(lambda ids: ids.dtype == torch.int32, id="int32"),
    ],
)
def test_token_ids_reach(condition: Callable[[torch.Tensor], bool]) -> None:
    _reach(ees.token_ids(ees.vocab_sizes(), dtype=ees.index_dtypes()), condition)


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda v: v > 65_536, id="V>65536"),
        pytest.param(lambda v: v == 262_144, id="V=262144"),
        *(
            pytest.param(lambda v, r=r: v == r, id=f"V={r}")
            for r in ees.REAL_VOCAB_SIZES
            if r != 262_144
        ),
        pytest.param(lambda v: v == 1, id="V=1"),
    ],
)
def test_vocab_sizes_reach(condition: Callable[[int], bool]) -> None:
    _reach(ees.vocab_sizes(), condition)


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(lambda c: c.num_embeddings > 65_536, id="V>65536"),
        pytest.param(lambda c: c.num_embeddings == 262_144, id="V=262144"),
        pytest.param(lambda c: c.ids.dtype == torch.int32, id="int32-ids"),
        pytest.param(lambda c: _has_duplicates(c.ids.build()), id="duplicate-ids"),
        pytest.param(lambda c: not c.ids.build().is_contiguous(), id="non-contiguous-ids"),
    ],
)
def test_cases_reach(condition: Callable[[ees.EmbeddingCase], bool]) -> None:
    _reach(ees.embedding_cases(), condition)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_name)
def test_every_float_dtype_is_reached(dtype: torch.dtype) -> None:
    _reach(ees.float_dtypes(), lambda d: d == dtype)
    _reach(ees.embedding_cases(), lambda c: c.dtype == dtype)


def _shows_weight_layout(weight: torch.Tensor, layout: str) -> bool:
    if layout == "offset":
        return weight.storage_offset() > 0
    return weight.is_contiguous() == (layout == "contiguous")


@pytest.mark.parametrize("layout", ees.WEIGHT_LAYOUTS)
def test_cases_reach_every_weight_layout(layout: str) -> None:
    # A layout that shows in the strides, not one that degenerates to contiguous.
    _reach(
        ees.embedding_cases(),
        lambda c: c.weight.layout == layout and _shows_weight_layout(c.weight.build(), layout),
    )


@pytest.mark.parametrize("layout", ees.IDS_LAYOUTS)
def test_cases_reach_every_ids_layout(layout: str) -> None:
    # A layout that shows in the strides, not one that degenerates to contiguous.
    _reach(
        ees.embedding_cases(),
        lambda c: (
            c.ids.layout == layout and (layout == "contiguous" or not c.ids.build().is_contiguous())
        ),
    )


def test_embedding_weights_reach_non_contiguous() -> None:
    _reach(
        ees.embedding_weights(ees.vocab_sizes(max_value=64), ees.embedding_dims()),
        lambda w: not w.is_contiguous(),
    )


@pytest.mark.parametrize(
    ("kwargs", "condition"),
    [
        pytest.param({"allow_nonfinite": True}, lambda w: bool((w == math.inf).any()), id="inf"),
        pytest.param({"allow_nonfinite": True}, lambda w: bool((w == -math.inf).any()), id="-inf"),
        pytest.param({"allow_nonfinite": True}, lambda w: bool(w.isnan().any()), id="nan"),
        pytest.param(
            {"allow_signed_zeros": True},
            lambda w: bool(_is_negative_zero(w).any()),
            id="-0.0",
        ),
    ],
)
def test_embedding_weights_reach_special_values(
    kwargs: dict[str, Any], condition: Callable[[torch.Tensor], bool]
) -> None:
    strategy = ees.embedding_weights(
        ees.vocab_sizes(max_value=64), ees.embedding_dims(), dtype=ees.float_dtypes(), **kwargs
    )
    _reach(strategy, condition)
    _reach(ees.embedding_cases(**kwargs), lambda c: condition(c.weight.build()))


@pytest.mark.parametrize("option", ees.EMBEDDING_OPTIONS)
def test_cases_reach_each_option(option: str) -> None:
    _reach(ees.embedding_cases(options=(option,)), lambda c: option in c.kwargs)


def _has_option(case: ees.EmbeddingCase | ees.EmbeddingBagCase, option: str) -> bool:
    if option == "per_sample_weights":
        return getattr(case, "per_sample_weights_seed", None) is not None
    return option in case.kwargs


@pytest.mark.parametrize(
    ("factory", "option"),
    [
        *((ees.embedding_cases, o) for o in ees.EMBEDDING_OPTIONS),
        *((ees.embedding_bag_cases, o) for o in ees.BAG_OPTIONS),
    ],
    ids=[
        *(f"embedding-{o}" for o in ees.EMBEDDING_OPTIONS),
        *(f"bag-{o}" for o in ees.BAG_OPTIONS),
    ],
)
def test_both_case_strategies_reach_each_option_absent_and_present(
    factory: Callable[..., st.SearchStrategy[Any]], option: str
) -> None:
    strategy = factory(options=(option,))
    _reach(strategy, lambda c: not _has_option(c, option))
    _reach(strategy, lambda c: _has_option(c, option))
    # Shrinking removes the option: the simplest case goes without it.
    assert not _has_option(find(strategy, lambda _: True, settings=MINIMAL), option)


def _answering(value: int) -> tuple[Callable[..., Any], list[tuple[Any, Any]]]:
    """A stand-in for a composite's ``draw`` that answers ``value`` and records each draw."""
    calls: list[tuple[Any, Any]] = []

    def draw(strategy: st.SearchStrategy[Any], label: Any = None) -> int:
        calls.append((strategy, label))
        return value

    return draw, calls


@pytest.mark.parametrize("mode", [None, *ees.BAG_MODES])
@pytest.mark.parametrize("option", ees.BAG_OPTIONS)
def test_option_drawn_is_present_for_three_of_its_four_values(
    option: str, mode: str | None
) -> None:
    # The one helper that both case strategies draw options with: one draw in [0, 3] labelled
    # "use <option>", made even where the mode refuses the option; 0 (where shrinking goes)
    # is absent, 1 to 3 present wherever the mode accepts the option.
    for value in range(4):
        draw, calls = _answering(value)
        present = option_drawn(draw, (option,), option, mode)
        applies = mode is None or option_applies(option, mode)
        assert present == (value > 0 and applies)
        ((strategy, label),) = calls
        assert repr(strategy) == repr(st.integers(0, 3))
        assert label == f"use {option}"


def test_option_drawn_draws_nothing_for_an_option_not_requested() -> None:
    draw, calls = _answering(3)
    assert not option_drawn(draw, ("sparse",), "padding_idx")
    assert calls == []


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param(
            lambda c: "max_norm" in c.kwargs and c.kwargs["norm_type"] == math.inf,
            id="max_norm-norm_type=inf",
        ),
        pytest.param(lambda c: c.kwargs.get("max_norm") == 0.0, id="max_norm=0"),
        pytest.param(lambda c: c.kwargs.get("padding_idx", 0) < 0, id="negative-padding_idx"),
        pytest.param(
            lambda c: c.kwargs.get("padding_idx") in c.ids.values, id="padding_idx-referenced"
        ),
        pytest.param(lambda c: set(c.kwargs) >= {"padding_idx", "max_norm"}, id="combined"),
    ],
)
def test_cases_reach_option_values(condition: Callable[[ees.EmbeddingCase], bool]) -> None:
    _reach(ees.embedding_cases(options=ees.EMBEDDING_OPTIONS), condition)


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param("id .* >= V", id="id-too-large"),
        pytest.param("negative id", id="negative-id"),
        pytest.param("floating-point ids", id="floating-ids"),
        pytest.param("padding_idx=.* outside", id="padding_idx-out-of-range"),
    ],
)
def test_invalid_cases_reach_each_kind(reason: str) -> None:
    # A bad padding_idx is drawn only where padding_idx is named (only named options reach
    # the kernel); naming it leaves the other kinds reachable.
    cases = ees.embedding_cases(options=("padding_idx",), invalid=True)
    _reach(cases, lambda c: re.match(reason, c.invalid) is not None)


def test_devices_reach_meta_on_request() -> None:
    _reach(ees.devices(include_meta=True), lambda d: d == "meta")


# --------------------------------------------------------------------------------------------
# Shrinking and replay
# --------------------------------------------------------------------------------------------


# Hypothesis's generation mixes in constants collected from every local module imported
# (tests included), so which examples a derandomized find() meets can change with unrelated
# edits. The expectations below hold for any such stream; where the strategy makes a
# not-simplest case the shortlex-minimal one, the row is a non-strict xfail.

# Both are minimal: a 0-d id takes the fewest values, an empty (0,) batch the fewest choices.
_ONE_OR_NO_ID = {((0,), ()), ((), (0,))}


def test_minimal_case_is_the_simplest() -> None:
    case = find(
        ees.embedding_cases(options=ees.EMBEDDING_OPTIONS), lambda _: True, settings=MINIMAL
    )
    assert (case.ids.values, case.ids.shape) in _ONE_OR_NO_ID
    assert case == ees.EmbeddingCase(
        ids=ees.IdsRecipe(case.ids.values, case.ids.shape, torch.int64, "cpu", "contiguous"),
        weight=ees.WeightRecipe(
            1, 1, torch.float32, "cpu", seed=0, specials=(), layout="contiguous"
        ),
        kwargs={},
        grad_seed=0,
        invalid=None,
    )


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        pytest.param(ees.vocab_sizes(), 1, id="vocab_sizes"),
        pytest.param(ees.vocab_sizes(min_value=7), 7, id="vocab_sizes-min"),
        pytest.param(ees.embedding_dims(min_value=3), 3, id="embedding_dims-min"),
        pytest.param(ees.float_dtypes(), torch.float32, id="float_dtypes"),
        pytest.param(ees.index_dtypes(), torch.int64, id="index_dtypes"),
        pytest.param(ees.devices(), "cpu", id="devices"),
    ],
)
def test_simple_strategies_shrink_to_the_first_choice(
    strategy: st.SearchStrategy[Any], expected: Any
) -> None:
    assert find(strategy, lambda _: True, settings=MINIMAL) == expected


def test_minimal_ids_and_weight() -> None:
    ids = find(ees.token_ids(10), lambda _: True, settings=MINIMAL)
    _assert_same_tensor(ids, torch.tensor(0))
    weight = find(ees.embedding_weights(3, 2), lambda _: True, settings=MINIMAL)
    expected = torch.randn(3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    _assert_same_tensor(weight, expected.float())


# Formerly non-strict gaps (stride-0 ids and scale_grad_by_freq surviving shrinking), fixed.
_GAP_EXPANDED_SHRINKS: tuple[()] = ()
_GAP_SPARSE_SHRINKS: tuple[()] = ()


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        pytest.param(
            lambda c: c.num_embeddings > 1000,
            {"V": {1001}, "D": 1, "ids": _ONE_OR_NO_ID},
            id="V>1000-shrinks-to-1001",
        ),
        pytest.param(
            lambda c: "padding_idx" in c.kwargs,
            {"V": {1}, "D": 1, "ids": _ONE_OR_NO_ID, "kwargs": {"padding_idx": 0}},
            id="padding_idx-shrinks-to-0",
        ),
        pytest.param(
            lambda c: c.kwargs.get("padding_idx", 0) < 0,
            {"V": {1}, "D": 1, "ids": _ONE_OR_NO_ID, "kwargs": {"padding_idx": -1}},
            id="negative-padding_idx-shrinks-to-minus-1",
            marks=_GAP_SPARSE_SHRINKS,
        ),
        pytest.param(
            lambda c: _has_duplicates(c.ids.build()),
            {"V": {1}, "D": 1, "ids": {((0, 0), (2,))}},
            id="duplicates-shrink-to-two-zeros",
            marks=_GAP_EXPANDED_SHRINKS,
        ),
        pytest.param(
            lambda c: c.embedding_dim >= 5 and math.prod(c.ids.shape) >= 3,
            {"V": {1}, "D": 5, "ids": {((0, 0, 0), (3,))}},
            id="three-ids-and-D=5",
            marks=_GAP_EXPANDED_SHRINKS,
        ),
    ],
)
def test_cases_shrink_to_the_boundary(
    condition: Callable[[ees.EmbeddingCase], bool], expected: dict[str, Any]
) -> None:
    case = find(ees.embedding_cases(options=ees.EMBEDDING_OPTIONS), condition, settings=MINIMAL)
    assert case.num_embeddings in expected["V"]
    assert case.embedding_dim == expected["D"]
    assert (case.ids.values, case.ids.shape) in expected["ids"]
    assert (case.dtype, case.device, case.ids.dtype) == (torch.float32, "cpu", torch.int64)
    assert (case.weight.layout, case.ids.layout) == ("contiguous", "contiguous")
    assert dict(case.kwargs) == expected.get("kwargs", {})


def _collect(seed_value: int, strategy: st.SearchStrategy[Any], n: int = 20) -> list[Any]:
    drawn: list[Any] = []

    # derandomize=False: the ci profile derandomizes, which would ignore @seed.
    @seed(seed_value)
    @settings(database=None, derandomize=False, max_examples=n, phases=[Phase.generate])
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def test_same_seed_replays_the_same_recipes() -> None:
    strategy = ees.embedding_cases(options=ees.EMBEDDING_OPTIONS, allow_signed_zeros=True)
    first = _collect(20240611, strategy)
    second = _collect(20240611, strategy)
    assert len(first) == 20
    assert first == second
    assert [c.source() for c in first] == [c.source() for c in second]
    assert _collect(7, strategy) != first


def test_same_seed_replays_the_same_tensors() -> None:
    strategy = st.tuples(
        ees.token_ids(ees.vocab_sizes()), ees.embedding_weights(17, 5, dtype=ees.float_dtypes())
    )
    first = _collect(99, strategy, n=10)
    second = _collect(99, strategy, n=10)
    assert len(first) == len(second) == 10
    for (ids_a, w_a), (ids_b, w_b) in zip(first, second, strict=True):
        _assert_same_tensor(ids_a, ids_b)
        _assert_same_tensor(w_a, w_b)
