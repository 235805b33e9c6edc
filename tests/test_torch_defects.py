"""The table of torch's own defects, and the rule that decides "this is torch, not you".

Every entry of ``TORCH_DEFECTS`` has a minimal case here on which torch's own function fails
the engine's check, and a neighbour (the same case without the defect's trigger) on which it
passes. The decision replays torch on the case: a kernel that fails where torch passes is
never excused, and a kernel that wraps torch under another name is recognised. The last tests
run the public verifiers on torch and name the defect behind their minimal counterexample.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

import embedding_equivalence as ee
import embedding_equivalence._engine.torch_defects as torch_defects
from embedding_equivalence import strategies as ees
from embedding_equivalence._engine.arguments import resolve_arguments
from embedding_equivalence._engine.check import (
    CheckableCase,
    EquivalenceError,
    case_snippet,
    check_case,
)
from embedding_equivalence._engine.driver import Part, Verification, drive
from embedding_equivalence._engine.repro import candidate_source
from embedding_equivalence._engine.torch_defects import (
    NOT_IN_TABLE,
    TORCH_DEFECTS,
    TorchDefect,
    describe,
    torch_defect_behind,
)
from embedding_equivalence.forms.options import option_applies
from embedding_equivalence.oracle import BagOracle, EmbeddingOracle
from embedding_equivalence.strategies import (
    EmbeddingBagCase,
    EmbeddingCase,
    IdsRecipe,
    WeightRecipe,
)

Case = EmbeddingCase | EmbeddingBagCase
DEFECTS = {d.id: d for d in TORCH_DEFECTS}


def bag(
    ids: tuple[int, ...],
    rows: int,
    offsets: tuple[int, ...] | None,
    mode: str,
    *,
    specials: tuple[tuple[int, int, float], ...] = (),
    invalid: str | None = None,
    device: str = "cpu",
    **kwargs: Any,
) -> EmbeddingBagCase:
    """A bag case over 1-D ``ids`` and a ``(rows, 1)`` table drawn from seed 0."""
    return EmbeddingBagCase(
        IdsRecipe(ids, (len(ids),), device=device),
        WeightRecipe(rows, 1, device=device, specials=specials),
        offsets,
        mode=mode,
        kwargs=kwargs,
        invalid=invalid,
    )


def decreasing(offsets: tuple[int, ...]) -> str:
    """The reason the strategies give a case with decreasing offsets."""
    return f"decreasing offsets (offsets={list(offsets)})"


#: id -> (a minimal case on which torch fails, backward, the same case without the trigger).
MINIMAL: dict[str, tuple[Case, bool, Case]] = {
    "embedding-sparse-padding-0d-ids": (
        EmbeddingCase(IdsRecipe((1,), ()), WeightRecipe(2, 1), {"padding_idx": 0, "sparse": True}),
        True,
        EmbeddingCase(
            IdsRecipe((1,), (1,)), WeightRecipe(2, 1), {"padding_idx": 0, "sparse": True}
        ),
    ),
    "bag-decreasing-offsets-accepted": (
        bag((0,), 1, (0, 1, 0), "max", invalid=decreasing((0, 1, 0))),
        True,
        bag((0,), 1, (0, 0, 1), "max"),
    ),
    "bag-2d-input-without-columns": (
        EmbeddingBagCase(IdsRecipe((), (2, 0)), WeightRecipe(1, 1), None, mode="sum"),
        True,
        EmbeddingBagCase(IdsRecipe((0, 0), (2, 1)), WeightRecipe(1, 1), None, mode="sum"),
    ),
    "bag-include-last-offset-mean": (
        bag((0, 1), 2, (0, 1), "mean", include_last_offset=True),
        False,
        bag((0, 1), 2, (0, 2), "mean", include_last_offset=True),
    ),
    # The id after the end holds the table's only +inf: max must not see it.
    "bag-include-last-offset-sum-max": (
        bag((0, 1), 2, (0, 1), "max", specials=((1, 0, math.inf),), include_last_offset=True),
        False,
        bag((0, 1), 2, (0, 2), "max", specials=((1, 0, math.inf),), include_last_offset=True),
    ),
    "bag-max-nan-only-first": (
        bag((0, 1), 2, (0,), "max", specials=((1, 0, math.nan),)),
        False,
        bag((1, 0), 2, (0,), "max", specials=((1, 0, math.nan),)),
    ),
    # Id 0 occurs twice, id 1 once: torch divides row 1 by id 0's count.
    "bag-scale-grad-by-freq-count": (
        bag((0, 0, 1), 2, (0,), "sum", scale_grad_by_freq=True),
        True,
        bag((0, 0), 2, (0,), "sum", scale_grad_by_freq=True),
    ),
}


#: The CUDA entries' minimal cases (torch 2.11 on CUDA; benchmarks/cuda_renorm_probe.py). Their
#: replays run where CUDA is selected; their predicates are checked everywhere.
INF = {"max_norm": 1.0, "norm_type": math.inf}
P2 = {"max_norm": 1.0, "norm_type": 2.0}
CUDA_MINIMAL: dict[str, tuple[Case, bool, Case]] = {
    # Row 0 is 1.5410 (seed 0): longer than max_norm in every norm.
    "embedding-cuda-max-norm-inf": (
        EmbeddingCase(IdsRecipe((0,), (1,), device="cuda"), WeightRecipe(1, 1, device="cuda"), INF),
        False,
        EmbeddingCase(IdsRecipe((0,), (1,), device="cuda"), WeightRecipe(1, 1, device="cuda"), P2),
    ),
    "bag-cuda-max-norm-inf": (
        bag((0,), 1, (0,), "sum", device="cuda", max_norm=1.0, norm_type=math.inf),
        False,
        bag((0,), 1, (0,), "sum", device="cuda", max_norm=1.0, norm_type=2.0),
    ),
    "embedding-cuda-max-norm-strided": (
        EmbeddingCase(
            IdsRecipe((0,), (1,), device="cuda"),
            WeightRecipe(2, 2, device="cuda", layout="transposed"),
            P2,
        ),
        False,
        EmbeddingCase(IdsRecipe((0,), (1,), device="cuda"), WeightRecipe(2, 2, device="cuda"), P2),
    ),
    "bag-cuda-max-norm-strided": (
        EmbeddingBagCase(
            IdsRecipe((0,), (1,), device="cuda"),
            WeightRecipe(2, 2, device="cuda", layout="transposed"),
            (0,),
            mode="sum",
            kwargs=P2,
        ),
        False,
        EmbeddingBagCase(
            IdsRecipe((0,), (1,), device="cuda"),
            WeightRecipe(2, 2, device="cuda"),
            (0,),
            mode="sum",
            kwargs=P2,
        ),
    ),
    "bag-cuda-max-norm-no-ids": (
        bag((), 1, (0,), "sum", device="cuda", max_norm=1.0, norm_type=2.0),
        False,
        bag((), 1, (0,), "sum", device="cuda"),
    ),
    "bag-cuda-bfloat16-backward": (
        EmbeddingBagCase(
            IdsRecipe((0,), (1,), device="cuda"),
            WeightRecipe(1, 1, dtype=torch.bfloat16, device="cuda"),
            (0,),
            mode="max",
        ),
        True,
        EmbeddingBagCase(
            IdsRecipe((0,), (1,), device="cuda"),
            WeightRecipe(1, 1, dtype=torch.bfloat16, device="cuda"),
            (0,),
            mode="sum",
        ),
    ),
}
MINIMAL.update(CUDA_MINIMAL)
#: The entries as test parameters: the CUDA ones marked ``cuda`` (run where CUDA is selected).
MINIMAL_IDS = [
    pytest.param(i, id=i, marks=[pytest.mark.cuda] if i in CUDA_MINIMAL else []) for i in MINIMAL
]


def torch_function(case: Case) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Torch's own function for ``case`` and the oracle factory that judges it."""
    if isinstance(case, EmbeddingBagCase):
        return F.embedding_bag, BagOracle.for_call
    return F.embedding, EmbeddingOracle.for_call


