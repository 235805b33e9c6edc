"""Example-based tests of the EmbeddingBag forms against ``torch.nn.functional.embedding_bag``.

Every tensor is built from ``torch.arange``: the table holds quarter-integers and the upstream
gradients small integers, and every bag holds 0, 1, 2 or 4 non-padding ids. Sums of up to four
such values, and their halves and quarters, are exact in every float dtype, so the forward
values and the gradients of ``lookup_embedding_bag``, ``matmul_embedding_bag`` and
``F.embedding_bag`` agree bit for bit although they add in different orders. Where the data are
not exact (a bag of three ids in ``mean``, renormalised rows) the tests say why they compare
with a tolerance or against hand-computed float64 values. No global RNG is used.

Three defects of ``F.embedding_bag`` (torch 2.13, CPU) are documented by the ``torch_defect``
tests below; the package's functions work around them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given

import embedding_equivalence.strategies as ees
from embedding_equivalence.forms.bag import (
    bag_bounds,
    bag_count_matrix,
    lookup_embedding_bag,
    matmul_embedding_bag,
)
from embedding_equivalence.forms.dtypes import FLOAT_DTYPES, dtype_name
from embedding_equivalence.forms.memory import OneHotTooLargeError
from registry import form_params

BagFn = Callable[..., torch.Tensor]

V, D = 7, 3
MODES = ["sum", "mean", "max"]


@pytest.fixture(params=form_params("bag"))
def bag_fn(request: pytest.FixtureRequest) -> BagFn:
    """Both EmbeddingBag forms; they must give the same values, gradients and errors."""
    return request.param


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def table(dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    """``(V, D)`` table of distinct quarter-integers ``(k - 10) / 4``, exact in every dtype."""
    k = torch.arange(V * D, dtype=torch.float64)
    return ((k - 10) / 4).reshape(V, D).to(device, dtype)


def upstream(shape: torch.Size, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """Small integer upstream gradient ``(k % 5) - 2`` for an output of ``shape``."""
    n = math.prod(shape)
    return ((torch.arange(n) % 5) - 2).reshape(shape).to(device, dtype)


def run(
    fn: BagFn,
    weight: torch.Tensor,
    input: torch.Tensor,
    offsets: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Forward and backward of ``fn`` on a fresh copy of ``weight``: (out, grad W, grad psw)."""
    w = weight.clone().requires_grad_()
    psw = kwargs.pop("per_sample_weights", None)
    if psw is not None:
        psw = psw.clone().requires_grad_()
        kwargs["per_sample_weights"] = psw
    out = fn(input, w, offsets, **kwargs)
    out.backward(upstream(out.shape, out.dtype, out.device))
    grad = w.grad
    assert grad is not None
    if grad.is_sparse:
        grad = grad.to_dense()
    return out.detach(), grad, None if psw is None else psw.grad


def assert_identical(
    actual: torch.Tensor, expected: torch.Tensor, *, signed_zeros: bool = False
) -> None:
    """Same dtype, shape and values (``torch.equal``, so ``-0.0 == 0.0`` unless ``signed_zeros``).

    The signs of zeros are not compared by default: a product gives ``0 * (-x) = -0.0`` where
    torch's kernels add into a ``+0.0`` accumulator (an empty bag over a column of negative
    weights, or the gradient of a row that occurs in no bag), a difference that no arithmetic
    on the result can observe except ``signbit`` and division by zero.
    """
    __tracebackhide__ = True
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.equal(actual, expected), f"\nactual:   {actual}\nexpected: {expected}"
    if signed_zeros:
        assert torch.equal(torch.signbit(actual), torch.signbit(expected)), "signs differ"


