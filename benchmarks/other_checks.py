"""Side by side: the checks others use to call an embedding kernel right, and the verifiers.

Four checks judge the same kernels: the mutant catalogues of the test suite
(``tests/mutants.py``, ``tests/bag_mutants.py``, ``tests/value_mutants.py``'s embedding and bag
kernels, ``tests/purity_mutants.py``) and right kernels, among them two that are not bit for
bit torch's but lie within the derived bound. The three checks of others are reimplemented
here from their public descriptions (no code copied):

``kernelbench``
    KernelBench's correctness check (ScalingIntelligence/KernelBench, arXiv 2502.10517;
    ``run_and_check_correctness`` and ``get_tolerance_for_precision`` in its ``eval.py``). A
    problem is a reference module with fixed input shapes; a candidate passes when, on 5
    trials that change only the values (each trial seeds new random inputs and freshly
    initialised weights, from trial seeds drawn once from seed 42), its output has the
    reference's shape and ``torch.allclose(reference, output, atol=tol, rtol=tol)`` holds,
    with ``tol`` 1e-4 in float32 and 1e-2 in float16 and bfloat16 (torchbench's numbers).
    Forward outputs only; the problem fixes the module's constructor, so only the default
    options. Here three level-1-style problems (:data:`KERNELBENCH_PROBLEMS`: an
    ``nn.Embedding`` and two ``nn.EmbeddingBag``, powers of two as in KernelBench), each
    evaluated in the three precisions; a kernel is flagged if any precision flags it.
``library``
    The embedding tests of kernel libraries, with their grids and tolerances.
    Liger-Kernel's ``test/transformers/test_embedding.py``: its list of
    ``(num_embeddings, embedding_dim, padding_idx)`` (duplicates dropped), 320 ids, float32,
    ``atol=1e-6, rtol=1e-5``, the output and the weight's gradient after one
    ``randn_like`` upstream gradient. FlagGems' ``test_embedding`` as it runs on CPU (its
    ``TO_CPU`` grid: 1,024 rows of width 8, ids of shape ``(2, 4)``, ``padding_idx`` in
    ``None, -1, 1, 2``, ``scale_grad_by_freq`` both ways, float16, float32 and bfloat16)
    and its ``test_embedding_bag`` (3, 8 and 16 bags of 3 ids from 50 rows of width 16 and
    32, modes sum, mean and max, ``per_sample_weights`` in sum mode, against a float64
    reference), both judged by ``flag_gems.testing.assert_close``: the output's dtype, then
    ``atol=1e-4`` and ``rtol`` 1.3e-6 (float32), 1e-3 (float16), 0.016 (bfloat16). FlagGems'
    bag test checks the output only; here the weight's gradient is checked as well, as its
    embedding test checks it (against torch's gradient in the same dtype). The reference runs
    first, on its own copy of the table.
``assert_close``
    What a kernel author writes by hand: ``torch.testing.assert_close`` (its default
    tolerances for each dtype) against ``F.embedding`` / ``F.embedding_bag``, on a handful of
    cases drawn once and then fixed (seeds 0 to 4 draw ``V``, ``D``, the ids' shape, the bags;
    float32, float64, float16 and bfloat16; modes sum, mean, max for bags), forward as
    ``assert_close(kernel(ids, w), F.embedding(ids, w))`` on the same tensors, and the
    weight's gradient on fresh leaves with the same upstream gradient. Default options.

and ``verify``: the package's ``ee.verify_embedding`` / ``ee.verify_embedding_bag`` /
``ee.verify_quantized_embedding`` at their defaults, with only the options (and
``deterministic``) that a mutant's bug needs, as ``benchmarks/catch_rates.py`` runs them,
under seeds ``0 .. K - 1``: a mutant counts as caught when every seed fails it, a right
kernel as flagged when any seed does.

A kernel that raises on a valid input is flagged. None of the three checks has a test for a
quantized lookup, so the one quantized purity mutant is not judged by them (counted as not
caught). The bag mutants and the size mutants of ``tests/mutants.py`` are one correct
hand-written kernel (``hand_written_bag``, ``blocked_embedding``, both judged among the right
kernels) with one bug each; where a check's case rejects that correct kernel (its float16 sums
are not torch's bit for bit), the case says nothing about the bug and is left out when the
check judges the mutant, as a maintainer would loosen or drop it to let the right kernel pass.

A flag on a right kernel is a false alarm, except where the verifier names the failure as
torch's own defect (``report.torch_defect``): then the kernel is torch's and the flag is a
finding, reported as such.

Usage::

    python benchmarks/other_checks.py                                # K = 3
    python benchmarks/other_checks.py --seeds 5 --json docs/other-checks.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
# The catalogues live with the tests.
sys.path.insert(0, str(ROOT / "tests"))

import embedding_equivalence as ee  # noqa: E402
from bag_mutants import BAG_MUTANTS, hand_written_bag  # noqa: E402
from mutants import MUTANTS, blocked_embedding  # noqa: E402
from purity_mutants import PURITY_MUTANTS  # noqa: E402
from value_mutants import VALUE_BAG_MUTANTS, VALUE_MUTANTS  # noqa: E402

CHECKS = ("kernelbench", "library", "assert_close", "verify")
FAMILIES = ("embedding", "bag", "value", "purity", "right")
#: How the page and the table name them.
CHECK_TITLES = {
    "kernelbench": "KernelBench",
    "library": "Liger/FlagGems tests",
    "assert_close": "assert_close",
    "verify": "ee.verify_*",
}
FAMILY_TITLES = {
    "embedding": "embedding mutants",
    "bag": "bag mutants",
    "value": "value mutants",
    "purity": "purity mutants",
    "right": "right kernels",
}

_BAG_KEYS = ("offsets", "mode", "per_sample_weights")


# --------------------------------------------------------------------------------------------
# Right kernels that are not torch's bit for bit
# --------------------------------------------------------------------------------------------


def bag_summed_pairwise(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> torch.Tensor:
    """``F.embedding_bag`` whose sums add each bag's rows pairwise, in the table's own dtype.

    Modes ``sum`` and ``mean`` (also with ``per_sample_weights``) reduce each bag as a tree of
    pairwise additions, every one rounded to the input dtype, where torch's CPU kernel adds
    the rows one after the other; the mean divides once. In bfloat16 the two orders give
    different last bits, both within the recursive-summation bound (the pairwise one is the
    more accurate). Everything else (mode ``max``, the other options, bad input) is
    ``ee.lookup_embedding_bag``'s.
    """
    checked = ee.lookup_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    if (
        mode == "max"
        or max_norm is not None
        or scale_grad_by_freq
        or sparse
        or include_last_offset
        or padding_idx is not None
    ):
        return checked
    flat = input.reshape(-1).long()
    n, dim = flat.shape[0], weight.shape[1]
    positions = torch.arange(n, device=flat.device)
    if input.dim() == 2:
        bags, length = input.shape
        starts = torch.arange(bags, device=flat.device) * length
    else:
        assert offsets is not None
        starts = offsets.long()
        bags = starts.shape[0]
        if bags == 0:
            return checked
    bag = (torch.searchsorted(starts, positions, right=True) - 1).clamp(min=0)
    rows = weight[flat]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1)[:, None]
    counts = torch.bincount(bag, minlength=bags) if n else bag.new_zeros(bags)
    longest, width = int(counts.max()) if bags and n else 0, 1
    while width < longest:
        width *= 2
    dense = rows.new_zeros(bags, width, dim).index_put((bag, positions - starts[bag]), rows)
    while dense.shape[1] > 1:  # one level of the tree: every sum rounds to the dtype
        dense = dense[:, 0::2] + dense[:, 1::2]
    out = dense[:, 0]
    if mode == "mean":
        out = out / counts.clamp(min=1)[:, None].to(out.dtype)
    return out


# --------------------------------------------------------------------------------------------
# The kernels under judgment
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """A kernel judged by every check.

    Attributes:
        family: ``embedding``, ``bag``, ``value``, ``purity`` (mutants) or ``right``.
        name: short id.
        fn: the kernel.
        kind: ``embedding`` (``F.embedding``'s signature), ``bag`` or ``quantized``.
        options: what the verifier must exercise for the bug to be reachable.
        backward: whether the verifier checks the gradient.
        deterministic: the bug shows only when two runs must agree bit for bit.
        base: the correct kernel the mutant is built on, where it is not torch's own
            function: a case of another check that rejects the base says nothing about the
            bug, and is left out when that check judges the mutant.
    """

    family: str
    name: str
    fn: Callable[..., torch.Tensor]
    kind: str
    options: tuple[str, ...] = ()
    backward: bool = True
    deterministic: bool = False
    base: Callable[..., torch.Tensor] | None = None


#: The mutants of ``tests/mutants.py`` built on its ``blocked_embedding``.
BLOCKED = frozenset(
    {
        "grid_drops_partial_block",
        "width_tail_dropped",
        "zero_rows_wider_than_1024",
        "ids_packed_in_int16",
        "padding_learns_past_768_ids",
        "freq_counter_in_uint8",
        "backward_drops_partial_block",
    }
)


def kernels() -> list[Kernel]:
    """Every kernel judged: the four mutant families, then the right kernels."""
    out = [
        Kernel(
            "embedding", m.name, m.fn, "embedding", m.options, m.backward,
            base=blocked_embedding if m.name in BLOCKED else None,
        )
        for m in MUTANTS
    ]  # fmt: skip
    out += [
        Kernel("bag", m.name, m.fn, "bag", m.options, base=hand_written_bag) for m in BAG_MUTANTS
    ]
    out += [
        Kernel("value", m.name, m.fn, "embedding", m.options, m.backward) for m in VALUE_MUTANTS
    ]
    out += [
        Kernel("value", m.name, m.fn, "bag", m.options, base=hand_written_bag)
        for m in VALUE_BAG_MUTANTS
    ]
    out += [
        Kernel("purity", m.name, m.fn, m.verifier, m.options, deterministic=m.deterministic)
        for m in PURITY_MUTANTS
    ]
    out += [
        Kernel("right", "F.embedding", F.embedding, "embedding"),
        Kernel("right", "ee.lookup_embedding", ee.lookup_embedding, "embedding"),
        Kernel("right", "ee.matmul_embedding", ee.matmul_embedding, "embedding"),
        Kernel("right", "F.embedding_bag", F.embedding_bag, "bag"),
        Kernel("right", "ee.lookup_embedding_bag", ee.lookup_embedding_bag, "bag"),
        Kernel("right", "ee.matmul_embedding_bag", ee.matmul_embedding_bag, "bag"),
        Kernel("right", "bag_summed_pairwise", bag_summed_pairwise, "bag"),
        # The catalogues' correct kernels, on which their mutants plant one bug each.
        Kernel("right", "blocked_embedding", blocked_embedding, "embedding"),
        Kernel("right", "hand_written_bag", hand_written_bag, "bag"),
    ]
    return out


@dataclass
class Verdict:
    """One check's judgment of one kernel.

    Attributes:
        flagged: the check rejects the kernel.
        detail: the first failing case and why (``None`` when it passes).
        judged: whether the check has a test for this kind of kernel at all.
        torch_defect: the verifier's diagnosis that the failure is torch's own.
        seeds: the verifier's runs (``None`` for the other checks).
        caught: how many of them failed.
        left_out: the cases left out because they reject the mutant's correct base.
    """

    flagged: bool
    detail: str | None = None
    judged: bool = True
    torch_defect: str | None = None
    seeds: int | None = None
    caught: int | None = None
    left_out: int = 0


class CheckFailed(Exception):
    """A failed case of a check: the message says which and why."""


def _run(candidate: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``candidate(*args, **kwargs)``; an exception on a valid input is a flag."""
    try:
        return candidate(*args, **kwargs)
    except Exception as exc:  # a kernel that raises on a valid input is flagged
        raise CheckFailed(f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:120]}") from exc


