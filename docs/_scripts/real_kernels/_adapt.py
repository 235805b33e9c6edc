"""Helpers of the adapters: what a library has no argument for, bags as offsets, input checks."""

from __future__ import annotations

import torch

from embedding_equivalence.forms.validation import (
    check_bag_sparse,
    check_embedding_args,
    check_embedding_bag_args,
    check_ids_in_range,
)

__all__ = [
    "check_bag_call",
    "check_embedding_call",
    "check_sharded_call",
    "no_counterpart",
    "offsets_with_end",
]

_DEFAULTS = {
    "padding_idx": None,
    "max_norm": None,
    "scale_grad_by_freq": False,
    "sparse": False,
}


def no_counterpart(library: str, **options: object) -> None:
    """Refuse an option that ``library``'s API has no argument for (only when it is set)."""
    for name, value in options.items():
        if value != _DEFAULTS[name]:
            raise NotImplementedError(f"{library} has no argument for {name}={value!r}")


def offsets_with_end(
    input: torch.Tensor, offsets: torch.Tensor | None, include_last_offset: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``F.embedding_bag``'s bags as 1-D ids and ``B + 1`` offsets (the last is the end).

    A 2-D input ``(B, L)`` is ``B`` bags of ``L`` ids; a 1-D input needs ``offsets``. The two
    calls that cannot be translated raise as ``F.embedding_bag`` does; any other offsets are
    passed on unchecked, for the library to take or refuse.
    """
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("offsets has to be None if input is 2D")
        bags, length = input.shape
        ends = torch.arange(bags + 1, device=input.device) * length
        return input.reshape(-1), ends.to(input.dtype)
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if include_last_offset:
        return input, offsets
    end = torch.tensor([input.numel()], dtype=offsets.dtype, device=offsets.device)
    return input, torch.cat([offsets, end])


def check_bag_call(
    fn: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    max_norm: float | None,
    norm_type: float,
    scale_grad_by_freq: bool,
    mode: str,
    sparse: bool,
    per_sample_weights: torch.Tensor | None,
    include_last_offset: bool,
    padding_idx: int | None,
) -> None:
    """The package's checks of an ``F.embedding_bag`` call (those of its own bag forms)."""
    check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    check_embedding_bag_args(
        input, weight, offsets, mode, per_sample_weights, include_last_offset,
        scale_grad_by_freq, fn,
    )  # fmt: skip
    check_bag_sparse(sparse, mode, scale_grad_by_freq, fn)
    check_ids_in_range(input, weight.shape[0], fn)


def check_embedding_call(
    fn: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None,
    max_norm: float | None,
    norm_type: float,
) -> None:
    """The package's checks of an ``F.embedding`` call (those of its own forms)."""
    check_embedding_args(input, weight, padding_idx, max_norm, norm_type, fn)
    check_ids_in_range(input, weight.shape[0], fn)


def check_sharded_call(
    fn: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None,
    max_norm: float | None,
    norm_type: float,
) -> None:
    """The package's checks of an ``F.embedding`` call on a DTensor table (a stand-in of the
    table's global shape, dtype and device, as the package's sharded forms check it)."""
    local = weight.to_local()  # type: ignore[attr-defined]
    table = local.new_empty((1, 1)).expand(weight.shape)
    check_embedding_args(input, table, padding_idx, max_norm, norm_type, fn)
    check_ids_in_range(input, weight.shape[0], fn)