# (input, offsets, extra keyword arguments): every bag holds 0, 1, 2 or 4 non-padding ids.
CASES: dict[str, tuple[list[Any], list[int] | None, dict[str, Any]]] = {
    "one_bag": ([3, 1, 4, 1], [0], {}),
    "bags": ([3, 1, 4, 1, 5, 6], [0, 2, 4], {}),
    "empty_bags": ([3, 1, 4, 1, 5], [0, 0, 1, 1, 5], {}),
    "duplicates": ([2, 2, 2, 2, 5, 5], [0, 4], {}),
    "include_last_offset": ([3, 1, 4, 1, 5, 6], [0, 2, 2, 6], {"include_last_offset": True}),
    "include_last_offset_empty_last": ([3, 1], [0, 2, 2], {"include_last_offset": True}),
    "2d": ([[3, 1], [4, 1], [5, 6]], None, {}),
    "2d_include_last_offset_ignored": ([[3, 1], [4, 1]], None, {"include_last_offset": True}),
    "padding_idx": ([3, 1, 4, 1, 1, 2], [0, 2, 5], {"padding_idx": 1}),
    "negative_padding_idx": ([6, 2, 6, 6, 3, 4, 6], [0, 3], {"padding_idx": -1}),
    "padding_only_bag": ([1, 1, 2, 1, 1], [0, 2, 3], {"padding_idx": 1}),
    "2d_padding_idx": ([[0, 2], [0, 0], [3, 0]], None, {"padding_idx": 0}),
    "empty_input": ([], [0, 0], {}),
    "no_bags": ([], [], {}),
    "no_bags_include_last_offset": ([], [0], {"include_last_offset": True}),
}


def make_case(
    name: str, index_dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, Any]]:
    ids, offsets, kwargs = CASES[name]
    input = torch.tensor(ids, dtype=index_dtype, device=device)
    offs = None if offsets is None else torch.tensor(offsets, dtype=index_dtype, device=device)
    return input, offs, dict(kwargs)


# --- forward and backward equal F.embedding_bag -------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(
    bag_fn: BagFn,
    mode: str,
    case: str,
    index_dtype: torch.dtype,
    embedding_device_dtype: tuple[str, torch.dtype],
    request: pytest.FixtureRequest,
) -> None:
    device, float_dtype = embedding_device_dtype
    if device == "cuda" and float_dtype == torch.bfloat16 and mode == "max":
        reason = (
            "torch has no CUDA backward of mode='max' in bfloat16 (embedding_bag_backward_cuda_max)"
        )
        request.applymarker(
            pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=reason)
        )
    input, offsets, kwargs = make_case(case, index_dtype, device)
    weight = table(float_dtype, device)
    out, grad, _ = run(bag_fn, weight, input, offsets, mode=mode, **kwargs)
    ref_out, ref_grad, _ = run(F.embedding_bag, weight, input, offsets, mode=mode, **kwargs)
    assert_identical(out, ref_out)
    assert_identical(grad, ref_grad)


@pytest.mark.parametrize(
    ("input_dtype", "offsets_dtype"),
    [(torch.int64, torch.int32), (torch.int32, torch.int64)],
    ids=["int64_ids_int32_offsets", "int32_ids_int64_offsets"],
)
def test_mixed_index_dtypes(
    bag_fn: BagFn, mode: str, input_dtype: torch.dtype, offsets_dtype: torch.dtype
) -> None:
    input = torch.tensor([3, 1, 4, 1, 5, 6], dtype=input_dtype)
    offsets = torch.tensor([0, 2, 4], dtype=offsets_dtype)
    out, grad, _ = run(bag_fn, table(), input, offsets, mode=mode)
    ref_out, ref_grad, _ = run(F.embedding_bag, table(), input.long(), offsets.long(), mode=mode)
    assert_identical(out, ref_out)
    assert_identical(grad, ref_grad)


def test_empty_bags_are_zero(bag_fn: BagFn, mode: str) -> None:
    input, offsets, _ = make_case("empty_bags", torch.int64, "cpu")
    out, grad, _ = run(bag_fn, table(), input, offsets, mode=mode)
    assert out.shape == (5, D)
    for b in (0, 2, 4):
        assert_identical(out[b], torch.zeros(D))
    assert torch.equal(grad[0], torch.zeros(D))  # row 0 is in no bag


def test_padding_only_bag_is_zero_and_padding_row_gets_no_gradient(
    bag_fn: BagFn, mode: str
) -> None:
    input, offsets, kwargs = make_case("padding_only_bag", torch.int64, "cpu")
    out, grad, _ = run(bag_fn, table(), input, offsets, mode=mode, **kwargs)
    assert_identical(out[0], torch.zeros(D))
    assert_identical(out[2], torch.zeros(D))
    assert_identical(out[1], table()[2])  # sum, mean and max of one row are that row
    assert_identical(grad[1], torch.zeros(D))


