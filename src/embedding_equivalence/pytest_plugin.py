"""A pytest plugin, installed with the package (``pytest11`` entry point).

It gives your own test suite, with no configuration:

- ``embedding_device_dtype``: parametrizes a test over every ``(device, dtype)`` pair, with
  ids like ``cpu-float16``; devices that are absent (``cuda``, ``mps``) are skipped with a
  reason rather than silently passed;
- ``embedding_device``: parametrizes over ``cpu``, ``cuda`` and ``mps`` the same way;
- ``embedding_max_examples``: the example budget from ``--embedding-max-examples`` (default
  100), to pass to :func:`~embedding_equivalence.verify_embedding` or to ``settings``.

Example:
    ```python
    import embedding_equivalence as ee

    def test_my_kernel(embedding_device_dtype, embedding_max_examples):
        device, dtype = embedding_device_dtype
        report = ee.verify_embedding(
            my_embedding, dtypes=[dtype], devices=[device], max_examples=embedding_max_examples
        )
        report.raise_for_failure()
    ```
"""

from __future__ import annotations

import pytest
import torch

from .strategies import available_devices, supported_float_dtypes

__all__ = ["DEVICE_KINDS", "pytest_addoption", "pytest_generate_tests"]

#: Every device kind the fixtures know; absent ones are skipped with a reason.
DEVICE_KINDS = ("cpu", "cuda", "mps")
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--embedding-max-examples``."""
    group = parser.getgroup("embedding-equivalence")
    group.addoption(
        "--embedding-max-examples",
        type=int,
        default=100,
        help="example budget for embedding verification (fixture embedding_max_examples)",
    )


def _skip_mark(device: str) -> list[pytest.MarkDecorator]:
    if device in available_devices():
        return []
    return [pytest.mark.skip(reason=f"no {device.upper()} device on this machine")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the ``embedding_device`` and ``embedding_device_dtype`` fixtures."""
    if "embedding_device_dtype" in metafunc.fixturenames:
        params = []
        for device in DEVICE_KINDS:
            supported = supported_float_dtypes(device)
            for dtype in _DTYPES:
                if dtype not in supported:
                    continue
                name = str(dtype).removeprefix("torch.")
                params.append(
                    pytest.param((device, dtype), id=f"{device}-{name}", marks=_skip_mark(device))
                )
        metafunc.parametrize("embedding_device_dtype", params)
    if "embedding_device" in metafunc.fixturenames:
        params = [pytest.param(d, id=d, marks=_skip_mark(d)) for d in DEVICE_KINDS]
        metafunc.parametrize("embedding_device", params)


@pytest.fixture
def embedding_max_examples(request: pytest.FixtureRequest) -> int:
    """The example budget given by ``--embedding-max-examples`` (default 100)."""
    value = int(request.config.getoption("--embedding-max-examples", default=100) or 0)
    if value < 1:
        raise pytest.UsageError(f"--embedding-max-examples={value} must be at least 1")
    return value
