"""A pytest plugin, installed with the package (``pytest11`` entry point).

It gives your own test suite, with no configuration:

- ``embedding_device_dtype``: parametrizes a test over every ``(device, dtype)`` pair of the
  selected devices, with ids like ``cpu-float16``; only dtypes the device supports are
  generated (no ``float64`` on MPS);
- ``embedding_device``: parametrizes over the selected devices (ids ``cpu``, ``cuda``, ``mps``);
- ``embedding_max_examples``: the example budget from ``--embedding-max-examples`` (default
  100), to pass to [`verify_embedding`][embedding_equivalence.verify_embedding] or to ``settings``;
- ``embedding_verify``: the recommended pattern, a verifier for each row of a test: a
  ``cpu-boundaries`` row per device runs the boundary phase once for every dtype of the device
  (the dtypes take turns along its axes), and a ``cpu-float32`` row per device and dtype runs
  that dtype's random examples without repeating the phase; ``dtypes=`` narrows both to the
  dtypes a kernel supports. The boundary phase costs as much
  as the random examples of all dtypes together, so the same rows built with
  ``embedding_device_dtype`` and ``verify_embedding(..., dtypes=[dtype])`` pay for it once per
  dtype (``benchmarks/plugin_cost.py`` prints both).

Which devices: by default, those present on the machine
([`available_devices`][embedding_equivalence.strategies.available_devices]), so a CPU-only machine
gets CPU rows only, never rows skipped for an absent GPU. The environment variable
``EMBEDDING_TEST_DEVICES`` (comma-separated device kinds, e.g. ``cpu,cuda``) overrides the
detection: the listed devices are exactly the rows generated, and a listed device that is not
present (or a name that is not a device kind) fails the session with a usage error that names
it, so a GPU run can demand its GPU instead of passing on the CPU alone:

```
EMBEDDING_TEST_DEVICES=cpu,cuda python -m pytest
```

Examples:
    ```python
    def test_my_kernel(embedding_verify):
        embedding_verify(my_embedding, options=["padding_idx"])  # raises on a failure
    ```

    The same rows by hand (each row runs the boundary phase in its dtype):

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

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ._cli.usage import int_at_least
from ._draw.tensors import available_devices, float_dtypes, supported_float_dtypes
from ._engine.arguments import DEFAULT_MAX_EXAMPLES, phase_rows

if TYPE_CHECKING:
    import torch

    from ._engine.report import VerificationReport
from .forms.dtypes import dtype_name

__all__ = [
    "DEVICES_ENV",
    "DEVICE_KINDS",
    "pytest_addoption",
    "pytest_configure",
    "pytest_generate_tests",
    "selected_devices",
    "session_devices",
]

#: Every device kind the fixtures know, in the order their rows are generated.
DEVICE_KINDS = ("cpu", "cuda", "mps")
#: The environment variable that overrides device detection (comma-separated device kinds).
DEVICES_ENV = "EMBEDDING_TEST_DEVICES"
_SELECTED = pytest.StashKey[list[str]]()


def selected_devices(environ: Mapping[str, str] | None = None) -> list[str]:
    """The device kinds to generate test rows for, in [`DEVICE_KINDS`][] order.

    Without ``EMBEDDING_TEST_DEVICES`` (or with it empty), the devices present on this machine.
    With it, exactly the listed device kinds (comma-separated, case and spaces ignored), each
    of which must be present.

    Args:
        environ: where to read the variable; `os.environ` by default.

    Returns:
        A non-empty list of device kinds, such as ``["cpu"]`` or ``["cpu", "cuda"]``.

    Raises:
        pytest.UsageError: the variable names an unknown device kind, no device at all, or a
            device that is not present on this machine (the message names it and what is).
    """
    raw = (os.environ if environ is None else environ).get(DEVICES_ENV, "")
    present = available_devices()
    if not raw.strip():
        return present
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in DEVICE_KINDS]
    if unknown or not names:
        what = f"unknown device kind {', '.join(map(repr, unknown))}" if unknown else "no device"
        raise pytest.UsageError(
            f"{DEVICES_ENV}={raw!r} names {what}; known device kinds: {', '.join(DEVICE_KINDS)}"
        )
    if absent := [kind for kind in DEVICE_KINDS if kind in names and kind not in present]:
        raise pytest.UsageError(
            f"{DEVICES_ENV}={raw!r} demands {', '.join(absent)}, which "
            f"{'is' if len(absent) == 1 else 'are'} not present on this machine "
            f"(present: {', '.join(present)})"
        )
    return [kind for kind in DEVICE_KINDS if kind in names]


def session_devices(config: pytest.Config) -> list[str]:
    """[`selected_devices`][] for this session, computed once and kept on ``config``."""
    if _SELECTED not in config.stash:
        config.stash[_SELECTED] = selected_devices()
    return config.stash[_SELECTED]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--embedding-max-examples``."""
    group = parser.getgroup("embedding-equivalence")
    group.addoption(
        "--embedding-max-examples",
        type=int_at_least(1),  # refused on the command line, before any test is collected
        default=DEFAULT_MAX_EXAMPLES,
        help="example budget for embedding verification (fixture embedding_max_examples)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Read ``EMBEDDING_TEST_DEVICES`` once: a bad or unsatisfiable value fails the session."""
    session_devices(config)


def _rows(devices: list[str], max_examples: int) -> list[Any]:
    """Per device, its boundary row, then a row per dtype ([`phase_rows`][]), with their ids.

    A row is ``(device, dtypes, boundaries, max_examples)``; its id ``cpu-boundaries`` (every
    dtype of the device) or ``cpu-float32``.

    [`phase_rows`]: embedding_equivalence._engine.arguments.phase_rows
    """
    return [
        pytest.param(
            (device, dtypes, boundaries, budget),
            id=f"{device}-{dtype_name(dtypes[0]) if len(dtypes) == 1 else 'boundaries'}",
        )
        for device in devices
        for dtypes, boundaries, budget in phase_rows(
            supported_float_dtypes(device), True, max_examples
        )
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``embedding_device``, ``embedding_device_dtype`` and ``embedding_verify``."""
    names, devices = metafunc.fixturenames, session_devices(metafunc.config)
    if "embedding_verify" in names:
        rows = _rows(devices, _budget(metafunc.config))
        metafunc.parametrize("embedding_verify", rows, indirect=True)
    if "embedding_device_dtype" in names:
        params = [
            pytest.param((device, dtype), id=f"{device}-{dtype_name(dtype)}")
            for device in devices
            for dtype in supported_float_dtypes(device)
        ]
        metafunc.parametrize("embedding_device_dtype", params)
    if "embedding_device" in names:
        metafunc.parametrize("embedding_device", [pytest.param(d, id=d) for d in devices])


def _budget(config: pytest.Config) -> int:
    value = config.getoption("--embedding-max-examples", default=DEFAULT_MAX_EXAMPLES)
    assert isinstance(value, int)  # the option's type checked it when the command was parsed
    return value


@pytest.fixture
def embedding_max_examples(request: pytest.FixtureRequest) -> int:
    """The example budget given by ``--embedding-max-examples`` (default 100)."""
    return _budget(request.config)


@pytest.fixture
def embedding_verify(request: pytest.FixtureRequest) -> Callable[..., VerificationReport]:
    """A verifier for this row; it raises ``EquivalenceError`` on a failure.

    Call it as ``embedding_verify(candidate, verifier=ee.verify_embedding, dtypes=None,
    **kwargs)``: ``verifier`` is [`verify_embedding`][embedding_equivalence.verify_embedding]
    (the default), [`verify_embedding_bag`][embedding_equivalence.verify_embedding_bag] or
    [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding], and
    ``kwargs`` go to it (``options``, ``seed``, the sizes, ...). ``dtypes`` names the dtypes
    your kernel supports, as dtypes or their names, as the verifiers take them (default: every
    dtype of the device): the boundary row runs those of them that the device has, and a
    dtype's row outside them is skipped, with that reason. The row sets ``devices``,
    ``boundaries`` and ``max_examples`` (``--embedding-max-examples`` for a dtype's row, one
    random example for the boundary row). Returns the passing report.
    """
    from hypothesis.errors import InvalidArgument

    from ._engine.verify import verify_embedding  # here: a session without the fixture is light

    device, row_dtypes, boundaries, max_examples = request.param

    def verify(
        candidate: Callable[..., Any],
        verifier: Callable[..., VerificationReport] = verify_embedding,
        *,
        dtypes: Sequence[torch.dtype | str] | None = None,
        **kwargs: Any,
    ) -> VerificationReport:
        __tracebackhide__ = True  # a skip or a failure is reported at the test's own line
        if owned := sorted(set(kwargs) & {"devices", "boundaries", "max_examples"}):
            raise InvalidArgument(
                f"embedding_verify sets {', '.join(owned)} for its row; call "
                f"{getattr(verifier, '__name__', 'the verifier')}(...) directly to choose them"
            )
        # dtypes read as the verifiers read them: dtypes or their names.
        named = row_dtypes if dtypes is None else float_dtypes(dtypes, "dtypes")
        if not (chosen := tuple(d for d in row_dtypes if d in named)):
            pytest.skip(
                f"{dtype_name(row_dtypes[0])} is not among the dtypes this test names "
                f"({', '.join(map(dtype_name, named))})"
            )
        report = verifier(
            candidate, dtypes=chosen, devices=[device], boundaries=boundaries,
            max_examples=max_examples, **kwargs,
        )  # fmt: skip
        report.raise_for_failure()
        return report

    return verify
