"""torchao's int8 embedding, through the quantized verifier and verify_torchao_embedding.

torchao quantizes an ``nn.Embedding`` in place (``quantize_`` with
``IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))``): one scale and int8
zero point per row. Its lookup dequantizes the table and calls ``F.embedding``. The adapter,
``torchao_interop.torchao_int8_embedding`` (beside this module), wraps any ``"int8"`` table in
torchao's tensor, so ``verify_quantized_embedding`` checks torchao's lookup on the verifier's
own tables; ``verify_torchao_embedding`` quantizes drawn float tables with torchao and checks
what it stored (each element within half a step of the float one) and its lookup of that.
"""

from __future__ import annotations

from typing import Any

from . import torchao_interop
from ._common import Run, entry_result, execute

ADAPTER = "real_kernels.torchao_interop:torchao_int8_embedding"


def verify_torchao_embedding(candidate: Any, **kwargs: Any) -> Any:
    """``torchao_interop.verify_torchao_embedding`` (its candidate is always the adapter)."""
    assert candidate is torchao_interop.torchao_int8_embedding
    return torchao_interop.verify_torchao_embedding(**kwargs)


def verify() -> dict[str, Any]:
    """Run the calls; the entry's JSON."""
    lookup = {"scheme": "int8", "max_examples": 100, "seed": 0}
    runs = [
        Run("its lookup, affine int8 tables", "verify_quantized_embedding", ADAPTER, lookup),
        Run(
            "its lookup, symmetric int8 tables", "verify_quantized_embedding", ADAPTER,
            {**lookup, "symmetric": True},
        ),
    ]  # fmt: skip
    for dtype in ("float32", "float16", "bfloat16"):
        runs.append(
            Run(
                f"its quantizer and lookup, {dtype} tables, D >= 2",
                "verify_torchao_embedding",
                ADAPTER,
                {"dtypes": [dtype], "dims": [2, 16], "max_examples": 100, "seed": 0},
            )
        )
    runs.append(
        Run(
            "its quantizer, float32 tables of one column",
            "verify_torchao_embedding",
            ADAPTER,
            {"dtypes": ["float32"], "dims": [1, 1], "max_examples": 20, "seed": 0},
        )
    )
    return entry_result("torchao_int8", [execute(r) for r in runs])
