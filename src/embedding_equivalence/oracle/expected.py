"""What an oracle tells the judge: the seam through which any exact reference plugs in.

An oracle is built from one call's tensors before the candidate runs, and reads from them
then all that it will answer with: the candidate may change its table in place (``max_norm``),
and the engine makes no copy of the table for the oracle. The engine
([`embedding_equivalence._engine.check`][]) asks it for the exact output and its bound, the table
after ``max_norm``'s in-place renorm, and the gradients, and compares the candidate's with
them. [`EmbeddingOracle`][embedding_equivalence.oracle.embedding.EmbeddingOracle] and
[`BagOracle`][embedding_equivalence.oracle.bag.BagOracle] implement it; a new verifier (quantized
tables, say) brings its own oracle and reuses everything else.

Large tables are judged by their rows: a ``(V, D)`` tensor is described by the rows that the
call references ([`ExpectedRows`][]) plus what every other row must hold exactly (zeros, or
the row as it was), so a table of 262,144 rows is never converted to float64 as a whole.
The rows as they were are a copy of a table of up to [`COPY_MAX_ELEMENTS`][] elements; a
larger table (past ``2**31`` elements, say, where a copy would not fit beside the table and its
gradient) is remembered by a digest of each row ([`RowDigests`][]), and read in chunks of
[`CHUNK_ELEMENTS`][] wherever it is read whole.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, Union

import torch

#: Tables of up to this many elements are copied to judge the rows a call must leave alone
#: (``max_norm``); larger ones are digested row by row ([`RowDigests`][]).
COPY_MAX_ELEMENTS = 1 << 22
#: Elements read at a time where a large table is read whole (a float64 chunk is 32 MiB).
CHUNK_ELEMENTS = 1 << 22


def row_chunks(num_rows: int, dim: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` row ranges of about ``CHUNK_ELEMENTS`` elements that cover ``num_rows``."""
    step = max(1, CHUNK_ELEMENTS // max(dim, 1))
    for lo in range(0, num_rows, step):
        yield lo, min(num_rows, lo + step)


#: Digests per row: each a sum of the row's 16-bit words times random integers.
_DIGEST_COLUMNS = 3


def _words(rows: torch.Tensor) -> torch.Tensor:
    """The ``(R, D)`` rows as 16-bit words (bytes for 1-byte dtypes), ``(R, W)`` in float64.

    ``-0.0`` is taken as ``+0.0`` and every NaN as one NaN, so that values that compare equal
    (``==``, or both NaN) give equal words, as the judge's exact comparison of an untouched
    row asks. Every word is an integer below ``2**15`` in magnitude, exact in float64.
    """
    x = rows.detach()
    if x.dtype.is_floating_point:
        x = x.clone(memory_format=torch.contiguous_format)  # a transposed table too
        x += 0.0  # -0.0 + 0.0 == +0.0
        x.masked_fill_(x.isnan(), float("nan"))
    else:
        x = x.contiguous()
    word = torch.int8 if x.element_size() == 1 else torch.int16
    return x.view(word).to(torch.float64)


@functools.lru_cache(maxsize=8)
def _coefficients(width: int, device: torch.device) -> torch.Tensor:
    """``(W, 3)`` nonzero random integers small enough that every digest is exact in float64.

    A row's digest sums ``W`` products of a word (below ``2**15``) and a coefficient (at most
    ``2**52 / (W 2**15)``): every partial sum is an integer below ``2**52``, so any order of
    summation gives the same digest, bit for bit.
    """
    limit = max(1, 2 ** (52 - 15 - max(width, 1).bit_length()))
    g = torch.Generator().manual_seed(0x5EED)
    c = torch.randint(1, limit + 1, (width, _DIGEST_COLUMNS), generator=g, dtype=torch.int64)
    sign = torch.randint(0, 2, c.shape, generator=g, dtype=torch.int64) * 2 - 1
    return (c * sign).to(device=device, dtype=torch.float64)


def _digest_rows(rows: torch.Tensor) -> torch.Tensor:
    """``(R, 3)`` float64 digests of the rows: their words times random integers, summed.

    Exact integer arithmetic (see [`_coefficients`][]): a change of one word always changes
    every digest of its row; changes of several words leave all three unchanged with a
    chance of about ``2**-60`` for a row of 1,024 float16 values.
    """
    words = _words(rows)
    return words @ _coefficients(words.shape[1], words.device)


@dataclass(frozen=True)
class RowDigests:
    """Digests of each row of a ``(V, D)`` table: the rows as they were, at ``24 V`` bytes.

    Each row's 16-bit words are multiplied by three columns of random integers and summed,
    exactly (see ``_digest_rows``): a row that a call changes keeps all three digests with a
    chance of about ``2**-60`` (never when one word changes). Rows whose values compare equal
    (``-0.0`` and ``0.0``, two NaNs) get equal digests. A chunk is one matrix product, so a
    table past ``2**31`` elements is digested in seconds.

    Attributes:
        digests: ``(V, 3)`` float64 on the CPU.
        shape: the table's ``(V, D)``.
    """

    digests: torch.Tensor
    shape: tuple[int, int]

    @classmethod
    def of(cls, table: torch.Tensor) -> RowDigests:
        """The digests of ``table``'s rows, read a chunk at a time."""
        v, d = table.shape
        # One tensor for all digests: small results kept between the chunks' temporaries
        # would fragment the heap (a table of 4 GiB grew the process by as much).
        digests = torch.empty(v, _DIGEST_COLUMNS, dtype=torch.float64)
        for lo, hi in row_chunks(v, d):
            digests[lo:hi] = _digest_rows(table[lo:hi])
        return cls(digests, (v, d))

    def changed(self, table: torch.Tensor) -> torch.Tensor:
        """``(V,)`` bool on the CPU: the rows of ``table`` whose digest differs from theirs."""
        if tuple(table.shape) != self.shape:
            return torch.ones(self.shape[0], dtype=torch.bool)
        return (RowDigests.of(table).digests != self.digests).any(dim=1)


#: What the rows of a ``(V, D)`` tensor off ``ExpectedRows.rows`` must hold.
Rest = Union[torch.Tensor, RowDigests, None]  # noqa: UP007 - py3.10 alias


def table_as_it_was(table: torch.Tensor) -> torch.Tensor | RowDigests:
    """What a judge needs to tell the rows a call changed: a copy, or [`RowDigests`][].

    Taken before the call; a copy up to ``COPY_MAX_ELEMENTS`` elements, digests beyond
    (where a copy would be as large as the table).
    """
    return table.detach().clone() if table.numel() <= COPY_MAX_ELEMENTS else RowDigests.of(table)


@dataclass
class ExpectedRows:
    """The exact value of a ``(V, D)`` tensor, known row by row on ``rows``.

    Attributes:
        rows: the sorted rows that hold computed values.
        values: ``(R, D)`` float64 exact values of those rows.
        bound: ``(R, D)`` float64 bounds on ``|actual - exact|`` there.
        num_rows: ``V``.
        rest: what every other row must equal exactly: ``None`` for zeros, a ``(V, D)``
            tensor (e.g. the table as it was before the call), or the [`RowDigests`][] of
            that table (a large one: every other row must keep its digest).
        note: said after a failure message (e.g. how ties were resolved).
    """

    rows: list[int]
    values: torch.Tensor
    bound: torch.Tensor
    num_rows: int
    rest: Rest = None
    note: str = ""

    def full(self, lo: int = 0, hi: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``lo:hi`` (default: all) of the exact values and bounds, float64 on the CPU.

        For messages, a chunk at a time (see [`row_chunks`][]) where the tensor is large.

        Raises:
            ValueError: ``rest`` is a [`RowDigests`][], which holds no values.
        """
        if isinstance(self.rest, RowDigests):
            raise ValueError("the rows off ExpectedRows.rows are known by their digests only")
        hi = self.num_rows if hi is None else hi
        dim = self.values.shape[1] if self.values.dim() == 2 else 0
        if self.rest is None:
            values = torch.zeros(hi - lo, dim, dtype=torch.float64)
        else:
            values = self.rest.detach()[lo:hi].to(device="cpu", dtype=torch.float64, copy=True)
            dim = values.shape[1]
        bound = torch.zeros(hi - lo, dim, dtype=torch.float64)
        rows = torch.tensor(self.rows, dtype=torch.int64)
        first, last = (int(torch.searchsorted(rows, x)) for x in (lo, hi))
        if last > first:
            local = rows[first:last] - lo
            values[local] = self.values[first:last]
            bound[local] = self.bound[first:last]
        return values, bound


class Oracle(Protocol):
    """The exact reference of one call, asked by the judge in this order.

    An oracle that subclasses it inherits the answers of a call without ``max_norm``, ties
    or ``per_sample_weights``: ``renormed``, ``weight_grad_explaining`` and
    ``per_sample_weights_grad`` return ``None``, and ``output_shape_text`` is a lookup's.
    """

    #: How the expected output shape is named in messages, e.g. ``"(*input.shape, D)"``.
    output_shape_text: str = "(*input.shape, D)"
    #: Whether the exact output on the negated table is the negated output: negation is exact
    #: and the rounding symmetric, so a sum's exact value and bound negate with it; a
    #: reduction that negation does not commute with (``max``) says otherwise.
    negates: bool = True

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact output (float64, CPU) and its bound (``None``: exact, signed zeros too)."""
        ...

    def negated_output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact output and bound of the call on the negated table (or negated scales)."""
        expected, bound = self.output()
        return -expected, bound

    def renormed(self) -> ExpectedRows | None:
        """The table after ``max_norm``'s in-place renorm, or ``None`` without ``max_norm``."""
        return None

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """The exact gradient of the table for the upstream gradient ``grad_output``."""
        ...

    def weight_grad_explaining(
        self, grad_output: torch.Tensor, actual: torch.Tensor
    ) -> ExpectedRows | None:
        """Another valid gradient that explains ``actual`` (its rows), or ``None``.

        Where the gradient is not unique (ties in a ``max`` bag), the judge asks for the valid
        gradient closest to the candidate's before it reports a difference; ``None`` (the
        default) where it is unique.
        """
        return None

    def per_sample_weights_grad(
        self, grad_output: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The exact gradient of ``per_sample_weights`` and its bound, or ``None`` without them."""
        return None
