"""The boundary phase: fixed examples at the sizes where kernels break, in every run.

Each kernel here is correct but past one boundary, as kernels really ship. With
``max_examples=1`` (one random example, which cannot reach the boundary) the phase must still
catch it, under any seed, and name the boundary it crossed.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import embedding_equivalence as ee
from embedding_equivalence._draw.boundaries import (
    bag_boundaries,
    embedding_boundaries,
    quantized_boundaries,
)
from embedding_equivalence._draw.boundary_data import (
    LIMITS,
    NATIVE_ELEMENTS,
    around_powers_of_two,
    option_sets,
)

DTYPES = [torch.float32]
#: Two runs, to show that a catch does not depend on the seed: the fast tier runs the first
#: seed, the slow tier adds the second.
SEEDS = [1, pytest.param(2, marks=pytest.mark.slow)]


def zero_past_768_ids(input, weight, padding_idx=None):
    """A grid that covers 768 ids: later ids come back as zeros."""
    out = F.embedding(input, weight, padding_idx)
    flat = out.reshape(-1, weight.shape[1])
    if flat.shape[0] > 768:
        flat = torch.cat([flat[:768], torch.zeros_like(flat[768:])])
    return flat.reshape(out.shape)


def zero_past_width_1024(input, weight):
    """Lookups come back zero for embedding_dim > 1024 (torchrec#3673's symptom)."""
    out = F.embedding(input, weight)
    return out * 0 if weight.shape[1] > 1024 else out


def counts_in_a_byte(input, weight, scale_grad_by_freq=False):
    """scale_grad_by_freq with per-row counts kept in uint8: they wrap at 256."""
    out = F.embedding(input, weight)
    if not scale_grad_by_freq:
        return out
    counts = torch.bincount(input.reshape(-1), minlength=weight.shape[0]).to(torch.uint8)
    scale = 1.0 / counts.to(weight.dtype)[input].unsqueeze(-1)
    return out.detach() + (out - out.detach()) * scale


def ids_wrap_at_2_16(input, weight):
    """Ids stored in 16 bits: rows past 65,535 read row ``id % 65536``."""
    if bool((input < 0).any()) or bool((input >= weight.shape[0]).any()):
        raise IndexError("id out of range")
    return F.embedding(input % 65536, weight)


def bag_mean_count_in_a_byte(input, weight, offsets=None, mode="mean", **kwargs):
    """mode='mean' divides by a bag length kept in uint8: wrong past 255 ids in a bag."""
    out = ee.lookup_embedding_bag(input, weight, offsets, mode=mode, **kwargs)
    if mode != "mean" or offsets is None or input.dim() != 1:
        return out
    ends = torch.cat([offsets[1:], offsets.new_tensor([input.numel()])])
    lengths = (ends - offsets).clamp(min=1)
    wrong = (lengths % 256).clamp(min=1)
    return out * (lengths / wrong).to(out.dtype).unsqueeze(1)


def _bag_lengths(input, offsets, include_last_offset=False):
    """Ids in each bag of a 1-D input (ids after the last offset in none)."""
    starts = offsets[:-1] if include_last_offset else offsets
    end = offsets[-1:] if include_last_offset else offsets.new_tensor([input.numel()])
    return torch.cat([starts[1:], end]) - starts


def bag_mean_count_in_int16(input, weight, offsets=None, mode="mean", **kwargs):
    """mode='mean' divides by a bag length kept in int16: wrong from 32,768 ids in a bag."""
    out = ee.lookup_embedding_bag(input, weight, offsets, mode=mode, **kwargs)
    if mode != "mean" or offsets is None or input.dim() != 1:
        return out
    lengths = _bag_lengths(input, offsets, kwargs.get("include_last_offset", False))
    wrong = lengths.to(torch.int16).to(lengths.dtype).clamp(min=1)
    return out * (lengths.clamp(min=1) / wrong).to(out.dtype).unsqueeze(1)


def bags_past_a_grid_of_65535(input, weight, offsets=None, **kwargs):
    """A launch grid of at most 65,535 blocks, one a bag: later bags come back as zeros."""
    out = ee.lookup_embedding_bag(input, weight, offsets, **kwargs)
    if out.shape[0] <= 65_535:
        return out
    return torch.cat([out[:65_535], torch.zeros_like(out[65_535:])])


def leading_empty_bags_in_a_byte(input, weight, offsets=None, **kwargs):
    """A leading run of empty bags skipped with a byte counter: from 256 of them on, the bags
    after the run are written 256 rows too early."""
    out = ee.lookup_embedding_bag(input, weight, offsets, **kwargs)
    if offsets is None or input.dim() != 1 or out.shape[0] == 0:
        return out
    lengths = _bag_lengths(input, offsets, kwargs.get("include_last_offset", False))
    leading = int((lengths != 0).int().argmax()) if bool((lengths != 0).any()) else 0
    if leading < 256:
        return out
    return torch.cat([out[256:], torch.zeros_like(out[:256])])


def trailing_empty_bags_in_int16(input, weight, offsets=None, **kwargs):
    """Trailing empty bags zero-filled by a loop counted in int16: from 32,768 of them on,
    the rows past the count's wrap are left as they were allocated (NaN here)."""
    out = ee.lookup_embedding_bag(input, weight, offsets, **kwargs)
    if offsets is None or input.dim() != 1:
        return out
    lengths = _bag_lengths(input, offsets, kwargs.get("include_last_offset", False))
    nonempty = torch.nonzero(lengths).reshape(-1)
    trailing = out.shape[0] - (int(nonempty[-1]) + 1 if nonempty.numel() else 0)
    if trailing < 32_768:
        return out
    out = out.clone()
    out[out.shape[0] - trailing + trailing % 32_768 :] = float("nan")
    return out


def int8_width_tail_dropped(input, qweight, scale, zero_point):
    """A dequantization in vectors of 64 columns that drops the tail of the width."""
    out = ee.lookup_quantized_embedding(input, qweight, scale, zero_point, scheme="int8")
    full = (out.shape[-1] // 64) * 64
    if full and full < out.shape[-1]:
        out = out.clone()
        out[..., full:] = 0
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_past_n_ids_is_caught_and_named(seed: int) -> None:
    report = ee.verify_embedding(zero_past_768_ids, max_examples=1, seed=seed, dtypes=DTYPES)
    assert not report.passed
    assert report.boundary == "fails from N = 769; passes at 768"
    assert "769" in (report.counterexample or "")


@pytest.mark.parametrize("seed", SEEDS)
def test_past_width_1024_is_caught_and_named(seed: int) -> None:
    report = ee.verify_embedding(zero_past_width_1024, max_examples=1, seed=seed, dtypes=DTYPES)
    assert not report.passed
    assert report.boundary == "fails from D = 1,025; passes at 1,024"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_counter_that_wraps_at_256_repeats_is_caught(seed: int) -> None:
    report = ee.verify_embedding(
        counts_in_a_byte, options=("scale_grad_by_freq",), max_examples=1, seed=seed,
        dtypes=DTYPES,
    )  # fmt: skip
    assert not report.passed
    assert report.boundary == "fails from repeats = 256; passes at 255"


@pytest.mark.parametrize("seed", SEEDS)
def test_ids_wrapping_at_2_16_are_caught(seed: int) -> None:
    report = ee.verify_embedding(ids_wrap_at_2_16, max_examples=1, seed=seed, dtypes=DTYPES)
    assert not report.passed
    assert report.boundary == "fails from V = 65,537; passes at 65,536"


@pytest.mark.parametrize("seed", SEEDS)
def test_max_norm_in_the_2_norm_whatever_norm_type_is_caught(seed: int) -> None:
    from mutants import max_norm_ignores_norm_type

    report = ee.verify_embedding(
        max_norm_ignores_norm_type, options=("max_norm",), max_examples=1, seed=seed,
        dtypes=DTYPES,
    )  # fmt: skip
    assert not report.passed
    assert report.boundary is not None
    assert report.boundary.startswith("fails at max_norm with norm_type=1.0"), report.boundary


@pytest.mark.parametrize("seed", SEEDS)
def test_negative_ids_that_wrap_are_caught(seed: int) -> None:
    wraps = lambda input, weight: weight[input].clone()  # noqa: E731
    report = ee.verify_embedding(wraps, max_examples=1, seed=seed)
    assert not report.passed
    assert report.boundary is not None
    assert report.boundary.startswith("fails at id -1")


def test_torch_sparse_padding_defect_is_found_under_any_seed() -> None:
    for seed in (0, 1):
        report = ee.verify_embedding(
            F.embedding, options=("padding_idx", "sparse"), max_examples=1, seed=seed
        )
        assert not report.passed
        assert "embedding-sparse-padding" not in (report.failure or "")  # id is not printed
        assert "torch defect" in (report.failure or "")
        assert "0-d id" in (report.boundary or "")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_bag_length_counter_in_a_byte_is_caught(seed: int) -> None:
    report = ee.verify_embedding_bag(
        bag_mean_count_in_a_byte, modes=("mean",), max_examples=1, seed=seed, dtypes=DTYPES
    )
    assert not report.passed
    assert report.boundary == "fails from bag length = 256; passes at 255"


# The fast tier crosses one of the larger bag axes; the slow tier the others (2**16 empty
# bags and 2**17 bags make the phase's largest examples).
@pytest.mark.parametrize(
    ("kernel", "mode", "crossed"),
    [
        (bag_mean_count_in_int16, "mean", "fails from bag length = 32,768; passes at 32,767"),
        pytest.param(
            bags_past_a_grid_of_65535,
            "sum",
            "fails from bags = 65,536; passes at 65,535",
            marks=pytest.mark.slow,
            id="bags_past_a_grid_of_65535",
        ),
        pytest.param(
            leading_empty_bags_in_a_byte,
            "max",
            "fails from empty bags = 256; passes at 255",
            marks=pytest.mark.slow,
            id="leading_empty_bags_in_a_byte",
        ),
        pytest.param(
            trailing_empty_bags_in_int16,
            "sum",
            "fails from empty bags = 32,768; passes at 32,767",
            marks=pytest.mark.slow,
            id="trailing_empty_bags_in_int16",
        ),
    ],
    ids=lambda x: getattr(x, "__name__", None),
)
def test_bag_bugs_past_the_larger_bag_axes_are_caught(kernel, mode: str, crossed: str) -> None:
    """Bag lengths up to 2**16, bag counts up to 2**17, empty bags at both ends up to 2**16."""
    report = ee.verify_embedding_bag(kernel, modes=(mode,), max_examples=1, seed=3, dtypes=DTYPES)
    assert not report.passed
    assert report.boundary == crossed


@pytest.mark.parametrize("seed", SEEDS)
def test_a_quantized_width_tail_is_caught(seed: int) -> None:
    report = ee.verify_quantized_embedding(
        int8_width_tail_dropped, scheme="int8", max_examples=1, seed=seed, dtypes=DTYPES
    )
    assert not report.passed
    assert report.boundary == "fails from D = 65; passes at 64"


def test_the_boundary_examples_are_the_same_under_every_seed() -> None:
    first = ee.verify_embedding(zero_past_width_1024, max_examples=1, seed=1, dtypes=DTYPES)
    second = ee.verify_embedding(zero_past_width_1024, max_examples=1, seed=2, dtypes=DTYPES)
    assert first.boundary == second.boundary
    assert first.counterexample == second.counterexample
    assert first.boundary_examples == second.boundary_examples


def test_the_lists_do_not_depend_on_anything_but_their_arguments() -> None:
    args = (("padding_idx",), [torch.float32, torch.float16], ["cpu"])
    assert [b.label for b in embedding_boundaries(*args)] == [
        b.label for b in embedding_boundaries(*args)
    ]
    assert [b.case for b in embedding_boundaries(*args)] == [
        b.case for b in embedding_boundaries(*args)
    ]


def test_boundaries_false_turns_the_phase_off() -> None:
    report = ee.verify_embedding(F.embedding, max_examples=3, seed=0, boundaries=False)
    assert report.passed
    assert report.boundary_examples == 0
    assert report.examples == 3


def test_a_correct_kernel_passes_the_phase() -> None:
    report = ee.verify_embedding(F.embedding, max_examples=1, seed=0)
    assert report.passed, str(report)
    assert report.boundary_examples > 200


def test_around_powers_of_two() -> None:
    assert around_powers_of_two(9) == (1, 2, 3, 4, 5, 7, 8, 9)
    values = around_powers_of_two(LIMITS["N"])
    assert values[-1] == LIMITS["N"]
    for k in range(2, 17):
        assert {2**k - 1, 2**k, 2**k + 1} <= set(values)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((), []),
        (("a",), [("a",)]),
        (("a", "b"), [("a",), ("b",), ("a", "b")]),
        (("scale_grad_by_freq", "sparse"), [("scale_grad_by_freq",), ("sparse",)]),
    ],
)
def test_option_sets(options: tuple[str, ...], expected: list[tuple[str, ...]]) -> None:
    assert option_sets(options, (("scale_grad_by_freq", "sparse"),)) == expected


