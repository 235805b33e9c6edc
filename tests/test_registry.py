"""The registry of forms and the option/mode table: complete, and obeyed by the forms."""

from __future__ import annotations

import inspect

import pytest
import torch

import embedding_equivalence as ee
from embedding_equivalence.forms import (
    BAG_MODES,
    BAG_OPTIONS,
    EMBEDDING_OPTIONS,
    FORMS,
    OPTION_MODES,
    form,
    forms,
    option_applies,
)


def test_every_public_form_function_is_registered() -> None:
    exported = {
        name
        for name in ee.__all__
        if name.endswith(("_embedding", "_embedding_bag"))
        and not name.startswith(("verify_", "bench_", "linear_to_"))  # not forms
        # The quantized lookup takes (input, qweight, scale, zero_point): it is verified by
        # verify_quantized_embedding, not listed with the forms of F.embedding's signature.
        and name != "lookup_quantized_embedding"
    }
    assert {f.name for f in forms(public=True)} == exported


@pytest.mark.parametrize("entry", FORMS, ids=lambda f: f.name)
def test_entry_describes_its_function(entry: ee.forms.Form) -> None:
    assert entry.fn.__name__ == entry.name
    assert form(entry.name) is entry
    parameters = inspect.signature(entry.fn).parameters
    assert list(parameters)[:2] == ["input", "weight"]
    allowed = EMBEDDING_OPTIONS if entry.kind == "embedding" else BAG_OPTIONS
    assert set(entry.options) <= set(allowed)
    # Every option the entry claims is a keyword of the function (per_sample_weights too).
    assert set(entry.options) <= set(parameters)


def test_unknown_form_names_the_forms() -> None:
    with pytest.raises(KeyError, match="matmul_embedding"):
        form("gather_embedding")


@pytest.mark.parametrize("option", sorted(OPTION_MODES))
@pytest.mark.parametrize("mode", BAG_MODES)
def test_the_bag_forms_obey_the_option_table(option: str, mode: str) -> None:
    """An option the table refuses for a mode is refused by both bag forms, naming both."""
    weight = torch.ones(4, 2)
    ids, offsets = torch.tensor([0, 1, 2]), torch.tensor([0, 2])
    values: dict[str, object] = {
        "per_sample_weights": torch.ones(3),
        "scale_grad_by_freq": True,
        "sparse": True,
    }
    for entry in forms("bag"):
        if option not in entry.options:
            continue
        call = {option: values[option], "mode": mode}
        if option_applies(option, mode):
            entry.fn(ids, weight, offsets, **call)
        else:
            with pytest.raises(ValueError, match=f"{option}.*{mode}|{mode}.*{option}"):
                entry.fn(ids, weight, offsets, **call)
