"""Every form matches torch's embedding under every autograd mode that torch supports.

Modes: reverse mode (``backward``), forward mode (``torch.autograd.forward_ad`` dual numbers),
``torch.func.grad``, ``jvp``, ``jacrev``, ``jacfwd``, ``vmap`` over a batch of tables (of the
output, and of the gradient: an ensemble), and double backward; each under every option
(``padding_idx``, ``max_norm``, ``scale_grad_by_freq``; ``sparse`` in reverse mode, the only
one where it means anything). The cases come from the package's strategies, in float64 on the
CPU, and every tangent, batch of tables or poisoned gradient from drawn seeds.

What is compared, and how:

- exact quantities are compared with ``torch.equal`` against torch's own answer in the same
  mode: outputs, tangents (a gather of the tangent), Jacobians of an embedding (entries 0, 1 or
  ``1 / count``), the table after ``max_norm``'s in-place renorm;
- gradients are sums, whose rounding depends on the order of the additions: they are held to
  the exact float64 gradient within the derived bound (``gradient_error_bound``), the same
  contract that torch's own kernel meets (``test_properties_embedding``);
- where torch has no answer the exact one is derived: ``F.embedding_bag`` has no forward mode
  and no double backward, so ``matmul_embedding_bag``'s tangent is checked against the oracle
  applied to the tangent as a table (``out_tangent = A @ tangent`` for the linear ``sum`` and
  ``mean``), and the double backward of every form against ``A @ tangent'`` (the backward is
  ``A^T G``, linear in ``G``);
- torch's own defects are pinned at the end of the file (strict xfails with a minimal repro).

Torch's kernels under ``vmap`` (``embedding_renorm_``, ``_embedding_bag``) run as a loop with a
UserWarning; only the forms that call them may warn (``torch_kernels_may_fall_back``), the
package's own forms run on batching rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import embedding_equivalence as ee
from autograd_helpers import (
    BAG_FORMS,
    EMBEDDING_FORMS,
    Outcome,
    assert_same,
    assert_within,
    backward,
    bag_call,
    bag_double_backward_exact,
    bag_gradient_exact,
    bag_jacobian_exact,
    bag_output_exact,
    bag_positions,
    bag_tables_after,
    bag_tangent_exact,
    double_backward,
    embedding_call,
    embedding_double_backward_exact,
    embedding_gradient_exact,
    forward_ad,
    func_grad,
    func_jvp,
    jacobian,
    over_tables,
    randn,
    torch_kernels_may_fall_back,
)
from embedding_equivalence import strategies as ees

# The first use of forward mode in a process imports torch._decomp.decompositions_for_jvp,
# which calls the deprecated torch.jit.script (torch 2.13): torch's warning, not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

Form = Callable[..., torch.Tensor]
SEEDS = st.integers(0, 2**32 - 1)
#: The Jacobian tests run fewer examples: each builds ``N * D * V * D`` entries and, for a bag,
#: one oracle gradient per output entry.
FEWER = settings(max_examples=max(1, settings.default.max_examples // 2))
MODE_OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq")


def _not_sparse(options: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(o for o in options if o != "sparse")


def embedding_cases(
    options: tuple[str, ...], *, jacobian: bool = False
) -> st.SearchStrategy[ees.EmbeddingCase]:
    """Float64 CPU calls, small enough for a Jacobian when ``jacobian``."""
    return ees.embedding_cases(
        options=options,
        dtype=torch.float64,
        device="cpu",
        vocab_size=ees.vocab_sizes(max_value=8 if jacobian else 64),
        embedding_dim=ees.embedding_dims(max_value=3 if jacobian else 8),
        max_ids=6 if jacobian else 16,
    )


def bag_cases(
    options: tuple[str, ...], *, jacobian: bool = False
) -> st.SearchStrategy[ees.EmbeddingBagCase]:
    """Float64 CPU bag calls (every mode, only the options ``F.embedding_bag`` accepts)."""
    return ees.embedding_bag_cases(
        options=options,
        dtype=torch.float64,
        device="cpu",
        vocab_size=ees.vocab_sizes(max_value=8 if jacobian else 32),
        embedding_dim=ees.embedding_dims(max_value=3 if jacobian else 6),
        max_bags=4 if jacobian else 8,
        max_ids=8 if jacobian else 16,
    )


# --------------------------------------------------------------------------------------------
# Embedding: reverse mode
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_backward_is_the_exact_gradient(form: Form, options: tuple[str, ...]) -> None:
    """``out.backward(G)``: output and renormed table equal torch's, and the gradient lies
    within the bound of the exact one, as torch's does (``sparse`` included: a sparse gradient
    has the same values; torch's is taken dense, its sparse backward fails on 0-d ids)."""

    @given(case=embedding_cases(options))
    def check(case: ees.EmbeddingCase) -> None:
        grad_output = case.grad_output()
        actual = backward(*embedding_call(form, case), grad_output)
        expected = backward(*embedding_call(F.embedding, case, sparse=False), grad_output)
        assert_same("out", actual.out, expected.out, "backward", form, case)
        assert_same("weight (renormed)", actual.table, expected.table, "backward", form, case)
        exact, bound = embedding_gradient_exact(case, grad_output)
        assert_within("weight.grad", actual.result, exact, bound, "backward", form, case)
        assert_within("weight.grad", expected.result, exact, bound, "backward", F.embedding, case)

    check()


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_func_grad_is_the_exact_gradient(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.grad``: output and renormed table equal torch's, and the gradient lies
    within the bound of the exact one, as torch's does."""

    @given(case=embedding_cases(_not_sparse(options)))
    def check(case: ees.EmbeddingCase) -> None:
        grad_output = case.grad_output()
        actual = func_grad(*embedding_call(form, case), grad_output)
        expected = func_grad(*embedding_call(F.embedding, case), grad_output)
        assert_same("out", actual.out, expected.out, "torch.func.grad", form, case)
        assert_same("weight", actual.table, expected.table, "torch.func.grad", form, case)
        exact, bound = embedding_gradient_exact(case, grad_output)
        assert_within("grad", actual.result, exact, bound, "torch.func.grad", form, case)
        mode = "torch.func.grad"
        assert_within("grad", expected.result, exact, bound, mode, F.embedding, case)

    check()


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_jacrev_equals_torch(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.jacrev``: every entry (0, 1 or ``1 / count``) equals torch's; for empty
    ids, where torch fails (``test_torch_jacrev_of_empty_ids_fails``), the Jacobian is empty."""

    @FEWER
    @given(case=embedding_cases(_not_sparse(options), jacobian=True))
    def check(case: ees.EmbeddingCase) -> None:
        actual = jacobian(*embedding_call(form, case), "jacrev")
        if case.ids.values:
            expected = jacobian(*embedding_call(F.embedding, case), "jacrev")
        else:
            fn, weight = embedding_call(F.embedding, case)
            out = fn(weight)
            expected = Outcome(out, weight, out.new_zeros((*out.shape, *weight.shape)))
        assert_same("jacobian", actual.result, expected.result, "jacrev", form, case)
        assert_same("weight", actual.table, expected.table, "jacrev", form, case)

    check()


# --------------------------------------------------------------------------------------------
# Embedding: forward mode
# --------------------------------------------------------------------------------------------


FORWARD_MODES = [
    pytest.param(forward_ad, "forward_ad", id="dual-numbers"),
    pytest.param(func_jvp, "torch.func.jvp", id="func-jvp"),
]


@pytest.mark.parametrize(("run", "mode"), FORWARD_MODES)
@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_forward_mode_equals_torch(
    form: Form, options: tuple[str, ...], run: Any, mode: str
) -> None:
    """Dual numbers and ``torch.func.jvp``: output, tangent and renormed table equal torch's.

    The tangent is ``tangent[ids]``, unscaled by ``max_norm`` (torch renorms the primal
    outside autograd) and not masked at padding (the options touch the gradient).
    """

    @given(case=embedding_cases(_not_sparse(options)), seed=SEEDS)
    def check(case: ees.EmbeddingCase, seed: int) -> None:
        tangent = randn(seed, (case.num_embeddings, case.embedding_dim))
        actual = run(*embedding_call(form, case), tangent)
        expected = run(*embedding_call(F.embedding, case), tangent)
        assert_same("out", actual.out, expected.out, mode, form, case)
        assert_same("tangent", actual.result, expected.result, mode, form, case)
        assert_same("weight", actual.table, expected.table, mode, form, case)

    check()


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_jacfwd_equals_torch(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.jacfwd``: every entry (0 or 1) equals torch's."""

    @FEWER
    @given(case=embedding_cases(_not_sparse(options), jacobian=True))
    def check(case: ees.EmbeddingCase) -> None:
        actual = jacobian(*embedding_call(form, case), "jacfwd")
        expected = jacobian(*embedding_call(F.embedding, case), "jacfwd")
        assert_same("jacobian", actual.result, expected.result, "jacfwd", form, case)
        assert_same("weight", actual.table, expected.table, "jacfwd", form, case)

    check()


# --------------------------------------------------------------------------------------------
# Embedding: vmap over a batch of tables
# --------------------------------------------------------------------------------------------


def _tables(case: Any, seeds: list[int]) -> torch.Tensor:
    """The case's table followed by one drawn table per seed: ``(1 + len(seeds), V, D)``."""
    shape = (case.num_embeddings, case.embedding_dim)
    return torch.stack([case.weight.values(), *(randn(s, shape) for s in seeds)])


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_vmap_over_tables_equals_torch(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.vmap`` over tables: outputs, and each table's renorm, equal torch's."""

    @given(case=embedding_cases(_not_sparse(options)), seeds=st.lists(SEEDS, max_size=2))
    def check(case: ees.EmbeddingCase, seeds: list[int]) -> None:
        fn, _ = embedding_call(form, case)
        with torch_kernels_may_fall_back(form):
            actual = over_tables(fn, _tables(case, seeds))
        fn, _ = embedding_call(F.embedding, case)
        with torch_kernels_may_fall_back(F.embedding):
            expected = over_tables(fn, _tables(case, seeds))
        assert_same("out", actual.out, expected.out, "vmap", form, case)
        assert_same("tables", actual.table, expected.table, "vmap", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_vmap_of_grad_over_tables_is_the_exact_gradient(
    form: Form, options: tuple[str, ...]
) -> None:
    """``vmap(grad(...))`` over tables (an ensemble): each table's gradient within the bound."""

    @given(case=embedding_cases(_not_sparse(options)), seeds=st.lists(SEEDS, max_size=2))
    def check(case: ees.EmbeddingCase, seeds: list[int]) -> None:
        grad_output = case.grad_output()
        fn, _ = embedding_call(form, case)
        with torch_kernels_may_fall_back(form):
            grads = over_tables(fn, _tables(case, seeds), grad_output).result
        exact, bound = embedding_gradient_exact(case, grad_output)
        for grad in grads:  # the gradient does not depend on the table
            assert_within("grad", grad, exact, bound, "vmap(grad)", form, case)

    check()


# --------------------------------------------------------------------------------------------
# Embedding: double backward
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_double_backward_is_exact(form: Form, options: tuple[str, ...]) -> None:
    """``d<weight.grad(G), T>/dG = T[ids]`` with the padding positions zeroed, exactly (as
    torch's ``embedding_dense_double_backward``)."""

    @given(case=embedding_cases(("padding_idx", "max_norm")), seed=SEEDS)
    def check(case: ees.EmbeddingCase, seed: int) -> None:
        tangent = randn(seed, (case.num_embeddings, case.embedding_dim))
        fn, weight = embedding_call(form, case)
        actual = double_backward(fn, weight, case.grad_output(), tangent)
        expected = embedding_double_backward_exact(case, tangent)
        assert_same("grad of grad_output", actual.result, expected, "double backward", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_double_backward_with_scale_grad_by_freq_is_exact(
    form: Form, options: tuple[str, ...]
) -> None:
    """With ``scale_grad_by_freq`` the backward is ``G -> S one_hot^T G`` (``S`` divides row
    ``v`` by its count), so its derivative is ``T[ids] / count``, rounded once."""

    @given(case=embedding_cases(MODE_OPTIONS), seed=SEEDS)
    def check(case: ees.EmbeddingCase, seed: int) -> None:
        tangent = randn(seed, (case.num_embeddings, case.embedding_dim))
        fn, weight = embedding_call(form, case)
        actual = double_backward(fn, weight, case.grad_output(), tangent)
        expected = embedding_double_backward_exact(case, tangent)
        assert_same("grad of grad_output", actual.result, expected, "double backward", form, case)

    check()


# --------------------------------------------------------------------------------------------
# Padding positions get no gradient at all
# --------------------------------------------------------------------------------------------

POISONS = st.sampled_from([math.nan, math.inf, -math.inf])


@pytest.mark.parametrize(("form", "options"), EMBEDDING_FORMS)
def test_nonfinite_gradient_at_padding_reaches_no_row(form: Form, options: tuple[str, ...]) -> None:
    """A nan or inf upstream gradient at a padding position changes no row of the gradient:
    it is the gradient of the same call with zeros there, bit for bit, and finite, as torch's
    (whose backward skips padding positions)."""

    @given(case=embedding_cases(options), poison=POISONS)
    def check(case: ees.EmbeddingCase, poison: float) -> None:
        padding = case.kwargs.get("padding_idx")
        assume(padding is not None)
        ids = case.ids.build()
        at_padding = ids == padding % case.num_embeddings
        clean = case.grad_output()
        clean[at_padding] = 0.0
        poisoned = clean.clone()
        poisoned[at_padding] = poison
        actual = backward(*embedding_call(form, case), poisoned)
        expected = backward(*embedding_call(form, case), clean)
        assert_same("weight.grad", actual.result, expected.result, "backward", form, case)
        assert bool(actual.result.isfinite().all())
        torch_grad = backward(*embedding_call(F.embedding, case, sparse=False), poisoned).result
        assert bool(torch_grad.isfinite().all())

    check()


@pytest.mark.parametrize(("form", "options"), BAG_FORMS)
def test_nonfinite_gradient_of_a_bag_without_ids_reaches_no_row(
    form: Form, options: tuple[str, ...]
) -> None:
    """The bag analogue: a nan or inf upstream gradient of a bag that holds no id but padding
    (or none at all) changes no row, as in ``F.embedding_bag``."""

    @given(case=bag_cases(options), poison=POISONS)
    def check(case: ees.EmbeddingBagCase, poison: float) -> None:
        padding = case.kwargs.get("padding_idx")
        v = case.num_embeddings
        ids = case.ids.values
        bags = bag_positions(case)
        idle = [all(padding is not None and ids[i] == padding % v for i in b) for b in bags]
        assume(any(idle))
        clean = case.grad_output()
        clean[torch.tensor(idle, dtype=torch.bool)] = 0.0
        poisoned = clean.clone()
        poisoned[torch.tensor(idle, dtype=torch.bool)] = poison
        actual = backward(*bag_call(form, case), poisoned)
        expected = backward(*bag_call(form, case), clean)
        assert_same("weight.grad", actual.result, expected.result, "backward", form, case)
        assert bool(actual.result.isfinite().all())

    check()


# --------------------------------------------------------------------------------------------
# Bags: the modes F.embedding_bag supports (reverse, torch.func.grad, jacrev, vmap)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("form", "options"), BAG_FORMS)
def test_bag_backward_is_the_exact_gradient(form: Form, options: tuple[str, ...]) -> None:
    """``out.backward(G)`` for every mode and option (``sparse`` included): within the bound."""

    @given(case=bag_cases(options))
    def check(case: ees.EmbeddingBagCase) -> None:
        grad_output = case.grad_output()
        actual = backward(*bag_call(form, case), grad_output)
        exact, bound = bag_gradient_exact(case, case.weight.values(), grad_output)
        assert_within("weight.grad", actual.result, exact, bound, "backward", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), BAG_FORMS)
def test_bag_func_grad_is_the_exact_gradient(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.grad`` for every mode and option: within the bound."""

    @given(case=bag_cases(_not_sparse(options)))
    def check(case: ees.EmbeddingBagCase) -> None:
        grad_output = case.grad_output()
        actual = func_grad(*bag_call(form, case), grad_output)
        exact, bound = bag_gradient_exact(case, case.weight.values(), grad_output)
        assert_within("grad", actual.result, exact, bound, "torch.func.grad", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), BAG_FORMS)
def test_bag_jacrev_is_the_exact_jacobian(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.jacrev``: each row within the bound of the exact gradient of its entry."""

    @FEWER
    @given(case=bag_cases(_not_sparse(options), jacobian=True))
    def check(case: ees.EmbeddingBagCase) -> None:
        # torch's _embedding_bag_backward runs under vmap as a loop, which refuses a batch of
        # size 0: zero bags (test_torch_jacrev_of_zero_bags_fails).
        assume(case.num_bags > 0 or form is not ee.lookup_embedding_bag)
        fn, weight = bag_call(form, case)
        with torch_kernels_may_fall_back(form):
            actual = jacobian(fn, weight, "jacrev")
        exact, bound = bag_jacobian_exact(case, case.weight.values(), reverse=True)
        assert_within("jacobian", actual.result, exact, bound, "jacrev", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), BAG_FORMS)
def test_bag_vmap_over_tables(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.vmap`` over tables: each output within the bound of the exact reduction of
    its table, each table renormed as ``F.embedding_bag`` renorms it."""

    @given(case=bag_cases(_not_sparse(options)), seeds=st.lists(SEEDS, max_size=2))
    def check(case: ees.EmbeddingBagCase, seeds: list[int]) -> None:
        fn, _ = bag_call(form, case)
        tables = _tables(case, seeds)
        with torch_kernels_may_fall_back(form):
            actual = over_tables(fn, tables.clone())
        expected_tables = bag_tables_after(case, tables)
        assert_same("tables", actual.table, expected_tables, "vmap", form, case)
        for k, table in enumerate(tables):
            exact, bound = bag_output_exact(case, table)
            assert_within(f"out[{k}]", actual.out[k], exact, bound, "vmap", form, case)

    check()


# --------------------------------------------------------------------------------------------
# Bags beyond torch: forward mode and double backward of the product form
# --------------------------------------------------------------------------------------------

PRODUCT_BAG_FORMS = [p for p in BAG_FORMS if p.id != "lookup_embedding_bag"]


@pytest.mark.parametrize(("run", "mode"), FORWARD_MODES)
@pytest.mark.parametrize(("form", "options"), PRODUCT_BAG_FORMS)
def test_bag_forward_mode_is_the_exact_tangent(
    form: Form, options: tuple[str, ...], run: Any, mode: str
) -> None:
    """Dual numbers and ``torch.func.jvp``: ``A @ tangent`` within the oracle's bound
    (``sum``/``mean``), the tangent at each bag's first maximum exactly (``max``); the renorm
    leaves the tangent alone."""

    @given(case=bag_cases(options), seed=SEEDS)
    def check(case: ees.EmbeddingBagCase, seed: int) -> None:
        tangent = randn(seed, (case.num_embeddings, case.embedding_dim))
        actual = run(*bag_call(form, case), tangent)
        exact, bound = bag_tangent_exact(case, tangent, actual.table)
        assert_within("tangent", actual.result, exact, bound, mode, form, case)

    check()


@pytest.mark.parametrize(("form", "options"), PRODUCT_BAG_FORMS)
def test_bag_jacfwd_is_the_exact_jacobian(form: Form, options: tuple[str, ...]) -> None:
    """``torch.func.jacfwd``: the Jacobian of ``jacrev``, within the same bound."""

    @FEWER
    @given(case=bag_cases(options, jacobian=True))
    def check(case: ees.EmbeddingBagCase) -> None:
        actual = jacobian(*bag_call(form, case), "jacfwd")
        exact, bound = bag_jacobian_exact(case, case.weight.values(), reverse=False)
        assert_within("jacobian", actual.result, exact, bound, "jacfwd", form, case)

    check()


@pytest.mark.parametrize(("form", "options"), PRODUCT_BAG_FORMS)
def test_bag_double_backward_is_exact(form: Form, options: tuple[str, ...]) -> None:
    """``d<weight.grad(G), T>/dG = A @ T'`` (``T'``: ``T`` divided by the counts, padding row
    zeroed), within the oracle's bound; torch's ``_embedding_bag_backward`` has no derivative."""

    @given(case=bag_cases(options), seed=SEEDS)
    def check(case: ees.EmbeddingBagCase, seed: int) -> None:
        tangent = randn(seed, (case.num_embeddings, case.embedding_dim))
        fn, weight = bag_call(form, case)
        actual = double_backward(fn, weight, case.grad_output(), tangent)
        exact, bound = bag_double_backward_exact(case, tangent, actual.table)
        assert_within("grad of grad_output", actual.result, exact, bound, "double backward",
                      form, case)  # fmt: skip

    check()


# --------------------------------------------------------------------------------------------
# Torch's own behaviour, pinned (torch 2.13, CPU)
# --------------------------------------------------------------------------------------------

TORCH = torch.__version__


@pytest.mark.xfail(
    strict=True,
    reason=f"torch {TORCH}: embedding_dense_double_backward ignores scale_grad_by_freq, so the "
    f"double backward is not the derivative of the (scaled) backward",
)
def test_torch_double_backward_ignores_scale_grad_by_freq() -> None:
    ids = torch.tensor([1, 1])
    weight = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
    grad_output = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
    out = F.embedding(ids, weight, scale_grad_by_freq=True)
    (grad,) = torch.autograd.grad(out, weight, grad_output, create_graph=True)
    (result,) = torch.autograd.grad(grad, grad_output, torch.ones(2, 1, dtype=torch.float64))
    # weight.grad[1] = (G[0] + G[1]) / 2, so its derivative in G is 1/2 at both positions.
    assert torch.equal(result, torch.full((2, 1), 0.5, dtype=torch.float64))


@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=f"torch {TORCH}: jacrev of F.embedding on empty ids fails ('EmbeddingBackward0 "
    f"returned an invalid gradient')",
)
def test_torch_jacrev_of_empty_ids_fails() -> None:
    weight = torch.zeros(3, 2, dtype=torch.float64)
    ids = torch.zeros(0, dtype=torch.int64)
    jac = torch.func.jacrev(lambda w: F.embedding(ids, w))(weight)
    assert jac.shape == (0, 2, 3, 2)


@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=f"torch {TORCH}: _embedding_bag_backward has no batching rule, and the loop that "
    f"replaces it refuses a batch of size 0, so jacrev of F.embedding_bag with zero bags fails",
)
def test_torch_jacrev_of_zero_bags_fails() -> None:
    weight = torch.zeros(3, 2, dtype=torch.float64)
    ids = torch.zeros(0, 2, dtype=torch.int64)
    with torch_kernels_may_fall_back(F.embedding_bag):
        jac = torch.func.jacrev(lambda w: F.embedding_bag(ids, w, mode="sum"))(weight)
    assert jac.shape == (0, 2, 3, 2)


def test_torch_embedding_bag_has_no_forward_mode() -> None:
    """Why only the product form is checked in forward mode (remove when torch adds it)."""
    weight = torch.zeros(3, 2, dtype=torch.float64)
    ids, offsets = torch.tensor([0, 2]), torch.tensor([0])
    with pytest.raises(NotImplementedError, match="forward AD"):
        torch.func.jvp(lambda w: F.embedding_bag(ids, w, offsets), (weight,), (weight,))


def test_torch_embedding_bag_has_no_double_backward() -> None:
    """Why only the product form is checked for double backward (remove when torch adds it)."""
    weight = torch.zeros(3, 2, dtype=torch.float64, requires_grad=True)
    grad_output = torch.ones(1, 2, dtype=torch.float64, requires_grad=True)
    out = F.embedding_bag(torch.tensor([0, 2]), weight, torch.tensor([0]), mode="sum")
    (grad,) = torch.autograd.grad(out, weight, grad_output, create_graph=True)
    with pytest.raises(NotImplementedError, match="_embedding_bag_backward"):
        torch.autograd.grad(grad.sum(), grad_output)