def test_every_axis_reaches_its_limit_with_the_first_and_last_rows() -> None:
    axes: dict[str, list] = {}
    for b in embedding_boundaries((), [torch.float32], ["cpu"]):
        axes.setdefault(b.axis, []).append(b)
    for axis in ("N", "D", "V", "repeats"):
        assert max(b.value for b in axes[axis]) == LIMITS[axis]
    top = max(axes["V"], key=lambda b: b.value)
    ids = set(top.case.ids.values)
    assert {0, LIMITS["V"] - 1} <= ids
    assert top.case.weight.native  # drawn in its own dtype, without a float64 copy
    kinds = {b.what for b in axes["bad input"]}
    assert any("most negative" in k for k in kinds)


def test_tables_past_native_size_take_the_narrowest_dtypes_in_turn() -> None:
    """On the ``V`` axis every requested dtype takes turns up to ``NATIVE_ELEMENTS`` rows, and
    the narrowest ones past it, in the embedding and the bag lists alike; bisecting keeps the
    failing example's dtype."""
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    for boundaries in (
        embedding_boundaries((), dtypes, ["cpu"]),
        bag_boundaries((), ("sum", "max"), dtypes, ["cpu"]),
    ):
        on_v = [b for b in boundaries if b.axis == "V"]
        small = {b.case.weight.dtype for b in on_v if b.value <= NATIVE_ELEMENTS}
        large = [b for b in on_v if b.value > NATIVE_ELEMENTS]
        assert small == set(dtypes)
        assert {b.case.weight.dtype for b in large} == {torch.float16, torch.bfloat16}
        assert max(b.value for b in large) == LIMITS["V"]
        for b in large:
            assert b.make is not None
            assert b.make(3).weight.dtype == b.case.weight.dtype
    only_wide = embedding_boundaries((), [torch.float64, torch.float32], ["cpu"])
    large = [b for b in only_wide if b.axis == "V" and b.value > NATIVE_ELEMENTS]
    assert {b.case.weight.dtype for b in large} == {torch.float32}


