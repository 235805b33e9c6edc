"""The size knobs of the verifiers: vocab_sizes=, embedding_dims=, num_ids= (API and CLI).

Also tables past 2**31 elements through them, at a size CI can afford (the full size runs in
``benchmarks/large_tables.py``)."""

from __future__ import annotations

import gc
import math
import re
import weakref
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
import embedding_equivalence.oracle.expected as expected_module
from embedding_equivalence import strategies as ees
from embedding_equivalence._cli.main import main
from embedding_equivalence._draw.sizes import case_sizes, example_bytes, large_table_sizes
from embedding_equivalence._draw.tensors import LARGE_TABLE_ELEMENTS, edge_rows, is_large_table
from embedding_equivalence._engine.check import (
    EquivalenceError,
    check_case,
    compare_exact_or_bounded,
    compare_rows,
)
from embedding_equivalence.forms.quantized import lookup_quantized_embedding
from embedding_equivalence.oracle import EmbeddingOracle
from embedding_equivalence.oracle.expected import ExpectedRows, RowDigests

SEEN: list[tuple[int, int, int]] = []


def probe(weight: torch.Tensor) -> bool:
    """Whether this call is the verifiers' probe of the candidate, made once before any
    example (on a table of 2 rows, under ``no_grad``), which the knobs do not shape."""
    return not torch.is_grad_enabled() and weight.shape[0] == 2


