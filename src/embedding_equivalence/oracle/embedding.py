r"""The exact float64 reference and the error bounds that the candidates are held to.

The oracle is written from the definitions, with Python's exactly rounded ``math.fsum`` for
every sum, and never calls an embedding kernel, so a bug in torch's own kernels is caught too.

**Forward.** ``out[n] = W[ids[n]]`` copies a row: no arithmetic, so a correct forward is
exact and the bound is zero. With ``max_norm`` the referenced rows are first rescaled to
``r * max_norm / (||r||_p + 1e-7)`` when ``||r||_p > max_norm``; the candidate computes the
norm in floating point, so there the bound is relative (see [`renorm_error_bound`][]).

**Backward.** Row ``v`` of the weight's gradient is the sum of the ``k = count(v)`` upstream
gradient rows whose id is ``v``:

.. math:: g_v = \sum_{n:\,\mathrm{ids}_n = v} G_n .

Any order of ``k - 1`` floating-point additions with unit roundoff at most ``u``, followed by
at most one rounding to the output dtype, satisfies the recursive-summation bound (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 4.4 and Lemma 3.1):

.. math:: |\hat g_v - g_v| \le \gamma_k \sum_n |G_n|, \qquad
          \gamma_k = \frac{k u}{1 - k u}\quad (k u < 1).

``scale_grad_by_freq`` divides by ``k``: one rounding of ``1/k`` and one of the product (or of
each scaled term) add two to the count, giving ``gamma_{k+2}``. The oracle itself rounds
twice in float64 (the correctly rounded ``fsum`` and the division), which adds
``2 u_{64} \sum |G_n| / k``; and a result in the subnormal range can lose up to half the
smallest subnormal per rounding. Every gradient entry is therefore held to

.. math:: |\hat g_{v,d} - g_{v,d}| \le \big(\gamma_{k+s}(u) + 2 u_{64}\big)
          \frac{\sum_n |G_{n,d}|}{c} + (k + s)\,\eta ,

with ``s = 2, c = k`` under ``scale_grad_by_freq`` (else ``s = 0, c = 1``), ``u`` the unit
roundoff of the dtype (``eps / 2``: ``2^-11`` for float16, ``2^-8`` for bfloat16, ``2^-24``
for float32, ``2^-53`` for float64) and ``eta`` half its smallest subnormal (float64's smallest
subnormal itself: see ``bounds.subnormal_loss``). The padding row and rows that no id
references must be exactly zero. Nothing here is tuned by hand.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..forms.validation import padding_row
from .bounds import U64, gammas, grouped_sums, renorm_error_bound, subnormal_loss, unit_roundoff
from .call import Call
from .expected import ExpectedRows, Oracle, table_as_it_was


def flat_ids(input: torch.Tensor) -> list[int]:
    """The ids of ``input`` as a flat list of Python ints (read once, on the CPU)."""
    return [int(i) for i in input.detach().reshape(-1).cpu().tolist()]


def _norm(row: list[float], p: float) -> float:
    if math.isinf(p):
        # NaN propagates, as in torch.linalg.vector_norm (Python's max would skip it unless it
        # came first).
        return math.nan if any(map(math.isnan, row)) else max(map(abs, row), default=0.0)
    if p == 1:
        return math.fsum(abs(x) for x in row)
    if p == 2:
        return math.sqrt(math.fsum(x * x for x in row))
    return math.fsum(abs(x) ** p for x in row) ** (1 / p)


def renorm_row(row: list[float], max_norm: float, norm_type: float) -> list[float]:
    """``row`` rescaled by ``max_norm / (norm + 1e-7)`` if its norm exceeds ``max_norm``."""
    norm = _norm(row, norm_type)
    if norm > max_norm:
        scale = max_norm / (norm + 1e-7)
        return [x * scale for x in row]
    return row


def referenced_rows(
    weight: torch.Tensor, rows: list[int], max_norm: float | None, norm_type: float
) -> torch.Tensor:
    """The ``(R, D)`` float64 CPU values of ``rows`` of ``weight``, renormalized by ``max_norm``.

    Only the referenced rows are read (one gather), so a table of 262,144 rows costs what its
    referenced rows cost.
    """
    index = torch.tensor(rows, dtype=torch.int64, device=weight.device)
    values = weight.detach().index_select(0, index).to(device="cpu", dtype=torch.float64)
    if max_norm is None:
        return values
    renormed = [renorm_row(row, max_norm, norm_type) for row in values.tolist()]
    return torch.tensor(renormed, dtype=torch.float64).reshape(values.shape)


def renormed_table(
    weight: torch.Tensor, ids: list[int], max_norm: float | None, norm_type: float
) -> torch.Tensor:
    """The whole table in float64 on the CPU, with the rows in ``ids`` renormalized."""
    table = weight.detach().to(device="cpu", dtype=torch.float64).clone()
    if max_norm is not None and ids:
        rows = sorted(set(ids))
        table[rows] = referenced_rows(weight, rows, max_norm, norm_type)
    return table


def renorm_expected(
    weight: torch.Tensor, rows: list[int], max_norm: float, norm_type: float, dtype: torch.dtype
) -> tuple[ExpectedRows, torch.Tensor]:
    """The table after ``max_norm``'s renorm of ``rows``, read before the call renorms it.

    The embedding and bag oracles' answer to the judge's question "which table must the call
    leave?": the renormed ``rows``, each entry within
    [`renorm_error_bound`][embedding_equivalence.oracle.bounds.renorm_error_bound] (in
    ``dtype``) of the exact value, and every other row as it was (a copy, or digests:
    [`table_as_it_was`][embedding_equivalence.oracle.expected.table_as_it_was]).

    Returns:
        ``(expected, originals)``: the
        [`ExpectedRows`][embedding_equivalence.oracle.expected.ExpectedRows] of the table
        after the call, and the ``(R, D)`` float64 values of ``rows`` before it.
    """
    originals = referenced_rows(weight, rows, None, norm_type)
    bound = renorm_error_bound(originals, max_norm, dtype)
    values = referenced_rows(weight, rows, max_norm, norm_type)
    expected = ExpectedRows(rows, values, bound, weight.shape[0], rest=table_as_it_was(weight))
    return expected, originals


def _grad_rows(
    ids: list[int], grad_output: torch.Tensor, padding_idx: int | None, scale_grad_by_freq: bool
) -> tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The referenced rows with their exact gradient, ``sum |G|`` and id counts.

    Gradient and sums are divided by the count under ``scale_grad_by_freq``; the padding
    row's are zero. The upstream rows are grouped by id and each group is summed exactly
    ([`grouped_sums`][embedding_equivalence.oracle.bounds.grouped_sums]: no Python loop over
    the ids, so ``2**17`` ids cost what their ``fsum``s cost).
    """
    dim = grad_output.shape[-1] if grad_output.dim() > 0 else 0
    g = grad_output.detach().to(device="cpu", dtype=torch.float64).reshape(len(ids), dim)
    unique, row_of = torch.unique(torch.tensor(ids, dtype=torch.int64), return_inverse=True)
    rows = unique.tolist()
    grad, abs_sum, count = grouped_sums(row_of.reshape(-1), g, len(rows))
    if scale_grad_by_freq:
        grad, abs_sum = grad / count[:, None], abs_sum / count[:, None]
    if padding_idx in rows:
        grad[rows.index(padding_idx)] = abs_sum[rows.index(padding_idx)] = 0.0
    return rows, grad, abs_sum, count


