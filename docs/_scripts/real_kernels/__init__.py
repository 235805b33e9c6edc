"""Real kernels, verified: the libraries people use, run through this package's verifiers.

One module per entry, each with the adapter (a module-level function with ``F.embedding``'s or
``F.embedding_bag``'s signature, so that the sharded verifier's workers can import it by name)
and ``verify()``, which probes the library with the verifiers and returns the JSON-able result
that ``docs/real-kernels.json`` holds and ``docs/real-kernels.md`` renders. ``generate.py`` runs
every entry whose library is importable; ``page.py`` renders the JSON at build time.

This module imports no library: the page, the generator and the tests read ``ENTRIES`` without
them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENTRIES", "Entry", "entry"]


@dataclass(frozen=True)
class Entry:
    """One library on the page.

    Attributes:
        id: the module's name in this package, and the entry's key in the JSON.
        title: the heading on the page.
        requires: the module that must import for the entry to run (the tests skip the entry
            when its top-level package is not installed).
        distributions: the pip distributions whose versions produced the result.
        env: environment variables of the entry's process, set before its library is
            imported (``TRITON_INTERPRET=1``: Triton kernels on the CPU).
        runs_on_cpu: ``False`` for a library that does not start without a GPU: on the CPU
            the generator records why it does not import, and the page shows that.
    """

    id: str
    title: str
    requires: str
    distributions: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    runs_on_cpu: bool = True


ENTRIES: tuple[Entry, ...] = (
    Entry(
        "compile_inductor",
        "torch.compile (inductor, CPU) of F.embedding",
        "torch._inductor",
        ("torch",),
    ),
    Entry(
        "fbgemm_tbe",
        "fbgemm-gpu-cpu: DenseTableBatchedEmbeddingBagsCodegen",
        "fbgemm_gpu",
        ("fbgemm-gpu-cpu", "torch"),
    ),
    Entry(
        "torchrec_ebc",
        "torchrec: EmbeddingBagCollection",
        "torchrec",
        ("torchrec", "fbgemm-gpu-cpu", "torch"),
    ),
    Entry(
        "dtensor_embedding",
        "torch DTensor: F.embedding on a sharded table",
        "torch.distributed.tensor",
        ("torch",),
    ),
    Entry(
        "torchao_int8",
        "torchao: int8 embedding (IntxWeightOnlyConfig, one scale per row)",
        "torchao.quantization",
        ("torchao", "torch"),
    ),
    Entry(
        "megatron_vocab_parallel",
        "Megatron-core: VocabParallelEmbedding",
        "megatron.core",
        ("megatron-core", "torch"),
    ),
    Entry(
        "liger_embedding",
        "Liger-Kernel: LigerEmbeddingFunction and LigerEmbedding (Triton)",
        "liger_kernel.ops.experimental.embedding",
        ("liger-kernel", "triton", "torch"),
        env=(("TRITON_INTERPRET", "1"),),
    ),
    Entry(
        "sparsify_embedding_bag",
        "eai-sparsify: xformers_embedding_bag (Triton)",
        "sparsify.xformers",
        ("eai-sparsify", "triton", "torch"),
        env=(("TRITON_INTERPRET", "1"),),
    ),
    Entry(
        "flaggems_embedding",
        "FlagGems: embedding (Triton)",
        "flag_gems",
        ("flag-gems", "triton", "torch"),
        runs_on_cpu=False,
    ),
)


def entry(entry_id: str) -> Entry:
    """The entry named ``entry_id``."""
    for e in ENTRIES:
        if e.id == entry_id:
            return e
    raise KeyError(f"no entry {entry_id!r}; entries: {[e.id for e in ENTRIES]}")
