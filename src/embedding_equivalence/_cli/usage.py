"""What the command-line interfaces share: the usage error (exit status 2) and argument types.

The console script (``_cli.main``, ``_cli.sharded``) and the repository's benchmark
(``benchmarks/bench/cli.py``) use them, so that a bad command line reads the same in each.
The argument type [`int_at_least`][] lives in ``forms.validation``, below every layer that
parses a command line (the pytest plugin's option too); it is re-exported here.
"""

from __future__ import annotations

from ..forms.validation import (
    int_at_least,  # moved to forms.validation; the benchmark imports it here
)

__all__ = ["UsageError", "int_at_least"]


class UsageError(Exception):
    """A bad command line: reported in one line with exit status 2."""