def engine_fails(fn: Callable[..., Any], case: Case, backward: bool) -> str | None:
    """The engine's message when ``fn`` fails ``case``, else ``None``."""
    _, oracle = torch_function(case)
    try:
        check_case(fn, case, oracle, backward=backward)
    except EquivalenceError as exc:
        return str(exc)
    return None


# --- the table --------------------------------------------------------------------------------


def test_every_entry_has_a_minimal_case_and_a_unique_id() -> None:
    ids = [d.id for d in TORCH_DEFECTS]
    assert len(ids) == len(set(ids))
    assert set(MINIMAL) == set(ids)


@pytest.mark.parametrize("defect", TORCH_DEFECTS, ids=lambda d: d.id)
def test_entries_give_a_reference_and_the_versions_seen(defect: TorchDefect) -> None:
    assert defect.kind in ("embedding", "bag")
    assert defect.summary
    assert "\n" not in defect.summary
    issue = re.fullmatch(r"https://github\.com/pytorch/pytorch/issues/\d+", defect.reference)
    assert issue or "no pytorch/pytorch issue" in defect.reference
    assert re.match(r"\d+\.\d+\.\d+\S* \((CPU|CUDA)\)$", defect.affected)
    assert ("cuda" in defect.id) == ("CUDA" in defect.affected)