def test_2d_input_equals_offsets(bag_fn: BagFn, mode: str) -> None:
    ids = [[3, 1], [4, 1], [5, 6]]
    out_2d = bag_fn(torch.tensor(ids), table(), mode=mode)
    flat = torch.tensor(ids).reshape(-1)
    assert_identical(out_2d, bag_fn(flat, table(), torch.tensor([0, 2, 4]), mode=mode))


def test_2d_input_with_empty_rows(bag_fn: BagFn, mode: str) -> None:
    # F.embedding_bag itself fails here ("step must be nonzero": it builds the offsets with
    # torch.arange(0, B * L, L)); B bags of zero ids are B rows of zeros.
    input = torch.zeros(2, 0, dtype=torch.int64)
    out, grad, _ = run(bag_fn, table(), input, mode=mode)
    assert_identical(out, torch.zeros(2, D))
    assert_identical(grad, torch.zeros(V, D))


def test_strided_weight(bag_fn: BagFn, mode: str) -> None:
    weight = table().t().contiguous().t()  # same values, strides (1, V)
    input, offsets, _ = make_case("bags", torch.int64, "cpu")
    out, grad, _ = run(bag_fn, weight, input, offsets, mode=mode)
    ref_out, ref_grad, _ = run(F.embedding_bag, table(), input, offsets, mode=mode)
    assert_identical(out, ref_out)
    assert_identical(grad, ref_grad)


def test_general_values_agree_up_to_summation_order(bag_fn: BagFn, mode: str) -> None:
    # sin(k) is not exact in any dtype and the bags hold 3 and 5 ids, so the lookup (which adds
    # by position) and the product (which adds count * W[v] over v) may round differently;
    # both stay within float64 rounding of each other. max is a selection, so it is exact.
    weight = torch.arange(V * D, dtype=torch.float64).sin().reshape(V, D)
    input = torch.tensor([3, 1, 4, 1, 5, 6, 2, 6])
    offsets = torch.tensor([0, 3])
    out, grad, _ = run(bag_fn, weight, input, offsets, mode=mode)
    ref_out, ref_grad, _ = run(F.embedding_bag, weight, input, offsets, mode=mode)
    if mode == "max":
        assert_identical(out, ref_out)
        assert_identical(grad, ref_grad)
    else:
        torch.testing.assert_close(out, ref_out, rtol=1e-15, atol=1e-15)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-15, atol=1e-15)


# --- per_sample_weights ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "offsets", "kwargs"),
    [
        pytest.param([3, 1, 4, 1, 5, 6], [0, 2, 4], {}, id="1d"),
        pytest.param([3, 1, 4, 1, 1, 6], [0, 0, 4], {"padding_idx": 1}, id="padding_idx"),
        pytest.param([[3, 1], [4, 1], [5, 6]], None, {}, id="2d"),
        pytest.param([3, 1, 4, 1, 5, 6], [0, 2, 4, 6], {"include_last_offset": True}, id="ilo"),
    ],
)
def test_per_sample_weights_match_torch(
    bag_fn: BagFn,
    ids: list[Any],
    offsets: list[int] | None,
    kwargs: dict[str, Any],
    index_dtype: torch.dtype,
    embedding_device_dtype: tuple[str, torch.dtype],
) -> None:
    device, float_dtype = embedding_device_dtype
    if device == "cuda" and float_dtype == torch.bfloat16:
        pytest.skip(
            "torch (2.11) has no bfloat16 per_sample_weights backward on CUDA "
            "(NotImplementedError from _embedding_bag_per_sample_weights_backward_cuda): "
            "no reference here, and lookup_embedding_bag runs that kernel"
        )
    input = torch.tensor(ids, dtype=index_dtype, device=device)
    offs = None if offsets is None else torch.tensor(offsets, dtype=index_dtype, device=device)
    psw = ((torch.arange(input.numel()) % 4) - 1.5).reshape(input.shape).to(device, float_dtype)
    weight = table(float_dtype, device)
    out, grad, grad_psw = run(
        bag_fn, weight, input, offs, mode="sum", per_sample_weights=psw, **kwargs
    )
    ref = run(F.embedding_bag, weight, input, offs, mode="sum", per_sample_weights=psw, **kwargs)
    assert_identical(out, ref[0])
    assert_identical(grad, ref[1])
    assert grad_psw is not None
    assert ref[2] is not None
    assert_identical(grad_psw, ref[2])