def recording_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.embedding`` that records ``(V, D, N)`` of each valid call."""
    if not input.is_floating_point() and not probe(weight):
        SEEN.append((weight.shape[0], weight.shape[1], input.numel()))
    return F.embedding(input, weight)


@pytest.fixture(autouse=True)
def _fresh_record() -> None:
    SEEN.clear()


def test_the_knobs_bound_every_drawn_call() -> None:
    report = ee.verify_embedding(
        recording_embedding, vocab_sizes=50_257, embedding_dims=(3, 5), num_ids=(100, 300),
        max_examples=15, seed=0, boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)
    assert SEEN
    for vocab, dim, n in SEEN:
        assert vocab == 50_257
        assert 3 <= dim <= 5
        assert 100 <= n <= 300 or n == 1  # an invalid call has a single id


def test_a_strategy_is_a_knob_too() -> None:
    report = ee.verify_embedding(
        recording_embedding, vocab_sizes=st.sampled_from([7, 11]), embedding_dims=2,
        max_examples=10, seed=0, boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)
    assert {v for v, _, _ in SEEN} <= {7, 11}
    assert {d for _, d, _ in SEEN} == {2}


def test_bag_knobs() -> None:
    report = ee.verify_embedding_bag(
        F.embedding_bag, vocab_sizes=(1000, 2000), embedding_dims=4, modes=("sum",),
        max_examples=10, seed=0, boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"vocab_sizes": 0}, "vocab_sizes=0 must be a positive int"),
        ({"embedding_dims": (5, 2)}, "embedding_dims=(5, 2) must satisfy 1 <= min <= max"),
        ({"num_ids": (1, 2, 3)}, "num_ids=(1, 2, 3) must be an int, (min, max) or a strategy"),
        ({"vocab_sizes": "big"}, "vocab_sizes='big' must be a positive int"),
    ],
    ids=["zero", "reversed", "triple", "text"],
)
def test_malformed_knobs_are_refused(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        ee.verify_embedding(F.embedding, **knobs)


def test_a_largest_example_that_does_not_fit_is_refused_with_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The budget variable stands for the memory available (here: one byte short of the
    # CPU's share, host and device both being the CPU, then exactly enough).
    knobs: dict[str, Any] = {"vocab_sizes": 50_257, "embedding_dims": 32, "num_ids": 64}
    host, device = example_bytes(50_257, 32, 64, torch.float32)
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(host + device - 1))
    with pytest.raises(InvalidArgument, match=r"V=50257, D=32, N=64, torch\.float32\) needs"):
        ee.verify_embedding(F.embedding, dtypes=[torch.float32], **knobs)
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(host + device))
    report = ee.verify_embedding(
        F.embedding, dtypes=[torch.float32], max_examples=5, seed=0, boundaries=False, **knobs
    )
    assert report.passed, str(report)


def test_the_cli_takes_the_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--candidate", "test_sizes:recording_embedding", "--vocab-sizes", "30:40"]
    argv += ["--embedding-dims", "2", "--num-ids", "9", "--max-examples", "5"]
    argv += ["--dtypes", "float32"]
    assert main([*argv, "--seed", "0", "--no-boundaries"]) == 0
    assert SEEN
    assert all(30 <= v <= 40 and d == 2 and n in (9, 1) for v, d, n in SEEN)


def test_the_bag_verifier_takes_num_ids_as_the_length_of_the_input() -> None:
    seen: list[tuple[int, ...]] = []

    def bag(input: torch.Tensor, weight: torch.Tensor, offsets: Any = None, **kw: Any) -> Any:
        if not probe(weight):
            seen.append(tuple(input.shape))
        return F.embedding_bag(input, weight, offsets, **kw)

    report = ee.verify_embedding_bag(
        bag, num_ids=(100, 120), vocab_sizes=50, embedding_dims=3, modes=("sum",),
        max_examples=20, seed=0, boundaries=False,
    )  # fmt: skip
    assert report.passed, str(report)
    assert seen
    assert all(len(shape) == 1 and 100 <= shape[0] <= 120 for shape in seen), set(seen)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vocab-sizes", "ten"], "'ten' is not N or LO:HI"),
        (["--embedding-dims", "8:2"], "'8:2' must satisfy 1 <= LO <= HI"),
    ],
    ids=["not-a-number", "reversed"],
)
def test_the_cli_refuses_bad_knobs(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["verify", *argv]) == 2
    assert message in capsys.readouterr().err


# --- Tables past 2**31 elements, at a size CI can afford ---------------------------------------

#: A large table at CI size: 4,100 x 1,024 = 4,198,400 elements, just past LARGE_TABLE_ELEMENTS.
V_CI, D_CI = 4_100, 1_024
#: A large table with many rows: ids past 2**20 (the stand-in of an int32 wrap) exist.
V_WIDE, D_WIDE = (1 << 20) + 8, 4


def test_the_preset_is_just_past_2_31_elements() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for kind in ("embedding", "bag", "quantized"):
            v, d = large_table_sizes(dtype, kind)
            assert 2**31 < v * d <= 2**31 + 16 * d
            assert (v - 1) * d >= 2**31  # the last row's offset wraps in an int32
    v, d = large_table_sizes(torch.float16, "quantized", scheme="uint4")
    assert (v - 1) * d // 2 >= 2**31 > (v - 9) * d // 2 - d  # packed: bytes past 2**31
    with pytest.raises(InvalidArgument, match="kind='sharded' must be one of"):
        large_table_sizes(torch.float16, "sharded")
    with pytest.raises(InvalidArgument, match=r"must be a floating torch\.dtype"):
        large_table_sizes(torch.int8)


def test_the_estimate_counts_the_table_in_its_dtype_and_its_gradient() -> None:
    v, d = large_table_sizes(torch.float16)
    table = v * d * 2
    host, device = example_bytes(v, d, 512, torch.float16)
    assert device >= 2 * table  # the table and its dense gradient, in float16
    assert host + device <= 2.5 * table + 2**30  # no float64 copy, no copy of the table
    host, device = example_bytes(v, d, 512, torch.float16, kind="quantized")
    assert v * d <= host + device <= v * d + 2**28  # int8, forward only


def test_a_table_past_2_31_elements_is_accepted_on_24_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(24 << 30))
    v, d = large_table_sizes(torch.float16)
    for fn in ("verify_embedding", "verify_embedding_bag"):
        sizes = case_sizes(
            fn, vocab_sizes=v, embedding_dims=d, dtypes=[torch.float16], devices=["cpu"]
        )
        assert sizes["vocab_size"] == v
        assert sizes["embedding_dim"] == d
    v, d = large_table_sizes(torch.float32, "quantized")
    sizes = case_sizes(
        "verify_quantized_embedding", vocab_sizes=v, embedding_dims=d, num_ids=64,
        dtypes=[torch.float32, torch.float16], devices=["cpu"],
    )  # fmt: skip
    assert sizes["vocab_size"] == v


def test_a_table_too_large_is_refused_with_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(24 << 30))
    # 2**33 elements of float16: a 16 GiB table and its 16 GiB gradient.
    with pytest.raises(InvalidArgument, match=r"V=8388608, D=1024, .*needs about 32\.\d GiB"):
        ee.verify_embedding(
            F.embedding, vocab_sizes=2**23, embedding_dims=1024, dtypes=[torch.float16]
        )
    # A float64 table at the preset's size: 16 GiB, and as much for its gradient.
    v, d = large_table_sizes(torch.float64)
    with pytest.raises(InvalidArgument, match=rf"V={v}, D={d}, .*needs about 32\.\d GiB on cpu"):
        ee.verify_embedding(F.embedding, vocab_sizes=v, embedding_dims=d, dtypes=[torch.float64])


def test_edge_rows_are_the_last_the_first_and_the_first_past_2_31() -> None:
    assert edge_rows(V_CI, D_CI) == (V_CI - 1, 0)
    v, d = large_table_sizes(torch.float16)
    assert edge_rows(v, d) == (v - 1, 0, 2**31 // d)
    assert edge_rows(3, 5) == ()  # small tables draw their ids freely
    assert is_large_table(V_CI, D_CI)
    assert not is_large_table(V_CI - 100, D_CI)


@settings(max_examples=10, database=None)
@given(
    ees.embedding_cases(
        vocab_size=V_CI, embedding_dim=D_CI, dtype=torch.float16, max_elements=V_CI * D_CI
    )
)
def test_a_large_table_is_native_contiguous_and_looked_up_at_its_last_row(
    case: ees.EmbeddingCase,
) -> None:
    assert case.weight.native
    assert case.weight.layout == "contiguous"
    assert case.ids.values[0] == V_CI - 1  # first, so in the first row of an expanded input
    if case.ids.layout != "expanded":
        assert case.ids.values[:2] == (V_CI - 1, 0)[: len(case.ids.values)]


def test_a_small_table_is_drawn_through_float64_as_before() -> None:
    v = LARGE_TABLE_ELEMENTS // D_CI - 1
    cases = ees.embedding_cases(vocab_size=v, embedding_dim=D_CI, max_elements=v * D_CI)
    natives = []

    @settings(max_examples=5, database=None)
    @given(cases)
    def run(case: ees.EmbeddingCase) -> None:
        natives.append(case.weight.native)

    run()
    assert natives
    assert not any(natives)


def test_the_rows_of_a_large_table_differ() -> None:
    recipe = ees.WeightRecipe(V_CI, D_CI, torch.float16, seed=3, native=True)
    w = recipe.build()
    assert w.dtype == torch.float16
    assert w.is_contiguous()
    assert torch.unique(w, dim=0).shape[0] == V_CI  # reading a wrong row is seen


def _recording(ids_seen: list[list[int]], kind: str) -> Any:
    def candidate(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not input.is_floating_point() and not probe(weight):
            ids_seen.append(input.reshape(-1).tolist())
        if kind == "quantized":
            return lookup_quantized_embedding(input, weight, *args, scheme="int8")
        if kind == "bag":  # F.embedding_bag takes some bad offsets (a torch defect)
            return ee.lookup_embedding_bag(input, weight, *args, **kwargs)
        return F.embedding(input, weight, **kwargs)

    return candidate


@pytest.mark.parametrize("kind", ["embedding", "bag", "quantized"])
def test_every_call_of_a_large_table_looks_its_last_row_up(kind: str) -> None:
    seen: list[list[int]] = []
    candidate = _recording(seen, kind)
    knobs: dict[str, Any] = {"vocab_sizes": V_WIDE, "embedding_dims": D_WIDE}
    knobs.update(max_examples=5, seed=1)
    knobs["boundaries"] = False
    if kind == "embedding":
        report = ee.verify_embedding(candidate, dtypes=[torch.float16], **knobs)
    elif kind == "bag":
        report = ee.verify_embedding_bag(candidate, dtypes=[torch.float16], **knobs)
    else:
        report = ee.verify_quantized_embedding(candidate, scheme="int8", **knobs)
    assert report.passed, str(report)
    valid = [ids for ids in seen if all(0 <= i < V_WIDE for i in ids)]
    assert valid
    assert all(V_WIDE - 1 in ids for ids in valid)


def wrapping_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.embedding`` whose row offsets wrap at 2**20 rows (an int32 offset, scaled down)."""
    return F.embedding(input % (1 << 20), weight)