def _scatter(rows: list[int], compact: torch.Tensor, num_rows: int) -> torch.Tensor:
    out = torch.zeros(num_rows, *compact.shape[1:], dtype=compact.dtype)
    out[rows] = compact  # no rows: an empty index, which writes nothing
    return out


def _expected_grad(
    ids: list[int],
    grad_output: torch.Tensor,
    num_rows: int,
    dtype: torch.dtype,
    padding: int | None,
    scale_grad_by_freq: bool,
) -> ExpectedRows:
    """The exact gradient of the referenced rows, and its bound row by row (no Python loop).

    ``(gamma_{k+s}(u) + 2 u_64) * abs_sum + (k + s) * eta`` with ``k`` the row's count and
    ``s = 2`` under ``scale_grad_by_freq`` (``abs_sum``, the sums of ``|grad_output|``, is
    then divided by the count); the padding row's gradient must be exactly zero: bound 0
    (not ``k * eta``). ``dtype`` is the dtype in which the candidate computes the gradient.
    """
    rows, grad, abs_sum, count = _grad_rows(ids, grad_output, padding, scale_grad_by_freq)
    u, eta = unit_roundoff(dtype), subnormal_loss(dtype)
    k = count.to(torch.float64) + (2 if scale_grad_by_freq else 0)
    bound = (gammas(k, u) + 2 * U64)[:, None] * abs_sum + (k * eta)[:, None]
    if padding in rows:
        bound[rows.index(padding)] = 0.0
    return ExpectedRows(rows, grad, bound, num_rows)


def reference_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact forward in float64 on the CPU, and the table after ``max_norm``'s renorm.

    ``padding_idx`` does not change the forward (the padding row is looked up like any other);
    it is accepted so that a call's keyword arguments can be passed through unchanged.

    Args:
        input: ids of any shape ``(*batch)``, all in ``[0, V)``.
        weight: ``(V, D)`` floating table (not modified).
        padding_idx: ignored by the forward.
        max_norm: rescale the referenced rows whose ``norm_type``-norm exceeds it.
        norm_type: the ``p`` of the p-norm.

    Returns:
        ``(out, table)``: ``out`` of shape ``(*batch, D)`` and the (renormalized) ``(V, D)``
        table, both float64 on the CPU.
    """
    oracle = EmbeddingOracle(input, weight, padding_idx=padding_idx, max_norm=max_norm,
                             norm_type=norm_type)  # fmt: skip
    return oracle.output()[0], renormed_table(weight, oracle.ids, max_norm, norm_type)


def reference_embedding_grad(
    input: torch.Tensor,
    grad_output: torch.Tensor,
    num_embeddings: int,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The weight's gradient in float64, with exactly rounded row sums.

    Args:
        input: ids of any shape ``(*batch)``.
        grad_output: upstream gradient ``(*batch, D)``.
        num_embeddings: ``V``.
        padding_idx: row whose gradient is zero (negative counts from the end).
        scale_grad_by_freq: divide row ``v`` by ``count(v)``.

    Returns:
        ``(grad, abs_sum, count)``: the ``(V, D)`` gradient, the ``(V, D)`` sums of
        ``|grad_output|`` that the error bound scales with (already divided by the count
        under ``scale_grad_by_freq``), and the ``(V,)`` id counts, all on the CPU.
    """
    padding = padding_row(padding_idx, num_embeddings)
    rows, *compact = _grad_rows(flat_ids(input), grad_output, padding, scale_grad_by_freq)
    grad, abs_sum, count = (_scatter(rows, values, num_embeddings) for values in compact)
    return grad, abs_sum, count