def test_per_sample_weights_of_padding_get_no_gradient(bag_fn: BagFn) -> None:
    input = torch.tensor([3, 1, 4, 1])
    psw = torch.tensor([1.0, 2.0, 3.0, 4.0])
    out, _, grad_psw = run(
        bag_fn, table(), input, torch.tensor([0, 2]), mode="sum", per_sample_weights=psw,
        padding_idx=1,
    )  # fmt: skip
    assert_identical(out, torch.stack([table()[3], 3 * table()[4]]))
    assert grad_psw is not None
    assert grad_psw[1] == 0
    assert grad_psw[3] == 0


# --- max ----------------------------------------------------------------------------------


def test_max_gradient_goes_to_the_first_maximum(bag_fn: BagFn) -> None:
    # Ties between different rows in each column: F.embedding_bag keeps the first maximum it
    # meets, so only that row receives the gradient of that column.
    weight = torch.tensor([[1.0, 5.0], [3.0, 2.0], [3.0, 5.0]])
    input = torch.tensor([0, 1, 2, 2, 1, 0])
    offsets = torch.tensor([0, 3])
    out, grad, _ = run(bag_fn, weight, input, offsets, mode="max")
    ref_out, ref_grad, _ = run(F.embedding_bag, weight, input, offsets, mode="max")
    assert_identical(out, ref_out)
    assert_identical(grad, ref_grad)
    assert_identical(grad, torch.tensor([[0.0, -1.0], [-2.0, 0.0], [0.0, 1.0]]))


def test_max_keeps_the_first_of_signed_zeros(bag_fn: BagFn) -> None:
    weight = torch.tensor([[-0.0, 0.0], [0.0, -0.0]])
    input = torch.tensor([0, 1, 1, 0])
    offsets = torch.tensor([0, 2])
    out, grad, _ = run(bag_fn, weight, input, offsets, mode="max")
    ref_out, ref_grad, _ = run(F.embedding_bag, weight, input, offsets, mode="max")
    assert_identical(out, ref_out, signed_zeros=True)
    assert_identical(grad, ref_grad)


def test_matmul_max_propagates_nan() -> None:
    # torch.amax semantics: a NaN is the maximum of its bag and column, wherever it stands.
    # (F.embedding_bag's CPU kernel keeps a NaN only when it is the first id of its bag.)
    weight = torch.tensor([[float("nan"), 1.0], [3.0, float("nan")], [0.0, 0.0]])
    out = matmul_embedding_bag(torch.tensor([2, 0, 1]), weight, torch.tensor([0]), mode="max")
    assert torch.isnan(out).all()


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_matmul_non_finite_row_poisons_other_bags(mode: str) -> None:
    # The documented exception of the matmul forms: 0 * inf = nan in every bag's product.
    weight = table()
    weight[6] = float("inf")
    input, offsets = torch.tensor([3, 1, 4]), torch.tensor([0, 2])
    assert torch.isfinite(lookup_embedding_bag(input, weight, offsets, mode=mode)).all()
    assert torch.isnan(matmul_embedding_bag(input, weight, offsets, mode=mode)).all()


# --- include_last_offset with ids after the last offset ------------------------------------


def test_ids_after_the_last_offset_belong_to_no_bag(bag_fn: BagFn, mode: str) -> None:
    # Documented: "The last element is the size of the input, or the ending index position of
    # the last bag". The result must equal the call on the ids up to the last offset.
    input = torch.tensor([3, 1, 4, 1, 5, 6])
    out, grad, _ = run(
        bag_fn, table(), input, torch.tensor([0, 2, 4]), mode=mode, include_last_offset=True
    )
    ref_out, ref_grad, _ = run(F.embedding_bag, table(), input[:4], torch.tensor([0, 2]), mode=mode)
    assert_identical(out, ref_out)
    assert_identical(grad, ref_grad)
    assert_identical(grad[5:], torch.zeros(2, D))  # rows 5 and 6 occur only after the end


