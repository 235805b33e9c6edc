"""The equivalence as properties: every form == the float64 oracle, forward and backward.

The central statement of the project is ``test_forms_agree_bit_for_bit``: for finite tables
every form returns exactly the lookup's tensor. Gradients are compared with the exact
gradient under the derived bound (``embedding_equivalence.testing.gradient_error_bound``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.testing import assert_case_equivalent
from registry import form_params

FORMS = form_params("embedding", with_options=True)
#: Every form but the torch kernel itself (``lookup_embedding`` calls ``F.embedding``).
DENSE_FORMS = form_params("embedding", where=lambda f: f.name != "lookup_embedding")


@pytest.mark.parametrize(("form", "options"), FORMS)
def test_form_matches_oracle(
    form: Callable[..., Any], options: tuple[str, ...], embedding_device: str
) -> None:
    """Forward exact, gradient within the bound, max_norm's side effect, for every option."""

    @given(case=ees.embedding_cases(options=options, device=embedding_device))
    def check(case: ees.EmbeddingCase) -> None:
        assert_case_equivalent(form, case)

    check()


@pytest.mark.parametrize("form", DENSE_FORMS)
def test_forms_agree_bit_for_bit(
    form: Callable[..., Any], embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    """For finite tables, every form returns exactly the lookup's tensor (and the same renorm)."""
    device, float_dtype = embedding_device_dtype

    @given(
        case=ees.embedding_cases(
            options=("padding_idx", "max_norm"), device=device, dtype=float_dtype
        )
    )
    def check(case: ees.EmbeddingCase) -> None:
        ids, w1 = case.build(requires_grad=False)
        _, w2 = case.build(requires_grad=False)
        expected = ee.lookup_embedding(ids, w1, **case.kwargs)
        actual = form(ids, w2, **case.kwargs)
        assert torch.equal(actual, expected)
        assert torch.equal(w1, w2)  # the in-place renorm is identical too

    check()


@pytest.mark.parametrize(("form", "options"), FORMS)
def test_forms_reject_bad_input_alike(form: Callable[..., Any], options: tuple[str, ...]) -> None:
    """Every form raises the same exception type, with its own name, as the lookup."""

    @given(case=ees.embedding_cases(options=options, device="cpu", invalid=True))
    def check(case: ees.EmbeddingCase) -> None:
        ids, w = case.build(requires_grad=False)
        with pytest.raises(Exception) as reference:  # noqa: PT011 - the type is compared below
            ee.lookup_embedding(ids, w, **case.kwargs)
        with pytest.raises(reference.type, match=f"^{form.__name__}: "):
            form(ids, w, **case.kwargs)

    check()


@pytest.mark.parametrize("form", form_params("embedding"))
@settings(max_examples=15)
@given(
    case=ees.embedding_cases(
        dtype=torch.float64,
        device="cpu",
        max_ids=6,
        vocab_size=ees.vocab_sizes(max_value=8),
        embedding_dim=ees.embedding_dims(max_value=4),
    )
)
def test_gradcheck_and_gradgradcheck(form: Callable[..., Any], case: ees.EmbeddingCase) -> None:
    """Autograd's numerical checks in float64: first and second derivatives of each form.

    Without options only: ``padding_idx`` and ``scale_grad_by_freq`` define a gradient that
    differs from the derivative on purpose (zero for the padding row, divided by the count),
    and ``max_norm`` is an in-place side effect outside the graph; the oracle tests cover them.
    """
    ids, weight = case.build(requires_grad=True)

    def fn(w: torch.Tensor) -> torch.Tensor:
        return form(ids, w)

    assert torch.autograd.gradcheck(fn, (weight,))
    assert torch.autograd.gradgradcheck(fn, (weight,))


@given(case=ees.embedding_cases(device="meta", options=("padding_idx",)))
def test_shapes_on_meta(case: ees.EmbeddingCase) -> None:
    """Shape-only property on the meta device: every dense form gives (*ids.shape, D)."""
    ids, weight = case.build(requires_grad=False)
    for form in (ee.lookup_embedding, ee.matmul_embedding, ee.linear_embedding):
        out = form(ids, weight, **case.kwargs)
        assert out.shape == (*ids.shape, case.embedding_dim)
        assert out.device.type == "meta"
        assert out.dtype == weight.dtype
