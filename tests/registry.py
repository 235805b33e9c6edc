"""The suite's parametrizations of the forms: the package's registry (``FORMS``) and two more.

A new entry in ``embedding_equivalence.forms.FORMS`` is tested by every property that takes
forms of its kind, with no list to update here. [`CROSS_CHECKS`][] adds two further lookups
(not exported, so not in the package), which every property checks beside the registry's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from embedding_equivalence.forms import EMBEDDING_OPTIONS, Form, forms
from embedding_equivalence.forms.renorm import prepare_product_call, stop_padding_grad

__all__ = ["CROSS_CHECKS", "form_params", "index_select_embedding", "indexing_embedding"]


def index_select_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Lookup through ``torch.index_select``; gradient by ``index_add`` (autograd's rule).

    Same arguments, semantics and errors as ``lookup_embedding`` (without ``sparse``).
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    call = prepare_product_call(input, weight, options, "index_select_embedding")
    rows = call.weight.index_select(0, call.flat)
    rows = stop_padding_grad(rows, call.flat, call.padding, call.counts)
    return rows.reshape(*input.shape, weight.shape[1])


def indexing_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Lookup by advanced indexing, ``weight[input]``; gradient by accumulating ``index_put``.

    Same arguments, semantics and errors as ``lookup_embedding`` (without ``sparse``).
    """
    options = (padding_idx, max_norm, norm_type, scale_grad_by_freq)
    call = prepare_product_call(input, weight, options, "indexing_embedding")
    rows = stop_padding_grad(call.weight[call.flat], call.flat, call.padding, call.counts)
    return rows.reshape(*input.shape, weight.shape[1])


_NOT_SPARSE = tuple(o for o in EMBEDDING_OPTIONS if o != "sparse")
#: Two further lookups, cross-checks for the suite (not exported).
CROSS_CHECKS: tuple[Form, ...] = (
    Form("index_select_embedding", index_select_embedding, "embedding", "lookup", _NOT_SPARSE,
         public=False),
    Form("indexing_embedding", indexing_embedding, "embedding", "lookup", _NOT_SPARSE,
         public=False),
)  # fmt: skip


def form_params(
    kind: str = "embedding",
    *,
    where: Callable[[Form], bool] = lambda f: True,
    with_options: bool = False,
    marks: Any = (),
) -> list[Any]:
    """``pytest.param``s of the forms of ``kind`` that satisfy ``where``, with readable ids.

    The registry's forms, then the [`CROSS_CHECKS`][].

    Args:
        kind: ``"embedding"`` or ``"bag"``.
        where: a filter on the registry's entries.
        with_options: make each param ``(fn, options)`` instead of ``fn``.
        marks: marks of every param (``pytest.mark.slow`` for the slow tier).

    Returns:
        One param per form, its id the form's name.
    """
    assert kind in ("embedding", "bag"), kind
    return [
        pytest.param(*((f.fn, f.options) if with_options else (f.fn,)), id=f.name, marks=marks)
        for f in (*forms(kind), *CROSS_CHECKS)  # type: ignore[arg-type]
        if f.kind == kind and where(f)
    ]