def test_zero_bags_with_ids_after_the_last_offset(bag_fn: BagFn, mode: str) -> None:
    # F.embedding_bag reads out of bounds here (garbage gradient, sometimes a segfault).
    input = torch.tensor([3, 1, 4])
    out, grad, _ = run(
        bag_fn, table(), input, torch.tensor([0]), mode=mode, include_last_offset=True
    )
    assert out.shape == (0, D)
    assert_identical(grad, torch.zeros(V, D))


# --- max_norm -------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_max_norm_matches_torch(bag_fn: BagFn, mode: str, norm_type: float) -> None:
    # Renormalised rows are not exact, so each bag holds at most two distinct ids: a sum of
    # two terms (plus exact zeros) is the same in any order. Padding ids and ids after the
    # last offset are renormalised too, as F.embedding_bag does.
    input = torch.tensor([6, 3, 2, 2, 5, 1, 4])
    offsets = torch.tensor([0, 2, 4, 5])
    kwargs = {"max_norm": 1.5, "norm_type": norm_type, "padding_idx": 5, "mode": mode}
    w, w_ref = table(), table()
    out = bag_fn(input, w, offsets, include_last_offset=True, **kwargs)
    ref = F.embedding_bag(input[:5], w_ref, offsets[:3], **kwargs)
    F.embedding_bag(input[5:], w_ref, torch.tensor([0]), **kwargs)  # torch renorms these too
    assert_identical(out, ref)
    assert_identical(w, w_ref)  # the same rows, renormalised in place bit for bit
    assert not torch.equal(w, table())


def test_max_norm_gradient_matches_torch(bag_fn: BagFn, mode: str) -> None:
    input, offsets = torch.tensor([6, 3, 2, 2, 5]), torch.tensor([0, 2, 4])
    _, grad, _ = run(bag_fn, table(), input, offsets, mode=mode, max_norm=1.5)
    _, ref_grad, _ = run(F.embedding_bag, table(), input, offsets, mode=mode, max_norm=1.5)
    assert_identical(grad, ref_grad)


# --- scale_grad_by_freq ---------------------------------------------------------------------

# Id 1 occurs twice, id 2 once and id 3 four times (counts are powers of two, so every
# quotient is exact); bag 0 = [1, 1, 2], bag 1 = [3, 3, 3, 3] (sizes 3 and 4).
SGBF_IDS = [1, 1, 2, 3, 3, 3, 3]
SGBF_OFFSETS = [0, 3]


def sgbf_expected(mode: str, padding_idx: int | None = None) -> torch.Tensor:
    """The gradient of row v: sum of its occurrences' upstream gradients / count(v), in float64."""
    g = upstream(torch.Size([2, D]), torch.float64, "cpu")
    bags = [SGBF_IDS[0:3], SGBF_IDS[3:]]
    grad = torch.zeros(V, D, dtype=torch.float64)
    for b, bag in enumerate(bags):
        size = sum(1 for i in bag if i != padding_idx)
        for i in bag:
            if i != padding_idx:
                grad[i] += g[b] / (size if mode == "mean" else 1)
    counts = torch.bincount(torch.tensor(SGBF_IDS), minlength=V).clamp(min=1)
    grad /= counts[:, None]
    if padding_idx is not None:
        grad[padding_idx] = 0
    return grad


@pytest.mark.parametrize("float_dtype", FLOAT_DTYPES, ids=dtype_name)  # on the CPU
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 3], ids=["no_padding", "padding"])
def test_scale_grad_by_freq(
    bag_fn: BagFn, mode: str, padding_idx: int | None, float_dtype: torch.dtype
) -> None:
    # Compared with hand-computed values, not with F.embedding_bag: its CPU backward divides by
    # the wrong count here (see test_torch_defect_scale_grad_by_freq).
    input, offsets = torch.tensor(SGBF_IDS), torch.tensor(SGBF_OFFSETS)
    _, grad, _ = run(
        bag_fn, table(float_dtype), input, offsets, mode=mode, scale_grad_by_freq=True,
        padding_idx=padding_idx,
    )  # fmt: skip
    expected = sgbf_expected(mode, padding_idx)
    if mode == "mean":  # bag 0 holds 3 ids: 1/3 is not exact, so allow the dtype's rounding
        torch.testing.assert_close(grad, expected.to(float_dtype))
    else:
        assert_identical(grad, expected.to(float_dtype))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_matches_torch_when_counts_are_equal(bag_fn: BagFn, mode: str) -> None:
    # Every id occurs twice, so torch's CPU count mix-up cannot show.
    input, offsets = torch.tensor([1, 2, 1, 4, 2, 4]), torch.tensor([0, 2, 4])
    _, grad, _ = run(bag_fn, table(), input, offsets, mode=mode, scale_grad_by_freq=True)
    _, ref_grad, _ = run(
        F.embedding_bag, table(), input, offsets, mode=mode, scale_grad_by_freq=True
    )
    assert_identical(grad, ref_grad)