#: A check's cases for one kernel: ``(label, run)``; ``run()`` raises :class:`CheckFailed`.
Cases = list[tuple[str, Callable[[], None]]]


def failing(cases: Cases) -> set[str]:
    """The labels of every case that fails."""
    out = set()
    for label, case in cases:
        try:
            case()
        except CheckFailed:
            out.add(label)
    return out


def _judge(cases: Cases, left_out: set[str] | frozenset[str] = frozenset()) -> Verdict:
    """Runs the cases in order, but those ``left_out``; the first that fails flags."""
    for label, case in cases:
        if label in left_out:
            continue
        try:
            case()
        except CheckFailed as flag:
            return Verdict(True, str(flag), left_out=len(left_out))
    return Verdict(False, left_out=len(left_out))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------
# KernelBench
# --------------------------------------------------------------------------------------------

#: KernelBench's precisions and ``get_tolerance_for_precision`` (atol = rtol).
KERNELBENCH_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
KERNELBENCH_TRIALS = 5


@dataclass(frozen=True)
class Problem:
    """A level-1-style problem: a reference module's fixed shapes.

    Attributes:
        name: the problem's name.
        kind: ``embedding`` or ``bag``.
        rows: ``num_embeddings``.
        dim: ``embedding_dim``.
        ids: the input's shape.
        mode: ``nn.EmbeddingBag``'s mode (bags).
        bag_length: with a 1-D input, the length of each bag (``offsets = arange(0, N, L)``).
    """

    name: str
    kind: str
    rows: int
    dim: int
    ids: tuple[int, ...]
    mode: str = "sum"
    bag_length: int | None = None


