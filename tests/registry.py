"""The suite's parametrizations of the forms, all read from the package's registry (``FORMS``).

A new entry in ``embedding_equivalence.forms.FORMS`` is tested by every property that takes
forms of its kind, with no list to update here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from embedding_equivalence.forms import Form, forms

__all__ = ["form_params"]


def form_params(
    kind: str = "embedding",
    *,
    where: Callable[[Form], bool] = lambda f: True,
    with_options: bool = False,
) -> list[Any]:
    """``pytest.param``s of the forms of ``kind`` that satisfy ``where``, with readable ids.

    Args:
        kind: ``"embedding"`` or ``"bag"``.
        where: a filter on the registry's entries.
        with_options: make each param ``(fn, options)`` instead of ``fn``.

    Returns:
        One param per form, its id the form's name.
    """
    assert kind in ("embedding", "bag"), kind
    return [
        pytest.param(*((f.fn, f.options) if with_options else (f.fn,)), id=f.name)
        for f in forms(kind)  # type: ignore[arg-type]
        if where(f)
    ]
