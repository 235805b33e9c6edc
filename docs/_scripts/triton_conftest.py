"""conftest.py of a project whose tests verify Triton kernels on the CPU."""

import os

# Triton's interpreter, for every test: pytest imports this file before the test modules,
# so the kernels they import are interpreted. A GPU job sets TRITON_INTERPRET=0 to compile them.
os.environ.setdefault("TRITON_INTERPRET", "1")