# --- sparse gradients (lookup only) --------------------------------------------------------


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_lookup_sparse_gradient(mode: str) -> None:
    input, offsets, kwargs = make_case("padding_idx", torch.int64, "cpu")
    w = table().requires_grad_()
    out = lookup_embedding_bag(input, w, offsets, mode=mode, sparse=True, **kwargs)
    out.backward(upstream(out.shape, out.dtype, out.device))
    assert w.grad is not None
    assert w.grad.is_sparse
    _, dense, _ = run(matmul_embedding_bag, table(), input, offsets, mode=mode, **kwargs)
    assert_identical(w.grad.to_dense(), dense)


# --- the bag-count matrix -------------------------------------------------------------------


def test_bag_count_matrix_counts_and_weights() -> None:
    bag_index, ids = torch.tensor([0, 0, 0, 2]), torch.tensor([1, 3, 1, 0])
    counts = bag_count_matrix(bag_index, ids, 3, 4, torch.float32)
    assert_identical(counts, torch.tensor([[0.0, 2, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]))
    weights = torch.tensor([0.5, 2.0, 0.25, -1.0])
    summed = bag_count_matrix(bag_index, ids, 3, 4, torch.float32, weights)
    assert_identical(summed, torch.tensor([[0.0, 0.75, 0, 2], [0, 0, 0, 0], [-1, 0, 0, 0]]))


# --- errors -----------------------------------------------------------------------------------

W = table()
IDS = torch.tensor([3, 1, 4, 1])
OFFS = torch.tensor([0, 2])

# (input, offsets, keyword arguments, exception, a fragment of the message)
ERRORS: dict[str, tuple[Any, Any, dict[str, Any], type[Exception], str]] = {
    "input_0d": (torch.tensor(1), OFFS, {}, ValueError, r"got shape \(\)"),
    "input_3d": (IDS.reshape(1, 2, 2), None, {}, ValueError, r"got shape \(1, 2, 2\)"),
    "input_float": (IDS.float(), OFFS, {}, TypeError, "int64 or torch.int32"),
    "input_list": ([3, 1], OFFS, {}, TypeError, "must be a torch.Tensor"),
    "id_too_large": (torch.tensor([3, 7]), OFFS, {}, IndexError, r"input\[1\] = 7"),
    "id_negative": (torch.tensor([3, -1]), OFFS, {}, IndexError, r"input\[1\] = -1"),
    "id_after_last_offset": (
        torch.tensor([3, 1, 9]), torch.tensor([0, 2]), {"include_last_offset": True},
        IndexError, r"input\[2\] = 9",
    ),
    "padding_idx_out_of_range": (IDS, OFFS, {"padding_idx": 7}, ValueError, "padding_idx=7"),
    "max_norm_negative": (IDS, OFFS, {"max_norm": -1.0}, ValueError, "max_norm=-1.0"),
    "1d_without_offsets": (IDS, None, {}, ValueError, "a 1-D input needs offsets"),
    "2d_with_offsets": (IDS.reshape(2, 2), OFFS, {}, ValueError, "offsets must be None"),
    "offsets_list": (IDS, [0, 2], {}, TypeError, "offsets must be a 1-D torch.Tensor"),
    "offsets_2d": (IDS, OFFS.reshape(1, 2), {}, ValueError, r"got shape \(1, 2\)"),
    "offsets_float": (IDS, OFFS.float(), {}, TypeError, "offsets must have dtype"),
    "offsets_int16": (IDS, OFFS.to(torch.int16), {}, TypeError, "offsets must have dtype"),
    "offsets_device": (IDS, OFFS.to("meta"), {}, ValueError, "offsets are on meta"),
    "offsets_first_not_zero": (IDS, torch.tensor([1, 3]), {}, ValueError, r"offsets\[0\] = 1"),
    "offsets_decreasing": (
        IDS, torch.tensor([0, 3, 1]), {}, ValueError,
        r"offsets\[2\] = 1 is smaller than offsets\[1\] = 3",
    ),
    "offsets_negative": (
        IDS, torch.tensor([0, -1]), {}, ValueError, r"offsets\[1\] = -1 is smaller",
    ),
    "offsets_past_end": (IDS, torch.tensor([0, 5]), {}, ValueError, r"offsets\[1\] = 5 is past"),
    "offsets_past_end_ilo": (
        IDS, torch.tensor([0, 2, 5]), {"include_last_offset": True}, ValueError,
        r"offsets\[2\] = 5 is past",
    ),
    "offsets_empty_with_ids": (
        IDS, torch.tensor([], dtype=torch.int64), {}, ValueError, "offsets is empty",
    ),
    "include_last_offset_empty_offsets": (
        IDS, torch.tensor([], dtype=torch.int64), {"include_last_offset": True}, ValueError,
        "needs at least one offset",
    ),
    "mode_unknown": (IDS, OFFS, {"mode": "min"}, ValueError, "mode must be one of"),
    "mode_not_str": (IDS, OFFS, {"mode": 0}, ValueError, "mode must be one of"),
    "max_scale_grad_by_freq": (
        IDS, OFFS, {"mode": "max", "scale_grad_by_freq": True}, ValueError,
        "scale_grad_by_freq=True is not supported with mode='max'",
    ),
    "psw_mean": (
        IDS, OFFS, {"mode": "mean", "per_sample_weights": torch.ones(4)}, ValueError,
        "only supported with mode='sum'.*weighted mean",
    ),
    "psw_max": (
        IDS, OFFS, {"mode": "max", "per_sample_weights": torch.ones(4)}, ValueError,
        "only supported with mode='sum'",
    ),
    "psw_list": (
        IDS, OFFS, {"mode": "sum", "per_sample_weights": [1.0] * 4}, TypeError,
        "per_sample_weights must be a torch.Tensor",
    ),
    "psw_dtype": (
        IDS, OFFS, {"mode": "sum", "per_sample_weights": torch.ones(4, dtype=torch.float64)},
        TypeError, "weight's dtype torch.float32",
    ),
    "psw_shape": (
        IDS, OFFS, {"mode": "sum", "per_sample_weights": torch.ones(3)}, ValueError,
        r"input's shape \(4\).*got \(3\)",
    ),
    "psw_device": (
        IDS, OFFS, {"mode": "sum", "per_sample_weights": torch.ones(4, device="meta")},
        ValueError, "per_sample_weights is on meta",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors(bag_fn: BagFn, case: str) -> None:
    input, offsets, kwargs, exc, match = ERRORS[case]
    weight = table()
    with pytest.raises(exc, match=match) as info:
        bag_fn(input, weight, offsets, **kwargs)
    name = "lookup_embedding_bag" if bag_fn is lookup_embedding_bag else "matmul_embedding_bag"
    assert str(info.value).startswith(f"{name}: ")
    assert torch.equal(weight, table())  # nothing is renormalised before an error


def test_errors_come_before_side_effects(bag_fn: BagFn) -> None:
    # F.embedding_bag renormalises the weight, then refuses per_sample_weights with mean.
    weight = table()
    with pytest.raises(ValueError, match="per_sample_weights"):
        bag_fn(IDS, weight, OFFS, max_norm=0.5, mode="mean", per_sample_weights=torch.ones(4))
    assert torch.equal(weight, table())


def test_weight_errors(bag_fn: BagFn) -> None:
    with pytest.raises(ValueError, match="weight must be 2-D"):
        bag_fn(IDS, table()[0], OFFS)
    with pytest.raises(TypeError, match="weight must be floating point"):
        bag_fn(IDS, table().long(), OFFS)
    with pytest.raises(ValueError, match="input is on cpu but weight is on meta"):
        bag_fn(IDS, table().to("meta"), OFFS)


def test_nested_input_is_refused(bag_fn: BagFn) -> None:
    nested = torch.nested.nested_tensor(
        [torch.tensor([3, 1]), torch.tensor([4])], layout=torch.jagged
    )
    with pytest.raises(ValueError, match=r"input.values\(\), weight, input.offsets\(\)"):
        bag_fn(nested, table())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"mode": "max"}, "sparse=True is not supported with mode='max'", id="max"),
        pytest.param(
            {"mode": "sum", "scale_grad_by_freq": True},
            "cannot be combined with scale_grad_by_freq",
            id="scale_grad_by_freq",
        ),
    ],
)
def test_lookup_sparse_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lookup_embedding_bag(IDS, table(), OFFS, sparse=True, **kwargs)


