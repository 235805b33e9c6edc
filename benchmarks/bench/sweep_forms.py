"""The forms the sweep times, read from the package's registry of forms.

Every public embedding form of [`FORMS`][embedding_equivalence.forms.FORMS] is swept, in the
registry's order; [`SWEEP_NAMES`][] adds what the registry does not hold (its label in the
tables and plots, and its model), and a form that takes ``sparse=True`` is swept a second time
with a sparse gradient. A test checks that [`SWEEP_NAMES`][] covers every public embedding
form, so a new form cannot be left out of the benchmark unnoticed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from embedding_equivalence.forms import registry

from .timing import MODES, Implementation, Mode

__all__ = ["FORMS_BY_LABEL", "SWEEP_FORMS", "SWEEP_NAMES", "SweepForm"]


@dataclass(frozen=True)
class SweepForm:
    """One form that the sweep times.

    Attributes:
        label: its name in the tables and plots, e.g. ``"one-hot matmul"``.
        impl: the call (``impl.name`` is the function, e.g. ``"matmul_embedding"``).
        model: the key of its model in
            [`MODEL_FORMULAS`][bench.model.MODEL_FORMULAS].
        grad: the layout of the weight's gradient in forward+backward, ``"dense"`` or
            ``"sparse"``.
        modes: the modes it is timed in.
    """

    label: str
    impl: Implementation
    model: str
    grad: str
    modes: tuple[Mode, ...] = MODES


#: ``form name -> (label, model)`` for each public embedding form of the registry. A form whose
#: options include ``sparse`` also runs as ``"<label> (sparse grad)"`` with the model
#: ``"<model>_sparse_grad"``, forward+backward only (its forward is the same call).
SWEEP_NAMES: dict[str, tuple[str, str]] = {
    "lookup_embedding": ("lookup", "lookup"),
    "matmul_embedding": ("one-hot matmul", "one_hot"),
    "linear_embedding": ("linear", "linear"),
    "sparse_matmul_embedding": ("sparse matmul", "sparse_mm"),
}


def _sweep_forms() -> tuple[SweepForm, ...]:
    out: list[SweepForm] = []
    for f in registry.forms("embedding", public=True):
        if f.name not in SWEEP_NAMES:
            continue
        label, model = SWEEP_NAMES[f.name]
        dense = f.computes == "dense matmul"
        out.append(
            SweepForm(label, Implementation(f.name, f.name, True, f.fn, dense), model, "dense")
        )
        if "sparse" in f.options:
            impl = Implementation(
                f"{f.name}(sparse=True)", f.name, True, functools.partial(f.fn, sparse=True), dense
            )
            out.append(
                SweepForm(
                    f"{label} (sparse grad)", impl, f"{model}_sparse_grad", "sparse", ("fwd+bwd",)
                )
            )
    return tuple(out)


#: The forms of the sweep, in the order of the tables.
SWEEP_FORMS: tuple[SweepForm, ...] = _sweep_forms()
#: [`SWEEP_FORMS`][] by label.
FORMS_BY_LABEL: dict[str, SweepForm] = {f.label: f for f in SWEEP_FORMS}
