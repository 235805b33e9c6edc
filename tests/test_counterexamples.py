"""The counterexample catalogue: where lookup and matmul stop being the same function.

Each test lets Hypothesis search for the documented break and asserts the minimal case it
shrinks to, so the docs can quote it. The searches are derandomized and read no database.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from hypothesis import find, settings
from hypothesis import strategies as st

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.testing import assert_case_equivalent, reference_embedding

# A search, not a property: derandomized so the minimal example is the same on every run.
SEARCH = settings(settings.default, database=None, derandomize=True, max_examples=2000)


def _forward_mismatch(case: ees.EmbeddingCase) -> bool:
    ids, weight = case.build(requires_grad=False)
    out = ee.matmul_embedding(ids, weight)
    expected, _ = reference_embedding(ids, weight)
    nan_both = out.isnan() & expected.isnan()
    return bool(((out.double() != expected) & ~nan_both).any())


def test_nonfinite_weight_poisons_other_rows() -> None:
    """0 * inf = nan: one inf in an unreferenced row turns the matmul's output into nan."""
    case = find(ees.embedding_cases(allow_nonfinite=True), _forward_mismatch, settings=SEARCH)
    # Minimal: two rows, one column, one id; the non-finite entry sits in the *other* row.
    assert (case.num_embeddings, case.embedding_dim, len(case.ids.values)) == (2, 1, 1)
    ((row, col, value),) = case.weight.specials
    assert row != case.ids.values[0]
    assert col == 0
    assert math.isinf(value) or math.isnan(value)
    ids, weight = case.build(requires_grad=False)
    assert ee.matmul_embedding(ids, weight).isnan().all()
    assert torch.equal(ee.lookup_embedding(ids, weight), weight[ids])  # the lookup is fine


def test_negative_zero_comes_back_positive() -> None:
    """1 * -0.0 summed with +0.0 products is +0.0: the matmul loses the sign of zero."""

    def sign_lost(case: ees.EmbeddingCase) -> bool:
        ids, weight = case.build(requires_grad=False)
        out = ee.matmul_embedding(ids, weight)
        looked_up = ee.lookup_embedding(ids, weight)
        return bool(((out == 0) & (out.signbit() != looked_up.signbit())).any())

    case = find(ees.embedding_cases(allow_signed_zeros=True), sign_lost, settings=SEARCH)
    # Minimal: a 1 x 1 table holding -0.0; even with V = 1 the GEMM returns +0.0.
    assert (case.num_embeddings, case.embedding_dim) == (1, 1)
    assert case.weight.specials == ((0, 0, -0.0),)
    ids, weight = case.build(requires_grad=False)
    assert ee.lookup_embedding(ids, weight).signbit().all()
    assert not ee.matmul_embedding(ids, weight).signbit().any()
    assert torch.equal(ee.matmul_embedding(ids, weight), ee.lookup_embedding(ids, weight))


def test_low_precision_gradients_differ_yet_stay_within_the_bound() -> None:
    """Duplicate ids: lookup and matmul round their sums differently; both obey the bound."""

    def grads_differ(case: ees.EmbeddingCase) -> bool:
        ids, w1 = case.build()
        _, w2 = case.build()
        g = case.grad_output()
        ee.lookup_embedding(ids, w1).backward(g)
        ee.matmul_embedding(ids, w2).backward(g)
        return not torch.equal(w1.grad, w2.grad)

    low = st.sampled_from([torch.float16, torch.bfloat16])
    case = find(ees.embedding_cases(dtype=low), grads_differ, settings=SEARCH)
    # Minimal: three copies of one id. Two terms are rounded once in any order; three are not:
    # the lookup adds in float16, the CPU GEMM accumulates in float32 and rounds once.
    assert case.ids.values == (0, 0, 0)
    assert (case.num_embeddings, case.embedding_dim) == (1, 1)
    assert_case_equivalent(ee.lookup_embedding, case)
    assert_case_equivalent(ee.matmul_embedding, case)


