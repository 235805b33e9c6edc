"""Torch's own defects: a table, and the test that tells a user "this is torch, not you".

The verifiers judge every candidate against an exact float64 oracle, never against torch, so
they also find torch's own defects; a user who wraps ``F.embedding`` or ``F.embedding_bag``
then sees a failure that is not theirs. [`TORCH_DEFECTS`][] lists the defects this package
has pinned (each one by a strict ``xfail`` in its tests), with a reference and the torch
versions seen affected.

The rule, applied by [`torch_defect_behind`][] to a shrunk failing case, goes by behaviour,
never by name:

1. the case is replayed on torch's own function (``F.embedding`` for an
   [`EmbeddingCase`][embedding_equivalence._draw.cases.EmbeddingCase], ``F.embedding_bag``
   for an [`EmbeddingBagCase`][embedding_equivalence._draw.cases.EmbeddingBagCase]) through
   the same engine and oracle ([`check_case`][embedding_equivalence._engine.check.check_case]).
   Only when torch fails the very same case is the failure torch's: a kernel that fails
   where torch passes is never excused, whatever it is called, and a kernel that wraps torch
   under any name is recognised;
2. the first entry of the table whose predicate matches the case (its shape: options,
   ids, offsets, table values) names the defect and its reference. A failure of torch that
   no entry matches is still torch's, reported as not in the table.

A version of torch that fixes a defect passes step 1, so the table never excuses a kernel
on a torch that is not affected, whatever its ``affected`` field says.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeGuard

import torch
import torch.nn.functional as F

from .._draw.cases import EmbeddingBagCase, EmbeddingCase
from ..forms.bag import bag_bounds
from ..forms.validation import padding_row
from ..oracle import BagOracle, EmbeddingOracle
from ..oracle.embedding import referenced_rows
from .check import OracleFactory
from .replay import replay_fails

#: A drawn case of either kind.
Case = EmbeddingCase | EmbeddingBagCase
#: Whether a case has the shape of a defect: ``(case, backward) -> bool``.
Predicate = Callable[[Case, bool], bool]

#: The versions seen affected: the torch this package's tests pin the defects on.
_SEEN = "2.13.0 (CPU)"
#: The versions seen affected by the CUDA defects (benchmarks/cuda_renorm_probe.py on an H200).
_SEEN_CUDA = "2.11.0+cu130 (CUDA)"
#: The reference of a defect no pytorch/pytorch issue is known for.
_NO_ISSUE = "no pytorch/pytorch issue known to this package"
#: The reference of a torch failure that matches no entry of the table.
NOT_IN_TABLE = "not in the table"


def _issue(number: int) -> str:
    return f"https://github.com/pytorch/pytorch/issues/{number}"


@dataclass(frozen=True, kw_only=True)
class TorchDefect:
    """One defect of ``F.embedding`` or ``F.embedding_bag``.

    Attributes:
        id: a short unique name, e.g. ``"bag-scale-grad-by-freq-count"``.
        summary: what torch does wrong, in one line.
        reference: the pytorch/pytorch issue's URL, or why there is none (the default).
        affected: the torch versions seen affected, e.g. ``"2.13.0 (CPU)"`` (the default:
            the torch this package's tests pin the defects on).
        kind: ``"embedding"`` (``F.embedding``) or ``"bag"`` (``F.embedding_bag``).
        predicate: ``(case, backward) -> bool``: whether a case has the defect's shape (its
            options, ids, offsets or table values; never a name).
        compiled: the defect is in ``torch.compile`` of torch's function (inductor, the
            default backend), not in the function itself.
    """

    id: str
    summary: str
    reference: str = _NO_ISSUE
    affected: str = _SEEN
    kind: Literal["embedding", "bag"]
    predicate: Predicate = field(compare=False, repr=False)
    compiled: bool = False

    @property
    def function(self) -> str:
        """Torch's function the defect lives in, e.g. ``"torch.compile(F.embedding)"``."""
        name = "F.embedding" if self.kind == "embedding" else "F.embedding_bag"
        return f"torch.compile({name})" if self.compiled else name


