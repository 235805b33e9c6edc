"""The ``torchrun`` scripts of sharded failures: every rank checks the candidate, and asserts.

A counterexample of ``verify_sharded_embedding`` is a script for ``torchrun`` that rebuilds the
failing case on every rank, runs the candidate as the verifier ran it, and checks it against the
exact float64 values within the verifier's bound: it exits non-zero on every rank while the bug
is there, and 0 once it is fixed. Every collective comes before the check, and each rank checks
the same whole tensors, so the ranks agree, and a rank whose check fails leaves none waiting.

- A table built whole ([`sharded_snippet`][]): the helper of ``embedding_equivalence.testing``
  that the single-process repro uses runs the candidate on the table's shards (as the verifier
  shards it), gathers the output and the gradient, and judges them with the verifier's oracle,
  bound and messages.
- A table too large to build whole ([`large_snippet`][]): every rank draws only its own shard
  from the recipe; the ranks sum their entries of the referenced rows' gradient, then every rank
  checks the output and those rows.
"""

from __future__ import annotations

from .._draw.cases import EmbeddingCase, refusal_source
from .._draw.recipes import device_source, dtype_source, kwargs_source
from .._engine.check import CheckableCase, Snippet
from ._large import LargeShardedCase
from ._rank import SHARDINGS


def _head(world_size: int, preamble: str, tensor_api: str, testing: list[str]) -> list[str]:
    """The imports of a script for ``world_size`` ranks, the candidate's, and ``testing``'s."""
    lines = [
        f"# Run with: torchrun --nproc-per-node {world_size} repro.py",
        "import torch",
        "import torch.distributed as dist",
        "from torch.distributed.device_mesh import init_device_mesh",
        f"from torch.distributed.tensor import {tensor_api}",
    ]
    if preamble:
        lines.append(preamble.rstrip("\n"))
    if testing:
        lines.append(f"from embedding_equivalence.testing import {', '.join(testing)}")
    return lines


def _sharded_function(dim: int, device: str, max_norm: bool) -> list[str]:
    """``def sharded(input, weight, **options)``: the candidate as the verifier calls it."""
    back = "" if device == "cpu" else ".cpu()"
    lines = [
        "# The candidate as the verifier calls it, on the table split over the ranks: the output",
        "# comes back whole, and after the backward pass weight.grad is the shards' gradient.",
        "def sharded(input, weight, **options):",
        f"    shards = distribute_tensor(weight, mesh, [Shard({dim})], src_data_rank=None)",
        "    if shards.requires_grad:",
        "        shards.register_post_accumulate_grad_hook(",
        f'            lambda s: setattr(weight, "grad", s.grad.full_tensor(){back})',
        "        )",
        f"    out = candidate(input{device_source(device)}, shards, **options)",
    ]
    if max_norm:
        lines += [
            "    with torch.no_grad():  # the table after the call: max_norm renorms shards' rows",
            "        weight.copy_(shards.full_tensor())",
        ]
    lines.append("    out = out.full_tensor() if isinstance(out, DTensor) else out")
    returned = f"out{back} if isinstance(out, torch.Tensor) else out" if back else "out"
    lines.append(f"    return {returned}")
    return lines


def _small_script(
    case: EmbeddingCase, dim: int, world_size: int, device: str, backward: bool, preamble: str
) -> str:
    """The script of a case whose table every rank builds whole (see [`sharded_snippet`][])."""
    backend = "nccl" if device == "cuda" else "gloo"
    helper = "assert_backward_equivalent" if backward else "assert_forward_equivalent"
    valid = case.invalid is None
    testing = [helper] if valid else []
    lines = _head(world_size, preamble, "DTensor, Shard, distribute_tensor", testing)
    lines += ["", case.ids.source("input"), case.weight.source("weight")]
    if valid and backward:
        lines.append(case.grad_output_source())
    lines += [
        "",
        f'dist.init_process_group("{backend}")',
        f'mesh = init_device_mesh("{device}", (dist.get_world_size(),))',
        "",
        "",
        *_sharded_function(dim, device, "max_norm" in case.kwargs),
        "",
        "",
    ]
    options = kwargs_source(case.kwargs)
    if case.invalid is not None:  # every rank must raise
        call = f"sharded(input, weight{options})"
        lines += refusal_source(call, case.invalid, "dist.get_rank(), ")
    else:
        grad = ", grad_output" if backward else ""
        lines += [
            "# The exact check, on every rank: it runs sharded, then judges the output and the",
            "# gradient gathered whole, with no collective after that. It raises while the bug",
            "# is there.",
            f"{helper}(sharded, input, weight{grad}{options})",
        ]
    lines.append("dist.destroy_process_group()")
    return "\n".join(lines)


