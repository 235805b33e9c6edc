"""One call of an embedding function: its tensors and arguments, as the oracle and engine see it.

A case of the drawing layer makes a fresh [`Call`][] for each run (``EmbeddingCase.call``), and
a user's own tensors make one directly; the oracles are built from it (``for_call``), and the
engine runs a candidate on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Call:
    """The tensors and arguments of one call, fresh from a case (or given by the user).

    The call is ``fn(input, weight, **kwargs)``, or ``fn(input, weight, offsets, **kwargs)``
    when [`offsets`][] is set (``F.embedding_bag``'s positional third argument).

    Attributes:
        input: the ids.
        weight: the ``(V, D)`` table (a leaf that requires grad when the gradient is checked).
        kwargs: keyword arguments (options, ``mode``, the ``per_sample_weights`` tensor).
        offsets: bag starts, or ``None``.
        grad_output: the upstream gradient for the backward pass, or ``None`` (forward only).
        extra: more positional arguments after those, by name (a quantized table's
            ``scale`` and ``zero_point``, which may be ``None``).
        output_dtype_of: the argument whose dtype the output must have (``"weight"``, or
            ``"scale"`` for a quantized table).
        weight_name: what the table is called in messages (``"qweight"`` when quantized).
    """

    input: torch.Tensor
    weight: torch.Tensor
    kwargs: dict[str, Any] = field(default_factory=dict)
    offsets: torch.Tensor | None = None
    grad_output: torch.Tensor | None = None
    extra: dict[str, torch.Tensor | None] = field(default_factory=dict)
    output_dtype_of: str = "weight"
    weight_name: str = "weight"

    @property
    def args(self) -> tuple[torch.Tensor | None, ...]:
        """The positional arguments."""
        offsets = () if self.offsets is None else (self.offsets,)
        return (self.input, self.weight, *offsets, *self.extra_args)

    @property
    def extra_args(self) -> tuple[torch.Tensor | None, ...]:
        """The values of [`extra`][]."""
        return tuple(self.extra.values())

    @property
    def output_dtype(self) -> torch.dtype:
        """The dtype the output must have (that of the argument [`output_dtype_of`][])."""
        name = self.output_dtype_of
        source = self.weight if name == "weight" else self.extra[name]
        assert source is not None
        return source.dtype

    @property
    def per_sample_weights(self) -> torch.Tensor | None:
        """The ``per_sample_weights`` tensor, if the call passes one."""
        psw = self.kwargs.get("per_sample_weights")
        return psw if isinstance(psw, torch.Tensor) else None