@pytest.mark.parametrize("defect_id", list(CUDA_MINIMAL))
def test_a_cuda_entry_reads_the_device_and_the_trigger(defect_id: str) -> None:
    """Checked on any machine: the predicate needs the case's recipe, not a GPU."""
    case, backward, neighbour = CUDA_MINIMAL[defect_id]
    predicate = DEFECTS[defect_id].predicate
    assert predicate(case, backward)
    assert not predicate(neighbour, backward)
    on_cpu = dataclasses.replace(
        case,
        ids=dataclasses.replace(case.ids, device="cpu"),
        weight=dataclasses.replace(case.weight, device="cpu"),
    )
    assert not predicate(on_cpu, backward)


@pytest.mark.parametrize("defect_id", MINIMAL_IDS)
def test_the_entry_is_named_on_its_minimal_case(defect_id: str) -> None:
    case, backward, _ = MINIMAL[defect_id]
    fn, _ = torch_function(case)
    assert engine_fails(fn, case, backward) is not None  # torch's own function fails it
    assert DEFECTS[defect_id].predicate(case, backward)
    assert torch_defect_behind(case, backward) is DEFECTS[defect_id]


@pytest.mark.parametrize("defect_id", MINIMAL_IDS)
def test_torch_passes_the_case_without_the_trigger(defect_id: str) -> None:
    _, backward, neighbour = MINIMAL[defect_id]
    fn, _ = torch_function(neighbour)
    assert engine_fails(fn, neighbour, backward) is None
    assert not DEFECTS[defect_id].predicate(neighbour, backward)
    assert torch_defect_behind(neighbour, backward) is None


@pytest.mark.parametrize("defect_id", MINIMAL_IDS)
def test_without_the_backward_only_a_defect_of_the_forward_is_named(defect_id: str) -> None:
    case, _, _ = MINIMAL[defect_id]
    defect = DEFECTS[defect_id]
    fn, _ = torch_function(case)
    forward_fails = engine_fails(fn, case, backward=False) is not None
    assert defect.predicate(case, False) == forward_fails  # it knows where the defect shows
    assert torch_defect_behind(case, False) is (defect if forward_fails else None)


def test_include_last_offset_sum_with_padding_takes_the_ids_after_the_end() -> None:
    """Sum with padding_idx adds the ids after the last offset (found by a scan of drawn cases)."""
    case = bag((0, 1, 2), 3, (0, 1), "sum", include_last_offset=True, padding_idx=2)
    message = engine_fails(F.embedding_bag, case, backward=False)
    assert message is not None
    assert message.startswith("out[0, 0]")
    assert torch_defect_behind(case, False) is DEFECTS["bag-include-last-offset-sum-max"]


# --- by behaviour, not by name ----------------------------------------------------------------


