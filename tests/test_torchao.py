"""torchao's int8 embedding through its adapter, ``real_kernels.torchao_interop`` (docs/_scripts).

Runs where torchao is installed (the ``quant`` extra; CI installs it). The lookup is checked
on the verifier's own drawn tables (``verify_quantized_embedding`` of torchao's kernel) and on
the tables torchao's quantizer makes (``verify_torchao_embedding``). What the run finds about
torchao's quantizer is asserted as a report, whatever the installed version does: either the
property holds, or the report names the element and the bound it broke.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence._engine.check import EquivalenceError

if importlib.util.find_spec("torchao") is None:
    pytest.skip("torchao is not installed (the quant extra)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' package real_kernels


@pytest.fixture(scope="module")
def eta() -> ModuleType:
    """The adapter ``real_kernels.torchao_interop``, imported by the tests that use it.

    Every pytest-xdist worker collects this module, and importing torchao takes seconds: only
    the worker that runs these tests pays for it.
    """
    return importlib.import_module("real_kernels.torchao_interop")


@pytest.mark.parametrize(
    "symmetric", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["affine", "symmetric"]
)
def test_torchaos_lookup_is_the_exact_dequantization(symmetric: bool, eta: ModuleType) -> None:
    report = ee.verify_quantized_embedding(
        eta.torchao_int8_embedding, scheme="int8", symmetric=symmetric, max_examples=60, seed=0
    )
    assert report.passed, str(report)


def test_the_lookup_of_what_torchao_stores_from_float32_tables(eta: ModuleType) -> None:
    report = eta.verify_torchao_embedding(dims=(2, 16), dtypes=(torch.float32,), seed=0)
    assert report.passed, str(report)
    assert report.quantized is not None
    assert report.quantized.scheme == "int8"
    assert (report.quantized.source or "").startswith("torchao ")
    assert report.worst_error > 0  # the lookup was judged, not skipped


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_narrow_tables_are_quantized_within_half_a_step_or_reported(
    dtype: torch.dtype, eta: ModuleType
) -> None:
    report = eta.verify_torchao_embedding(dims=(2, 16), dtypes=(dtype,), seed=0)
    if not report.passed:
        assert report.failure is not None
        assert re.match(
            r"torchao's quantizer stored weight\[\d+, \d+\] = .* above the bound", report.failure
        ), report.failure
        assert report.counterexample is not None
        assert "eta.quantize_with_torchao(weight)" in report.counterexample


def test_a_table_torchao_cannot_quantize_is_reported_with_a_repro(eta: ModuleType) -> None:
    report = eta.verify_torchao_embedding(
        dims=(1, 1), dtypes=(torch.float32,), max_examples=20, seed=0
    )
    if not report.passed:  # torchao 0.18's quantize_ fails on D = 1
        assert report.failure is not None
        assert report.failure.startswith("torchao's quantize_ raised"), report.failure
        namespace: dict[str, object] = {}
        with pytest.raises(RuntimeError):
            exec(report.counterexample or "", namespace)


def test_the_quantizer_check_catches_a_value_one_step_off(eta: ModuleType) -> None:
    weight = torch.tensor([[0.0, 1.0, -2.0, 0.5]])
    table = ee.quantize_rowwise(weight, "int8")
    eta_check = eta._check_quantization
    eta_check(weight, table, "repro")  # the reference quantizer passes
    off = table.qweight.clone()
    off[0, 1] += 1
    with pytest.raises(EquivalenceError, match=r"stored weight\[0, 1\] = 1\.0"):
        eta_check(weight, table._replace(qweight=off), "repro")


def test_unpacking_refuses_what_is_not_a_per_row_torchao_tensor(eta: ModuleType) -> None:
    with pytest.raises(TypeError, match="expected torchao's IntxUnpackedToInt8Tensor"):
        eta.unpack_torchao_weight(torch.zeros(2, 2))
    table = eta.unpack_torchao_weight(eta.quantize_with_torchao(torch.randn(3, 4)).weight)
    assert table.zero_point is not None
    assert table.zero_point.dtype == torch.int32
    assert tuple(table.scale.shape) == (3,)


def test_strategy_of_the_scheme_is_the_one_the_adapter_takes() -> None:
    assert "int8" in ee.SCHEMES
    assert ees.QUANTIZED_SCALE_DTYPES[0] == torch.float32
