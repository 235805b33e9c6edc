"""What an oracle tells the judge: the seam through which any exact reference plugs in.

An oracle is built from one call's tensors before the candidate runs. The engine
([`embedding_equivalence._check`][]) asks it for the exact output and its bound, the table
after ``max_norm``'s in-place renorm, and the gradients, and compares the candidate's with
them. [`EmbeddingOracle`][embedding_equivalence.oracle.embedding.EmbeddingOracle] and
[`BagOracle`][embedding_equivalence.oracle.bag.BagOracle] implement it; a new verifier (quantized
tables, say) brings its own oracle and reuses everything else.

Large tables are judged by their rows: a ``(V, D)`` tensor is described by the rows that the
call references ([`ExpectedRows`][]) plus what every other row must hold exactly (zeros, or
the row as it was), so a table of 262,144 rows is never converted to float64 as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["ExpectedRows", "Oracle"]


@dataclass
class ExpectedRows:
    """The exact value of a ``(V, D)`` tensor, known row by row on [`rows`][].

    Attributes:
        rows: the sorted rows that hold computed values.
        values: ``(R, D)`` float64 exact values of those rows.
        bound: ``(R, D)`` float64 bounds on ``|actual - exact|`` there.
        num_rows: ``V``.
        rest: what every other row must equal exactly: ``None`` for zeros, else a ``(V, D)``
            tensor (e.g. the table as it was before the call).
        note: said after a failure message (e.g. how ties were resolved).
    """

    rows: list[int]
    values: torch.Tensor
    bound: torch.Tensor
    num_rows: int
    rest: torch.Tensor | None = None
    note: str = ""

    def full(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole ``(V, D)`` exact values and bounds, float64 on the CPU (for messages)."""
        dim = self.values.shape[1] if self.values.dim() == 2 else 0
        if self.rest is None:
            values = torch.zeros(self.num_rows, dim, dtype=torch.float64)
        else:
            values = self.rest.detach().to(device="cpu", dtype=torch.float64).clone()
            dim = values.shape[1]
        bound = torch.zeros(self.num_rows, dim, dtype=torch.float64)
        if self.rows:
            values[self.rows] = self.values
            bound[self.rows] = self.bound
        return values, bound


class Oracle(Protocol):
    """The exact reference of one call, asked by the judge in this order."""

    #: How the expected output shape is named in messages, e.g. ``"(*input.shape, D)"``.
    output_shape_text: str

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact output (float64, CPU) and its bound (``None``: exact, signed zeros too)."""
        ...

    def renormed(self) -> ExpectedRows | None:
        """The table after ``max_norm``'s in-place renorm, or ``None`` without ``max_norm``."""
        ...

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """The exact gradient of the table for the upstream gradient ``grad_output``."""
        ...

    def weight_grad_explaining(
        self, grad_output: torch.Tensor, actual: torch.Tensor
    ) -> ExpectedRows | None:
        """Another valid gradient that explains ``actual`` (its rows), or ``None``.

        Where the gradient is not unique (ties in a ``max`` bag), the judge asks for the valid
        gradient closest to the candidate's before it reports a difference.
        """
        ...

    def per_sample_weights_grad(
        self, grad_output: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The exact gradient of ``per_sample_weights`` and its bound, or ``None``."""
        ...