def gradient_error_bound(
    input: torch.Tensor,
    grad_output: torch.Tensor,
    num_embeddings: int,
    dtype: torch.dtype,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Per-element bound on ``|grad - exact|`` for a ``(V, D)`` embedding gradient in ``dtype``.

    ``(gamma_{k+s}(u) + 2 u_64) * sum_n |G[n, d]| / c + (k + s) * eta`` for row ``v`` with
    ``k = count(v)``; see the module documentation for the derivation. Zero for the padding row
    and for rows that no id references (their gradient must be exactly zero).

    Args:
        input: ids of any shape ``(*batch)``.
        grad_output: upstream gradient ``(*batch, D)``.
        num_embeddings: ``V``.
        dtype: dtype in which the candidate computes the gradient.
        padding_idx: row that must have an exactly zero gradient.
        scale_grad_by_freq: whether the gradient is divided by the id counts.

    Returns:
        ``(V, D)`` float64 tensor of bounds on the CPU.
    """
    padding = padding_row(padding_idx, num_embeddings)
    ids = flat_ids(input)
    expected = _expected_grad(ids, grad_output, num_embeddings, dtype, padding, scale_grad_by_freq)
    return expected.full()[1]


class EmbeddingOracle(Oracle):
    """The exact reference of one ``F.embedding`` call (the ``Oracle`` seam).

    Built from the call's ``input`` and the table as it was before the call; reads only the
    rows that ``input`` references. The embedding's gradient is unique, and ``F.embedding``
    has no ``per_sample_weights``: ``weight_grad_explaining`` and
    ``per_sample_weights_grad`` are ``None``.

    Args:
        input: ids of any shape, all in ``[0, V)``.
        weight: the ``(V, D)`` table before the call, read here and not kept: its referenced
            rows, and with ``max_norm`` what tells the rows the call changes (a copy, or a
            digest of each row of a large table; see
            [`table_as_it_was`][embedding_equivalence.oracle.expected.table_as_it_was]). The
            candidate may then renormalize the table in place.
        padding_idx: row that gets no gradient (negative counts from the end).
        max_norm: renorm threshold, or ``None``.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: divide each row's gradient by its count.
        **_: other options of the call (``sparse``) that do not change the values.
    """

    def __init__(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        *,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        **_: Any,
    ) -> None:
        self.ids = flat_ids(input)
        self.input_shape = tuple(input.shape)
        self.num_embeddings, self.dim = weight.shape
        self.dtype = weight.dtype
        self.padding = padding_row(padding_idx, self.num_embeddings)
        self.scale_grad_by_freq = scale_grad_by_freq
        self.rows = sorted(set(self.ids))
        self._renormed: ExpectedRows | None = None
        if max_norm is None:
            self._values = referenced_rows(weight, self.rows, None, norm_type)
        else:
            self._renormed = renorm_expected(weight, self.rows, max_norm, norm_type, self.dtype)[0]
            self._values = self._renormed.values

    def _gather(self, compact: torch.Tensor) -> torch.Tensor:
        rows = torch.tensor(self.rows, dtype=torch.int64)
        index = torch.searchsorted(rows, torch.tensor(self.ids, dtype=torch.int64))
        return compact.index_select(0, index).reshape(*self.input_shape, self.dim)

    @classmethod
    def for_call(cls, call: Call) -> EmbeddingOracle:
        """The oracle of ``call`` (its ``weight`` must be the table as it was before the call)."""
        return cls(call.input, call.weight, **call.kwargs)

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``out[n] = W[ids[n]]`` exactly; bounded only by the renorm's rounding."""
        bound = None
        if self._renormed is not None and self.ids:
            bound = self._gather(self._renormed.bound)
        return self._gather(self._values), bound

    def renormed(self) -> ExpectedRows | None:
        """The referenced rows after the renorm; every other row must be untouched."""
        return self._renormed

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """Each referenced row sums its ids' upstream rows; the padding row is exactly zero."""
        return _expected_grad(self.ids, grad_output, self.num_embeddings, self.dtype,
                              self.padding, self.scale_grad_by_freq)  # fmt: skip