KERNELBENCH_PROBLEMS = (
    Problem("Embedding", "embedding", 8192, 256, (16, 256)),
    Problem("EmbeddingBag_sum_offsets", "bag", 8192, 256, (4096,), "sum", 32),
    Problem("EmbeddingBag_mean_2d", "bag", 8192, 256, (128, 32), "mean"),
)


def kernelbench_trial_seeds() -> list[int]:
    """The trial seeds: drawn once from seed 42, the same for every kernel."""
    draws = torch.randint(0, 2**31 - 1, (KERNELBENCH_TRIALS,), generator=_gen(42))
    return [int(s) for s in draws]


_KB_CACHE: dict[tuple[str, torch.dtype, int], dict[str, Any]] = {}


def kernelbench_inputs(problem: Problem, dtype: torch.dtype, trial: int) -> dict[str, Any]:
    """A trial's inputs: ``input``, ``weight`` and the bag's ``offsets`` and ``mode``.

    The table is the module's fresh ``N(0, 1)`` initialisation in ``dtype``; ids are uniform
    in ``[0, rows)``. Cached: every kernel meets the same trials, as in KernelBench.
    """
    key = (problem.name, dtype, trial)
    if key not in _KB_CACHE:
        g = _gen(kernelbench_trial_seeds()[trial])
        ids = torch.randint(0, problem.rows, problem.ids, generator=g)
        weight = torch.randn(problem.rows, problem.dim, generator=g).to(dtype)
        inputs: dict[str, Any] = {"input": ids, "weight": weight}
        if problem.kind == "bag":
            inputs["mode"] = problem.mode
            if problem.bag_length is not None:
                inputs["offsets"] = torch.arange(0, ids.numel(), problem.bag_length)
        _KB_CACHE[key] = inputs
    return _KB_CACHE[key]


