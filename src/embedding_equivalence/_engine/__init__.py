"""The engine, the one driver, and the verifiers it runs.

One call checked against its oracle (``check.py``: the runner seam, the oracle seam, the
judge; ``compare.py``: the element-wise comparisons), the repro (``repro.py``, with
``names.py`` and ``script_source.py``), the boundary phase, compiled, transformed and Triton
candidates, torch's own defects and the interpreter's limits; a verifier's arguments
(``arguments.py``), the one driver (``driver.py``), the typed report and its renderer
(``report.py``), and ``verify_embedding`` and its siblings as descriptions (``verify.py``).
"""
