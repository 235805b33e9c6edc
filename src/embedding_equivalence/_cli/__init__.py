"""The console script and what only it needs.

``verify`` and ``demo`` (``main.py``), the console's progress, tables and usage errors
(``console.py``, ``usage.py``), and the sharded runs it starts (``sharded.py``).
"""
