"""Seconds of a default ``verify_embedding`` of ``torch.compile(F.embedding)`` on the CPU.

The default backend (inductor) with an empty compile cache, so every graph is generated and
compiled as on a first run; one intra-op thread. Prints the time, how many examples ran
compiled and how many fell back to eager. The target is at most 60 s. Usage::

    python benchmarks/compiled_speed.py
"""

from __future__ import annotations

import os
import tempfile
import time


def main() -> None:
    """Print the figures."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # before torch compiles anything
        import torch
        import torch.nn.functional as F

        import embedding_equivalence as ee

        torch.set_num_threads(1)
        for options in [(), ("padding_idx", "max_norm", "scale_grad_by_freq")]:
            start = time.perf_counter()
            report = ee.verify_embedding(torch.compile(F.embedding), options=options, seed=0)
            seconds = time.perf_counter() - start
            print(
                f"options={list(options)}: {'PASSED' if report.passed else 'FAILED'} "
                f"{report.examples} examples in {seconds:.1f} s; "
                f"{report.compiled.examples if report.compiled else 0} ran compiled, "
                f"{report.compiled.eager_fallbacks if report.compiled else 0} fell back "
                f"({(report.compiled and report.compiled.fallback_reasons) or 'no fallback'})"
            )


if __name__ == "__main__":
    main()
