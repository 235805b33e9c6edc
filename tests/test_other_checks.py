"""The checks others use (``benchmarks/checks_elsewhere.py``) and what the Verify page reads.

The three reimplemented checks must reject a plainly wrong kernel and accept ``F.embedding``;
the right bfloat16 bag kernel must fail KernelBench's ``allclose`` on the benchmark's own
example while the derived bound accepts it; ``docs/other-checks.json`` must hold what the
page's table reads, consistently. The benchmark is imported from ``benchmarks/``, as
``python benchmarks/other_checks.py`` runs it. All tensors come from fixed seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from embedding_equivalence.testing import (
    assert_bag_backward_equivalent,
    assert_bag_forward_equivalent,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmark, as the script imports it

import checks_elsewhere as ce  # noqa: E402
import other_checks as oc  # noqa: E402

JSON = ROOT / "docs" / "other-checks.json"
SUM_PROBLEM = next(p for p in ce.KERNELBENCH_PROBLEMS if p.name == "EmbeddingBag_sum_offsets")
EMBEDDING_PROBLEM = next(p for p in ce.KERNELBENCH_PROBLEMS if p.kind == "embedding")


@pytest.fixture(scope="module", autouse=True)
def _engine_loaded() -> None:
    # The first check of a process loads what the package's engine imports lazily (torch's
    # compiler modules among them, about a second once per process): a set-up cost, not the
    # cost of the tests below.
    weight = torch.ones(2, 1)
    assert_bag_forward_equivalent(F.embedding_bag, torch.tensor([[0, 1]]), weight, mode="sum")


def shifted_by_one(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """Plainly wrong: every row read is the next one."""
    return F.embedding((input + 1) % weight.shape[0], weight, *args, **kwargs)


CASES = {
    "kernelbench": lambda fn: ce.kernelbench_case(fn, EMBEDDING_PROBLEM, torch.float32, 0),
    "liger": lambda fn: ce.liger_case(fn, 100, 64, None),
    "flaggems": lambda fn: ce.flaggems_embedding_case(fn, 1, True, torch.bfloat16),
    "assert_close": lambda fn: ce.assert_close_case(fn, "embedding", 0, torch.float32, None),
}


@pytest.mark.parametrize("check", list(CASES))
def test_each_check_passes_torch(check: str) -> None:
    CASES[check](F.embedding)


@pytest.mark.parametrize("check", list(CASES))
def test_each_check_flags_a_wrong_kernel(check: str) -> None:
    with pytest.raises(ce.CheckFailed):
        CASES[check](shifted_by_one)


def test_a_kernel_that_raises_is_flagged() -> None:
    def refuses(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("int64 ids only")

    with pytest.raises(ce.CheckFailed, match="raised NotImplementedError"):
        ce.assert_close_case(refuses, "embedding", 1, torch.float16, None)


def test_bfloat16_pairwise_bag_fails_allclose_and_passes_the_bound() -> None:
    inputs = ce.kernelbench_inputs(SUM_PROBLEM, torch.bfloat16, 0)
    ids, weight, offsets = inputs["input"], inputs["weight"], inputs["offsets"]
    out = oc.bag_summed_pairwise(ids, weight, offsets, mode="sum")
    reference = F.embedding_bag(ids, weight, offsets, mode="sum")
    assert not torch.allclose(reference, out, atol=1e-2, rtol=1e-2)
    with pytest.raises(ce.CheckFailed, match=r"allclose\(atol=rtol=0.01\) failed"):
        ce.kernelbench_case(oc.bag_summed_pairwise, SUM_PROBLEM, torch.bfloat16, 0)
    # The derived bound accepts it (KernelBench judges the output only).
    assert_bag_forward_equivalent(oc.bag_summed_pairwise, ids, weight, offsets, mode="sum")


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_pairwise_bag_gradient_is_within_the_bound(mode: str) -> None:
    g = torch.Generator().manual_seed(2)
    weight = torch.randn(50, 16, generator=g).to(torch.bfloat16)
    ids = torch.randint(0, 50, (37,), generator=g)
    offsets = torch.tensor([0, 5, 5, 30])  # an empty bag, a long one, a short last one
    grad_output = torch.randn(4, 16, generator=g).to(torch.bfloat16)
    assert_bag_backward_equivalent(
        oc.bag_summed_pairwise, ids, weight, offsets, grad_output, mode=mode
    )


def test_pairwise_bag_is_torch_where_it_delegates() -> None:
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(10, 3, generator=g)
    ids = torch.randint(0, 10, (2, 4), generator=g)
    for mode in ("max", "mean"):
        expected = F.embedding_bag(ids, weight, mode=mode, padding_idx=2)
        actual = oc.bag_summed_pairwise(ids, weight, mode=mode, padding_idx=2)
        torch.testing.assert_close(actual, expected)


# --------------------------------------------------------------------------------------------
# docs/other-checks.json: what the Verify page reads
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    if not JSON.exists():
        pytest.skip("no docs/other-checks.json: run benchmarks/other_checks.py --json")
    return json.loads(JSON.read_text(encoding="utf-8"))


def test_json_has_what_the_page_reads(data: dict[str, Any]) -> None:
    assert [c["key"] for c in data["checks"]] == list(oc.CHECKS)
    assert all(c["title"] for c in data["checks"])
    families = [f["key"] for f in data["families"]]
    assert families == [f for f in oc.FAMILIES if f in families]
    assert "right" in families
    assert isinstance(data["seeds"], int)
    assert set(data["versions"]) == {"torch", "hypothesis"}
    for family in families:
        counts = data["totals"][family]
        assert set(counts) == {"total", *oc.CHECKS}
        assert all(0 <= counts[c] <= counts["total"] for c in oc.CHECKS)


def test_json_totals_agree_with_the_kernels(data: dict[str, Any]) -> None:
    for family, counts in data["totals"].items():
        rows = [k for k in data["kernels"] if k["family"] == family]
        assert len(rows) == counts["total"]
        for check in oc.CHECKS:
            flagged = [k for k in rows if check in k["flagged_by"]]
            if family == "right":  # a defect the verifier names as torch's is no false alarm
                flagged = [k for k in flagged if not (check == "verify" and k["torch_defect"])]
            assert len(flagged) == counts[check], (family, check)


def test_json_has_no_machine_paths(data: dict[str, Any]) -> None:
    text = JSON.read_text(encoding="utf-8")
    assert str(ROOT) not in text
    assert "/home/" not in text
    assert "/tmp/" not in text