def test_matmul_refuses_a_bag_count_matrix_that_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", "40")  # 2 bags x 7 x 4 = 56
    weight = table()
    with pytest.raises(OneHotTooLargeError, match=r"56 B \(2 bags x 7 rows x 4 bytes") as info:
        matmul_embedding_bag(IDS, weight, OFFS, mode="sum", max_norm=0.5)
    assert "lookup_embedding_bag" in str(info.value)
    assert torch.equal(weight, table())  # refused before the in-place renorm
    # max builds no bag-count matrix, and the lookup never does.
    matmul_embedding_bag(IDS, weight, OFFS, mode="max")
    lookup_embedding_bag(IDS, weight, OFFS, mode="sum")


# --- defects of F.embedding_bag (torch 2.13, CPU) that the package works around -------------


@pytest.mark.xfail(
    reason="pytorch/pytorch#190063: the CPU backward divides by counts[indices[i]] with i the "
    "unique-group counter (fix proposed in pytorch/pytorch#190264)",
    raises=AssertionError,
    strict=False,
)
def test_torch_defect_scale_grad_by_freq() -> None:
    input, offsets = torch.tensor(SGBF_IDS), torch.tensor(SGBF_OFFSETS)
    _, grad, _ = run(F.embedding_bag, table(), input, offsets, mode="sum", scale_grad_by_freq=True)
    assert_identical(grad, sgbf_expected("sum").float())