# --- what a case looks like -------------------------------------------------------------------


def _padding(case: Case) -> int | None:
    """``padding_idx`` as a row (a negative one counts from the end), or ``None``."""
    padding = case.kwargs.get("padding_idx")
    return padding_row(padding, case.num_embeddings) if isinstance(padding, int) else None


def _bags(case: EmbeddingBagCase) -> list[list[int]]:
    """The ids of each bag, ``padding_idx`` left out (ids after the last offset in none)."""
    values = list(case.ids.values)
    last = bool(case.kwargs.get("include_last_offset", False))
    bounds = bag_bounds(case.ids.shape, case.offsets, last)
    padding = _padding(case)
    return [[i for i in values[lo:hi] if i != padding] for lo, hi in bounds]


def _ids_after_the_last_offset(case: Case) -> TypeGuard[EmbeddingBagCase]:
    """``include_last_offset`` with ids after ``offsets[-1]``: ids that belong to no bag."""
    offsets = case.offsets if isinstance(case, EmbeddingBagCase) else None
    if not case.kwargs.get("include_last_offset") or not offsets or len(case.ids.shape) != 1:
        return False
    return offsets[-1] < case.ids.shape[0]


# --- the predicates ---------------------------------------------------------------------------


def _sparse_padding_0d(case: Case, backward: bool) -> bool:
    return (
        isinstance(case, EmbeddingCase)
        and backward
        and case.ids.shape == ()
        and bool(case.kwargs.get("sparse"))
        and _padding(case) is not None
    )


def _scale_grad_mixed_counts(case: Case, backward: bool) -> bool:
    """A dense ``scale_grad_by_freq`` backward over ids with a repeated id beside another.

    All ids count, ``padding_idx`` included: torch sorts them all before scaling.
    """
    if not isinstance(case, EmbeddingBagCase) or not backward or case.mode == "max":
        return False
    if not case.kwargs.get("scale_grad_by_freq") or case.kwargs.get("sparse"):
        return False
    ids = case.ids.values
    return 1 < len(set(ids)) < len(ids)


def _max_nan_after_the_first(case: Case, backward: bool) -> bool:
    """A ``max`` bag holds a NaN in some column, in a row other than its first id's.

    The rows are read as ``max`` reads them: after ``max_norm`` (which turns an infinite entry
    into NaN).
    """
    if not isinstance(case, EmbeddingBagCase) or case.mode != "max":
        return False
    bags = [bag for bag in _bags(case) if len(bag) > 1]
    table = case.weight.values()
    max_norm = case.kwargs.get("max_norm")
    norm_type = float(case.kwargs.get("norm_type", 2.0))
    nans = (referenced_rows(table, bag, max_norm, norm_type).isnan() for bag in bags)
    return any(bool((nan[1:].any(dim=0) & ~nan[0]).any()) for nan in nans)


def _decreasing_offsets(case: Case, backward: bool) -> bool:
    if not isinstance(case, EmbeddingBagCase) or case.offsets is None:
        return False
    return any(b < a for a, b in itertools.pairwise(case.offsets))


def _cuda_max_norm(case: Case) -> bool:
    return case.weight.device.startswith("cuda") and case.kwargs.get("max_norm") is not None


def _cuda_bfloat16_bag_backward(case: Case, backward: bool) -> bool:
    return (
        isinstance(case, EmbeddingBagCase)
        and backward
        and case.weight.device.startswith("cuda")
        and case.weight.dtype == torch.bfloat16
        and (case.mode == "max" or case.per_sample_weights_seed is not None)
    )


def _2d_input_without_columns(case: Case, backward: bool) -> bool:
    return (
        isinstance(case, EmbeddingBagCase) and len(case.ids.shape) == 2 and case.ids.shape[1] == 0
    )


