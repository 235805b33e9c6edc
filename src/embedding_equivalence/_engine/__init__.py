"""The engine and the verifiers over it.

One call checked against its oracle (``check.py``: the runner seam, the oracle seam, the
judge), the repro (``repro.py``), the boundary phase, compiled, transformed and Triton
candidates, torch's own defects and the interpreter's limits, and ``verify_embedding`` and
its siblings (``verify.py``).
"""
