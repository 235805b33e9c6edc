"""The checks others use to call an embedding kernel right, reimplemented from their descriptions.

``benchmarks/other_checks.py`` judges the mutant catalogues and right kernels with these three
checks beside the package's verifiers. Each check is a function from a kernel and its kind
(``"embedding"`` or ``"bag"``) to its cases (:data:`OTHER_CHECKS`); a case raises
:class:`CheckFailed` when the kernel fails it. No code is copied from the projects named.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


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
