"""The registry of forms: every list of forms in the project reads [`FORMS`][].

The test suite's parametrizations, the CLI's verify table, the benchmark sweep and the docs
all take their forms from here; a new form is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .bag import lookup_embedding_bag, matmul_embedding_bag
from .lookup import lookup_embedding
from .matmul import linear_embedding, matmul_embedding, sparse_matmul_embedding
from .options import BAG_OPTIONS, EMBEDDING_OPTIONS


@dataclass(frozen=True)
class Form:
    """One implementation of the embedding (or of the embedding bag).

    Attributes:
        name: the function's name, e.g. ``"matmul_embedding"``.
        fn: the function, with ``F.embedding``'s (``kind="bag"``: ``F.embedding_bag``'s)
            signature.
        kind: ``"embedding"`` or ``"bag"``.
        computes: how: ``"lookup"`` (indexing), ``"dense matmul"`` (a one-hot or bag-count
            matrix times the table) or ``"sparse matmul"`` (a sparse one-hot times the table).
        options: the keyword options it takes, in [`EMBEDDING_OPTIONS`][] /
            [`BAG_OPTIONS`][] order.
        public: exported by ``embedding_equivalence``; a form that is not is a cross-check,
            such as the two further lookups the test suite adds (``tests/registry.py``).
    """

    name: str
    fn: Callable[..., Any]
    kind: Literal["embedding", "bag"]
    computes: Literal["lookup", "dense matmul", "sparse matmul"]
    options: tuple[str, ...]
    public: bool = True


_NOT_SPARSE = tuple(o for o in EMBEDDING_OPTIONS if o != "sparse")
_BAG_NOT_SPARSE = tuple(o for o in BAG_OPTIONS if o != "sparse")
_DENSE, _SPARSE = "dense matmul", "sparse matmul"

#: Every form, the public ones first, embeddings before bags.
FORMS: tuple[Form, ...] = (
    Form("lookup_embedding", lookup_embedding, "embedding", "lookup", EMBEDDING_OPTIONS),
    Form("matmul_embedding", matmul_embedding, "embedding", _DENSE, _NOT_SPARSE),
    Form("linear_embedding", linear_embedding, "embedding", _DENSE, _NOT_SPARSE),
    Form("sparse_matmul_embedding", sparse_matmul_embedding, "embedding", _SPARSE, _NOT_SPARSE),
    Form("lookup_embedding_bag", lookup_embedding_bag, "bag", "lookup", BAG_OPTIONS),
    Form("matmul_embedding_bag", matmul_embedding_bag, "bag", _DENSE, _BAG_NOT_SPARSE),
)


def forms(
    kind: Literal["embedding", "bag"] | None = None, *, public: bool | None = None
) -> tuple[Form, ...]:
    """The entries of [`FORMS`][] of one ``kind`` (``None``: both), optionally public only.

    Args:
        kind: ``"embedding"``, ``"bag"`` or ``None``.
        public: ``True``/``False`` to select by `Form.public`; ``None`` for all.

    Returns:
        The matching forms, in [`FORMS`][] order.
    """
    return tuple(f for f in FORMS if kind in (None, f.kind) and public in (None, f.public))


def form(name: str) -> Form:
    """The entry of [`FORMS`][] named ``name``.

    Args:
        name: e.g. ``"matmul_embedding"``.

    Returns:
        The form.

    Raises:
        KeyError: no form has that name; the message lists the names.
    """
    for f in FORMS:
        if f.name == name:
            return f
    raise KeyError(f"no form named {name!r}; the forms are {[f.name for f in FORMS]}")
