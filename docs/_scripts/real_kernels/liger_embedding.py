"""Liger-Kernel's Triton embedding (LigerEmbeddingFunction, LigerEmbedding), through
``verify_embedding``, on the CPU under Triton's interpreter (the entry's process sets
TRITON_INTERPRET=1 before Liger is imported)."""

from __future__ import annotations

from typing import Any

import torch
from liger_kernel.ops.experimental.embedding import LigerEmbeddingFunction
from liger_kernel.transformers.experimental.embedding import LigerEmbedding

from ._adapt import check_embedding_call, no_counterpart
from ._common import Probe, entry_result
from ._reports import Defect


def liger_embedding_function(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """F.embedding's signature, computed by LigerEmbeddingFunction (which takes no options)."""
    no_counterpart(
        "LigerEmbeddingFunction", padding_idx=padding_idx, max_norm=max_norm,
        scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
    )  # fmt: skip
    return LigerEmbeddingFunction.apply(weight, input)


def liger_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    """F.embedding's signature, computed by the module LigerEmbedding, with the drawn table as
    its weight (built on the meta device, so that its own random table is never made)."""
    no_counterpart(
        "LigerEmbedding", max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse,
    )  # fmt: skip
    with torch.device("meta"):
        module = LigerEmbedding(weight.shape[0], weight.shape[1], padding_idx=padding_idx)
    return torch.func.functional_call(module, {"weight": weight}, (input,))


# The same calls after the package's checks of the ids and options ("checked"), and with empty
# ids answered by the adapter, after the options it refuses (Liger fails on empty ids:
# "nonempty", checked; "unchecked_nonempty", bad input passed on to Liger).


def checked_liger_embedding_function(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    check_embedding_call("checked_liger_embedding_function", input, weight, padding_idx,
                         max_norm, norm_type)  # fmt: skip
    return liger_embedding_function(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def unchecked_nonempty_liger_embedding_function(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    if input.numel() == 0:
        no_counterpart(
            "LigerEmbeddingFunction", padding_idx=padding_idx, max_norm=max_norm,
            scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
        )  # fmt: skip
        return weight[input]
    return liger_embedding_function(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def nonempty_liger_embedding_function(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    check_embedding_call("nonempty_liger_embedding_function", input, weight, padding_idx,
                         max_norm, norm_type)  # fmt: skip
    return unchecked_nonempty_liger_embedding_function(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def checked_liger_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    check_embedding_call("checked_liger_embedding", input, weight, padding_idx, max_norm,
                         norm_type)  # fmt: skip
    return liger_embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def unchecked_nonempty_liger_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    if input.numel() == 0:
        no_counterpart(
            "LigerEmbedding", max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )  # fmt: skip
        return weight[input]
    return liger_embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def nonempty_liger_embedding(
    input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    sparse=False,
):  # fmt: skip
    check_embedding_call("nonempty_liger_embedding", input, weight, padding_idx, max_norm,
                         norm_type)  # fmt: skip
    return unchecked_nonempty_liger_embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")

#: The findings that are Liger's own (checked: not the interpreter's, not the adapter's).
DEFECTS = (
    # Empty ids: the output's view(*ids.shape, -1) cannot infer -1 from 0 elements.
    Defect("LigerEmbeddingFunction: as it is, defaults", "LigerEmbeddingFunction"),
    # No bounds check: an id past the table is read as a row (out of bounds).
    Defect(
        "LigerEmbeddingFunction: as it is (empty ids answered by the adapter), bad input "
        "included, on what passed",
        "LigerEmbeddingFunction",
    ),
    # padding_idx zeroes the output, where nn.Embedding returns the padding row as it is.
    Defect(
        "LigerEmbedding: padding_idx (input checked first, empty ids answered by the adapter)",
        "LigerEmbedding",
    ),
)


#: Every call's fixed arguments: random examples only. Under Triton's interpreter, which runs
#: one program at a time, the boundary phase (up to 2**17 ids, widths of 2**13) kept a single
#: passing call running for more than 5 minutes on the 2-core machine.
INTERPRETED = {"boundaries": False}
#: The page's note on it.
INTERPRETED_NOTE = (
    "every call runs random examples only (boundaries=False): Triton's interpreter runs one "
    "program at a time, and with the boundary phase (up to 2**17 ids, widths of 2**13) a single "
    "passing call ran for more than 5 minutes on the 2-core machine"
)


def verify() -> dict[str, Any]:
    """Probe LigerEmbeddingFunction, then LigerEmbedding; the entry's JSON."""
    records, notes = [], []
    for prefix, name in (("LigerEmbeddingFunction", "liger_embedding_function"),
                         ("LigerEmbedding", "liger_embedding")):  # fmt: skip
        probe = Probe(
            "verify_embedding",
            f"{__name__}:{name}",
            OPTIONS,
            checked=f"{__name__}:checked_{name}",
            workaround=f"{__name__}:nonempty_{name}",
            workaround_label="input checked first, empty ids answered by the adapter",
            unchecked_workaround=f"{__name__}:unchecked_nonempty_{name}",
            unchecked_label="empty ids answered by the adapter",
            prefix=prefix,
            fixed=INTERPRETED,
        )
        records += probe.run()
        notes += probe.notes
    return entry_result("liger_embedding", records, [INTERPRETED_NOTE, *notes], DEFECTS)
