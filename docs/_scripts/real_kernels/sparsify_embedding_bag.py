"""eai-sparsify's Triton embedding bag (``sparsify.xformers.xformers_embedding_bag``, from
xformers), through ``verify_embedding_bag``, on the CPU under Triton's interpreter (the entry's
process sets TRITON_INTERPRET=1 before sparsify is imported)."""

from __future__ import annotations

import itertools
from typing import Any

import torch
from sparsify.xformers import xformers_embedding_bag

from ._adapt import check_bag_call, no_counterpart, offsets_with_end
from ._common import Probe, Run, entry_result, execute
from ._reports import Defect


def _fixed_size_bags(input, offsets, include_last_offset, per_sample_weights, dtype):
    """The bags as xformers_embedding_bag takes them: ``(B, L)`` ids and ``(B, L)`` weights.

    A 2-D input is that already (weights of 1 without ``per_sample_weights``); bags of a 1-D
    input of different lengths are filled up to the longest with id 0 at weight 0.
    """
    weights = per_sample_weights
    if input.dim() == 2:
        if weights is None:
            weights = torch.ones(input.shape, dtype=dtype, device=input.device)
        return input, weights
    ids, ends = offsets_with_end(input, offsets, include_last_offset)
    bounds = ends.tolist()
    bags = len(bounds) - 1
    longest = max((b - a for a, b in itertools.pairwise(bounds)), default=0)
    fixed = input.new_zeros((bags, longest))
    fixed_weights = torch.zeros((bags, longest), dtype=dtype, device=input.device)
    for bag, (a, b) in enumerate(itertools.pairwise(bounds)):
        fixed[bag, : b - a] = ids[a:b]
        fixed_weights[bag, : b - a] = 1 if weights is None else weights[a:b]
    return fixed, fixed_weights


def sparsify_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """F.embedding_bag's signature, computed by xformers_embedding_bag, which sums bags of
    one length with a weight per id."""
    no_counterpart(
        "xformers_embedding_bag", max_norm=max_norm, scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse, padding_idx=padding_idx,
    )  # fmt: skip
    if mode != "sum":
        raise NotImplementedError(f"xformers_embedding_bag sums: it has no mode={mode!r}")
    ids, weights = _fixed_size_bags(
        input, offsets, include_last_offset, per_sample_weights, weight.dtype
    )
    return xformers_embedding_bag(ids, weight, weights)


def checked_sparsify_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The same call, after the package's checks of the ids, offsets and options."""
    check_bag_call(
        "checked_sparsify_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return sparsify_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


def _rows_of_8(weight, contiguous):
    """The table with zero rows appended up to a multiple of 8 rows (the backward fails on
    other tables; the extra rows are never looked up), made contiguous if asked."""
    extra = -weight.shape[0] % 8
    if extra:
        return torch.cat([weight, weight.new_zeros((extra, weight.shape[1]))])
    return weight.contiguous() if contiguous else weight


def rows8_sparsify_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The checked call, on the table padded to a multiple of 8 rows, in its layout."""
    check_bag_call(
        "rows8_sparsify_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return sparsify_embedding_bag(
        input, _rows_of_8(weight, False), offsets, max_norm, norm_type, scale_grad_by_freq,
        mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


def unchecked_answered_sparsify_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The call as it is, on the table padded to a multiple of 8 rows, with the table, the
    ids and the weights made contiguous (the probe found wrong sums for other layouts)."""
    if per_sample_weights is not None:
        per_sample_weights = per_sample_weights.contiguous()
    return sparsify_embedding_bag(
        input.contiguous(), _rows_of_8(weight, True), offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


def answered_sparsify_embedding_bag(
    input, weight, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
    padding_idx=None,
):  # fmt: skip
    """The checked call, on the table padded to a multiple of 8 rows, all made contiguous."""
    check_bag_call(
        "answered_sparsify_embedding_bag", input, weight, offsets, max_norm, norm_type,
        scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return unchecked_answered_sparsify_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip


OPTIONS = (
    "padding_idx", "max_norm", "scale_grad_by_freq", "sparse", "per_sample_weights",
    "include_last_offset",
)  # fmt: skip


#: The findings that are the kernel's own (checked: not the interpreter's, not the adapter's).
DEFECTS = (
    # The backward asserts K % 8 == 0 (BLOCK_SIZE = 8 rows a program); the forward takes any K.
    Defect("as it is, defaults", "xformers_embedding_bag"),
    # The forward and the backward sum in float32, also for a float64 table.
    Defect(
        "float64 (input checked first, table padded to 8k rows, tensors contiguous)",
        "xformers_embedding_bag",
    ),
    # The kernels read the table, the ids and the weights as contiguous, whatever their strides.
    Defect(
        "input checked first, table padded to 8k rows, tensors in every layout",
        "xformers_embedding_bag",
    ),
    # No bounds check: an id past the table is read as a row (out of bounds).
    Defect(
        "as it is (table padded to 8k rows, tensors contiguous), bad input included, on what "
        "passed",
        "xformers_embedding_bag",
    ),
)


def verify() -> dict[str, Any]:
    """Probe xformers_embedding_bag (sums only); the entry's JSON."""
    # Its backward launches a program for every 8 rows of the table, whatever the batch:
    # under the interpreter, tables of up to 1,024 rows keep a call within seconds. Random
    # examples only: with the boundary phase (bags of up to 2**16 ids, 2**17 bags), one
    # passing call ran for more than 10 minutes under the interpreter on the 2-core machine.
    fixed = {"modes": ["sum"], "vocab_sizes": [1, 1024], "boundaries": False}
    probe = Probe(
        "verify_embedding_bag",
        f"{__name__}:sparsify_embedding_bag",
        OPTIONS,
        checked=f"{__name__}:checked_sparsify_embedding_bag",
        workaround=f"{__name__}:answered_sparsify_embedding_bag",
        workaround_label="input checked first, table padded to 8k rows, tensors contiguous",
        unchecked_workaround=f"{__name__}:unchecked_answered_sparsify_embedding_bag",
        unchecked_label="table padded to 8k rows, tensors contiguous",
        modes=("sum",),
        fixed=fixed,
    )
    records = probe.run()
    # The layouts of the table, the ids and the weights, once the rows are padded: what the
    # workaround's contiguous copies answer.
    layouts = {**fixed, "options": ["per_sample_weights"], "dtypes": ["float32"],
               "max_examples": 30, "seed": 0}  # fmt: skip
    records.append(
        execute(Run("input checked first, table padded to 8k rows, tensors in every layout",
                    "verify_embedding_bag", f"{__name__}:rows8_sparsify_embedding_bag", layouts))
    )  # fmt: skip
    note = (
        "every call runs random examples only (boundaries=False): under Triton's interpreter, "
        "one program at a time, a passing call with the boundary phase (bags of up to 2**16 "
        "ids, 2**17 bags) ran for more than 10 minutes on the 2-core machine"
    )
    return entry_result("sparsify_embedding_bag", records, [note, *probe.notes], DEFECTS)
