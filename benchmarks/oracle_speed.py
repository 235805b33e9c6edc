"""Seconds per check at large vocabularies: the engine and oracle on one call, V up to 262,144.

Times ``testing.assert_case_equivalent(lookup_embedding, case)`` (forward, renorm, gradient)
on fixed cases of 512 ids into tables of 32,768 and 262,144 rows of width 64, with and
without options, one thread, best of 5. Usage::

    python benchmarks/oracle_speed.py
"""

from __future__ import annotations

import time

import torch

import embedding_equivalence as ee
from embedding_equivalence.strategies import EmbeddingCase, IdsRecipe, WeightRecipe
from embedding_equivalence.testing import assert_case_equivalent


def _case(vocab: int, kwargs: dict[str, object]) -> EmbeddingCase:
    ids = torch.randint(0, vocab, (512,), generator=torch.Generator().manual_seed(1)).tolist()
    return EmbeddingCase(
        ids=IdsRecipe(tuple(ids), (16, 32)),
        weight=WeightRecipe(vocab, 64, torch.float32, "cpu", seed=2),
        kwargs=kwargs,
        grad_seed=3,
    )


def main() -> None:
    """Print the table."""
    torch.set_num_threads(1)
    options: dict[str, dict[str, object]] = {
        "no options": {},
        "padding_idx, max_norm, scale_grad_by_freq": {
            "padding_idx": 0,
            "max_norm": 1.0,
            "scale_grad_by_freq": True,
        },
    }
    print(f"{'V':>8s}  {'options':42s} {'ms per check':>12s}")
    for vocab in (32_768, 262_144):
        for label, kwargs in options.items():
            case = _case(vocab, kwargs)
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                assert_case_equivalent(ee.lookup_embedding, case)
                best = min(best, time.perf_counter() - start)
            print(f"{vocab:8d}  {label:42s} {1e3 * best:12.1f}")


if __name__ == "__main__":
    main()
