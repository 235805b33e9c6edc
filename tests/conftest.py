"""Hypothesis profiles and the device/dtype fixtures shared by the whole suite.

Profiles (choose with ``HYPOTHESIS_PROFILE``; CI sets ``CI=true`` and gets ``ci``):

- ``dev``: the default on a workstation, randomized, 50 examples per property;
- ``ci``: derandomized (the same examples on every run, so CI never flakes), 40 examples;
- ``thorough``: 1,000 examples per property, for a nightly or pre-release run.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

# deadline=None everywhere: the first call of a torch kernel pays for lazy initialisation and
# dispatch caches, so per-example wall time says nothing about the property and a deadline
# would only produce flaky DeadlineExceeded errors.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    # Building tensors for V up to 262,144 makes some draws slow on a 2-core machine; that is
    # the cost of the property, not a defect of the strategy.
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# The suite's tensors are small: a second intra-op thread only adds contention on a busy
# 2-core machine (a verification ran 6x slower with two threads than with one).
torch.set_num_threads(1)


def _device_params() -> list[object]:
    cuda = torch.cuda.is_available()
    mps = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    return [
        pytest.param("cpu", id="cpu"),
        pytest.param(
            "cuda",
            id="cuda",
            marks=[pytest.mark.cuda, pytest.mark.skipif(not cuda, reason="no CUDA device")],
        ),
        pytest.param("mps", id="mps", marks=pytest.mark.skipif(not mps, reason="no MPS device")),
    ]


FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INDEX_DTYPES = [torch.int64, torch.int32]


@pytest.fixture(params=_device_params(), scope="session")
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device kind; absent ones are skipped with a reason."""
    return torch.device(request.param)


@pytest.fixture(params=FLOAT_DTYPES, ids=lambda d: str(d).removeprefix("torch."), scope="session")
def float_dtype(request: pytest.FixtureRequest, device: torch.device) -> torch.dtype:
    """Every floating dtype the device supports (MPS has no float64)."""
    if device.type == "mps" and request.param == torch.float64:
        pytest.skip("MPS has no float64")
    return request.param


@pytest.fixture(params=INDEX_DTYPES, ids=lambda d: str(d).removeprefix("torch."), scope="session")
def index_dtype(request: pytest.FixtureRequest) -> torch.dtype:
    """int64 and int32 ids, the two dtypes F.embedding accepts."""
    return request.param