def test_a_kernel_that_fails_where_torch_passes_is_not_excused() -> None:
    """The case has the shape of the scale_grad_by_freq defect, but torch gets it right."""
    case = bag((0, 1, 1), 2, (0,), "sum", scale_grad_by_freq=True)

    def unscaled(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any):
        kwargs.pop("scale_grad_by_freq")
        return F.embedding_bag(input, weight, *args, **kwargs)

    assert DEFECTS["bag-scale-grad-by-freq-count"].predicate(case, True)
    assert engine_fails(unscaled, case, backward=True) is not None
    assert engine_fails(F.embedding_bag, case, backward=True) is None
    assert torch_defect_behind(case, True) is None


def test_a_plain_bug_is_not_torch() -> None:
    case = EmbeddingCase(IdsRecipe((0, 1), (2,)), WeightRecipe(2, 1))

    def doubled(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return 2 * weight[input]

    assert engine_fails(doubled, case, backward=True) is not None
    assert torch_defect_behind(case, True) is None


@pytest.mark.parametrize("defect_id", MINIMAL_IDS)
def test_a_wrapper_of_torch_under_another_name_gets_the_defect(defect_id: str) -> None:
    case, backward, _ = MINIMAL[defect_id]
    fn, _ = torch_function(case)

    def my_kernel(*args: Any, **kwargs: Any) -> torch.Tensor:
        return fn(*args, **kwargs)

    message = engine_fails(my_kernel, case, backward)
    assert message is not None
    assert "my_kernel" in message
    assert torch_defect_behind(case, backward) is DEFECTS[defect_id]


def test_the_predicates_read_the_case_not_its_labels() -> None:
    """The reason text of an invalid case is a label: the offsets decide."""
    case, backward, _ = MINIMAL["bag-decreasing-offsets-accepted"]
    relabelled = dataclasses.replace(case, invalid="a reason that names nothing")
    assert torch_defect_behind(relabelled, backward) is DEFECTS["bag-decreasing-offsets-accepted"]


def test_a_torch_failure_outside_the_table_is_still_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    case, backward, _ = MINIMAL["bag-scale-grad-by-freq-count"]
    monkeypatch.setattr(torch_defects, "TORCH_DEFECTS", ())
    defect = torch_defect_behind(case, backward)
    assert defect is not None
    assert (defect.kind, defect.reference, defect.affected) == (
        "bag",
        NOT_IN_TABLE,
        torch.__version__,
    )
    assert NOT_IN_TABLE in describe(defect)


def test_describe_names_the_function_summary_reference_and_versions() -> None:
    for defect in TORCH_DEFECTS:
        text = describe(defect)
        assert text.startswith(f"torch's own {defect.function} fails this case too")
        assert "not your kernel's" in text
        for part in (defect.summary, defect.reference, defect.affected):
            assert part in text


def test_the_decision_leaves_global_state_alone() -> None:
    before = (
        torch.get_rng_state(),
        random.getstate(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
    )
    with torch.no_grad():
        for case, backward, neighbour in MINIMAL.values():
            torch_defect_behind(case, backward)
            torch_defect_behind(neighbour, backward)
        assert not torch.is_grad_enabled()
    after = (
        torch.get_rng_state(),
        random.getstate(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
    )
    assert torch.equal(before[0], after[0])
    assert before[1:] == after[1:]


def test_under_no_grad_torch_is_still_named() -> None:
    case, backward, _ = MINIMAL["bag-scale-grad-by-freq-count"]
    with torch.no_grad():
        assert torch_defect_behind(case, backward) is DEFECTS["bag-scale-grad-by-freq-count"]


def test_a_case_that_breaks_the_replay_is_not_blamed_on_torch() -> None:
    """An id past the table's end in a case marked valid: the oracle itself cannot run."""
    case = bag((5,), 2, (0,), "sum")
    assert torch_defect_behind(case, True) is None


# --- end to end: the verifiers' minimal counterexamples ---------------------------------------


def torch_bag_flat(
    input: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor | None = None, **kwargs: Any
) -> torch.Tensor:
    """F.embedding_bag, with a 2-D input passed as flat ids and offsets (torch fails on (B, 0))
    and bad input refused first (torch accepts decreasing offsets): a user's wrapper of torch."""
    ee.lookup_embedding_bag(input, weight.detach().clone(), offsets, **kwargs)
    if input.dim() == 2:
        count, length = input.shape
        offsets = torch.arange(count, dtype=input.dtype, device=input.device) * length
        input = input.reshape(-1)
        psw = kwargs.get("per_sample_weights")
        if psw is not None:
            kwargs["per_sample_weights"] = psw.reshape(-1)
    return F.embedding_bag(input, weight, offsets, **kwargs)


def minimal_case(
    candidate: Callable[..., Any],
    part: Part,
    oracle: Callable[..., Any],
    options: tuple[str, ...],
    dtypes: tuple[torch.dtype, ...],
    seed: int,
) -> tuple[ee.VerificationReport, CheckableCase]:
    """Run the driver as the public verifier does, recording the cases it checks.

    The engine writes each case's snippet before it runs it, and Hypothesis runs the minimal
    failing case last: the last case recorded is the counterexample of the report.
    """
    seen: list[CheckableCase] = []

    def recording(case: CheckableCase, backward: bool, preamble: str) -> str:
        seen.append(case)
        return case_snippet(case, backward, preamble)

    args = resolve_arguments(
        "verify_embedding", candidate, options=options, dtypes=dtypes, devices=["cpu"], seed=seed
    )
    part = dataclasses.replace(part, snippet=recording)
    report = drive(Verification(candidate, args, oracle, [lambda: part]))
    assert not report.passed
    assert report.counterexample == case_snippet(seen[-1], True, candidate_source(candidate))
    return report, seen[-1]


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (F.embedding_bag, "bag-2d-input-without-columns"),
        # Shrinking to the count defect's minimal case takes seconds: the slow tier's.
        pytest.param(
            torch_bag_flat, "bag-scale-grad-by-freq-count", marks=pytest.mark.slow, id="wrapper"
        ),
    ],
    ids=["F.embedding_bag", "wrapper"],
)
def test_verify_embedding_bag_on_torch_names_the_defect(
    candidate: Callable[..., Any], expected: str
) -> None:
    options, mode, dtypes, seed = ("scale_grad_by_freq",), "sum", (torch.float32,), 0
    # Random examples only, as minimal_case draws them (test_boundaries checks that the
    # boundary phase finds each defect under every seed).
    public = ee.verify_embedding_bag(
        candidate,
        options=options,
        modes=(mode,),
        dtypes=dtypes,
        devices=["cpu"],
        seed=seed,
        boundaries=False,
    )
    assert not public.passed
    # The same run through the driver, recording the cases: the verifier's valid
    # strategy for the one mode, and its invalid one (one example in five).
    valid = ees.embedding_bag_cases(
        modes=(mode,),
        options=tuple(o for o in options if option_applies(o, mode)),
        dtype=st.sampled_from(dtypes),
        device=st.sampled_from(("cpu",)),
    )
    invalid = ees.embedding_bag_cases(
        modes=(mode,), options=options, dtype=st.sampled_from(dtypes), device="cpu", invalid=True
    )
    report, case = minimal_case(
        candidate, Part(valid, invalid), BagOracle.for_call, options, dtypes, seed
    )
    assert (report.counterexample, report.failure) == (public.counterexample, public.failure)
    assert isinstance(case, EmbeddingBagCase)
    assert torch_defect_behind(case, True) is DEFECTS[expected]


def test_verify_embedding_on_torch_names_the_sparse_padding_defect() -> None:
    options, dtypes, seed = ("padding_idx", "sparse"), (torch.float32,), 0
    public = ee.verify_embedding(  # random examples only, as minimal_case draws them
        F.embedding, options=options, dtypes=dtypes, devices=["cpu"], seed=seed, boundaries=False
    )
    assert not public.passed
    valid = ees.embedding_cases(
        options=options, dtype=st.sampled_from(dtypes), device=st.sampled_from(("cpu",))
    )
    invalid = ees.embedding_cases(
        options=options, dtype=st.sampled_from(dtypes), device="cpu", invalid=True
    )
    report, case = minimal_case(
        F.embedding, Part(valid, invalid), EmbeddingOracle.for_call, options, dtypes, seed
    )
    assert (report.counterexample, report.failure) == (public.counterexample, public.failure)
    assert isinstance(case, EmbeddingCase)
    assert torch_defect_behind(case, True) is DEFECTS["embedding-sparse-padding-0d-ids"]
