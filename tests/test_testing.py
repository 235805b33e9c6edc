"""The assertion helpers and the oracle: they pass the truth and fail planted bugs, loudly."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.testing import (
    EquivalenceError,
    assert_backward_equivalent,
    assert_case_equivalent,
    assert_forward_equivalent,
    gamma,
    gradient_error_bound,
    reference_embedding,
    reference_embedding_grad,
    unit_roundoff,
)


@pytest.mark.parametrize(
    ("dtype", "mantissa_bits"),
    [(torch.float16, 10), (torch.bfloat16, 7), (torch.float32, 23), (torch.float64, 52)],
    ids=["float16", "bfloat16", "float32", "float64"],
)
def test_unit_roundoff_is_half_an_ulp_of_one(dtype: torch.dtype, mantissa_bits: int) -> None:
    # IEEE-style formats store `mantissa_bits` fraction bits: eps = 2**-p, u = eps / 2.
    assert unit_roundoff(dtype) == 2.0 ** -(mantissa_bits + 1)


def test_unit_roundoff_refuses_integers() -> None:
    with pytest.raises(TypeError, match="not a floating dtype"):
        unit_roundoff(torch.int64)


def test_gamma() -> None:
    assert gamma(0, 0.1) == 0.0
    assert gamma(2, 0.25) == pytest.approx(0.5 / 0.5)
    assert gamma(4, 0.25) == math.inf  # k u >= 1: the bound says nothing


def test_gradient_bound_follows_the_formula() -> None:
    # Row 1 is referenced three times, row 2 once, row 0 never, row 3 is padding.
    ids = torch.tensor([1, 2, 1, 1, 3])
    g = torch.tensor([[1.0], [-2.0], [0.5], [-0.25], [8.0]])
    bound = gradient_error_bound(ids, g, 4, torch.float16, padding_idx=3)
    u, u64 = 2.0**-11, 2.0**-53
    eta = 2.0**-25  # half of float16's smallest subnormal, 2**-24
    assert bound[1, 0].item() == pytest.approx((3 * u / (1 - 3 * u) + 2 * u64) * 1.75 + 3 * eta)
    assert bound[2, 0].item() == pytest.approx((u / (1 - u) + 2 * u64) * 2.0 + eta)
    assert bound[0, 0].item() == 0.0  # unreferenced: must be exactly zero
    assert bound[3, 0].item() == 0.0  # padding: must be exactly zero


def test_gradient_bound_with_scale_grad_by_freq_adds_two_roundings() -> None:
    ids = torch.tensor([0, 0])
    g = torch.tensor([[1.0], [3.0]])
    bound = gradient_error_bound(ids, g, 1, torch.float32, scale_grad_by_freq=True)
    u = 2.0**-24
    k = 2 + 2
    expected = (k * u / (1 - k * u) + 2 * 2.0**-53) * (4.0 / 2) + k * 2.0**-150
    assert bound[0, 0].item() == pytest.approx(expected)


def test_reference_grad_is_exactly_rounded() -> None:
    # 1e16 + 1 - 1e16 is 0 in naive float64 left-to-right summation; fsum gives 1.
    ids = torch.tensor([0, 0, 0])
    g = torch.tensor([[1e16], [1.0], [-1e16]], dtype=torch.float64)
    grad, abs_sum, count = reference_embedding_grad(ids, g, 1)
    assert grad.item() == 1.0
    assert abs_sum.item() == 2e16 + 1
    assert count.tolist() == [3]


def test_reference_forward_renorms_like_the_definition() -> None:
    weight = torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    out, table = reference_embedding(torch.tensor([0, 1]), weight, max_norm=1.0)
    scale = 1.0 / (5.0 + 1e-7)
    assert table[0].tolist() == [3.0 * scale, 4.0 * scale]
    assert torch.equal(table[1], weight[1].double())  # norm 0.5 <= 1: untouched
    assert torch.equal(table[2], weight[2].double())  # not referenced: untouched
    assert torch.equal(out, table[[0, 1]])


def _wrong_row(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return weight[(input + 1) % weight.shape[0]]


def _no_accumulation(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    class Lookup(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: torch.Tensor) -> torch.Tensor:
            return w[input]

        @staticmethod
        def backward(ctx: Any, *grads: torch.Tensor) -> torch.Tensor:
            (g,) = grads
            out = torch.zeros_like(weight)
            out[input] = g  # last write wins: duplicates do not accumulate
            return out

    return Lookup.apply(weight)


def test_forward_helper_passes_the_lookup() -> None:
    w = torch.arange(12.0).reshape(4, 3)
    out = assert_forward_equivalent(ee.lookup_embedding, torch.tensor([[3, 0]]), w)
    assert out.shape == (1, 2, 3)


def test_forward_helper_message_names_everything() -> None:
    w = torch.arange(12.0).reshape(4, 3)
    with pytest.raises(EquivalenceError) as info:
        assert_forward_equivalent(_wrong_row, torch.tensor([2, 0]), w)
    message = str(info.value)
    assert "out[0, 0] = 9, but the exact value is 6" in message
    assert "_wrong_row(input=tensor([2, 0])" in message
    assert "must match exactly" in message
    assert "Repro:" in message
    assert "candidate(input, weight)" in info.value.repro


def test_backward_helper_catches_missing_accumulation() -> None:
    w = torch.ones(3, 2)
    ids = torch.tensor([1, 1])
    g = torch.ones(2, 2)
    assert assert_backward_equivalent(ee.lookup_embedding, ids, w, g) == 0.0
    with pytest.raises(
        EquivalenceError, match=r"weight.grad\[1, 0\] = 1, but the exact value is 2"
    ):
        assert_backward_equivalent(_no_accumulation, ids, w, g)


def test_helpers_leave_the_callers_weight_alone() -> None:
    w = torch.tensor([[3.0, 4.0]])
    before = w.clone()
    assert_forward_equivalent(ee.lookup_embedding, torch.tensor([0]), w, max_norm=1.0)
    assert torch.equal(w, before)


def test_repro_snippet_runs_and_reproduces() -> None:
    w = torch.arange(6.0).reshape(3, 2)
    with pytest.raises(EquivalenceError) as info:
        assert_forward_equivalent(_wrong_row, torch.tensor([0, 2]), w)
    namespace: dict[str, Any] = {}
    snippet = info.value.repro.replace(
        "candidate = ...  # the function under test", "candidate = _wrong_row"
    )
    namespace["_wrong_row"] = _wrong_row
    exec(snippet, namespace)  # the snippet is plain Python
    assert torch.equal(namespace["out"], _wrong_row(torch.tensor([0, 2]), w))


@given(case=ees.embedding_cases(options=("padding_idx", "max_norm", "scale_grad_by_freq")))
def test_case_repro_rebuilds_the_exact_tensors(case: ees.EmbeddingCase) -> None:
    calls: list[tuple[torch.Tensor, torch.Tensor, dict[str, Any]]] = []

    def record(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        calls.append((input, weight.detach().clone(), kwargs))
        return ee.lookup_embedding(input, weight, **kwargs)

    namespace: dict[str, Any] = {"candidate": record}
    exec(case.source("candidate"), namespace)
    # The call, then the script's exact check runs it again, and once more on the negated
    # table (the purity check's second call), except where max_norm renorms the table.
    assert len(calls) == (2 if "max_norm" in case.kwargs else 3)
    input, weight, kwargs = calls[0]
    ids, w = case.build()
    assert torch.equal(input, ids)
    assert input.stride() == ids.stride()
    assert torch.equal(weight, w.detach())
    assert namespace["weight"].stride() == w.stride()
    assert kwargs == dict(case.kwargs)
    assert torch.equal(namespace["grad_output"], case.grad_output())


@given(case=ees.embedding_cases(invalid=True, device="cpu"))
def test_invalid_cases_must_raise(case: ees.EmbeddingCase) -> None:
    assert case.invalid is not None
    assert assert_case_equivalent(ee.lookup_embedding, case) == 0.0

    def accepts_everything(input: torch.Tensor, weight: torch.Tensor, **_: Any) -> torch.Tensor:
        return torch.zeros(*input.shape, weight.shape[1], dtype=weight.dtype)

    with pytest.raises(EquivalenceError, match="the call is invalid"):
        assert_case_equivalent(accepts_everything, case)
