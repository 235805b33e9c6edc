"""What the command-line interfaces share: the usage error (exit status 2) and argument types.

The console script (``_cli.main``, ``_cli.sharded``), the pytest plugin's
``--embedding-max-examples`` and the repository's benchmark (``benchmarks/bench/cli.py``) use
them, so that a bad command line reads the same in each.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


class UsageError(Exception):
    """A bad command line: reported in one line with exit status 2."""


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer (``1_000`` allowed) no smaller than ``minimum``.

    The command lines' (``_cli``, the benchmark) and the pytest plugin's
    ``--embedding-max-examples``: a bad value reads the same in each.

    Args:
        minimum: the smallest value accepted.

    Returns:
        The parser, which raises ``argparse.ArgumentTypeError`` naming the value.
    """

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at least {minimum}")
        return n

    return parse


def csv_list(value: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [v.strip() for v in value.split(",") if v.strip()]
