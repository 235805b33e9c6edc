"""The Triton kernels of the docs and of the Real kernels page, compiled, on a GPU.

What Triton's interpreter cannot tell, checked where the kernels compile: the worked kernel
(``docs/_scripts/triton_kernels.py``) passes on CUDA, its one-block bug is caught there too, its
racy variant (a load and a store where an atomic belongs) fails there although it passes under
the interpreter, and Liger-Kernel's bfloat16 gradient, which the interpreter cannot run, is
judged. Each check prints one line (the report's first line, and its boundary or failure) and
the lines go to a JSON file. Liger is taken from its wheel when it is not installed. Usage, on
a machine with a GPU and without ``TRITON_INTERPRET``::

    PYTHONPATH=src:docs/_scripts python benchmarks/triton_cuda_check.py --out triton-cuda.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def _checks() -> list[tuple[str, Callable[[], Any]]]:
    import torch
    from triton_kernels import one_block_embedding, racy_embedding, triton_embedding

    import embedding_equivalence as ee

    cuda = ["cuda"]
    checks: list[tuple[str, Callable[[], Any]]] = []
    try:
        from liger_kernel.ops.experimental.embedding import LigerEmbeddingFunction
    except ImportError:
        LigerEmbeddingFunction = None

    def liger(input, weight):
        if input.numel() == 0:  # Liger fails on empty ids (the Real kernels page)
            return weight[input]
        return LigerEmbeddingFunction.apply(weight, input)

    if LigerEmbeddingFunction is not None:
        for dtype in (torch.bfloat16, torch.float32):
            checks.append((f"Liger, {dtype}", lambda dtype=dtype: ee.verify_embedding(
                liger, devices=cuda, dtypes=[dtype], max_examples=100, seed=0,
                boundaries=False)))  # fmt: skip
    checks += [
        ("racy variant", lambda: ee.verify_embedding(
            racy_embedding, devices=cuda, dtypes=[torch.float32], max_examples=20, seed=0)),
        ("one-block bug", lambda: ee.verify_embedding(
            one_block_embedding, devices=cuda, dtypes=[torch.float32], max_examples=1, seed=0)),
        ("worked kernel, every dtype, boundaries", lambda: ee.verify_embedding(
            triton_embedding, options=("padding_idx",), devices=cuda, seed=0)),
    ]  # fmt: skip
    return checks


def main() -> int:
    """Run the checks; print a line each and write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="triton-cuda.json")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("unset TRITON_INTERPRET: this check compiles the kernels")
    import torch
    import triton

    results: list[dict[str, Any]] = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    for name, check in _checks():
        start = time.perf_counter()
        try:
            report = check()
            lines = [str(report).splitlines()[0]]
            if not report.passed:
                lines += [report.boundary or "", (report.failure or "").splitlines()[0]]
        except Exception as exc:  # a check that cannot run says why
            lines = [f"{type(exc).__name__}: {exc}".splitlines()[0]]
        seconds = time.perf_counter() - start
        results.append({"check": name, "seconds": round(seconds, 1), "lines": lines})
        print(f"[{name}] {seconds:.1f} s", *lines, sep="\n  ", flush=True)
        found = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "triton": triton.__version__, "results": results}  # fmt: skip
        with open(args.out, "w", encoding="utf-8") as out:  # after each: a timeout keeps them
            json.dump(found, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
