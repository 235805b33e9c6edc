"""Example-based tests of every embedding form against ``torch.nn.functional.embedding``.

Every tensor here is built from ``torch.arange``: small multiples of 1/4 (resp. small integers
for gradients), exact in float16 and bfloat16, so that sums of duplicate gradients are exact in
every dtype and each expected value can be written down by hand. No global RNG is used.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from embedding_equivalence import (
    lookup_embedding,
)
from registry import form_params

Form = Callable[..., torch.Tensor]

FORMS = form_params("embedding")

V, D = 6, 4


def table(
    dtype: torch.dtype,
    device: torch.device | str,
    layout: str = "contiguous",
    num_embeddings: int = V,
    embedding_dim: int = D,
) -> torch.Tensor:
    """A ``(V, D)`` table of distinct quarter-integers in ``layout``, exact in every float dtype.

    The values are ``(k - 10) / 4`` for ``k = 0, 1, ...`` (never ``-0.0``), so each row differs
    from every other and the signs are mixed.
    """

    def values(*shape: int) -> torch.Tensor:
        n = 1
        for s in shape:
            n *= s
        return ((torch.arange(n, dtype=torch.float64) - 10) / 4).reshape(shape).to(device, dtype)

    v, d = num_embeddings, embedding_dim
    if layout == "contiguous":
        w = values(v, d)
    elif layout == "transposed":  # .t() of a (D, V) tensor: strides (1, V)
        w = values(d, v).t()
    elif layout == "column_step":  # every second column: strides (2D, 2)
        w = values(v, 2 * d)[:, ::2]
    elif layout == "row_offset":  # rows 2..V+1 of a larger table: contiguous, storage offset
        w = values(v + 3, d)[2 : 2 + v]
    elif layout == "row_step":  # every second row: strides (2D, 1)
        w = values(2 * v, d)[::2]
    else:  # pragma: no cover
        raise AssertionError(layout)
    assert w.shape == (v, d)
    return w


LAYOUTS = ["contiguous", "transposed", "column_step", "row_offset", "row_step"]

ID_SHAPES = {
    "0d": torch.tensor(3),
    "empty": torch.zeros(0, dtype=torch.int64),
    "2x0": torch.zeros(2, 0, dtype=torch.int64),
    "1d": torch.tensor([5, 0, 3, 3, 1]),
    "2x3": torch.tensor([[1, 4, 1], [0, 5, 2]]),
    "2x1x3": torch.tensor([[[2, 2, 0]], [[5, 1, 2]]]),
}


def grad_of(
    form: Form, ids: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, **options: object
) -> torch.Tensor:
    """Gradient of ``sum(form(ids, weight) * grad_out)`` with respect to ``weight``."""
    out = form(ids, weight, **options)
    (grad,) = torch.autograd.grad(out, weight, grad_out)
    return grad


# --------------------------------------------------------------------------------------------
# Forward


@pytest.mark.parametrize("ids_name", list(ID_SHAPES))
@pytest.mark.parametrize("form", FORMS)
def test_forward_shape_and_values_equal_f_embedding(
    form: Form,
    ids_name: str,
    index_dtype: torch.dtype,
    embedding_device_dtype: tuple[str, torch.dtype],
) -> None:
    device, float_dtype = embedding_device_dtype
    ids = ID_SHAPES[ids_name].to(device, index_dtype)
    weight = table(float_dtype, device)
    out = form(ids, weight)
    assert out.shape == (*ids.shape, D)
    assert out.dtype == weight.dtype
    assert out.device == weight.device
    assert torch.equal(out, F.embedding(ids, weight))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("form", FORMS)
def test_forward_strided_weight_equals_f_embedding(
    form: Form, layout: str, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(float_dtype, device, layout)
    ids = torch.tensor([[5, 0, 3], [3, 1, 5]], device=device)
    out = form(ids, weight)
    assert out.dtype == weight.dtype
    assert out.device == weight.device
    assert torch.equal(out, F.embedding(ids, weight))
    # And the value written by hand: out[b] is row ids[b] of the table.
    assert torch.equal(out[1, 0], weight[3])


@pytest.mark.parametrize("form", FORMS)
def test_forward_small_table_by_hand(form: Form) -> None:
    weight = torch.arange(8.0).reshape(4, 2)
    out = form(torch.tensor([2, 0, 2]), weight)
    assert torch.equal(out, torch.tensor([[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]]))


@pytest.mark.parametrize("form", FORMS)
def test_forward_does_not_modify_weight_without_max_norm(form: Form) -> None:
    weight = table(torch.float32, "cpu")
    before = weight.clone()
    form(torch.tensor([0, 5, 5]), weight)
    assert torch.equal(weight, before)


# --------------------------------------------------------------------------------------------
# Gradients


@pytest.mark.parametrize("form", FORMS)
def test_duplicate_ids_accumulate_by_hand(
    form: Form, index_dtype: torch.dtype, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = torch.arange(8.0).reshape(4, 2).to(device, float_dtype).requires_grad_()
    ids = torch.tensor([2, 0, 2, 2], device=device, dtype=index_dtype)
    grad_out = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8]], device=device, dtype=float_dtype)
    expected = torch.tensor(
        [
            [3, 4],  # id 0 once: grad_out[1]
            [0, 0],  # id 1 never
            [1 + 5 + 7, 2 + 6 + 8],  # id 2 at positions 0, 2, 3
            [0, 0],  # id 3 never
        ],
        device=device,
        dtype=float_dtype,
    )
    grad = grad_of(form, ids, weight, grad_out)
    assert grad.dtype == weight.dtype
    assert grad.device == weight.device
    assert torch.equal(grad, expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("form", FORMS)
def test_duplicate_ids_accumulate_strided_batched(
    form: Form, layout: str, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(float_dtype, device, layout).requires_grad_()
    ids = torch.tensor([[[1, 4], [1, 1]], [[0, 4], [5, 1]]], device=device)
    grad_out = (torch.arange(ids.numel() * D) % 7).reshape(*ids.shape, D).to(device, float_dtype)
    # Reference by hand: row v of the gradient is the sum of grad_out[b] over ids[b] == v.
    expected = torch.zeros(V, D, dtype=torch.float64)
    for position, v in enumerate(ids.reshape(-1).tolist()):
        expected[v] += grad_out.reshape(-1, D)[position].double().cpu()
    grad = grad_of(form, ids, weight, grad_out)
    assert torch.equal(grad, expected.to(device, float_dtype))
    assert torch.equal(grad, grad_of(F.embedding, ids, weight, grad_out))


@pytest.mark.parametrize("form", FORMS)
def test_no_ids_give_a_zero_gradient(form: Form, embedding_device: str) -> None:
    weight = table(torch.float32, embedding_device).requires_grad_()
    ids = torch.zeros(2, 0, dtype=torch.int64, device=embedding_device)
    grad = grad_of(form, ids, weight, torch.zeros(2, 0, D, device=embedding_device))
    assert torch.equal(grad, torch.zeros(V, D, device=embedding_device))


@pytest.mark.parametrize("padding_idx", [2, -2], ids=["pad2", "pad-2"])
@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_gets_zero_gradient_and_keeps_its_forward_value(
    form: Form, padding_idx: int, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(float_dtype, device).requires_grad_()
    pad_row = padding_idx % V  # -2 is row V - 2 = 4
    ids = torch.tensor([[pad_row, 1, pad_row], [3, pad_row, 1]], device=device)
    out = form(ids, weight, padding_idx=padding_idx)
    # Forward: the padding row is looked up like any other row (it holds nonzero values here).
    assert weight[pad_row].abs().sum() > 0
    assert torch.equal(out[0, 0], weight[pad_row])
    assert torch.equal(out, F.embedding(ids, weight, padding_idx=padding_idx))
    grad_out = torch.arange(6 * D).reshape(2, 3, D).to(device, float_dtype) + 1
    (grad,) = torch.autograd.grad(out, weight, grad_out)
    assert torch.equal(grad[pad_row], torch.zeros(D, device=device, dtype=float_dtype))
    assert not torch.signbit(grad[pad_row]).any()  # +0.0, not -0.0
    expected_row1 = grad_out[0, 1] + grad_out[1, 2]
    assert torch.equal(grad[1], expected_row1)
    assert torch.equal(grad[3], grad_out[1, 0])
    assert torch.equal(grad, grad_of(F.embedding, ids, weight, grad_out, padding_idx=padding_idx))


@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_blocks_non_finite_gradient(form: Form) -> None:
    weight = table(torch.float32, "cpu").requires_grad_()
    ids = torch.tensor([0, 1])
    grad_out = torch.tensor([[float("inf")] * D, [float("nan")] * D])
    grad = grad_of(form, ids, weight, grad_out, padding_idx=0)
    assert torch.equal(grad[0], torch.zeros(D))


@pytest.mark.parametrize("form", FORMS)
def test_scale_grad_by_freq_divides_by_count(
    form: Form, index_dtype: torch.dtype, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(float_dtype, device).requires_grad_()
    # id 2 occurs twice, id 0 once, id 3 four times (powers of two: every quotient is exact).
    ids = torch.tensor([2, 0, 2, 3, 3, 3, 3], device=device, dtype=index_dtype)
    grad_out = torch.arange(7 * 2).reshape(7, 2).to(device, float_dtype)
    grad_out = torch.cat([grad_out, grad_out], dim=1)  # D = 4: columns (a, b, a, b)
    expected = torch.tensor(
        [
            [2, 3, 2, 3],  # id 0: grad_out[1] / 1
            [0, 0, 0, 0],
            [(0 + 4) / 2, (1 + 5) / 2, (0 + 4) / 2, (1 + 5) / 2],  # id 2: rows 0, 2
            [(6 + 8 + 10 + 12) / 4, (7 + 9 + 11 + 13) / 4] * 2,  # id 3: rows 3..6
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ],
        device=device,
        dtype=float_dtype,
    )
    grad = grad_of(form, ids, weight, grad_out, scale_grad_by_freq=True)
    assert torch.equal(grad, expected)
    reference = grad_of(F.embedding, ids, weight, grad_out, scale_grad_by_freq=True)
    assert torch.equal(grad, reference)


@pytest.mark.parametrize("form", FORMS)
def test_scale_grad_by_freq_with_padding_idx(form: Form, embedding_device: str) -> None:
    weight = table(torch.float64, embedding_device).requires_grad_()
    ids = torch.tensor([[1, 1], [4, 1], [4, 1]], device=embedding_device)
    grad_out = torch.arange(6 * D, dtype=torch.float64, device=embedding_device).reshape(3, 2, D)
    grad = grad_of(form, ids, weight, grad_out, padding_idx=4, scale_grad_by_freq=True)
    expected_row1 = (grad_out[0, 0] + grad_out[0, 1] + grad_out[1, 1] + grad_out[2, 1]) / 4
    assert torch.equal(grad[1], expected_row1)
    assert torch.equal(grad[4], torch.zeros(D, dtype=torch.float64, device=embedding_device))
    reference = grad_of(F.embedding, ids, weight, grad_out, padding_idx=4, scale_grad_by_freq=True)
    assert torch.equal(grad, reference)


# --------------------------------------------------------------------------------------------
# max_norm


NORM_TYPES = [
    pytest.param(1.0, id="p1"),
    pytest.param(2.0, id="p2"),
    pytest.param(float("inf"), id="pinf"),
]


@pytest.mark.parametrize("norm_type", NORM_TYPES)
@pytest.mark.parametrize("form", FORMS)
def test_max_norm_renormalizes_referenced_rows_like_f_embedding(
    form: Form, norm_type: float, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(float_dtype, device)
    original = weight.clone()
    # The reference is F.embedding on the CPU: torch's CUDA renorm (2.11) leaves rows unchanged
    # with norm_type=inf (benchmarks/cuda_renorm_probe.py).
    reference_weight = weight.cpu().clone()
    ids = torch.tensor([[0, 5], [5, 2], [4, 0]], device=device)
    max_norm = 1.5
    out = form(ids, weight, max_norm=max_norm, norm_type=norm_type)
    reference_out = F.embedding(
        ids.cpu(), reference_weight, max_norm=max_norm, norm_type=norm_type
    ).to(device)
    reference_weight = reference_weight.to(device)
    long_rows = [0, 4, 5]  # referenced, norm > 1.5 in every p-norm: rescaled
    short_row = 2  # referenced, (-0.5, -0.25, 0, 0.25) has norm <= 1.0 in every p-norm: kept
    unreferenced = [1, 3]  # row 1 = (-1.5, -1.25, -1, -0.75) is long, but not referenced
    for v in long_rows:
        assert torch.linalg.vector_norm(original[v].double(), norm_type) > max_norm
        assert not torch.equal(weight[v], original[v])
    assert torch.equal(weight[short_row], original[short_row])
    assert torch.equal(weight[unreferenced], original[unreferenced])
    if device == "cpu":
        assert torch.equal(weight, reference_weight)
        assert torch.equal(out, reference_out)
    else:
        torch.testing.assert_close(weight, reference_weight)
        torch.testing.assert_close(out, reference_out)
    # The output is the renormalized row, and its norm is at most max_norm (up to rounding).
    assert torch.equal(out[0, 1], weight[5])
    norms = torch.linalg.vector_norm(weight[long_rows].double(), norm_type, dim=1)
    tolerance = 3 * torch.finfo(float_dtype).eps * max_norm
    assert bool((norms <= max_norm + tolerance).all())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("form", FORMS)
def test_max_norm_on_strided_weight(form: Form, layout: str) -> None:
    weight = table(torch.float32, "cpu", layout)
    reference_weight = weight.clone()
    ids = torch.tensor([4, 1, 4])
    out = form(ids, weight, max_norm=2.0)
    reference_out = F.embedding(ids, reference_weight, max_norm=2.0)
    assert torch.equal(weight, reference_weight)
    assert torch.equal(out, reference_out)


@pytest.mark.parametrize("form", FORMS)
def test_max_norm_leaves_short_rows_alone(form: Form) -> None:
    weight = table(torch.float32, "cpu")
    before = weight.clone()
    ids = torch.tensor([2, 3])  # rows (-0.5, -0.25, 0, 0.25) and (0.5, 0.75, 1, 1.25)
    form(ids, weight, max_norm=100.0)
    assert torch.equal(weight, before)


@pytest.mark.parametrize("form", FORMS)
def test_max_norm_modifies_a_leaf_parameter_and_keeps_the_gradient(form: Form) -> None:
    weight = table(torch.float32, "cpu").requires_grad_()
    reference_weight = weight.detach().clone().requires_grad_()
    ids = torch.tensor([0, 0, 5])
    grad_out = torch.ones(3, D)
    out = form(ids, weight, max_norm=1.0)
    out.backward(grad_out)
    F.embedding(ids, reference_weight, max_norm=1.0).backward(grad_out)
    assert weight.grad is not None
    assert torch.equal(weight.detach(), reference_weight.detach())
    assert torch.equal(weight.grad, reference_weight.grad)


# --------------------------------------------------------------------------------------------
# sparse gradients (lookup_embedding only)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="plain"),
        pytest.param({"padding_idx": 1}, id="padding_idx"),
        # scale_grad_by_freq is absent: torch's embedding_backward refuses it with sparse=True.
    ],
)
def test_sparse_gradient_equals_dense(
    options: dict[str, object], embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    ids = torch.tensor([[1, 4, 1], [0, 4, 4]], device=device)
    grad_out = torch.arange(6 * D).reshape(2, 3, D).to(device, float_dtype)
    dense_weight = table(float_dtype, device).requires_grad_()
    sparse_weight = table(float_dtype, device).requires_grad_()
    lookup_embedding(ids, dense_weight, **options).backward(grad_out)  # type: ignore[arg-type]
    lookup_embedding(ids, sparse_weight, sparse=True, **options).backward(grad_out)  # type: ignore[arg-type]
    assert dense_weight.grad is not None
    assert sparse_weight.grad is not None
    assert not dense_weight.grad.is_sparse
    assert sparse_weight.grad.is_sparse
    assert sparse_weight.grad.layout == torch.sparse_coo
    assert torch.equal(sparse_weight.grad.to_dense(), dense_weight.grad)
