"""verify_embedding(transforms=("jvp", "vmap")): forward-mode AD and vmap, checked when asked.

Three kernels with a correct value and a correct reverse pass, each broken under one
transform: a custom ``autograd.Function`` without a ``jvp``, one whose ``jvp`` doubles the
tangent, and one whose data-dependent check cannot run under ``vmap``. Each passes the
default verification and is caught when its transform is asked for.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence.forms.validation import check_embedding_args, check_ids_in_range

SEED = 0


class _Lookup(torch.autograd.Function):
    """``weight[ids]`` with its reverse pass written out, and no forward-mode rule."""

    @staticmethod
    def forward(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return weight[ids].clone()  # a 0-d id would give a view of the table

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        weight, ids = inputs
        ctx.save_for_backward(ids)
        ctx.ids = ids
        ctx.rows = weight.shape[0]

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        (ids,) = ctx.saved_tensors
        (g,) = grads
        flat = g.reshape(-1, g.shape[-1])
        grad = flat.new_zeros(ctx.rows, g.shape[-1]).index_add_(0, ids.reshape(-1), flat)
        return grad, None


class _DoublingJvp(_Lookup):
    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> torch.Tensor:
        return tangents[0][ctx.ids] * 2  # the tangent of a lookup is a lookup, not twice one


def _checked(input: torch.Tensor, weight: torch.Tensor) -> None:
    check_embedding_args(input, weight, None, None, 2.0, "kernel")
    check_ids_in_range(input, weight.shape[0], "kernel")


def no_jvp_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _checked(input, weight)
    return _Lookup.apply(weight, input.long())  # type: ignore[no-any-return]


def doubling_jvp_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _checked(input, weight)
    return _DoublingJvp.apply(weight, input.long())  # type: ignore[no-any-return]


def item_checking_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _checked(input, weight)
    if not bool(torch.isfinite(weight).all()):  # data-dependent: no vmap rule
        raise ValueError("non-finite table")
    return F.embedding(input, weight)


@pytest.mark.parametrize(
    ("kernel", "transform", "symptom"),
    [
        (no_jvp_embedding, "jvp", r"^jvp of the candidate raised"),
        (doubling_jvp_embedding, "jvp", r"^tangent_out\[[\d, ]*\] = .*, but the exact value is"),
        (item_checking_embedding, "vmap", r"^vmap of the candidate raised"),
    ],
    ids=["missing-jvp", "wrong-jvp", "no-vmap"],
)
def test_a_kernel_broken_under_a_transform_is_caught_when_it_is_asked(
    kernel: Any, transform: str, symptom: str
) -> None:
    # The default, reverse mode only, passes (random examples: what the boundary phase adds
    # is not about transforms).
    assert ee.verify_embedding(kernel, max_examples=20, seed=SEED, boundaries=False).passed
    report = ee.verify_embedding(kernel, transforms=(transform,), seed=SEED)
    assert not report.passed
    assert report.failure is not None
    assert re.search(symptom, report.failure), report.failure
    assert report.counterexample is not None
    assert f"torch.func.{transform}(f" in report.counterexample


def test_the_jvp_repro_prints_the_wrong_tangent() -> None:
    report = ee.verify_embedding(doubling_jvp_embedding, transforms=("jvp",), seed=SEED)
    assert report.counterexample is not None
    namespace: dict[str, Any] = {}
    exec(report.counterexample, namespace)
    tangent, input = namespace["tangent"], namespace["input"]
    assert torch.equal(namespace["tangent_out"], 2 * tangent[input])


_EVERY_OPTION = ("padding_idx", "max_norm", "scale_grad_by_freq")


@pytest.mark.parametrize(
    ("options", "max_examples", "boundaries"),
    [
        pytest.param(_EVERY_OPTION, 20, False, id="every-option-20"),
        pytest.param((), 100, True, id="no-option-100", marks=pytest.mark.slow),
        pytest.param(_EVERY_OPTION, 100, True, id="every-option-100", marks=pytest.mark.slow),
    ],
)
def test_torch_embedding_passes_under_both_transforms(
    options: tuple[str, ...], max_examples: int, boundaries: bool
) -> None:
    report = ee.verify_embedding(
        F.embedding, options=options, transforms=("jvp", "vmap"), max_examples=max_examples,
        seed=SEED, boundaries=boundaries,
    )  # fmt: skip
    assert report.passed, str(report)


def test_torch_embedding_bag_has_no_forward_ad() -> None:
    report = ee.verify_embedding_bag(
        F.embedding_bag, modes=("sum",), transforms=("jvp",), max_examples=20, seed=SEED
    )
    assert not report.passed
    assert report.failure is not None
    assert "Trying to use forward AD with _embedding_bag" in report.failure


@pytest.mark.parametrize(
    ("transforms", "message"),
    [("jvp", "must be a sequence"), (("grad",), "unknown ['grad']")],
    ids=["string", "unknown"],
)
def test_bad_transforms_are_refused(transforms: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        ee.verify_embedding(F.embedding, transforms=transforms)
