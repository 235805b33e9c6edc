"""The page "Verify your own embedding": what its hidden blocks run (CI runs its demo early)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shared_results import shared

HERE = Path(__file__).resolve().parent
#: The pytest command of the plugin's demo, as the page shows it.
PYTEST_DEMO = ["pytest", "-v", "--no-header", "-rs", "--embedding-max-examples", "3",
               "test_my_kernels.py"]  # fmt: skip


def _run_the_tests() -> str:
    with tempfile.TemporaryDirectory() as project:  # a user's project, outside this repository
        for name in ("my_kernels.py", "test_my_kernels.py"):
            shutil.copy(HERE / name, project)
        run = subprocess.run(
            [sys.executable, "-m", *PYTEST_DEMO, "-p", "no:cacheprovider"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )
    return run.stdout


def pytest_plugin_demo() -> str:
    """``$ pytest ...`` and what it printed after its "collected" line, run in a fresh folder
    holding ``my_kernels.py`` and ``test_my_kernels.py``."""
    stdout = shared("verify-pytest-plugin", _run_the_tests)
    return (
        "$ "
        + " ".join(PYTEST_DEMO)
        + "\n"
        + stdout.split("collected", 1)[-1].split("\n", 1)[-1].rstrip()
    )