#: The defects of ``F.embedding`` and ``F.embedding_bag`` that a verification can reach. Those
#: of the CPU are each pinned by a strict ``xfail`` in the package's tests
#: (``tests/test_counterexamples.py``, ``tests/test_bag.py``, ``tests/test_properties_bag.py``);
#: those of CUDA, last, by ``benchmarks/cuda_renorm_probe.py`` and a minimal case each in
#: ``tests/test_torch_defects.py`` that runs where CUDA is. A case can have the shape of two;
#: the first match wins, so they are in the order the engine judges a call: bad input accepted,
#: then the forward, then the gradient. Left out: the double backward of ``F.embedding`` on
#: empty ids (no verifier takes second derivatives), zero bags followed by ids under
#: ``include_last_offset`` (a segmentation fault: the strategies never draw it), and the
#: DTensor defects (the sharded verifier's, not an in-process replay's).
TORCH_DEFECTS: tuple[TorchDefect, ...] = (
    TorchDefect(
        id="embedding-sparse-padding-0d-ids",
        summary="the sparse backward of F.embedding with padding_idx raises 'too many indices "
        "for tensor of dimension 0' on 0-d ids (a (1,)-shaped id works)",
        kind="embedding",
        predicate=_sparse_padding_0d,
    ),
    TorchDefect(
        id="bag-decreasing-offsets-accepted",
        summary="decreasing offsets are not refused on the CPU: mode='max' returns a result, "
        "and sum and mean read past the bag (they raise 'Expected i < index_size' or, "
        "depending on memory, return a result)",
        reference=_issue(55549),
        kind="bag",
        predicate=_decreasing_offsets,
    ),
    TorchDefect(
        id="bag-2d-input-without-columns",
        summary="a 2-D input of shape (B, 0) raises 'step must be nonzero' instead of giving B "
        "empty bags",
        kind="bag",
        predicate=_2d_input_without_columns,
    ),
    TorchDefect(
        id="bag-include-last-offset-mean",
        summary="with include_last_offset and ids after offsets[-1], mean divides the last bag "
        "by len(input) - offsets[-2], counting ids that belong to no bag",
        reference=_issue(52851),
        kind="bag",
        predicate=lambda case, _: _ids_after_the_last_offset(case) and case.mode == "mean",
    ),
    TorchDefect(
        id="bag-include-last-offset-sum-max",
        summary="with include_last_offset and ids after offsets[-1], max (and sum with "
        "padding_idx) takes those ids into the last bag, and sum's backward writes "
        "uninitialised values into their rows",
        reference=_issue(191965),
        kind="bag",
        predicate=lambda case, _: _ids_after_the_last_offset(case) and case.mode in ("sum", "max"),
    ),
    TorchDefect(
        id="bag-max-nan-only-first",
        summary="mode='max' keeps a NaN only when it comes first in its bag; a later NaN is "
        "skipped, unlike torch.amax",
        kind="bag",
        predicate=_max_nan_after_the_first,
    ),
    TorchDefect(
        id="bag-scale-grad-by-freq-count",
        summary="with scale_grad_by_freq, the CPU backward divides a row's gradient by another "
        "row's count (counts[indices[i]] with i the unique-group counter)",
        reference=_issue(190063),
        kind="bag",
        predicate=_scale_grad_mixed_counts,
    ),
    # On CUDA (torch 2.11; benchmarks/cuda_renorm_probe.py compares each with the CPU).
    *(
        TorchDefect(
            id=f"{kind}-cuda-max-norm-inf",
            summary="on CUDA, max_norm with norm_type=inf leaves every row unchanged",
            affected=_SEEN_CUDA,
            kind=kind,
            predicate=lambda c, _: _cuda_max_norm(c) and c.kwargs.get("norm_type") == float("inf"),
        )
        for kind in ("embedding", "bag")
    ),
    *(
        TorchDefect(
            id=f"{kind}-cuda-max-norm-strided",
            summary="on CUDA, max_norm on a strided (non-contiguous) table takes the norm of "
            "the wrong elements",
            affected=_SEEN_CUDA,
            kind=kind,
            predicate=lambda case, _: _cuda_max_norm(case) and case.weight.layout != "contiguous",
        )
        for kind in ("embedding", "bag")
    ),
    TorchDefect(
        id="bag-cuda-max-norm-no-ids",
        summary="on CUDA, F.embedding_bag of no ids with max_norm raises 'CUDA error: invalid "
        "argument'",
        affected=_SEEN_CUDA,
        kind="bag",
        predicate=lambda case, _: _cuda_max_norm(case) and not case.ids.values,
    ),
    TorchDefect(
        id="bag-cuda-bfloat16-backward",
        summary="on CUDA, bfloat16 has no backward for mode='max' nor for per_sample_weights "
        "(NotImplementedError)",
        affected=_SEEN_CUDA,
        kind="bag",
        predicate=_cuda_bfloat16_bag_backward,
    ),
)