def sharded_snippet(sharding: str, world_size: int, device: str) -> Snippet:
    """The replay snippet of a sharded call: a script for ``torchrun`` that asserts.

    Every rank builds the same tensors and checks ``sharded``, the candidate called as the
    verifier calls it (on the table split over the ranks with ``distribute_tensor``, its output
    and the table's gradient gathered whole), with ``assert_backward_equivalent`` of
    ``embedding_equivalence.testing`` (``assert_forward_equivalent`` without ``backward``): the
    verifier's oracle, bound and messages. The check comes after the last collective, and every
    rank judges the same whole tensors: each raises while the bug is there. A call that the
    reference refuses must raise on every rank. A case of a table too large to build whole is
    written by [`large_snippet`][].

    Args:
        sharding: ``"vocab"`` or ``"dim"``.
        world_size: the number of ranks of the run.
        device: ``"cpu"`` (gloo) or ``"cuda"`` (nccl).

    Returns:
        The engine's snippet writer: ``(case, backward, preamble) -> source``.
    """
    dim = SHARDINGS[sharding]

    def snippet(case: CheckableCase, backward: bool, preamble: str) -> str:
        if isinstance(case, LargeShardedCase):  # each rank draws its own shard
            return large_snippet(case, sharding, world_size, device, "candidate", backward,
                                 preamble)  # fmt: skip
        if not isinstance(case, EmbeddingCase):
            raise TypeError(f"a sharded run draws embedding cases, not {type(case).__name__}")
        return _small_script(case, dim, world_size, device, backward, preamble)

    return snippet


def _large_gradient(case: LargeShardedCase, dim: int, device: str) -> tuple[list[str], list[str]]:
    """The lines of a large script's backward pass: gathered on every rank, then checked."""
    v, d = case.num_embeddings, case.embedding_dim
    padding, scale = case.padding_row, bool(case.kwargs.get("scale_grad_by_freq", False))
    rows = "sorted(set(ids))" if padding is None else f"sorted(set(ids) | {{{padding}}})"
    pad = "None" if padding is None else f"rows.index({padding})"
    on_device = device_source(device)
    run = [
        "",
        case.grad_output_source(),
        f"out.backward(grad_output{on_device})",
        f"grad = weight.grad.redistribute(mesh, [Shard({dim})]).to_local().cpu()",
        "# The referenced rows (each id's, and the padding row): this rank's entries of their",
        "# gradient, zero elsewhere, summed over the ranks (each entry comes from one rank), so",
        "# that every rank checks them all; and the rows of its shard that no id references but",
        "# got a gradient, counted.",
        f"rows = {rows}",
        f"got = torch.zeros(len(rows), {d}, dtype=torch.float64)",
    ]
    if dim == 0:
        run += [
            "mine = [k for k, i in enumerate(rows) if lo <= i < hi]",
            "got[mine] = grad[[rows[k] - lo for k in mine]].double()",
            "others = torch.ones(hi - lo, dtype=torch.bool)",
            "others[[i - lo for i in rows if lo <= i < hi]] = False",
        ]
    else:
        run += [
            "got[:, lo:hi] = grad[rows].double()",
            f"others = torch.ones({v}, dtype=torch.bool)",
            "others[rows] = False",
        ]
    run.append("strays = grad[others].ne(0).any(dim=1).sum().reshape(1)")
    if on_device:  # nccl reduces tensors on the device
        run.append(f"got, strays = got{on_device}, strays{on_device}")
    run += ["dist.all_reduce(got)", "dist.all_reduce(strays)"]
    if on_device:
        run.append("got, strays = got.cpu(), strays.cpu()")
    check = [
        "# The exact gradient of the referenced rows, and its bound: the verifier's, on the ids",
        "# renumbered into those rows.",
        "flat = torch.searchsorted(torch.tensor(rows), input.reshape(-1).long().cpu())",
        f"g = grad_output.reshape(-1, {d})",
        f"exact = reference_embedding_grad(flat, g, len(rows), padding_idx={pad}, "
        f"scale_grad_by_freq={scale})[0]",
        f"bound = gradient_error_bound(flat, g, len(rows), {dtype_source(case.dtype)}, "
        f"padding_idx={pad}, scale_grad_by_freq={scale})",
        'message, _ = compare_exact_or_bounded("weight.grad[rows]", got, exact, bound)',
        'assert message is None, f"{message}; row k here is the table\'s row rows[k]"',
        'assert int(strays) == 0, f"{int(strays)} rows that no id references got a gradient"',
    ]
    return run, check