def wrapping_bag(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """``F.embedding_bag`` whose ids wrap at 2**20, as ``wrapping_embedding``."""
    return F.embedding_bag(input % (1 << 20), weight, *args, **kwargs)


def wrapping_quantized(
    input: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, zero_point: Any
) -> torch.Tensor:
    """An int8 lookup whose ids wrap at 2**20, as ``wrapping_embedding``."""
    return lookup_quantized_embedding(input % (1 << 20), qweight, scale, zero_point, scheme="int8")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_kernel_that_wraps_large_ids_is_caught_by_its_first_example(seed: int) -> None:
    report = ee.verify_embedding(
        wrapping_embedding, vocab_sizes=V_WIDE, embedding_dims=D_WIDE, dtypes=[torch.float16],
        max_examples=1, seed=seed, boundaries=False,
    )  # fmt: skip
    if report.passed:  # the one example drawn was invalid input, refused as it must be
        assert report.examples == 1
        return
    assert f"{V_WIDE - 1}" in str(report.counterexample) or "input" in str(report.failure)


def test_kernels_that_wrap_large_ids_are_caught() -> None:
    knobs: dict[str, Any] = {"vocab_sizes": V_WIDE, "embedding_dims": D_WIDE, "seed": 0}
    knobs.update(max_examples=3, boundaries=False)
    report = ee.verify_embedding(wrapping_embedding, dtypes=[torch.float16], **knobs)
    assert not report.passed, str(report)
    assert "out[" in str(report.failure)
    report = ee.verify_embedding_bag(wrapping_bag, modes=("sum",), dtypes=[torch.float16], **knobs)
    assert not report.passed, str(report)
    report = ee.verify_quantized_embedding(wrapping_quantized, scheme="int8", **knobs)
    assert not report.passed, str(report)


def test_max_norm_on_a_large_table_is_judged_by_row_digests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    knobs: dict[str, Any] = {"vocab_sizes": V_CI, "embedding_dims": D_CI, "dtypes": [torch.float32]}
    knobs.update(options=("max_norm",), max_examples=3, seed=0, boundaries=False)
    report = ee.verify_embedding(F.embedding, **knobs)
    assert report.passed, str(report)

    def renorms_every_row(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> Any:
        if "max_norm" in kwargs:
            with torch.no_grad():
                norms = weight.norm(dim=1, keepdim=True)
                weight.mul_(torch.where(norms > kwargs["max_norm"], kwargs["max_norm"] / norms, 1))
        return F.embedding(input, weight, **kwargs)

    # Digests from 65 elements on: a small table takes the large table's path, cheaply.
    monkeypatch.setattr(expected_module, "COPY_MAX_ELEMENTS", 64)
    knobs.update(vocab_sizes=40, embedding_dims=3, max_examples=20)
    report = ee.verify_embedding(renorms_every_row, **knobs)
    assert not report.passed
    changed = r"^weight \(after max_norm\)\[\d+, :\] changed, but no id references row"
    assert re.search(changed, str(report.failure)), str(report)


def test_the_whole_comparison_is_the_same_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.Generator().manual_seed(0)
    actual = torch.zeros(50, 7)
    actual[[3, 20]] = torch.randn(2, 7, generator=g)
    actual[41, 2] = 1.0  # a row that must be zero
    actual[44, 5] = -0.0  # equal to zero
    rows = [3, 20, 45]
    values = actual[rows].double()
    values[1, 4] += 1e-3
    bound = torch.full((3, 7), 1e-6, dtype=torch.float64)
    whole = compare_exact_or_bounded("w", actual, *ExpectedRows(rows, values, bound, 50).full())
    assert whole[0] is not None
    assert "w[20, 4]" in whole[0]
    assert "2 of 350" in whole[0]
    monkeypatch.setattr(expected_module, "CHUNK_ELEMENTS", 7 * 4)
    assert compare_rows("w", actual, ExpectedRows(rows, values, bound, 50)) == whole
    rest = torch.randn(50, 7, generator=g)
    changed = rest.clone()
    changed[rows] = actual[rows]
    changed[33, 0] += 1.0
    chunked = compare_rows("w", changed, ExpectedRows(rows, values, bound, 50, rest=rest))
    monkeypatch.setattr(expected_module, "CHUNK_ELEMENTS", 1 << 22)
    assert chunked == compare_rows("w", changed, ExpectedRows(rows, values, bound, 50, rest=rest))
    digests = RowDigests.of(rest)
    msg, _ = compare_rows("w", changed, ExpectedRows(rows, values, bound, 50, rest=digests))
    assert msg is not None
    assert msg.startswith("w[20, 4]")
    assert "1 rows that no id" in msg
    changed[[3, 20, 45]] = values.float()
    msg, _ = compare_rows("w", changed, ExpectedRows(rows, values, bound, 50, rest=digests))
    assert msg is not None
    assert msg.startswith("w[33, :] changed, but no id references row 33")


def test_a_failure_keeps_no_tensor_of_its_call_alive() -> None:
    held: list[weakref.ref[torch.Tensor]] = []

    def off_by_one(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        held.append(weakref.ref(weight))
        return F.embedding(input, weight) + 1

    ids = ees.IdsRecipe((0, 2), (2,))
    case = ees.EmbeddingCase(ids, ees.WeightRecipe(3, 4))
    with pytest.raises(EquivalenceError) as info:
        check_case(off_by_one, case, EmbeddingOracle.for_call)
    assert "out[0, 0]" in str(info.value)
    gc.collect()
    assert held
    assert held[0]() is None, "the failure keeps the call's table alive"
    assert not math.isnan(info.value.worst)
