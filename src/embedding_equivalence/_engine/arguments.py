"""A verifier's common arguments, checked once, before anything is drawn.

Every verifier takes the same convention: ``candidate``, then keyword-only ``options``,
``dtypes``, ``devices``, ``max_examples``, ``seed``, ``backward``, ``boundaries``, the size
knobs and ``transforms``. [`resolve_arguments`][] checks them all and resolves the defaults
(every floating dtype of every device present, a fresh seed), and checks the candidate
against the call it will get (``_engine.probe``), so that a usage mistake is an
``InvalidArgument`` before the first example, worded the same by every verifier.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis.errors import InvalidArgument

from .._draw import tensors as _tensors
from .._draw.sizes import SizeSpec, case_sizes
from .probe import check_candidate
from .transforms import check_transforms_argument

#: The random examples of a verification when ``max_examples`` is not given.
DEFAULT_MAX_EXAMPLES = 100


@dataclass(frozen=True)
class Arguments:
    """A verifier's arguments after [`resolve_arguments`][].

    Attributes:
        verifier: the verifier's name, for messages.
        options: the options exercised.
        dtypes: the dtypes drawn from.
        devices: the devices drawn from.
        max_examples: the random examples, shared between the verification's parts.
        seed: the Hypothesis seed (drawn when none was given).
        backward: also check gradients.
        boundaries: run the boundary phase first.
        transforms: ``jvp`` and/or ``vmap`` checks.
        sizes: the size knobs resolved for the case strategies (see ``case_sizes``).
        dtypes_given: whether the caller named the dtypes (else they are every dtype that
            each device supports).
        deterministic: two runs of each example must agree bit for bit.
    """

    verifier: str
    options: tuple[str, ...]
    dtypes: tuple[torch.dtype, ...]
    devices: tuple[str, ...]
    max_examples: int
    seed: int
    backward: bool = True
    boundaries: bool = True
    transforms: tuple[str, ...] = ()
    sizes: dict[str, Any] = field(default_factory=dict)
    dtypes_given: bool = False
    deterministic: bool = False

    def dtypes_on(self, device: str) -> tuple[torch.dtype, ...]:
        """The run's dtypes that ``device`` supports (all of them where the caller named them)."""
        return self.dtypes if self.dtypes_given else _tensors.dtypes_on(device, self.dtypes)


def phase_rows(
    dtypes: Sequence[torch.dtype], boundaries: bool, max_examples: int
) -> list[tuple[tuple[torch.dtype, ...], bool, int]]:
    """The rows of a table of verifications over ``dtypes``: ``(dtypes, boundaries, budget)``.

    With the boundary phase on and several dtypes, a first row runs the boundary examples once
    for them all (the dtypes take turns along each axis; its budget is one random example, as
    the verifiers take no budget of 0), and a row per dtype runs its random examples without
    repeating the phase: what the CLI's rows and the pytest plugin's ``embedding_verify`` do.
    """
    if boundaries and len(dtypes) > 1:
        return [(tuple(dtypes), True, 1), *phase_rows(dtypes, False, max_examples)]
    return [((dtype,), boundaries, max_examples) for dtype in dtypes]


def draw_seed() -> int:
    """A fresh seed in ``[0, 2**32)``, for a run given none."""
    return random.SystemRandom().randrange(2**32)


def check_budget(candidate: object, max_examples: object) -> None:
    """Refuse a candidate that is not callable and a budget that is not a positive int.

    Raises:
        InvalidArgument: either is wrong.
    """
    if not callable(candidate):
        raise InvalidArgument(f"candidate={candidate!r} must be callable")
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise InvalidArgument(f"max_examples={max_examples!r} must be a positive int")


def option_names(options: Sequence[str]) -> tuple[str, ...]:
    """A verifier's ``options`` as a tuple; a bare string is refused, not split into letters.

    Raises:
        InvalidArgument: ``options`` is a string.
    """
    if isinstance(options, str):
        raise InvalidArgument(
            f"options={options!r} must be a sequence of names, e.g. options=[{options!r}]"
        )
    return tuple(options)


