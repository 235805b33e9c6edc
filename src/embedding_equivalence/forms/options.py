"""The keyword options of the embedding and the bag, and which option applies to which mode.

This is the one place that states "option X needs mode Y": the forms' validation, the
strategies, the verifier and the CLI all read [`OPTION_MODES`][] through
[`option_applies`][].
"""

from __future__ import annotations

__all__ = [
    "BAG_MODES",
    "BAG_OPTIONS",
    "EMBEDDING_OPTIONS",
    "OPTION_MODES",
    "SHARDED_OPTIONS",
    "option_applies",
]

#: Keyword options of ``F.embedding`` that the verifier can exercise.
EMBEDDING_OPTIONS: tuple[str, ...] = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")
#: Keyword options of ``F.embedding_bag`` that the verifier can exercise.
BAG_OPTIONS: tuple[str, ...] = (*EMBEDDING_OPTIONS, "per_sample_weights", "include_last_offset")
#: Keyword options that a sharded (DTensor) table takes: not ``sparse``, since a DTensor has a
#: dense gradient.
SHARDED_OPTIONS: tuple[str, ...] = ("padding_idx", "max_norm", "scale_grad_by_freq")
#: The reductions of ``F.embedding_bag``, in shrinking order.
BAG_MODES: tuple[str, ...] = ("sum", "mean", "max")
#: Options that ``F.embedding_bag`` accepts with some modes only; the others take every mode.
OPTION_MODES: dict[str, tuple[str, ...]] = {
    "per_sample_weights": ("sum",),
    "scale_grad_by_freq": ("sum", "mean"),
    "sparse": ("sum", "mean"),
}


def option_applies(option: str, mode: str) -> bool:
    """Whether ``F.embedding_bag`` accepts ``option`` together with ``mode``.

    Args:
        option: a name from [`BAG_OPTIONS`][].
        mode: a name from [`BAG_MODES`][].

    Returns:
        True unless [`OPTION_MODES`][] restricts ``option`` to other modes.
    """
    return mode in OPTION_MODES.get(option, BAG_MODES)
