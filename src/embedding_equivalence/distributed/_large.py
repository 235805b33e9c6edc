"""Sharded tables too large to build whole: each rank builds its shard from a recipe.

A table of ``V * D`` elements past [`SHARD_LOCAL_ELEMENTS`][] is never made in one piece.
Its values come from a [`BlockTable`][]: blocks of rows, each drawn from a generator seeded by
the table's seed and the block's number, so any rank builds any range of rows (or columns)
alone, bit for bit the same, in the memory of that range.

The verifier's process (the driver) checks such a call on a **compact** table: the rows that
the ids reference (and the padding row), renumbered ``0 .. R - 1`` in order, with the ids
renumbered alike ([`LargeShardedCase.call`][] makes this [`ShardedCall`][]). The exact oracle
and its bound are those of ``verify_embedding`` on that compact call: the lookup, the renorm
and each row's gradient sum depend only on the referenced rows and on which ids are equal, so
the compact oracle is the full one restricted to the referenced rows. The ranks run the
candidate on the full-size DTensor (``DTensor.from_local`` of the rank's shard) and send back
only the output, the referenced rows of the gradient (and of the table after ``max_norm``),
and the first row that no id references yet got a gradient or was changed
([`run_large_on_rank`][]). The driver assembles them ([`judge_large`][]) and judges them
against the compact oracle, naming rows by their global number.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard

from .._draw.cases import (
    Call,
    EmbeddingCase,
    IdsRecipe,
    TableFacts,
    WeightRecipe,
    dtype_source,
    kwargs_source,
)
from .._draw.tensors import LARGE_TABLE_ELEMENTS
from .._engine.check import EquivalenceError, Outcome, judge
from .._engine.repro import describe_call, format_float
from ..oracle import EmbeddingOracle
from ..oracle.expected import RowDigests, row_chunks
from .forms import shard_range

__all__ = [
    "BLOCK_ELEMENTS",
    "SHARD_LOCAL_ELEMENTS",
    "BlockTable",
    "LargeOutcome",
    "LargeShardedCase",
    "ShardedCall",
    "judge_large",
    "large_name",
    "large_snippet",
    "run_large_on_rank",
    "shard_local",
    "wants_backward",
]

#: Tables of at least this many elements are built shard by shard on the ranks (the size from
#: which ``verify_embedding`` draws a table in its own dtype). A module attribute, so that a
#: test can lower it in the verifier's process (the ranks follow the call they are sent).
SHARD_LOCAL_ELEMENTS = LARGE_TABLE_ELEMENTS
#: Elements of one block of a [`BlockTable`][] (rows of a block: ``BLOCK_ELEMENTS // D``).
BLOCK_ELEMENTS = 1 << 16
#: Mixes a block's number into the table's seed (the odd 64-bit golden-ratio constant).
_MIX = 0x9E3779B97F4A7C15


def shard_local(vocab_size: int, embedding_dim: int) -> bool:
    """Whether a sharded ``(V, D)`` table is built shard by shard ([`SHARD_LOCAL_ELEMENTS`][])."""
    return vocab_size * embedding_dim >= SHARD_LOCAL_ELEMENTS


@dataclass(frozen=True)
class BlockTable:
    """A ``(V, D)`` table given by a seed, whose rows any process can build alone.

    Rows ``[b * R, (b + 1) * R)`` (``R = max(1, BLOCK_ELEMENTS // D)``) are drawn uniformly in
    ``[-1, 1)``, in ``dtype`` itself, by a ``torch.Generator`` seeded with
    ``(seed * 0x9E3779B97F4A7C15 + b) mod 2**63``: every row holds ``D`` independent draws, so
    rows stay distinguishable (reading a wrong row is seen), and a range of rows or columns
    costs the blocks it overlaps, never the whole table.

    Attributes:
        num_embeddings: ``V``.
        embedding_dim: ``D``.
        dtype: the table's floating dtype.
        seed: the table's seed.
    """

    num_embeddings: int
    embedding_dim: int
    dtype: torch.dtype = torch.float32
    seed: int = 0

    @property
    def block_rows(self) -> int:
        """Rows of one block."""
        return max(1, BLOCK_ELEMENTS // max(self.embedding_dim, 1))

    def _block_seed(self, block: int) -> int:
        return (self.seed * _MIX + block) % (1 << 63)

    def _fill_block(self, block: int, out: torch.Tensor) -> None:
        """Draw block ``block`` (its rows, every column) into ``out``."""
        generator = torch.Generator().manual_seed(self._block_seed(block))
        out.uniform_(-1, 1, generator=generator)

    def _block(self, block: int) -> torch.Tensor:
        lo = block * self.block_rows
        hi = min(self.num_embeddings, lo + self.block_rows)
        out = torch.empty(hi - lo, self.embedding_dim, dtype=self.dtype)
        self._fill_block(block, out)
        return out

    def rows(self, lo: int, hi: int, columns: tuple[int, int] | None = None) -> torch.Tensor:
        """Rows ``lo:hi`` (and columns ``columns[0]:columns[1]``), contiguous, on the CPU."""
        c0, c1 = columns if columns is not None else (0, self.embedding_dim)
        out = torch.empty(hi - lo, c1 - c0, dtype=self.dtype)
        if hi <= lo:
            return out
        step = self.block_rows
        whole = columns is None or (c0, c1) == (0, self.embedding_dim)
        for block in range(lo // step, (hi - 1) // step + 1):
            b_lo = block * step
            b_hi = min(self.num_embeddings, b_lo + step)
            a, b = max(lo, b_lo), min(hi, b_hi)
            if whole and (a, b) == (b_lo, b_hi):  # the whole block: draw in place
                self._fill_block(block, out[a - lo : b - lo])
            else:
                out[a - lo : b - lo] = self._block(block)[a - b_lo : b - b_lo, c0:c1]
        return out

    def gather(self, rows: Sequence[int]) -> torch.Tensor:
        """The ``(len(rows), D)`` rows ``rows``, each block drawn once."""
        out = torch.empty(len(rows), self.embedding_dim, dtype=self.dtype)
        step = self.block_rows
        by_block: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            by_block.setdefault(row // step, []).append(i)
        for block, positions in by_block.items():
            values = self._block(block)
            local = torch.tensor([rows[i] - block * step for i in positions], dtype=torch.int64)
            out[torch.tensor(positions, dtype=torch.int64)] = values[local]
        return out

    def shard(self, dim: int, world_size: int, rank: int) -> torch.Tensor:
        """The block of ``rank`` under ``Shard(dim)`` over ``world_size`` ranks (torch's chunks)."""
        v, d = self.num_embeddings, self.embedding_dim
        if dim == 0:
            return self.rows(*shard_range(v, world_size, rank))
        return self.rows(0, v, shard_range(d, world_size, rank))

    def source(self) -> str:
        """Python that defines ``table_rows(lo, hi, c0, c1)`` with these values (after torch)."""
        v, d, step = self.num_embeddings, self.embedding_dim, self.block_rows
        return "\n".join(
            [
                "def table_rows(lo, hi, c0, c1):",
                f'    """Rows lo:hi, columns c0:c1 of the ({v}, {d}) table, drawn a block of '
                f'{step} rows at a time."""',
                f"    out = torch.empty(hi - lo, c1 - c0, dtype={dtype_source(self.dtype)})",
                f"    for block in range(lo // {step}, (hi - 1) // {step} + 1):",
                f"        b_lo = block * {step}",
                f"        b_hi = min({v}, b_lo + {step})",
                f"        seed = ({self.seed} * {_MIX:#x} + block) % (1 << 63)",
                f"        values = torch.empty(b_hi - b_lo, {d}, dtype={dtype_source(self.dtype)})",
                "        values.uniform_(-1, 1, generator=torch.Generator().manual_seed(seed))",
                "        a, b = max(lo, b_lo), min(hi, b_hi)",
                "        out[a - lo : b - lo] = values[a - b_lo : b - b_lo, c0:c1]",
                "    return out",
            ]
        )


def _positive(padding_idx: object, num_embeddings: int) -> int | None:
    if not isinstance(padding_idx, int) or isinstance(padding_idx, bool):
        return None
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


@dataclass
class ShardedCall(Call):
    """The compact call of a [`LargeShardedCase`][], and the case the ranks build from.

    ``input``, ``weight`` and ``kwargs`` are the compact call (ids renumbered into the
    referenced rows, the ``(R, D)`` table of those rows, ``padding_idx`` renumbered), on which
    the engine builds its oracle; ``grad_output`` is the call's own.

    Attributes:
        case: the case itself (global ids, the table's recipe, the options as passed).
        rows: the global rows of the compact table, in order (each id's row, and the padding
            row).
    """

    case: LargeShardedCase | None = None
    rows: tuple[int, ...] = ()


@dataclass(frozen=True)
class LargeShardedCase(TableFacts):
    """An embedding case whose table is built shard by shard on the ranks.

    The same attributes as [`EmbeddingCase`][embedding_equivalence._draw.cases.EmbeddingCase]
    (so that shrinking and the boundary phase treat it alike); the table's values are those of
    the [`BlockTable`][] with the recipe's ``V``, ``D``, dtype and seed (its layout and
    specials are not used: the table is the ranks' contiguous shards).

    Attributes:
        ids: recipe of ``input``.
        weight: the table's size, dtype and seed.
        kwargs: the options passed to the candidate.
        grad_seed: seed of the upstream gradient.
        invalid: ``None`` for a valid call, else why the reference rejects it.
    """

    ids: IdsRecipe
    weight: WeightRecipe
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    grad_seed: int = 0
    invalid: str | None = None

    @classmethod
    def of(cls, case: EmbeddingCase) -> LargeShardedCase:
        """The shard-local counterpart of a drawn case."""
        return cls(case.ids, case.weight, dict(case.kwargs), case.grad_seed, case.invalid)

    @property
    def table(self) -> BlockTable:
        """The table's values."""
        w = self.weight
        return BlockTable(w.num_embeddings, w.embedding_dim, w.dtype, w.seed)

    def _embedding_case(self) -> EmbeddingCase:
        return EmbeddingCase(self.ids, self.weight, self.kwargs, self.grad_seed, self.invalid)

    def grad_output(self) -> torch.Tensor:
        """The upstream gradient ``(*input.shape, D)``, as the drawn case makes it."""
        return self._embedding_case().grad_output()

    def referenced_rows(self) -> tuple[int, ...]:
        """The sorted global rows of the compact table: every id's, and the padding row."""
        rows = set(self.ids.values)
        padding = _positive(self.kwargs.get("padding_idx"), self.num_embeddings)
        if padding is not None:
            rows.add(padding)
        return tuple(sorted(int(r) for r in rows))

    def call(self, backward: bool = True) -> ShardedCall:
        """The compact call (see [`ShardedCall`][]); a valid case's only."""
        input = self.ids.build()
        grad_output = self.grad_output() if backward else None
        if self.invalid is not None:  # out-of-range ids do not renumber: the ranks get them
            # The table's shape in messages, without its values (a stride-0 view of a zero).
            stand_in = torch.zeros((1, 1), dtype=self.dtype).expand(
                self.num_embeddings, self.embedding_dim
            )
            return ShardedCall(input, stand_in, dict(self.kwargs), case=self, rows=())
        rows = self.referenced_rows()
        index = torch.tensor(rows, dtype=torch.int64)
        flat = input.reshape(-1).to(torch.int64).contiguous()
        compact_ids = torch.searchsorted(index, flat).reshape(input.shape).to(input.dtype)
        weight = self.table.gather(rows).requires_grad_(backward)
        kwargs = dict(self.kwargs)
        padding = _positive(kwargs.get("padding_idx"), self.num_embeddings)
        if padding is not None:
            kwargs["padding_idx"] = rows.index(padding)
        return ShardedCall(
            compact_ids, weight, kwargs, grad_output=grad_output, case=self, rows=rows
        )

    def source(self, fn: str = "candidate", backward: bool = True, preamble: str = "") -> str:
        """A ``torchrun`` script for two ranks (see [`large_snippet`][])."""
        return large_snippet(self, "vocab", 2, "cpu", fn, backward, preamble)


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

    Every rank draws only its own shard of the table (``table_rows``), calls the candidate,
    and asserts that the output equals the referenced rows of the table (without ``max_norm``);
    with ``backward``, each rank asserts that its entries of the referenced rows' gradient lie
    within the verifier's bound of the exact float64 sums (``gradient_error_bound`` on the ids
    renumbered into those rows), and that its shard's gradient is zero off them.
    """
    dim = 0 if sharding == "vocab" else 1
    v, d = case.num_embeddings, case.embedding_dim
    backend = "nccl" if device == "cuda" else "gloo"
    lines = [
        f"# Run with: torchrun --nproc-per-node {world_size} repro.py",
        "import torch",
        "import torch.distributed as dist",
        "from torch.distributed.device_mesh import init_device_mesh",
        "from torch.distributed.tensor import DTensor, Shard",
    ]
    if backward and case.invalid is None:
        lines.append("from embedding_equivalence.testing import gradient_error_bound")
    if preamble:
        lines.append(preamble.rstrip("\n"))
    lines += [
        "",
        case.table.source(),
        "",
        f'dist.init_process_group("{backend}")',
        "rank, world = dist.get_rank(), dist.get_world_size()",
        f'mesh = init_device_mesh("{device}", (world,))',
        f"chunk = -(-{v if dim == 0 else d} // world)  # torch's chunking",
        f"lo, hi = min(rank * chunk, {v if dim == 0 else d}), "
        f"min((rank + 1) * chunk, {v if dim == 0 else d})",
        (
            f"local = table_rows(lo, hi, 0, {d})"
            if dim == 0
            else f"local = table_rows(0, {v}, lo, hi)"
        ),
        f"weight = DTensor.from_local(local.to({device!r}), mesh, [Shard({dim})], "
        f"shape=torch.Size(({v}, {d})), stride=({d}, 1))",
    ]
    if backward and case.invalid is None:
        lines.append("weight.requires_grad_(True)")
    lines.append(case.ids.source("input"))
    call = f"out = {fn}(input, weight{kwargs_source(case.kwargs)})"
    if case.invalid is not None:
        lines += [
            "try:",
            f"    {call}",
            "except Exception as error:",
            '    print(rank, "refused, as it must be:", repr(error))',
            "else:",
            f"    raise AssertionError({('the call must raise (' + case.invalid + ')')!r})",
            "dist.destroy_process_group()",
        ]
        return "\n".join(lines)
    lines += [
        call,
        "out = out.full_tensor() if isinstance(out, DTensor) else out",
        "ids = input.reshape(-1).tolist()",
        f"expected = torch.stack([table_rows(i, i + 1, 0, {d})[0] for i in ids]) if ids "
        f"else torch.empty(0, {d}, dtype=local.dtype)",
    ]
    if "max_norm" not in case.kwargs:
        lines.append(
            f"assert torch.equal(out.cpu().reshape(-1, {d}), expected), "
            f'f"rank {{rank}}: out differs from the table\'s rows"'
        )
    if backward:
        padding = _positive(case.kwargs.get("padding_idx"), v)
        scale = bool(case.kwargs.get("scale_grad_by_freq", False))
        mine = "[k for k, i in enumerate(rows) if lo <= i < hi]" if dim == 0 else "range(len(rows))"
        lines += [
            "",
            case._embedding_case().grad_output_source(),
            "out.backward(grad_output)",
            "grad = weight.grad.to_local().cpu()",
            "# The exact gradient of the referenced rows (each id's, and the padding row), and",
            "# its bound: the verifier's, on the ids renumbered into those rows.",
            f"rows = sorted(set(ids) | {{{padding}}})"
            if padding is not None
            else "rows = sorted(set(ids))",
            "flat = torch.searchsorted(torch.tensor(rows), input.reshape(-1).long())",
            f"g = grad_output.reshape(-1, {d}).double()",
            f"exact = torch.zeros(len(rows), {d}, dtype=torch.float64).index_add_(0, flat, g)",
        ]
        if scale:
            lines.append("exact /= torch.bincount(flat, minlength=len(rows)).clamp(min=1)[:, None]")
        pad = "None"
        if padding is not None:
            lines.append(f"exact[rows.index({padding})] = 0.0")
            pad = f"rows.index({padding})"
        lines += [
            f"bound = gradient_error_bound(flat, grad_output.reshape(-1, {d}), len(rows), "
            f"{dtype_source(case.dtype)}, padding_idx={pad}, scale_grad_by_freq={scale})",
            f"for k in {mine}:",
            (
                "    got, want, b = grad[rows[k] - lo].double(), exact[k], bound[k]"
                if dim == 0
                else "    got, want, b = grad[rows[k]].double(), exact[k, lo:hi], bound[k, lo:hi]"
            ),
            "    assert bool(((got - want).abs() <= b).all()), "
            'f"rank {rank}: weight.grad[{rows[k]}] = {got}, exact {want} (bound {b})"',
        ]
        if dim == 0:
            lines += [
                "others = torch.ones(hi - lo, dtype=torch.bool)",
                "others[[i - lo for i in rows if lo <= i < hi]] = False",
            ]
        else:
            lines += [f"others = torch.ones({v}, dtype=torch.bool)", "others[rows] = False"]
        lines.append(
            "assert not bool(grad[others].ne(0).any()), "
            'f"rank {rank}: rows that no id references got a gradient"'
        )
    lines.append("dist.destroy_process_group()")
    return "\n".join(lines)


@dataclass
class LargeOutcome(Outcome):
    """A rank's [`Outcome`][] of a shard-local call: compact pieces, and what strayed.

    ``weight_grad`` and ``table`` are ``(R, D)`` and hold this rank's entries of the
    referenced rows (its rows under ``Shard(0)``, its columns under ``Shard(1)``), zero
    elsewhere: the driver sums the ranks' pieces, each entry coming from one rank.

    Attributes:
        stray: the first row of this rank's shard that no id references but whose gradient
            is not zero: ``(row, how many such rows, its values on this rank)``.
        moved: the first such row that the call changed: ``(row, how many, before, after)``.
    """

    stray: tuple[int, int, list[float]] | None = None
    moved: tuple[int, int, list[float], list[float]] | None = None


def _clean(rows: torch.Tensor, inside: torch.Tensor) -> bool:
    """Whether every nonzero word of ``rows`` lies in its rows ``inside`` (a quick pass).

    Counts nonzero 8-byte words, several times faster than comparing each value with zero;
    ``False`` (look closer) where the rows are not whole words of a contiguous tensor.
    """
    if not rows.is_contiguous() or (rows.shape[1] * rows.element_size()) % 8:
        return False
    try:
        total = int(torch.count_nonzero(rows.reshape(-1).view(torch.int64)))
    except RuntimeError:  # a storage offset that is not a whole word
        return False
    if total == 0:
        return True
    picked = rows[inside.to(rows.device)].reshape(-1).view(torch.int64)
    return total == int(torch.count_nonzero(picked))


def _first_unreferenced(
    mask_of: Callable[[int, int], torch.Tensor],
    num_rows: int,
    dim: int,
    referenced: torch.Tensor,
    clean: Callable[[int, int, torch.Tensor], bool] | None = None,
) -> tuple[int, int] | None:
    """The first local row flagged by ``mask_of(lo, hi)`` and not in ``referenced``; and the count.

    Read a chunk at a time (no temporary of the shard's size); a chunk that ``clean(lo, hi,
    its referenced rows)`` passes is skipped.
    """
    first, count = None, 0
    for lo, hi in row_chunks(num_rows, dim):
        inside = referenced[(referenced >= lo) & (referenced < hi)] - lo
        if clean is not None and clean(lo, hi, inside):
            continue
        mask = mask_of(lo, hi).cpu()
        mask[inside] = False
        n = int(mask.sum())
        if n and first is None:
            first = lo + int(mask.nonzero()[0, 0])
        count += n
    return None if first is None else (first, count)


def _piece(
    local: torch.Tensor, rows: torch.Tensor, dim: int, lo: int, hi: int, width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R, D)`` with this rank's entries of the referenced rows, and their local rows."""
    piece = torch.zeros(len(rows), width, dtype=local.dtype)
    if dim == 0:
        owned = (rows >= lo) & (rows < hi)
        local_rows = rows[owned] - lo
        piece[owned] = local.detach()[local_rows.to(local.device)].cpu()
        return piece, local_rows
    piece[:, lo:hi] = local.detach()[rows.to(local.device)].cpu()
    return piece, rows


def wants_backward(out: object, backward: bool, outcome: Outcome) -> TypeGuard[torch.Tensor]:
    """Whether a rank runs the backward pass of ``out``; records ``outcome.requires_grad``.

    No backward without ``backward``, for a result that is not a tensor, or for an output
    that does not require grad (the judge decides whether that was right).
    """
    if not backward or not isinstance(out, torch.Tensor):
        return False
    outcome.requires_grad = out.requires_grad
    return out.requires_grad


def run_large_on_rank(
    fn: Callable[..., Any],
    call: ShardedCall,
    sharding_dim: int,
    device: str,
    mesh: DeviceMesh,
    failed: Callable[[Outcome, BaseException, str], Outcome],
) -> LargeOutcome:
    """Build this rank's shard of ``call.case``, run the candidate, keep only what is judged.

    Args:
        fn: the candidate.
        call: the compact call with its case (global ids, the table's recipe, the options).
        sharding_dim: ``0`` (``Shard(0)``) or ``1`` (``Shard(1)``).
        device: the rank's device.
        mesh: the 1-D mesh of the group.
        failed: records an exception in the outcome (``(outcome, exc, stage)``).

    Returns:
        This rank's [`LargeOutcome`][]: the full output, its pieces of the referenced rows'
        gradient (and table after ``max_norm``), and the first stray row.
    """
    gc.collect()  # what a previous call left in reference cycles, before the next shard
    outcome = LargeOutcome(rank=dist.get_rank())
    case = call.case
    assert case is not None
    v, d = case.num_embeddings, case.embedding_dim
    world, rank = mesh.size(), mesh.get_local_rank()
    lo, hi = shard_range(v if sharding_dim == 0 else d, world, rank)
    if case.invalid is None:
        local = case.table.shard(sharding_dim, world, rank).to(device)
    else:  # the candidate must refuse the ids before it reads a value: none are drawn
        shape = (hi - lo, d) if sharding_dim == 0 else (v, hi - lo)
        local = torch.empty(shape, dtype=case.dtype, device=device)
    backward = call.grad_output is not None
    weight = DTensor.from_local(
        local, mesh, [Shard(sharding_dim)], run_check=False, shape=torch.Size((v, d)), stride=(d, 1)
    )
    weight.requires_grad_(backward)
    kwargs = dict(case.kwargs)
    before = RowDigests.of(local) if "max_norm" in kwargs else None
    input = case.ids.build().to(device)
    rows = torch.tensor(call.rows, dtype=torch.int64)
    local_rows = rows
    try:
        out = fn(input, weight, **kwargs)
        out = out.full_tensor() if isinstance(out, DTensor) else out
    except Exception as exc:  # the judge decides whether raising was right
        return failed(outcome, exc, "forward")  # type: ignore[return-value]
    outcome.output = out.detach().clone().cpu() if isinstance(out, torch.Tensor) else out
    if before is not None:
        shard = weight.to_local().detach()
        outcome.table, local_rows = _piece(shard, rows, sharding_dim, lo, hi, d)
        changed = before.changed(shard)
        found = _first_unreferenced(lambda a, b: changed[a:b].clone(), shard.shape[0], 1,
                                    local_rows)  # fmt: skip
        if found is not None:
            row, count = found
            global_row = row + lo if sharding_dim == 0 else row
            cols = (0, d) if sharding_dim == 0 else (lo, hi)
            was = case.table.rows(global_row, global_row + 1, cols)[0]
            outcome.moved = (global_row, count, was.double().tolist(),
                             shard[row].double().cpu().tolist())  # fmt: skip
    if not wants_backward(out, backward, outcome):
        return outcome
    assert call.grad_output is not None
    try:
        out.backward(call.grad_output.to(device))
        grad = weight.grad
        if isinstance(grad, DTensor):
            if tuple(grad.placements) != (Shard(sharding_dim),):
                grad = grad.redistribute(mesh, [Shard(sharding_dim)])
            grad = grad.to_local()
    except Exception as exc:
        return failed(outcome, exc, "backward")  # type: ignore[return-value]
    if grad is None:
        return outcome
    want = (hi - lo, d) if sharding_dim == 0 else (v, hi - lo)
    if tuple(grad.shape) != want:
        error = ValueError(
            f"weight.grad's local shard on rank {rank} has shape {tuple(grad.shape)}, expected "
            f"{want} (Shard({sharding_dim}) of ({v}, {d}) over {world} ranks)"
        )
        return failed(outcome, error, "backward")  # type: ignore[return-value]
    outcome.weight_grad, local_rows = _piece(grad, rows, sharding_dim, lo, hi, d)
    g = grad.detach()
    found = _first_unreferenced(
        lambda a, b: g[a:b].ne(0).any(dim=1), g.shape[0], g.shape[1], local_rows,
        clean=lambda a, b, inside: _clean(g[a:b], inside),
    )  # fmt: skip

    if found is not None:
        row, count = found
        outcome.stray = (row + lo if sharding_dim == 0 else row, count,
                         g[row].double().cpu().tolist())  # fmt: skip
    return outcome


def _summed(pieces: Sequence[torch.Tensor | None]) -> torch.Tensor | None:
    """The sum of the ranks' pieces (each entry is one rank's), or ``None`` if one is missing."""
    if not pieces or any(p is None for p in pieces):
        return None
    total = pieces[0].clone()  # type: ignore[union-attr]
    for p in pieces[1:]:
        total += p  # type: ignore[operator]
    return total


_ROW = re.compile(r"^(weight\.grad|weight \(after max_norm\))\[(\d+)")
_ELEMENTS = re.compile(r"; (\d+) of (\d+) elements differ\)")


def _global_message(message: str, rows: Sequence[int]) -> str:
    """A judge's message about the compact table, with the rows named by their global number."""
    text = _ROW.sub(lambda m: f"{m.group(1)}[{rows[int(m.group(2))]}", message)
    return _ELEMENTS.sub(
        lambda m: f"; {m.group(1)} of the referenced rows' {m.group(2)} elements differ)", text
    )


def _values_text(values: Sequence[float]) -> str:
    shown = ", ".join(format_float(x) for x in values[:4])
    return f"[{shown}{', ...' if len(values) > 4 else ''}]"


def large_name(candidate: Callable[..., Any], case: LargeShardedCase, sharding: str) -> str:
    """The call in one line for messages, with the global ids and the table's shape."""
    v, d = case.num_embeddings, case.embedding_dim
    dim = 0 if sharding == "vocab" else 1
    table = f"DTensor(shape=({v}, {d}), dtype={dtype_source(case.dtype)}, Shard({dim}))"
    stand_in = torch.empty((1, 1), dtype=case.dtype).expand(1, d)
    text = describe_call(candidate, Call(case.ids.build(), stand_in, dict(case.kwargs)))
    head, _, rest = text.partition(", weight=")
    _, _, tail = rest.partition(")")  # the stand-in's description ends at its first ")"
    return f"{head}, weight={table}{tail} (each rank building its shard from the recipe)"


def judge_large(
    candidate: Callable[..., Any],
    call: ShardedCall,
    outcomes: Sequence[Outcome],
    sharding: str,
) -> list[Outcome]:
    """Judge the ranks' outcomes of a shard-local call; the assembled compact outcomes.

    Every rank's output is judged; the gradient (and the table after ``max_norm``) is the sum
    of the ranks' pieces. A row that no id references and yet got a gradient, or was changed,
    is named by its global number; every other difference is the engine's judge's message on
    the compact table, with its rows renamed.

    Args:
        candidate: the candidate, for the message.
        call: the compact call.
        outcomes: one a rank, as the group returned them.
        sharding: ``"vocab"`` or ``"dim"``, for the message.

    Returns:
        The outcomes with the assembled compact gradient and table, which the engine judges
        again (it passes where this passed).

    Raises:
        EquivalenceError: the first difference.
    """
    __tracebackhide__ = True
    case = call.case
    assert case is not None
    if case.invalid is not None:
        return list(outcomes)
    whole = all(o.error is None for o in outcomes)
    grad = _summed([o.weight_grad for o in outcomes]) if whole else None
    table = _summed([o.table for o in outcomes]) if whole else None
    merged = [
        dataclasses.replace(o, weight_grad=grad, table=table) if whole else o for o in outcomes
    ]
    name = large_name(candidate, case, sharding)
    oracle = EmbeddingOracle.for_call(dataclasses.replace(call, weight=call.weight.detach()))
    for o in merged:
        on = name if o.rank is None else f"{name} on rank {o.rank}"
        try:
            judge(o, call, oracle, on, "")
        except EquivalenceError as exc:
            raise EquivalenceError(_global_message(str(exc), call.rows), "", exc.worst) from None
    moved = [o.moved for o in outcomes if isinstance(o, LargeOutcome) and o.moved is not None]
    if moved:
        row, _, was, now = min(moved)
        count = sum(m[1] for m in moved)
        raise EquivalenceError(
            f"weight (after max_norm)[{row}, :] = {_values_text(now)}, but no id references row "
            f"{row}, which must be left as it was, {_values_text(was)} ({count} such rows "
            f"changed) [{name}]"
        )
    stray = [o.stray for o in outcomes if isinstance(o, LargeOutcome) and o.stray is not None]
    if stray:
        row, _, values = min(stray)
        count = sum(s[1] for s in stray)
        raise EquivalenceError(
            f"weight.grad[{row}, :] = {_values_text(values)}, but no id references row {row}: "
            f"its gradient must be exactly zero ({count} such rows) [{name}]"
        )
    return merged