def resolve_dtypes_devices(
    dtypes: Sequence[torch.dtype | str] | None, devices: Sequence[str | torch.device] | None
) -> tuple[tuple[torch.dtype, ...], tuple[str, ...]]:
    """Check a verifier's ``dtypes`` and ``devices``; ``None`` resolved to what is present.

    Raises:
        InvalidArgument: a single device or dtype where a sequence belongs, a device that is
            not present, or a dtype that is not floating (dtypes may be given by name).
    """
    if isinstance(devices, str | torch.device):
        raise InvalidArgument(
            f"devices={devices!r} must be a sequence of devices, e.g. devices=[{str(devices)!r}]"
        )
    devs = tuple(str(d) for d in devices) if devices else tuple(_tensors.available_devices())
    for d in devs:
        if (problem := _tensors.device_problem(d)) is not None:
            raise InvalidArgument(f"devices contains {d!r}, which {problem}")
    devs = tuple(str(torch.device(d)) for d in devs)
    if dtypes is not None:
        return _tensors.float_dtypes(dtypes, "dtypes"), devs
    return tuple(dict.fromkeys(dt for d in devs for dt in _tensors.dtypes_on(d))), devs


def resolve_deterministic(deterministic: object) -> bool:
    """``deterministic``, or with ``None`` whether torch's deterministic algorithms are on.

    Raises:
        InvalidArgument: not a bool or ``None``.
    """
    if deterministic is None:
        return torch.are_deterministic_algorithms_enabled()
    if not isinstance(deterministic, bool):
        raise InvalidArgument(f"deterministic={deterministic!r} must be True, False or None")
    return deterministic


def resolve_arguments(
    verifier: str,
    candidate: object,
    *,
    options: Sequence[str] = (),
    dtypes: Sequence[torch.dtype | str] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    seed: int | None = None,
    backward: bool = True,
    deterministic: bool | None = None,
    boundaries: bool = True,
    transforms: Sequence[str] = (),
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    default_dtypes: Sequence[torch.dtype] | None = None,
    scheme: str | None = None,
) -> Arguments:
    """Check a verifier's common arguments and resolve their defaults.

    Args:
        verifier: the verifier's name (its messages, and the kind of call whose memory the
            size check estimates).
        candidate: the kernel (must be callable).
        options: the options' names (the case strategies check that they are known).
        dtypes: floating dtypes or their names; ``None``: every one each device supports,
            within ``default_dtypes``.
        devices: a sequence of devices; ``None``: every device present.
        max_examples: a positive int.
        seed: ``None`` draws one.
        backward: also check gradients.
        deterministic: see [`resolve_deterministic`][].
        boundaries: run the boundary phase first.
        transforms: from ``("jvp", "vmap")``.
        vocab_sizes: the ``V`` knob.
        embedding_dims: the ``D`` knob.
        num_ids: the ``N`` knob.
        default_dtypes: the dtypes a run draws when ``dtypes`` is ``None`` (those each
            device supports of them).
        scheme: a quantized verifier's scheme, for the probe of the candidate.

    Returns:
        The [`Arguments`][].

    Raises:
        InvalidArgument: the first argument that is wrong, naming it and the right call; a
            candidate that cannot take the verifier's call or the options named, or whose
            probe shows a usage mistake (see
            [`check_candidate`][embedding_equivalence._engine.probe.check_candidate]).
    """
    check_budget(candidate, max_examples)
    opts = option_names(options)
    dts, devs = resolve_dtypes_devices(dtypes, devices)
    if dtypes is None and default_dtypes is not None:
        dts = tuple(d for d in default_dtypes if d in dts)
    sizes = case_sizes(
        verifier, vocab_sizes=vocab_sizes, embedding_dims=embedding_dims, num_ids=num_ids,
        dtypes=dts, devices=devs,
    )  # fmt: skip
    check_candidate(verifier, candidate, opts, devs, scheme)
    return Arguments(
        verifier=verifier,
        options=opts,
        dtypes=dts,
        devices=devs,
        max_examples=max_examples,
        seed=seed if seed is not None else draw_seed(),
        backward=backward,
        boundaries=boundaries,
        transforms=check_transforms_argument(transforms),
        sizes=sizes,
        dtypes_given=dtypes is not None,
        deterministic=resolve_deterministic(deterministic),
    )