def test_bag_and_quantized_lists_cover_their_edges() -> None:
    bags = list(bag_boundaries(("include_last_offset",), ("sum", "max"), [torch.float32], ["cpu"]))
    labels = " | ".join(b.label for b in bags)
    for edge in ("an empty bag first", "an empty bag last", "no bags", "(3, 0)", "decreasing"):
        assert edge in labels
    assert {b.case.mode for b in bags if b.axis == "bag length"} == {"sum", "max"}
    for axis in ("bag length", "bags", "empty bags"):
        on_axis = [b for b in bags if b.axis == axis]
        assert {2**k + j for k in range(1, 16) for j in (-1, 0, 1)} <= {b.value for b in on_axis}
        top = max(on_axis, key=lambda b: b.value)
        assert top.value == LIMITS[axis]
        assert len(top.case.ids.values) <= LIMITS["N"]
    empty = max((b for b in bags if b.axis == "empty bags"), key=lambda b: b.value)
    starts = empty.case.offsets
    assert starts[: LIMITS["empty bags"] + 1] == (0,) * (LIMITS["empty bags"] + 1)  # at the start
    last = len(empty.case.ids.values)  # ... and at the end (the end offset under the option)
    assert starts[-LIMITS["empty bags"] :] == (last,) * LIMITS["empty bags"]
    uint4 = [b for b in quantized_boundaries("uint4", False, [torch.float32], ["cpu"])]
    assert all(b.case.table.embedding_dim % 2 == 0 for b in uint4)