def large_snippet(
    case: LargeShardedCase,
    sharding: str,
    world_size: int,
    device: str,
    fn: str = "candidate",
    backward: bool = True,
    preamble: str = "",
) -> str:
    """A ``torchrun`` script that rebuilds ``case`` shard by shard and checks the candidate.

    Every rank draws only its own shard of the table (``table_rows``) and calls the candidate.
    With ``backward``, the ranks sum their entries of the referenced rows' gradient and count
    the rows of their shards that no id references but got a gradient (the last collectives).
    Then every rank asserts that the output is the referenced rows of the table (exactly;
    without ``max_norm``), that the referenced rows' gradient lies within the verifier's bound
    of the exact float64 sums (``reference_embedding_grad`` and ``gradient_error_bound`` of
    ``embedding_equivalence.testing``, on the ids renumbered into those rows), and that no
    other row got a gradient. A call that the reference refuses must raise on every rank.

    Args:
        case: the case.
        sharding: ``"vocab"`` or ``"dim"``.
        world_size: the number of ranks of the run.
        device: ``"cpu"`` (gloo) or ``"cuda"`` (nccl).
        fn: the name the script calls.
        backward: also check the gradient.
        preamble: lines that define ``fn`` (its import).

    Returns:
        Python source.
    """
    dim = SHARDINGS[sharding]
    v, d = case.num_embeddings, case.embedding_dim
    size = v if dim == 0 else d
    shard = f"lo, hi, 0, {d}" if dim == 0 else f"0, {v}, lo, hi"  # its rows, its columns
    backend = "nccl" if device == "cuda" else "gloo"
    valid = case.invalid is None
    checks_out = valid and "max_norm" not in case.kwargs
    testing = ["compare_exact_or_bounded"] if checks_out or (valid and backward) else []
    if valid and backward:
        testing += ["gradient_error_bound", "reference_embedding_grad"]
    lines = [
        *_head(world_size, preamble, "DTensor, Shard", testing),
        "",
        case.table.source(),
        "",
        f'dist.init_process_group("{backend}")',
        "rank, world = dist.get_rank(), dist.get_world_size()",
        f'mesh = init_device_mesh("{device}", (world,))',
        f"chunk = -(-{size} // world)  # torch's chunking",
        f"lo, hi = min(rank * chunk, {size}), min((rank + 1) * chunk, {size})",
        f"local = table_rows({shard})",
        f"weight = DTensor.from_local(local.to({device!r}), mesh, [Shard({dim})], "
        f"shape=torch.Size(({v}, {d})), stride=({d}, 1))",
    ]
    if backward and valid:
        lines.append("weight.requires_grad_(True)")
    lines.append(case.ids.source("input"))
    if device != "cpu":
        lines.append(f"input = input.to({device!r})")
    call = f"{fn}(input, weight{kwargs_source(case.kwargs)})"
    if case.invalid is not None:
        lines += refusal_source(call, case.invalid, "dist.get_rank(), ")
        return "\n".join([*lines, "dist.destroy_process_group()"])
    lines += [
        f"out = {call}",
        "out = out.full_tensor() if isinstance(out, DTensor) else out",
        "ids = input.reshape(-1).tolist()",
        f"expected = (torch.stack([table_rows(i, i + 1, 0, {d})[0] for i in ids]) if ids "
        f"else torch.empty(0, {d}, dtype=local.dtype)).reshape(*input.shape, {d})",
    ]
    run, check = _large_gradient(case, dim, device) if backward else ([], [])
    lines += [
        *run,
        "dist.destroy_process_group()  # the last collective: the checks below leave no rank "
        "waiting",
    ]
    if checks_out:
        lines += [
            "assert out.shape == expected.shape, "
            'f"out has shape {tuple(out.shape)}, expected {tuple(expected.shape)}"',
            'message, _ = compare_exact_or_bounded("out", out, expected, None)',
            "assert message is None, message",
        ]
    lines += check
    return "\n".join(lines)
