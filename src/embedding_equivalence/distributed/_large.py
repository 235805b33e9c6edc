"""Sharded tables too large to build whole: the case, and the call that the driver judges.

A table of ``V * D`` elements past [`SHARD_LOCAL_ELEMENTS`][] is never made in one piece.
Its values come from a [`BlockTable`][]: blocks of rows, each drawn from a generator seeded by
the table's seed and the block's number, so any rank builds any range of rows (or columns)
alone, bit for bit the same, in the memory of that range.

The verifier's process (the driver) checks such a call on a **compact** table: the rows that
the ids reference (and the padding row), renumbered ``0 .. R - 1`` in order, with the ids
renumbered alike ([`LargeShardedCase.call`][] makes this [`ShardedCall`][]). The exact oracle
and its bound are those of ``verify_embedding`` on that compact call: the lookup, the renorm
and each row's gradient sum depend only on the referenced rows and on which ids are equal, so
the compact oracle is the full one restricted to the referenced rows.

The rest lives beside this module, one concern each: what a rank does with such a call
([`run_large_on_rank`][embedding_equivalence.distributed._large_rank.run_large_on_rank]: build
its shard, run the candidate, send back only the referenced rows), how the driver judges the
ranks' pieces ([`judge_large`][embedding_equivalence.distributed._large_judge.judge_large]),
and the ``torchrun`` script of a failure
([`large_snippet`][embedding_equivalence.distributed._repro.large_snippet]), which needs the
run's sharding, world size and device, and so is written there rather than by the case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._draw.cases import EmbeddingCase, TableFacts
from .._draw.recipes import IdsRecipe, WeightRecipe, dtype_source
from .._draw.tensors import LARGE_TABLE_ELEMENTS
from ..forms import validation
from ..oracle.call import Call
from .forms import shard_range

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

    def _fill_block(self, block: int, out: torch.Tensor) -> None:
        """Draw block ``block`` (its rows, every column) into ``out``."""
        generator = torch.Generator().manual_seed((self.seed * _MIX + block) % (1 << 63))
        out.uniform_(-1, 1, generator=generator)

    def _block(self, block: int) -> torch.Tensor:
        lo, hi = block * self.block_rows, min(self.num_embeddings, (block + 1) * self.block_rows)
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
            b_lo, b_hi = block * step, min(self.num_embeddings, (block + 1) * step)
            a, b = max(lo, b_lo), min(hi, b_hi)
            if whole and (a, b) == (b_lo, b_hi):  # the whole block: draw in place
                self._fill_block(block, out[a - lo : b - lo])
            else:
                out[a - lo : b - lo] = self._block(block)[a - b_lo : b - b_lo, c0:c1]
        return out

    def gather(self, rows: Sequence[int]) -> torch.Tensor:
        """The ``(len(rows), D)`` rows ``rows``, each block drawn once."""
        out = torch.empty(len(rows), self.embedding_dim, dtype=self.dtype)
        index, step = torch.tensor(rows, dtype=torch.int64), self.block_rows
        for block in sorted({row // step for row in rows}):
            at = index // step == block
            out[at] = self._block(block)[index[at] - block * step]
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
        lines = [
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
        return "\n".join(lines)


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

    def grad_output_source(self, name: str = "grad_output") -> str:
        """Python that rebuilds [`grad_output`][]."""
        return self._embedding_case().grad_output_source(name)

    @property
    def padding_row(self) -> int | None:
        """The table's row that ``padding_idx`` names (counted from 0), or ``None``."""
        return validation.padding_row(self.kwargs.get("padding_idx"), self.num_embeddings)

    def referenced_rows(self) -> tuple[int, ...]:
        """The sorted global rows of the compact table: every id's, and the padding row."""
        padding = () if self.padding_row is None else (self.padding_row,)
        return tuple(sorted({int(r) for r in (*self.ids.values, *padding)}))

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
        padding = self.padding_row
        if padding is not None:
            kwargs["padding_idx"] = rows.index(padding)
        return ShardedCall(
            compact_ids, weight, kwargs, grad_output=grad_output, case=self, rows=rows
        )