def test_out_of_range_ids_are_refused_on_cpu() -> None:
    """On the CPU both torch and this package raise IndexError (no clamping)."""
    weight = torch.zeros(4, 2)
    with pytest.raises(IndexError):
        F.embedding(torch.tensor([4]), weight)
    for form in (ee.lookup_embedding, ee.matmul_embedding, ee.sparse_matmul_embedding):
        with pytest.raises(IndexError, match=r"input\[0\] = 4 is out of range"):
            form(torch.tensor([4]), weight)


@pytest.mark.cuda
def test_tf32_rounds_the_matmul() -> None:
    """With TF32 on, the CUDA matmul rounds W to 10 mantissa bits; the lookup does not."""

    def tf32_differs(case: ees.EmbeddingCase) -> bool:
        ids, weight = case.build(requires_grad=False)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            out = ee.matmul_embedding(ids, weight)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        return not torch.equal(out, ee.lookup_embedding(ids, weight))

    cases = ees.embedding_cases(device="cuda", dtype=torch.float32)
    case = find(cases, tf32_differs, settings=SEARCH)
    assert case.embedding_dim >= 1
    ids, weight = case.build(requires_grad=False)
    assert torch.equal(ee.matmul_embedding(ids, weight), ee.lookup_embedding(ids, weight))


@pytest.mark.cuda
def test_out_of_range_ids_on_cuda_are_a_device_assert() -> None:
    """On CUDA, F.embedding with a bad id is a device-side assert that kills the context.

    Run in a subprocess; this package's forms refuse the id before any kernel runs.
    """
    code = textwrap.dedent(
        """
        import torch, torch.nn.functional as F
        out = F.embedding(torch.tensor([4], device="cuda"), torch.zeros(4, 2, device="cuda"))
        torch.cuda.synchronize()
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "assert" in proc.stderr.lower()
    with pytest.raises(IndexError, match="out of range"):
        ee.lookup_embedding(torch.tensor([4], device="cuda"), torch.zeros(4, 2, device="cuda"))


TORCH = torch.__version__


@pytest.mark.xfail(
    strict=True,
    raises=IndexError,
    reason=f"torch {TORCH}: the sparse backward of F.embedding with padding_idx fails on 0-d ids",
)
def test_torch_sparse_backward_with_padding_on_0d_ids() -> None:
    """Found by verify_embedding(F.embedding, options=("padding_idx", "sparse"))."""
    weight = torch.ones(3, 2, requires_grad=True)
    F.embedding(torch.tensor(1), weight, padding_idx=0, sparse=True).sum().backward()


@pytest.mark.xfail(
    strict=True,
    raises=RuntimeError,
    reason=f"torch {TORCH}: the double backward of F.embedding fails on empty ids",
)
def test_torch_double_backward_on_empty_ids() -> None:
    """Found by gradgradcheck over the strategies; lookup_embedding works around it."""
    weight = torch.ones(3, 2, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([], dtype=torch.int64)
    assert torch.autograd.gradgradcheck(lambda w: F.embedding(ids, w), (weight,))


def test_verify_embedding_finds_the_torch_sparse_bug() -> None:
    """The verifier finds the 0-d sparse padding bug in F.embedding."""
    options = ("padding_idx", "sparse")
    report = ee.verify_embedding(F.embedding, options=options, dtypes=[torch.float32], seed=0)
    assert not report.passed
    assert report.failure is not None
    assert "too many indices" in report.failure
    assert report.counterexample is not None
    assert ".reshape(())" in report.counterexample  # the shrunk input is 0-d


@pytest.mark.slow  # a whole run that passes: every boundary example with both options
def test_the_package_form_passes_where_torch_has_the_sparse_bug() -> None:
    ours = ee.verify_embedding(
        ee.lookup_embedding, options=("padding_idx", "sparse"), dtypes=[torch.float32],
        max_examples=40, seed=0,
    )  # fmt: skip
    assert ours.passed, str(ours)