@pytest.mark.xfail(
    reason="pytorch/pytorch#52851: with include_last_offset and offsets[-1] < len(input), the "
    "CPU mean divides the last bag by len(input) - offsets[-2]",
    raises=AssertionError,
    strict=False,
)
def test_torch_defect_include_last_offset_mean() -> None:
    input, offsets = torch.tensor([3, 1, 4, 1, 5, 6]), torch.tensor([0, 2, 4])
    out = F.embedding_bag(input, table(), offsets, mode="mean", include_last_offset=True)
    ref = F.embedding_bag(input[:4], table(), offsets[:2], mode="mean")
    assert_identical(out, ref)


@given(
    case=ees.embedding_bag_cases(
        modes=("sum",), options=("include_last_offset",), dtype=torch.float64, device="cpu"
    )
)
def test_bag_bounds_are_the_bags_f_embedding_bag_reduces(case: ees.EmbeddingBagCase) -> None:
    """The rule for Python ints (cases, the defect table) agrees with the forms' on tensors.

    The form is checked against ``F.embedding_bag`` above; it is the reference here because
    torch fails two of the drawn shapes: ``(0, 0)`` inputs ("step must be nonzero") and ids
    after the last offset (pytorch/pytorch#52851, pinned above).
    """
    last = bool(case.kwargs.get("include_last_offset", False))
    input, weight, offsets, _ = case.build(requires_grad=False)
    weight = torch.round(weight * 8)  # small integers: every sum is exact, in any order
    out = lookup_embedding_bag(input, weight, offsets, mode="sum", include_last_offset=last)
    bounds = bag_bounds(case.ids.shape, case.offsets, last)
    assert len(bounds) == out.shape[0] == case.num_bags
    flat = input.reshape(-1)
    for b, (lo, hi) in enumerate(bounds):
        assert torch.equal(out[b], weight[flat[lo:hi]].sum(0))
