"""Hypothesis profiles, the suite's device rows and the fixtures the package's plugin lacks.

The device and dtype rows are the package's own pytest plugin's: a test names
``embedding_device_dtype`` (ids like ``cpu-float32``) or ``embedding_device`` (ids ``cpu``,
``cuda``), rows for the selected devices only (``EMBEDDING_TEST_DEVICES``, else those
present), and only the dtypes each device supports. Here: ``accelerator`` (each selected
device but the CPU), ``index_dtype``, the ``cuda`` mark on the CUDA rows, and the deselection
of what needs an unselected device.

Profiles (choose with ``HYPOTHESIS_PROFILE``; CI sets ``CI=true`` and gets ``ci``):

- ``dev``: the default on a workstation, randomized, 10 examples per property: the fast
  tier's small budget (a property costs its set-up more than its examples, and different
  examples on every run add up over a contributor's runs);
- ``ci``: derandomized (the same examples on every run, so CI never flakes), 40 examples;
- ``thorough``: 1,000 examples per property, for a nightly or pre-release run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

# One intra-op thread in every process the suite starts (ranks, launchers, CLI runs, reruns,
# repros), as in this process below: pytest-xdist already runs a worker per core, and a second
# OpenMP thread per process only spins against the other workers. (The package's pytest plugin
# has imported torch already, so this process gets its one thread from set_num_threads.)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch
from hypothesis import HealthCheck, settings

from embedding_equivalence.forms.dtypes import INDEX_DTYPES, dtype_name
from embedding_equivalence.pytest_plugin import DEVICES_ENV, session_devices
from forked import forked_ranks

# deadline=None everywhere: the first call of a torch kernel pays for lazy initialisation and
# dispatch caches, so per-example wall time says nothing about the property and a deadline
# would only produce flaky DeadlineExceeded errors.
settings.register_profile("dev", max_examples=10, deadline=None)
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


#: The plugin's parametrized fixtures, whose CUDA rows get the ``cuda`` mark.
PLUGIN_ROWS = ("embedding_device", "embedding_device_dtype")
_DESELECTED = pytest.StashKey[int]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``accelerator``: one row per selected device other than the CPU (ids ``cuda``, ``mps``).

    The plugin's ``embedding_device`` and ``embedding_device_dtype`` give the rows of the other
    devices; absent devices and MPS float64 produce no row at all.
    """
    accelerators = [d for d in session_devices(metafunc.config) if d != "cpu"]
    if "accelerator" in metafunc.fixturenames and accelerators:
        params = [
            pytest.param(d, id=d, marks=[pytest.mark.cuda] if d == "cuda" else [])
            for d in accelerators
        ]
        metafunc.parametrize("accelerator", params, indirect=True, scope="session")


def _on_cuda(item: pytest.Item) -> bool:
    """Whether ``item`` is a CUDA row of the plugin's device fixtures."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    rows = [params[name] for name in PLUGIN_ROWS if name in params]
    return any((row[0] if isinstance(row, tuple) else row) == "cuda" for row in rows)


#: The slow tier's modules whose tests take longest in all (process groups, launchers, reruns
#: in fresh processes), in that order. In the slow tier (``-m slow``) they are collected first:
#: pytest-xdist's ``loadscope`` hands a module to whichever worker is free, in collection
#: order, so the longest start first and the workers finish together instead of one running
#: the last long module alone.
LONGEST_FIRST = (
    "test_two_nodes.py",
    "test_distributed.py",
    "test_real_kernels.py",
    "test_keras.py",
    "test_compiled.py",
    "test_mutants.py",
    "test_sharded_size.py",
)


def _longest_first(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect what needs a device that is not selected, rather than collect skipped rows;
    in the slow tier, collect the modules of [`LONGEST_FIRST`][] first (a stable sort: each
    module keeps its order).

    Tests marked ``cuda`` run only when CUDA is selected (present, or demanded with
    ``EMBEDDING_TEST_DEVICES``, which fails the session when it is absent); tests of the
    ``accelerator`` fixture run only when a device besides the CPU is selected.
    """
    if config.option.markexpr.strip() == "slow":
        items.sort(key=_longest_first)
    devices = session_devices(config)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if _on_cuda(item):  # as the rows of an explicit @pytest.mark.cuda test are marked
            item.add_marker(pytest.mark.cuda)
        needs_cuda = item.get_closest_marker("cuda") is not None and "cuda" not in devices
        needs_accelerator = "accelerator" in getattr(item, "fixturenames", ()) and not any(
            device != "cpu" for device in devices
        )
        (dropped if needs_cuda or needs_accelerator else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    config.stash[_DESELECTED] = len(dropped)


def pytest_report_header(config: pytest.Config) -> list[str]:
    devices = session_devices(config)
    source = f"from {DEVICES_ENV}" if os.environ.get(DEVICES_ENV, "").strip() else "detected"
    return [f"embedding devices: {', '.join(devices)} ({source})"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = terminalreporter.config.stash.get(_DESELECTED, 0)
    if count:
        terminalreporter.write_line(
            f"embedding devices: {count} test(s) needing an unselected device were deselected "
            f"(selected: {', '.join(session_devices(terminalreporter.config))})"
        )


@pytest.fixture(autouse=True)
def _forked_ranks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Process groups fork their ranks from a warm server (``tests/forked.py``), but in
    the tests marked ``spawned_ranks``, which spawn fresh ones as the verifier does."""
    if request.node.get_closest_marker("spawned_ranks") is not None:
        yield
        return
    with forked_ranks():
        yield


@pytest.fixture(scope="session")
def accelerator(request: pytest.FixtureRequest) -> torch.device:
    """Each selected device other than the CPU; tests using it are deselected when none is."""
    return torch.device(request.param)


@pytest.fixture(params=INDEX_DTYPES, ids=dtype_name, scope="session")
def index_dtype(request: pytest.FixtureRequest) -> torch.dtype:
    """int64 and int32 ids, the two dtypes F.embedding accepts."""
    return request.param
