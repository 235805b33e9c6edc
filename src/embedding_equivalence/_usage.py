"""The error that the command-line interfaces share: a bad command line, exit status 2.

``cli`` (``verify``, ``demo``) and ``bench.cli`` both raise it; neither imports the other for
it, so the two stay free of an import circle.
"""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """A bad command line: reported in one line with exit status 2."""
