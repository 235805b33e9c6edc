"""The keyword options of the embedding and the bag, and which option applies to which mode.

This is the one place that states "option X needs mode Y": the forms' validation, the
strategies, the verifier and the CLI all read [`OPTION_MODES`][] through
[`option_applies`][]. It is also the one place that states "option X excludes option Y"
([`EXCLUSIVE_OPTIONS`][], read through [`option_excluded`][]): the forms refuse the pair, the
strategies and the boundary examples never combine it.
"""

from __future__ import annotations

from collections.abc import Mapping

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
#: Pairs of options never combined, the first kept when both are asked for: torch's sparse
#: embedding backward does not scale by frequency (``F.embedding`` and ``F.embedding_bag``
#: fail at ``backward()``).
EXCLUSIVE_OPTIONS: tuple[tuple[str, str], ...] = (("scale_grad_by_freq", "sparse"),)


def option_applies(option: str, mode: str) -> bool:
    """Whether ``F.embedding_bag`` accepts ``option`` together with ``mode``.

    Args:
        option: a name from [`BAG_OPTIONS`][].
        mode: a name from [`BAG_MODES`][].

    Returns:
        True unless [`OPTION_MODES`][] restricts ``option`` to other modes.
    """
    return mode in OPTION_MODES.get(option, BAG_MODES)


def option_excluded(option: str, kwargs: Mapping[str, object]) -> bool:
    """Whether ``option`` cannot be combined with the options that ``kwargs`` turns on.

    Args:
        option: a name from [`BAG_OPTIONS`][].
        kwargs: keyword options; one is on when its value is true (the exclusive options
            are flags).

    Returns:
        True if [`EXCLUSIVE_OPTIONS`][] pairs ``option`` with an option that is on.
    """
    on = {name for name, value in kwargs.items() if value}
    return any(option in pair and (set(pair) - {option}) & on for pair in EXCLUSIVE_OPTIONS)