def torch_bag_but_2d_without_columns(input, weight, offsets=None, **kwargs):
    """``F.embedding_bag``, with its (B, 0) defect routed around, to reach the others."""
    if input.dim() == 2 and input.shape[1] == 0:
        return ee.lookup_embedding_bag(input, weight, offsets, **kwargs)
    return F.embedding_bag(input, weight, offsets, **kwargs)


def torch_bag_but_two_defects(input, weight, offsets=None, **kwargs):
    """Also refusing decreasing offsets (which torch's sum and mean read out of bounds)."""
    if offsets is not None and offsets.numel() > 1 and bool((offsets.diff() < 0).any()):
        raise ValueError(f"offsets must not decrease, got {offsets.tolist()}")
    return torch_bag_but_2d_without_columns(input, weight, offsets, **kwargs)


#: Each defect of torch's table that a finite table can reach, and the call that requests the
#: options that trigger it (max for ids after the last offset: sum's symptom there is
#: uninitialised memory, which may happen to hold zeros). ``bag-max-nan-only-first`` needs a
#: NaN in the table, which the verifiers never draw: their contract is finite tables.
_DEFECT_RUNS = {
    "embedding-sparse-padding-0d-ids": lambda seed: ee.verify_embedding(
        F.embedding, options=("padding_idx", "sparse"), max_examples=1, seed=seed
    ),
    "bag-2d-input-without-columns": lambda seed: ee.verify_embedding_bag(
        F.embedding_bag, modes=("sum",), max_examples=1, seed=seed
    ),
    "bag-decreasing-offsets-accepted": lambda seed: ee.verify_embedding_bag(
        torch_bag_but_2d_without_columns, modes=("max",), max_examples=1, seed=seed
    ),
    "bag-include-last-offset-mean": lambda seed: ee.verify_embedding_bag(
        torch_bag_but_two_defects,
        modes=("mean",),
        options=("include_last_offset",),
        max_examples=1,
        seed=seed,
    ),
    "bag-include-last-offset-sum-max": lambda seed: ee.verify_embedding_bag(
        torch_bag_but_two_defects,
        modes=("max",),
        options=("include_last_offset",),
        max_examples=1,
        seed=seed,
    ),
    "bag-scale-grad-by-freq-count": lambda seed: ee.verify_embedding_bag(
        torch_bag_but_two_defects,
        modes=("sum",),
        options=("scale_grad_by_freq",),
        max_examples=1,
        seed=seed,
    ),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("defect", sorted(_DEFECT_RUNS))
def test_torch_defects_are_found_under_every_seed(defect: str, seed: int) -> None:
    report = _DEFECT_RUNS[defect](seed)
    assert not report.passed
    assert report.torch_defect == defect, str(report)
    assert report.boundary is not None


def test_every_defect_of_the_table_is_covered_or_explained() -> None:
    from embedding_equivalence._engine.torch_defects import TORCH_DEFECTS

    # The CUDA entries need a GPU: docs/cuda-results.json records the verifier finding them.
    ids = {d.id for d in TORCH_DEFECTS if "CUDA" not in d.affected}
    assert ids - set(_DEFECT_RUNS) == {"bag-max-nan-only-first"}


def test_boundary_snippets_rebuild_the_same_ids_and_offsets() -> None:
    """The short expressions of long inputs are valid Python that gives the very same ids."""
    cases = [b.case for b in embedding_boundaries((), [torch.float32], ["cpu"])]
    cases += [b.case for b in bag_boundaries((), ("sum",), [torch.float32], ["cpu"])]
    checked = 0
    for case in cases:
        if case.ids.dtype.is_floating_point or len(case.ids.values) > 5000:
            continue
        namespace: dict = {"torch": torch}
        exec(case.ids.source("input"), namespace)
        assert torch.equal(namespace["input"], case.ids.build()), case.ids.source("input")
        offsets = getattr(case, "offsets", None)
        if offsets is not None:
            tensors = case.build(requires_grad=False)
            exec("\n".join(case._source_parts()[0]), namespace)
            assert torch.equal(namespace["offsets"], tensors.offsets)
        checked += 1
    assert checked > 200