def _call(fn: Callable[..., Any], inputs: dict[str, Any], weight: torch.Tensor) -> Any:
    """``fn(input, weight[, offsets], mode=...)`` for a problem's inputs."""
    kwargs = {k: v for k, v in inputs.items() if k in ("mode",)}
    if "offsets" in inputs:
        return fn(inputs["input"], weight, inputs["offsets"], **kwargs)
    return fn(inputs["input"], weight, **kwargs)


def kernelbench_case(
    kernel: Callable[..., Any], problem: Problem, dtype: torch.dtype, trial: int
) -> None:
    """One trial of KernelBench's check; raises :class:`CheckFailed` on a failure."""
    # The trial's own ids (and offsets): the reference and the kernel share them, as in
    # KernelBench; a kernel that changes them in place leaves the next kernels' trials alone.
    cached = kernelbench_inputs(problem, dtype, trial)
    inputs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in cached.items()}
    reference = F.embedding if problem.kind == "embedding" else F.embedding_bag
    with torch.no_grad():
        expected = _call(reference, inputs, inputs["weight"].clone())
        actual = _run(_call, kernel, inputs, inputs["weight"].clone())
    where = f"{problem.name}, {dtype_name(dtype)}, trial {trial}"
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape:
        shape = getattr(actual, "shape", type(actual).__name__)
        raise CheckFailed(f"{where}: output shape {tuple(shape)}, expected {tuple(expected.shape)}")
    tol = KERNELBENCH_TOLERANCE[dtype]
    try:
        close = torch.allclose(expected, actual, atol=tol, rtol=tol)
    except RuntimeError as exc:  # a dtype mismatch: KernelBench reports the error
        raise CheckFailed(f"{where}: allclose raised {exc}") from exc
    if not close:
        diff = (expected.double() - actual.double()).abs().max().item()
        raise CheckFailed(f"{where}: allclose(atol=rtol={tol:g}) failed, max |diff| {diff:.3g}")


def kernelbench_cases(fn: Callable[..., Any], kind: str) -> Cases:
    """KernelBench's check: the problems of the kernel's kind, in every precision."""
    return [
        (f"{p.name} {d} {t}", lambda p=p, d=d, t=t: kernelbench_case(fn, p, d, t))
        for p in KERNELBENCH_PROBLEMS
        if p.kind == kind
        for d in KERNELBENCH_TOLERANCE
        for t in range(KERNELBENCH_TRIALS)
    ]


# --------------------------------------------------------------------------------------------
# Library tests: Liger-Kernel and FlagGems
# --------------------------------------------------------------------------------------------