# --- the decision -----------------------------------------------------------------------------


#: What a compiled candidate's report says when inductor fails torch's own function too.
_COMPILED = (
    "torch.compile of torch's own function (inductor, the default backend) fails the same "
    "case, so a compiled kernel cannot pass it there; verify your kernel past it with another "
    "thread count (torch.set_num_threads(1): inductor's CPU code depends on it), another "
    "backend (torch.compile(fn, backend='aot_eager') traces and guards alike), or eagerly"
)
#: Where the package records inductor's defect.
_COMPILED_REFERENCE = "the Real kernels page, torch.compile (inductor, CPU)"


def torch_defect_behind(
    case: EmbeddingCase | EmbeddingBagCase, backward: bool, *, compiled: bool = False
) -> TorchDefect | None:
    """The torch defect behind a failing case, decided by replaying torch on it.

    Args:
        case: the minimal failing case of a verification.
        backward: whether the verification checked gradients (as it ran).
        compiled: replay ``torch.compile`` of torch's function (inductor), for a compiled
            candidate whose failure torch's eager function does not share.

    Returns:
        ``None`` when torch's own function passes the case (or the replay could not run):
        the failure is the candidate's. Otherwise the first entry of [`TORCH_DEFECTS`][]
        whose predicate matches the case, or, when none does, an entry made for this case
        whose reference is ``"not in the table"``.
    """
    bag = isinstance(case, EmbeddingBagCase)
    if not bag and not isinstance(case, EmbeddingCase):
        return None
    kind: Literal["embedding", "bag"] = "bag" if bag else "embedding"
    fn = F.embedding_bag if bag else F.embedding
    oracle: OracleFactory = BagOracle.for_call if bag else EmbeddingOracle.for_call
    if not replay_fails(torch.compile(fn) if compiled else fn, case, oracle, backward):
        return None
    for defect in () if compiled else TORCH_DEFECTS:
        # A predicate that cannot read the case does not match it.
        with contextlib.suppress(Exception):
            if defect.kind == kind and defect.predicate(case, backward):
                return defect
    unlisted = "a defect that this package's table does not list yet"
    return TorchDefect(
        id=f"{kind}-compiled" if compiled else f"{kind}-unlisted",
        summary=_COMPILED if compiled else unlisted,
        reference=_COMPILED_REFERENCE if compiled else NOT_IN_TABLE,
        affected=torch.__version__,
        kind=kind,
        predicate=lambda c, b: True,
        compiled=compiled,
    )


def describe(defect: TorchDefect) -> str:
    """The sentence a report adds for ``defect``.

    Args:
        defect: what [`torch_defect_behind`][] returned.

    Returns:
        E.g. ``"torch's own F.embedding_bag fails this case too: this is a torch defect, not
        your kernel's: <summary> (<reference>; seen in torch <affected>)"``.
    """
    return (
        f"torch's own {defect.function} fails this case too: this is a torch defect, not your "
        f"kernel's: {defect.summary} ({defect.reference}; seen in torch {defect.affected})"
    )