#: Liger-Kernel's grid (duplicates dropped) and its float32 tolerances.
LIGER_CASES = (
    (100, 64, None),
    (1000, 128, None),
    (100, 60, None),
    (1000, 120, None),
    (1000, 500, None),
    (30522, 768, None),
    (100, 64, 0),
    (1000, 128, 50),
    (30522, 768, 1),
)
LIGER_ATOL, LIGER_RTOL = 1e-6, 1e-5
#: ``flag_gems.testing``'s resolutions (rtol) and atol.
FLAGGEMS_RTOL = {torch.float16: 1e-3, torch.float32: 1.3e-6, torch.bfloat16: 0.016}
FLAGGEMS_ATOL = 1e-4


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def _gems_assert_close(res: Any, ref: torch.Tensor, dtype: torch.dtype, where: str) -> None:
    """``flag_gems.testing.assert_close``: the dtype, then atol 1e-4 and the dtype's rtol."""
    if not isinstance(res, torch.Tensor) or res.dtype != dtype:
        got = getattr(res, "dtype", type(res).__name__)
        raise CheckFailed(f"{where}: dtype {got}, not {dtype}")
    try:
        torch.testing.assert_close(
            res, ref.to(dtype), atol=FLAGGEMS_ATOL, rtol=FLAGGEMS_RTOL[dtype]
        )
    except AssertionError as exc:
        raise CheckFailed(f"{where}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines[:2])[:200]


def _grad(
    fn: Callable[..., Any],
    call: Callable[[Callable[..., Any], torch.Tensor], Any],
    weight: torch.Tensor,
    grad_output: torch.Tensor,
) -> torch.Tensor:
    """The weight's gradient of ``call(fn, leaf)`` with ``grad_output`` upstream."""
    leaf = weight.detach().clone().requires_grad_(True)
    out = call(fn, leaf)
    (grad,) = torch.autograd.grad(out, leaf, grad_output)
    return grad.to_dense() if grad.is_sparse else grad


_LIGER_CACHE: dict[tuple[int, int, int | None], tuple[torch.Tensor, ...]] = {}


def _liger_inputs(rows: int, dim: int, padding_idx: int | None) -> tuple[torch.Tensor, ...]:
    """Ids, table, upstream gradient, and torch's output and gradient (computed first).

    Cached: the same for every kernel (the test seeds 42), and the largest rows of the grid
    (30,522 x 768) cost more to draw than to judge.
    """
    key = (rows, dim, padding_idx)
    if key not in _LIGER_CACHE:
        g = _gen(42)
        weight = torch.randn(rows, dim, generator=g)
        if padding_idx is not None:
            weight[padding_idx] = 0  # nn.Embedding's initialisation zeroes the padding row
        ids = torch.randint(0, rows, (32 * 10,), generator=g)
        if padding_idx is not None:
            ids[torch.randint(0, 32 * 10, (32 * 10 // 10,), generator=g)] = padding_idx
        leaf = weight.clone().requires_grad_(True)
        expected = F.embedding(ids, leaf, padding_idx).view(32, 10, -1)
        grad_output = torch.randn(expected.shape, generator=g)
        expected.backward(grad_output)
        assert leaf.grad is not None
        _LIGER_CACHE[key] = (ids, weight, grad_output, expected.detach(), leaf.grad)
    return _LIGER_CACHE[key]


def liger_case(kernel: Callable[..., Any], rows: int, dim: int, padding_idx: int | None) -> None:
    """Liger-Kernel's ``test_embedding_correctness`` on one row of its grid."""
    ids, weight, grad_output, expected, expected_grad = _liger_inputs(rows, dim, padding_idx)
    ids, grad_output = ids.clone(), grad_output.clone()  # the cache stays as drawn
    options = {} if padding_idx is None else {"padding_idx": padding_idx}
    where = f"Liger (V={rows}, D={dim}, padding_idx={padding_idx}), float32"
    leaf = weight.clone().requires_grad_(True)
    actual = _run(lambda: kernel(ids, leaf, **options).view(32, 10, -1))
    if not _allclose(expected, actual, LIGER_ATOL, LIGER_RTOL):
        raise CheckFailed(f"{where}: output not allclose(atol=1e-6, rtol=1e-5)")
    _run(actual.backward, grad_output)
    grad = leaf.grad
    grad = grad.to_dense() if grad is not None and grad.is_sparse else grad
    if not _allclose(expected_grad, grad, LIGER_ATOL, LIGER_RTOL):
        raise CheckFailed(f"{where}: weight.grad not allclose(atol=1e-6, rtol=1e-5)")


def _allclose(expected: Any, actual: Any, atol: float, rtol: float) -> bool:
    """``torch.allclose``, ``False`` where it raises.

    No tensor, shapes that do not broadcast, dtypes that differ: the test fails either way.
    """
    try:
        return bool(torch.allclose(expected, actual, atol=atol, rtol=rtol))
    except (RuntimeError, TypeError):
        return False


def flaggems_embedding_case(
    kernel: Callable[..., Any],
    padding_idx: int | None,
    scale_grad_by_freq: bool,
    dtype: torch.dtype,
) -> None:
    """FlagGems' ``test_embedding`` (forward and backward) on its CPU grid's row."""
    g = _gen(0)
    ids = torch.randint(0, 1024, (2, 4), generator=g)
    weight = torch.randn(1024, 8, generator=g).to(dtype)
    grad_output = torch.randn(2, 4, 8, generator=g).to(dtype)
    options: dict[str, Any] = {}
    if padding_idx is not None:
        options["padding_idx"] = padding_idx
    if scale_grad_by_freq:
        options["scale_grad_by_freq"] = True
    where = (
        f"FlagGems (padding_idx={padding_idx}, scale_grad_by_freq={scale_grad_by_freq}), "
        f"{dtype_name(dtype)}"
    )

    def call(fn: Callable[..., Any], w: torch.Tensor) -> Any:
        return fn(ids, w, **options)

    expected = call(F.embedding, weight.clone())
    _gems_assert_close(_run(call, kernel, weight.clone()), expected, dtype, where)
    expected_grad = _grad(F.embedding, call, weight, grad_output)
    actual_grad = _run(_grad, kernel, call, weight, grad_output)
    _gems_assert_close(actual_grad, expected_grad, dtype, f"{where}, weight.grad")


def flaggems_bag_case(
    kernel: Callable[..., Any], bags: int, dim: int, mode: str, dtype: torch.dtype
) -> None:
    """FlagGems' ``test_embedding_bag``, with the weight's gradient added."""
    g = _gen(42)
    samples = bags * 3
    weight = torch.randn(50, dim, generator=g).to(dtype)
    ids = torch.randint(0, 50, (samples,), generator=g)
    offsets = torch.arange(0, samples, max(1, samples // bags))[:bags]
    psw = torch.rand(samples, generator=g).to(dtype) if mode == "sum" else None
    grad_output = torch.randn(bags, dim, generator=g).to(dtype)
    where = f"FlagGems bag ({bags} bags, D={dim}, mode={mode}), {dtype_name(dtype)}"

    def call(fn: Callable[..., Any], w: torch.Tensor) -> Any:
        weights = None if psw is None else psw.to(w.dtype)
        return fn(ids, w, offsets, mode=mode, per_sample_weights=weights)

    expected = call(F.embedding_bag, weight.double())
    _gems_assert_close(_run(call, kernel, weight.clone()), expected, dtype, where)
    # The gradient as FlagGems' embedding backward test checks it: against torch's, in dtype.
    expected_grad = _grad(F.embedding_bag, call, weight, grad_output)
    actual_grad = _run(_grad, kernel, call, weight, grad_output)
    _gems_assert_close(actual_grad, expected_grad, dtype, f"{where}, weight.grad")


def library_cases(fn: Callable[..., Any], kind: str) -> Cases:
    """Liger-Kernel's and FlagGems' embedding tests (FlagGems' bag test for bags)."""
    dtypes = (torch.float16, torch.float32, torch.bfloat16)  # FlagGems' FLOAT_DTYPES
    if kind == "embedding":
        liger: Cases = [(f"Liger {c}", lambda c=c: liger_case(fn, *c)) for c in LIGER_CASES]
        gems: Cases = [
            (f"FlagGems {p} {s} {d}", lambda p=p, s=s, d=d: flaggems_embedding_case(fn, p, s, d))
            for p in (None, -1, 1, 2)
            for s in (True, False)
            for d in dtypes
        ]
        return liger + gems
    if kind == "bag":
        return [
            (
                f"FlagGems bag {b} {w} {m} {d}",
                lambda b=b, w=w, m=m, d=d: flaggems_bag_case(fn, b, w, m, d),
            )
            for b in (3, 8, 16)
            for w in (16, 32)
            for m in ("sum", "mean", "max")
            for d in dtypes
        ]
    return []


# --------------------------------------------------------------------------------------------
# torch.testing.assert_close on drawn-but-fixed cases
# --------------------------------------------------------------------------------------------

ASSERT_CLOSE_SEEDS = (0, 1, 2, 3, 4)
ASSERT_CLOSE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def assert_close_inputs(kind: str, seed: int, dtype: torch.dtype) -> dict[str, Any]:
    """The case of ``seed``: ids, a table and an upstream gradient (bags: offsets too).

    ``V`` in [1, 64], ``D`` in [1, 16]; ids of shape ``(a, b)`` with ``a, b`` in [1, 4]; bags:
    1 to 16 ids in 1 to 5 bags at drawn offsets, so that some may be empty.
    """
    g = _gen(seed)
    rows = int(torch.randint(1, 65, (), generator=g))
    dim = int(torch.randint(1, 17, (), generator=g))
    if kind == "embedding":
        shape = tuple(int(s) for s in torch.randint(1, 5, (2,), generator=g))
        ids = torch.randint(0, rows, shape, generator=g)
        out_shape: tuple[int, ...] = (*shape, dim)
        extra: dict[str, Any] = {}
    else:
        n = int(torch.randint(1, 17, (), generator=g))
        bags = int(torch.randint(1, 6, (), generator=g))
        ids = torch.randint(0, rows, (n,), generator=g)
        cuts = torch.randint(0, n + 1, (bags - 1,), generator=g).sort().values
        extra = {"offsets": torch.cat([torch.zeros(1, dtype=torch.long), cuts])}
        out_shape = (bags, dim)
    weight = torch.randn(rows, dim, generator=g).to(dtype)
    grad_output = torch.randn(out_shape, generator=g).to(dtype)
    return {"input": ids, "weight": weight, "grad_output": grad_output, **extra}


def assert_close_case(
    kernel: Callable[..., Any], kind: str, seed: int, dtype: torch.dtype, mode: str | None
) -> None:
    """``assert_close(kernel(ids, w), F.embedding(ids, w))``, then the weight's gradient."""
    case = assert_close_inputs(kind, seed, dtype)
    ids, weight, grad_output = case["input"], case["weight"], case["grad_output"]
    reference: Callable[..., Any] = F.embedding if kind == "embedding" else F.embedding_bag
    args = (case["offsets"],) if "offsets" in case else ()
    kwargs = {} if mode is None else {"mode": mode}
    where = f"seed {seed}, {dtype_name(dtype)}" + ("" if mode is None else f", mode={mode}")

    def call(fn: Callable[..., Any], w: torch.Tensor) -> Any:
        return fn(ids, w, *args, **kwargs)

    try:  # the kernel first, then the reference, on the same tensors
        torch.testing.assert_close(_run(call, kernel, weight), call(reference, weight))
    except AssertionError as exc:
        raise CheckFailed(f"{where}: {_first_line(exc)}") from exc
    actual = _run(_grad, kernel, call, weight, grad_output)
    try:
        torch.testing.assert_close(actual, _grad(reference, call, weight, grad_output))
    except AssertionError as exc:
        raise CheckFailed(f"{where}, weight.grad: {_first_line(exc)}") from exc


def assert_close_cases(fn: Callable[..., Any], kind: str) -> Cases:
    """``torch.testing.assert_close`` against torch on the fixed cases."""
    if kind not in ("embedding", "bag"):
        return []
    modes: tuple[str | None, ...] = (None,) if kind == "embedding" else ("sum", "mean", "max")
    return [
        (f"seed {s} {d} {m}", lambda s=s, d=d, m=m: assert_close_case(fn, kind, s, d, m))
        for s in ASSERT_CLOSE_SEEDS
        for d in ASSERT_CLOSE_DTYPES
        for m in modes
    ]


#: The three checks of others: each gives its cases for a kernel of a kind.
OTHER_CHECKS: dict[str, Callable[[Callable[..., Any], str], Cases]] = {
    "kernelbench": kernelbench_cases,
    "library": library_cases,
    "assert_close": assert_close_cases,
}
_BASE_FAILS: dict[tuple[str, Any], set[str]] = {}


def other_check(check: str, kernel: Kernel) -> Verdict:
    """One of the three checks on ``kernel``; a mutant skips the cases that reject its base."""
    cases = OTHER_CHECKS[check](kernel.fn, kernel.kind)
    if not cases:
        return Verdict(False, "no test of this kind", judged=False)
    left_out: set[str] = set()
    if kernel.base is not None:
        key = (check, kernel.base)
        if key not in _BASE_FAILS:
            _BASE_FAILS[key] = failing(OTHER_CHECKS[check](kernel.base, kernel.kind))
        left_out = _BASE_FAILS[key]
    return _judge(cases, left_out)


# --------------------------------------------------------------------------------------------
# The package's verifiers
# --------------------------------------------------------------------------------------------


def verify_report(kernel: Kernel, seed: int) -> Any:
    """The package's verifier for the kernel's kind: its defaults, and what the bug needs."""
    common: dict[str, Any] = {"seed": seed, "deterministic": kernel.deterministic or None}
    if kernel.kind == "embedding":
        return ee.verify_embedding(
            kernel.fn, options=kernel.options, backward=kernel.backward, **common
        )
    if kernel.kind == "bag":
        return ee.verify_embedding_bag(kernel.fn, options=kernel.options, **common)
    return ee.verify_quantized_embedding(kernel.fn, scheme="int8", **common)


def verify(kernel: Kernel, seeds: int) -> Verdict:
    """The verifier under seeds ``0 .. seeds - 1``.

    A mutant is caught when every seed fails it (the catch rate's standard: a bug found under
    some seeds is missed by some CI runs); a right kernel is flagged when any seed fails it.
    """
    caught, detail, defect = 0, None, None
    for seed in range(seeds):
        try:
            report = verify_report(kernel, seed)
        except Exception as exc:  # a verifier that raises has not caught anything
            detail = detail or f"seed {seed}: the verifier raised {type(exc).__name__}: {exc}"
            continue
        if not report.passed:
            caught += 1
            if detail is None:
                where = report.boundary or "a random example"
                detail = f"seed {seed}: {where}"
            defect = defect or report.torch_defect
    flagged = caught > 0 if kernel.family == "right" else caught == seeds
    return Verdict(flagged, detail, torch_defect=defect, seeds=seeds, caught=caught)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    """Every check's verdict on one kernel."""

    kernel: Kernel
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def false_alarm(self, check: str) -> bool:
        """A right kernel flagged, not for a defect the verifier names as torch's."""
        v = self.verdicts[check]
        return v.flagged and v.torch_defect is None


def judge(kernel: Kernel, seeds: int) -> Result:
    """Every check on ``kernel``; progress to stderr."""
    result = Result(kernel)
    for check in CHECKS:
        start = time.perf_counter()
        verdict = verify(kernel, seeds) if check == "verify" else other_check(check, kernel)
        result.verdicts[check] = verdict
        what = "flagged" if verdict.flagged else ("passed" if verdict.judged else "not judged")
        print(
            f"[{kernel.family}] {kernel.name} {check}: {what}"
            + (f" ({verdict.detail})" if verdict.flagged and verdict.detail else "")
            + f" [{time.perf_counter() - start:.1f} s]",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    return result


def totals(results: list[Result]) -> dict[str, dict[str, int]]:
    """Per family: ``total`` and, per check, the kernels flagged.

    For right kernels the false alarms: a defect the verifier names as torch's is not one.
    """
    out: dict[str, dict[str, int]] = {}
    for family in FAMILIES:
        rows = [r for r in results if r.kernel.family == family]
        if not rows:
            continue
        counts = {"total": len(rows)}
        for check in CHECKS:
            if family == "right":
                counts[check] = sum(r.false_alarm(check) for r in rows)
            else:
                counts[check] = sum(r.verdicts[check].flagged for r in rows)
        out[family] = counts
    return out


def markdown_table(sums: dict[str, dict[str, int]]) -> str:
    """The four checks side by side: bugs caught (mutants) and false alarms (right kernels)."""
    head = "| | " + " | ".join(CHECK_TITLES[c] for c in CHECKS) + " |"
    lines = [head, "|---|" + "---:|" * len(CHECKS)]
    for family, counts in sums.items():
        label = FAMILY_TITLES[family] + (" (false alarms)" if family == "right" else "")
        cells = [f"{counts[c]}/{counts['total']}" for c in CHECKS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _kernel_json(r: Result) -> dict[str, Any]:
    k = r.kernel
    return {
        "family": k.family,
        "name": k.name,
        "kind": k.kind,
        "needs": ", ".join((*k.options, *(("deterministic",) if k.deterministic else ()))),
        "flagged_by": [c for c in CHECKS if r.verdicts[c].flagged],
        "not_judged_by": [c for c in CHECKS if not r.verdicts[c].judged],
        "details": {c: r.verdicts[c].detail for c in CHECKS if r.verdicts[c].flagged},
        "cases_left_out": {c: r.verdicts[c].left_out for c in CHECKS if r.verdicts[c].left_out},
        "verify_seeds_caught": r.verdicts["verify"].caught,
        "torch_defect": r.verdicts["verify"].torch_defect,
    }


def main(argv: list[str] | None = None) -> int:
    """Judge every kernel with the four checks; print the per-family counts and the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="the verifiers' seeds (default 3)")
    parser.add_argument(
        "--json", type=Path, help="write the results there (docs/other-checks.json)"
    )
    parser.add_argument("--kernels", default="", help="comma-separated names (default: all)")
    args = parser.parse_args(argv)
    names = {n.strip() for n in args.kernels.split(",") if n.strip()}
    torch.set_num_threads(1)
    start = time.perf_counter()
    results = [judge(k, args.seeds) for k in kernels() if not names or k.name in names]
    seconds = time.perf_counter() - start
    sums = totals(results)
    for check in CHECKS:
        print(f"{CHECK_TITLES[check]}:")
        for family, counts in sums.items():
            what = "false alarms" if family == "right" else "bugs caught"
            print(f"  {FAMILY_TITLES[family]:18s} {what} {counts[check]}/{counts['total']}")
    for r in results:
        defect = r.verdicts["verify"].torch_defect
        if r.kernel.family == "right" and defect:
            print(f"{r.kernel.name}: flagged by the verifier for torch's own defect: {defect}")
        skipped = [CHECK_TITLES[c] for c in CHECKS if not r.verdicts[c].judged]
        if skipped:
            print(f"{r.kernel.name}: not judged by {', '.join(skipped)} (no test of its kind)")
    print()
    print(markdown_table(sums))
    print(
        f"\n{len(results)} kernels in {seconds:.0f} s; verifier seeds {args.seeds}; one thread; "
        f"torch {torch.__version__}, hypothesis {hypothesis.__version__}"
    )
    if args.json is not None:
        data = {
            "versions": {"torch": torch.__version__, "hypothesis": hypothesis.__version__},
            "seeds": args.seeds,
            "threads": 1,
            "checks": [{"key": c, "title": CHECK_TITLES[c]} for c in CHECKS],
            "families": [
                {"key": f, "title": FAMILY_TITLES[f], "right": f == "right"} for f in sums
            ],
            "totals": sums,
            "kernels": [_kernel_json(r) for r in results],
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
