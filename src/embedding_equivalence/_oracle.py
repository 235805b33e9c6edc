r"""The exact float64 reference and the error bounds that the candidates are held to.

The oracle is written from the definitions, with Python's exactly rounded ``math.fsum`` for
every sum, and never calls an embedding kernel, so a bug in torch's own kernels is caught too.

**Forward.** ``out[n] = W[ids[n]]`` copies a row: no arithmetic, so a correct forward is
exact and the bound is zero. With ``max_norm`` the referenced rows are first rescaled to
``r * max_norm / (||r||_p + 1e-7)`` when ``||r||_p > max_norm``; the candidate computes the
norm in floating point, so there the bound is relative (see :func:`renorm_error_bound`).

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
for float32, ``2^-53`` for float64) and ``eta`` half its smallest subnormal. The padding row
and rows that no id references must be exactly zero. Nothing here is tuned by hand.

**Bags** (``F.embedding_bag``). Bag ``b`` holds the positions ``i`` of its ``k = k_b`` ids
other than ``padding_idx``; its row is a reduction of the terms ``t_i = c_i x_i`` with
``x_i = W[ids_i, d]`` and ``c_i = 1``, or ``c_i = p_i`` (``per_sample_weights``). All bounds
below come from one lemma (Higham, Lemma 3.1 with eq. 4.4): if each term reaches the computed
result through at most ``m`` roundings (factors ``1 + delta``, ``|delta| <= u``; a rounding
in a wider accumulator has ``|delta| <= u`` too), then

.. math:: |\hat S - S| \le \gamma_m \sum_i |t_i| .

- ``sum``: ``k - 1`` additions and one rounding to the dtype, ``m = k`` (as above).
- ``per_sample_weights``: one more rounding for the product ``p_i x_i``: ``m = k + 1``. (A
  bag-count matrix that first adds the weights of a repeated id, then multiplies, spends
  ``c - 1`` additions there and saves as many in the sum over rows: still ``m <= k + 1``.)
- ``mean``: the sum divided by ``k``: one rounding for the quotient, or two for the
  reciprocal and the product, ``m = k + 2``; the bound scales with ``sum |x_i| / k``.
- ``max``: a selection, no arithmetic: exact (bound zero).

The oracle rounds too: ``fsum`` once, the division of ``mean`` once, and (float64 tables only)
each product ``p_i x_i`` once; products of two float32/float16/bfloat16 values are exact in
float64 (at most 48 significant bits). That is at most ``s + 1`` float64 roundings, where
``s = m - k`` counts the extra roundings above, hence ``gamma_{s+1}(u_64)``. With subnormal
results each of the ``k + s`` roundings may lose ``eta``. Every forward entry is held to

.. math:: |\hat y_{b,d} - y_{b,d}| \le \big(\gamma_{k+s}(u) + \gamma_{s+1}(u_{64})\big)
          A_{b,d} + R_{b,d} + (k + s)\,\eta,
          \qquad A_{b,d} = \sum_i |c_i| \, (|x_i| + r_i) \; (/ k \text{ for mean}),

with ``s = 0`` (sum), ``1`` (weighted sum), ``2`` (mean). ``r_i`` is zero, or with ``max_norm``
the :func:`renorm_error_bound` of the entry: the candidate's renormalized entry differs from
the oracle's by at most ``r_i``, which moves the exact sum by ``R = sum_i |c_i| r_i`` (``/ k``
for mean) and the maximum by at most ``R = max_i r_i`` (a maximum is 1-Lipschitz in each
argument). An empty bag (or one of padding only) must be exactly zero, and a non-finite exact
value must be matched exactly (NaN by NaN). The signs of zeros are not compared: a product
adds ``+0.0`` terms, so ``-0.0`` may come back as ``+0.0`` in any mode.

**Bag gradients.** Row ``v`` of the weight's gradient collects, over the ``k_v`` occurrences
``i`` of ``v`` in the bags, the terms ``c_i G[b_i, d]`` with ``c_i = 1`` (sum), ``p_i``
(weighted sum, ``s = 1``) or ``1 / k_{b_i}`` (mean, ``s = 2``): the same lemma gives the same
bound with ``k = k_v`` and ``A = sum_i |c_i G[b_i, d]|``. ``scale_grad_by_freq`` divides by
``k_v`` (two more roundings: ``s + 2``, one more in the oracle). The padding row, rows that
occur in no bag and rows that occur only after the last offset must be exactly zero.

In ``max`` mode the upstream gradient ``G[b, d]`` goes to one maximizing entry of bag ``b``
in column ``d``, so row ``v`` collects a sum of ``k`` = (number of bags assigned to ``v``)
terms: ``gamma_k(u) + gamma_1(u_64)`` times ``sum |G|``. Where several rows tie for the
maximum, every choice is a valid (sub)gradient, and kernels differ (``F.embedding_bag``
keeps the first maximum, a scatter-based kernel the last). The check therefore accepts a
gradient if *some* assignment of each tied bag to one of its maximizing rows explains it
within the bound: per column, tied bags that share rows form components, and each component
is searched depth-first, pruned by the interval that the unassigned bags can still add to each
row. A row is a maximizer of its bag when its value equals the maximum (NaN, if the column
holds one, is the maximum, as in ``torch.amax``); with ``max_norm``, when it lies within the
renorm bounds of the maximum (``x_i + r_i >= max_j (x_j - r_j)``). Should a component need
more than :data:`MAX_TIE_SEARCH` search steps, its rows are not checked (never a false alarm;
no drawn case comes close).

The gradient of ``per_sample_weights`` is ``<W[ids_i], G[b_i]>``, a dot product of ``D``
terms: ``D`` products, ``D - 1`` additions and one rounding to the dtype, ``gamma_{D+1}(u)``
(Higham eq. 3.5), plus ``gamma_2(u_64)`` for the oracle (a product in float64 and ``fsum``),
the renorm perturbation ``sum_d r_d |G_d|`` and ``(D + 1) eta``. Entries of padding ids and
of ids after the last offset must be exactly zero.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import NamedTuple

import torch

__all__ = [
    "MAX_TIE_SEARCH",
    "BagGradients",
    "embedding_bag_error_bound",
    "embedding_bag_gradient_error_bound",
    "gamma",
    "gradient_error_bound",
    "reference_embedding",
    "reference_embedding_bag",
    "reference_embedding_bag_grad",
    "reference_embedding_grad",
    "renorm_error_bound",
    "unit_roundoff",
]

_U64 = 2.0**-53


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff ``u = eps / 2`` of a floating dtype: the largest relative rounding error.

    Args:
        dtype: a floating ``torch.dtype``.

    Returns:
        ``2**-11`` for float16, ``2**-8`` for bfloat16, ``2**-24`` for float32, ``2**-53`` for
        float64.

    Raises:
        TypeError: ``dtype`` is not floating point.
    """
    if not dtype.is_floating_point:
        raise TypeError(f"unit_roundoff: {dtype} is not a floating dtype")
    return torch.finfo(dtype).eps / 2


def gamma(k: int, u: float) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``; ``inf`` when ``k u >= 1`` (no bound exists).

    Args:
        k: number of roundings.
        u: unit roundoff.

    Returns:
        The constant of the recursive-summation bound.
    """
    ku = k * u
    return math.inf if ku >= 1 else ku / (1 - ku)


def _flat_ids(input: torch.Tensor) -> list[int]:
    return [int(i) for i in input.detach().reshape(-1).cpu().tolist()]


def _norm(row: list[float], p: float) -> float:
    if math.isinf(p):
        # NaN propagates, as in torch.linalg.vector_norm (Python's max would skip it unless it
        # came first).
        return _nan_max([abs(x) for x in row]) if row else 0.0
    if p == 1:
        return math.fsum(abs(x) for x in row)
    if p == 2:
        return math.sqrt(math.fsum(x * x for x in row))
    return math.fsum(abs(x) ** p for x in row) ** (1 / p)


def _renorm_row(row: list[float], max_norm: float, norm_type: float) -> list[float]:
    """``row`` rescaled to ``max_norm / (norm + 1e-7)`` if its norm exceeds ``max_norm``."""
    norm = _norm(row, norm_type)
    if norm > max_norm:
        scale = max_norm / (norm + 1e-7)
        return [x * scale for x in row]
    return row


def _renormed_table(
    weight: torch.Tensor, ids: list[int], max_norm: float | None, norm_type: float
) -> torch.Tensor:
    """The table in float64 on the CPU, with the rows in ``ids`` renormalized by ``max_norm``."""
    table = weight.detach().to(device="cpu", dtype=torch.float64).clone()
    if max_norm is not None:
        for v in sorted(set(ids)):
            row = table[v].tolist()
            renormed = _renorm_row(row, max_norm, norm_type)
            if renormed is not row:
                table[v] = torch.tensor(renormed, dtype=torch.float64)
    return table


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
    del padding_idx
    ids = _flat_ids(input)
    table = _renormed_table(weight, ids, max_norm, norm_type)
    rows = [table[v] for v in ids]
    dim = table.shape[1]
    out = torch.stack(rows) if rows else torch.zeros(0, dim, dtype=torch.float64)
    return out.reshape(*input.shape, dim), table


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
    ids = _flat_ids(input)
    dim = grad_output.shape[-1] if grad_output.dim() > 0 else 0
    g = grad_output.detach().to(device="cpu", dtype=torch.float64).reshape(len(ids), dim)
    rows = g.tolist()
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num_embeddings
    groups: dict[int, list[int]] = defaultdict(list)
    for n, v in enumerate(ids):
        groups[v].append(n)
    grad = torch.zeros(num_embeddings, dim, dtype=torch.float64)
    abs_sum = torch.zeros(num_embeddings, dim, dtype=torch.float64)
    count = torch.zeros(num_embeddings, dtype=torch.int64)
    for v, positions in groups.items():
        count[v] = len(positions)
        if v == padding_idx:
            continue
        divisor = len(positions) if scale_grad_by_freq else 1
        grad[v] = torch.tensor(
            [math.fsum(rows[n][d] for n in positions) / divisor for d in range(dim)],
            dtype=torch.float64,
        )
        abs_sum[v] = torch.tensor(
            [math.fsum(abs(rows[n][d]) for n in positions) / divisor for d in range(dim)],
            dtype=torch.float64,
        )
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
    _, abs_sum, count = reference_embedding_grad(
        input, grad_output, num_embeddings, padding_idx, scale_grad_by_freq
    )
    return _bound_from_sums(abs_sum, count, dtype, padding_idx, scale_grad_by_freq)


def _bound_from_sums(
    abs_sum: torch.Tensor,
    count: torch.Tensor,
    dtype: torch.dtype,
    padding_idx: int | None,
    scale_grad_by_freq: bool,
) -> torch.Tensor:
    """:func:`gradient_error_bound` from the sums and counts of :func:`reference_embedding_grad`.

    Lets a caller that already has the exact gradient avoid summing everything twice.
    """
    u = unit_roundoff(dtype)
    eta = float(torch.finfo(dtype).smallest_normal) * torch.finfo(dtype).eps / 2
    extra = 2 if scale_grad_by_freq else 0
    k = count.to(torch.float64) + extra
    ku = k * u  # gamma_k for every row at once; inf where k u >= 1 (no bound exists)
    gam = torch.where(ku < 1, ku / (1 - ku), torch.full_like(ku, math.inf))
    bound = (gam + 2 * _U64)[:, None] * abs_sum + (k * eta)[:, None]
    bound[count == 0] = 0.0
    if padding_idx is not None:
        bound[padding_idx] = 0.0
    return bound


def renorm_error_bound(
    weight: torch.Tensor, max_norm: float, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Per-element bound on a row renormalized by ``max_norm`` (relative to the original row).

    The candidate computes ``||r||_p`` with at most ``D`` roundings in the accumulation and one
    to the dtype (relative error ``gamma_{D+1}``), then multiplies by the scale (one more
    rounding, and one for the scale itself): ``gamma_{D+3}(u) |r|``. When ``||r||_p`` lies
    within that error of ``max_norm`` the candidate and the oracle may disagree on whether to
    rescale at all; the scale then differs from 1 by at most that error plus
    ``1e-7 / max_norm``, which is added. Plus ``2 u_64`` for the oracle's own roundings.

    Args:
        weight: the ``(V, D)`` table before the renorm.
        max_norm: the renorm threshold.
        dtype: dtype the candidate works in (default: the weight's).

    Returns:
        ``(V, D)`` float64 bounds on the CPU.
    """
    dt = dtype or weight.dtype
    dim = weight.shape[1]
    rel = gamma(dim + 3, unit_roundoff(dt)) + 2 * _U64
    if max_norm > 0:
        rel += 1e-7 / max_norm
    w = weight.detach().to(device="cpu", dtype=torch.float64).abs()
    return rel * w


# --- EmbeddingBag ---------------------------------------------------------------------------

#: Search steps allowed per tied component in the ``max`` gradient check (see above).
MAX_TIE_SEARCH = 20_000

_BAG_MODES = ("sum", "mean", "max")


class BagGradients(NamedTuple):
    """Gradients (or their bounds) of one bag call, float64 on the CPU."""

    weight: torch.Tensor
    """``(V, D)``: of the table."""
    per_sample_weights: torch.Tensor | None
    """Of the input's shape: of ``per_sample_weights`` (``None`` without them)."""


def _exact_sum(values: Iterable[float]) -> float:
    """The correctly rounded sum; ``nan`` for ``inf - inf``, ``+-inf`` beyond float64's range."""
    vals = list(values)
    try:
        return math.fsum(vals)
    except ValueError:  # inf + -inf
        return math.nan
    except OverflowError:  # an intermediate sum left float64's range: redo it exactly
        total = sum((Fraction(x) for x in vals), Fraction(0))
        try:
            return float(total)
        except OverflowError:
            return math.copysign(math.inf, total)


def _nan_max(values: Sequence[float]) -> float:
    """Maximum with NaN propagation (``torch.amax``): NaN if any value is NaN."""
    if any(math.isnan(x) for x in values):
        return math.nan
    return max(values)


def _column_sums(rows: list[list[float]], dim: int) -> list[float]:
    return [_exact_sum(col) for col in zip(*rows, strict=True)] if rows else [0.0] * dim


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _check_bag_input(
    input: torch.Tensor,
    offsets: torch.Tensor | None,
    include_last_offset: bool,
    num_embeddings: int,
    mode: str,
    per_sample_weights: torch.Tensor | None,
) -> None:
    if mode not in _BAG_MODES:
        raise ValueError(f"mode must be one of {_BAG_MODES}, got {mode!r}")
    if input.dtype.is_floating_point:
        raise TypeError(f"ids must be integers, got {input.dtype}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("a 2-D input takes no offsets")
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("a 1-D input needs offsets")
        offs = [int(o) for o in offsets.tolist()]
        n = input.shape[0]
        if include_last_offset and not offs:
            raise ValueError("include_last_offset=True needs at least one offset")
        if not offs and n > 0:
            raise ValueError("no offsets, so no bags, but input holds ids")
        if offs and offs[0] != 0:
            raise ValueError(f"offsets[0] = {offs[0]} must be 0")
        if any(b < a for a, b in itertools.pairwise(offs)):
            raise ValueError("offsets must be non-decreasing")
        if offs and offs[-1] > n:
            raise ValueError(f"offsets[-1] = {offs[-1]} is past the end of input ({n} ids)")
    else:
        raise ValueError(f"input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    ids = _flat_ids(input)
    if any(not 0 <= v < num_embeddings for v in ids):
        raise IndexError(f"an id lies outside [0, {num_embeddings})")
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError("per_sample_weights needs mode='sum'")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError("per_sample_weights must have the input's shape")


class _BagProblem:
    """One bag call, parsed once: the bags, the (renormalized) table and the bound constants."""

    def __init__(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        offsets: torch.Tensor | None,
        max_norm: float | None,
        norm_type: float,
        scale_grad_by_freq: bool,
        mode: str,
        per_sample_weights: torch.Tensor | None,
        include_last_offset: bool,
        padding_idx: int | None,
        dtype: torch.dtype | None,
    ) -> None:
        num_embeddings, dim = weight.shape
        _check_bag_input(
            input, offsets, include_last_offset, num_embeddings, mode, per_sample_weights
        )
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        ids = _flat_ids(input)
        if input.dim() == 2:
            count, length = input.shape
            starts = [b * length for b in range(count)]
            end = count * length
        else:
            assert offsets is not None
            starts = [int(o) for o in offsets.tolist()]
            end = len(ids)
            if include_last_offset:
                end, starts = starts[-1], starts[:-1]
        bounds = [*starts[1:], end] if starts else []
        self.mode = mode
        self.dim = dim
        self.num_embeddings = num_embeddings
        self.input_shape = tuple(input.shape)
        self.ids = ids
        self.padding = padding_idx
        self.scale_grad_by_freq = scale_grad_by_freq
        #: positions of the non-padding entries of each bag
        self.bags = [
            [i for i in range(lo, hi) if ids[i] != padding_idx]
            for lo, hi in zip(starts, bounds, strict=True)
        ]
        self.psw: list[float] | None = None
        if per_sample_weights is not None:
            self.psw = [float(x) for x in per_sample_weights.detach().reshape(-1).cpu().tolist()]
        self._weight = weight
        self._max_norm = max_norm
        self._norm_type = norm_type
        self._table: torch.Tensor | None = None
        referenced = sorted({ids[i] for bag in self.bags for i in bag})
        #: the (renormalized) float64 rows of the table that some bag references
        self.rows: dict[int, list[float]] = {}
        if referenced:
            index = torch.tensor(referenced, device=weight.device)
            values = weight.detach()[index].to(device="cpu", dtype=torch.float64).tolist()
            if max_norm is not None:
                values = [_renorm_row(row, max_norm, norm_type) for row in values]
            self.rows = dict(zip(referenced, values, strict=True))
        self.rb: dict[int, list[float]] | None = None
        if max_norm is not None and referenced:
            bound = renorm_error_bound(weight[referenced], max_norm, dtype or weight.dtype)
            self.rb = {
                v: [_finite(x) for x in row]
                for v, row in zip(referenced, bound.tolist(), strict=True)
            }
        dt = dtype or weight.dtype
        self.u = unit_roundoff(dt)
        self.eta = float(torch.finfo(dt).smallest_normal) * torch.finfo(dt).eps / 2
        #: extra roundings per term (besides the k of a plain sum)
        self.extra = 2 if mode == "mean" else (1 if self.psw is not None else 0)
        #: how often each row occurs in the bags (scale_grad_by_freq's divisor)
        self.counts: dict[int, int] = defaultdict(int)
        for i in range(end):
            self.counts[ids[i]] += 1

    @property
    def table(self) -> torch.Tensor:
        """The whole ``(V, D)`` table in float64 after ``max_norm`` (computed on first use)."""
        if self._table is None:
            self._table = _renormed_table(self._weight, self.ids, self._max_norm, self._norm_type)
        return self._table

    def _coef(self, i: int) -> float:
        return 1.0 if self.psw is None else self.psw[i]

    def _rb(self, v: int) -> list[float]:
        return self.rb[v] if self.rb is not None else [0.0] * self.dim

    # -- forward -----------------------------------------------------------------------------

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out, bound)``, both ``(B, D)`` float64."""
        dim, u, eta, s = self.dim, self.u, self.eta, self.extra
        out: list[list[float]] = []
        bound: list[list[float]] = []
        for bag in self.bags:
            k = len(bag)
            if k == 0:
                out.append([0.0] * dim)
                bound.append([0.0] * dim)
                continue
            xs = [self.rows[self.ids[i]] for i in bag]
            rbs = [self._rb(self.ids[i]) for i in bag]
            if self.mode == "max":
                values = [_nan_max(col) for col in zip(*xs, strict=True)]
                slack = [max(col) for col in zip(*rbs, strict=True)]
            else:
                cs = [self._coef(i) for i in bag]
                values = _column_sums(
                    [[c * x for x in row] for c, row in zip(cs, xs, strict=True)], dim
                )
                mag = _column_sums(
                    [
                        [abs(c) * (abs(x) + r) for x, r in zip(row, rr, strict=True)]
                        for c, row, rr in zip(cs, xs, rbs, strict=True)
                    ],
                    dim,
                )
                pert = _column_sums(
                    [[abs(c) * r for r in rr] for c, rr in zip(cs, rbs, strict=True)], dim
                )
                if self.mode == "mean":
                    values = [x / k for x in values]
                    mag = [x / k for x in mag]
                    pert = [x / k for x in pert]
                g = gamma(k + s, u) + gamma(s + 1, _U64)
                slack = [g * a + r + (k + s) * eta for a, r in zip(mag, pert, strict=True)]
            out.append(values)
            bound.append(
                [b if math.isfinite(y) else 0.0 for y, b in zip(values, slack, strict=True)]
            )
        shape = (len(self.bags), dim)
        return (
            torch.tensor(out, dtype=torch.float64).reshape(shape),
            torch.tensor(bound, dtype=torch.float64).reshape(shape),
        )

    # -- backward ----------------------------------------------------------------------------

    def _occurrences(self) -> dict[int, list[tuple[int, int]]]:
        """Row -> ``(bag, position)`` of each of its occurrences in a bag."""
        occ: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for b, bag in enumerate(self.bags):
            for i in bag:
                occ[self.ids[i]].append((b, i))
        return occ

    def weight_grad_rows(
        self, grad_output: torch.Tensor
    ) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """``(rows, grad, bound)``: the referenced rows and their ``(R, D)`` gradient and bound.

        Every other row's gradient must be exactly zero. ``max``: first maximum of each bag.
        """
        rows = sorted(self.rows)
        position = {v: r for r, v in enumerate(rows)}
        g = grad_output.detach().to(device="cpu", dtype=torch.float64).tolist()
        grad = [[0.0] * self.dim for _ in rows]
        bound = [[0.0] * self.dim for _ in rows]
        if self.mode == "max":
            for d in range(self.dim):
                terms: dict[int, list[float]] = defaultdict(list)
                for b, (cands, _) in enumerate(self._max_candidates(d)):
                    if cands:
                        terms[cands[0]].append(g[b][d])
                for v, ts in terms.items():
                    r = position[v]
                    grad[r][d], bound[r][d] = _sum_and_bound(ts, 0, self.u, self.eta)
        else:
            s = self.extra + (2 if self.scale_grad_by_freq else 0)
            for v, occ in self._occurrences().items():
                k = len(occ)
                if self.mode == "mean":
                    terms_ = [[x / len(self.bags[b]) for x in g[b]] for b, _ in occ]
                else:
                    terms_ = [[self._coef(i) * x for x in g[b]] for b, i in occ]
                sums = _column_sums(terms_, self.dim)
                mags = _column_sums([[abs(x) for x in row] for row in terms_], self.dim)
                div = self.counts[v] if self.scale_grad_by_freq else 1
                gam = gamma(k + s, self.u) + gamma(s + 1, _U64)
                r = position[v]
                grad[r] = [x / div for x in sums]
                bound[r] = [
                    gam * m / div + (k + s) * self.eta if math.isfinite(x) else 0.0
                    for x, m in zip(sums, mags, strict=True)
                ]
        shape = (len(rows), self.dim)
        return (
            rows,
            torch.tensor(grad, dtype=torch.float64).reshape(shape),
            torch.tensor(bound, dtype=torch.float64).reshape(shape),
        )

    def full(self, rows: list[int], *compact: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Scatter ``(R, D)`` tensors of ``rows`` into ``(V, D)`` zeros."""
        result = []
        for t in compact:
            out = torch.zeros(self.num_embeddings, self.dim, dtype=torch.float64)
            if rows:
                out[rows] = t
            result.append(out)
        return tuple(result)

    def weight_grad(self, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(grad, bound)`` of the table, ``(V, D)``; ``max``: first maximum of each bag."""
        rows, grad, bound = self.weight_grad_rows(grad_output)
        full_grad, full_bound = self.full(rows, grad, bound)
        return full_grad, full_bound

    def psw_grad(self, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(grad, bound)`` of ``per_sample_weights``, of the input's shape."""
        g = grad_output.detach().to(device="cpu", dtype=torch.float64).tolist()
        n = len(self.ids)
        grad = [0.0] * n
        bound = [0.0] * n
        d = self.dim
        gam = gamma(d + 1, self.u) + gamma(2, _U64)
        for b, bag in enumerate(self.bags):
            for i in bag:
                x, r = self.rows[self.ids[i]], self._rb(self.ids[i])
                value = _exact_sum(a * c for a, c in zip(x, g[b], strict=True))
                mag = _exact_sum((abs(a) + e) * abs(c) for a, e, c in zip(x, r, g[b], strict=True))
                pert = _exact_sum(e * abs(c) for e, c in zip(r, g[b], strict=True))
                grad[i] = value
                bound[i] = gam * mag + pert + (d + 1) * self.eta if math.isfinite(value) else 0.0
        shape = self.input_shape
        return (
            torch.tensor(grad, dtype=torch.float64).reshape(shape),
            torch.tensor(bound, dtype=torch.float64).reshape(shape),
        )

    # -- max: ties ---------------------------------------------------------------------------

    def _max_candidates(self, d: int) -> list[tuple[list[int], int]]:
        """Per bag, the distinct rows that may hold its maximum in column ``d``.

        The exact maximizers come first, in the order of the bag (the first of them is
        ``F.embedding_bag``'s choice), then the rows that the renorm's rounding may make the
        maximum. With each list, the last exact maximizer (a scatter kernel's choice); an
        empty bag gives ``([], -1)``.
        """
        result: list[tuple[list[int], int]] = []
        for bag in self.bags:
            entries = [
                (self.ids[i], self.rows[self.ids[i]][d], self._rb(self.ids[i])[d]) for i in bag
            ]
            if not entries:
                result.append(([], -1))
                continue
            if any(math.isnan(x) for _, x, _ in entries):
                exact = [v for v, x, _ in entries if math.isnan(x)]
                near: list[int] = []
            else:
                top = max(x for _, x, _ in entries)
                floor = max(x - r for _, x, r in entries)
                exact = [v for v, x, _ in entries if x == top]
                near = [v for v, x, r in entries if x != top and x + r >= floor]
            result.append((list(dict.fromkeys(exact + near)), exact[-1]))
        return result

    def max_grad_matching(
        self, grad_output: torch.Tensor, actual: torch.Tensor
    ) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """Like :meth:`weight_grad_rows`, under the tie assignment that explains ``actual``.

        ``actual`` is the candidate's ``(R, D)`` gradient on the same rows. Starts from the
        first-maximum assignment and, for each component of tied bags whose rows do not
        match, searches for another assignment; the first one that matches replaces the
        default. Components without a match keep the default, so that the comparison reports
        them.
        """
        rows, grad, bound = self.weight_grad_rows(grad_output)
        position = {v: r for r, v in enumerate(rows)}
        g = grad_output.detach().to(device="cpu", dtype=torch.float64).tolist()
        target_rows = actual.detach().to(device="cpu", dtype=torch.float64)
        for d in range(self.dim):
            cands = self._max_candidates(d)
            tied = [(g[b][d], c, last) for b, (c, last) in enumerate(cands) if len(c) > 1]
            if not tied:
                continue
            fixed: dict[int, list[float]] = defaultdict(list)
            for b, (c, _) in enumerate(cands):
                if len(c) == 1:
                    fixed[c[0]].append(g[b][d])
            column = target_rows[:, d].tolist()
            target = {v: column[position[v]] for v in rows}
            for comp_rows, comp_bags in _tie_components(tied):
                if all(
                    _within(target[v], float(grad[position[v], d]), float(bound[position[v], d]))
                    for v in comp_rows
                ):
                    continue
                found = _search_assignment(comp_rows, comp_bags, fixed, target, self.u, self.eta)
                if found is None:
                    continue
                for v, (value, slack) in found.items():
                    grad[position[v], d], bound[position[v], d] = value, slack
        return rows, grad, bound


def _sum_and_bound(terms: list[float], s: int, u: float, eta: float) -> tuple[float, float]:
    """Exact sum of ``terms`` and its bound ``(gamma_{k+s}(u) + gamma_{s+1}(u64)) A + k eta``."""
    k = len(terms)
    value = _exact_sum(terms)
    if not math.isfinite(value):
        return value, 0.0
    mag = _exact_sum(abs(t) for t in terms)
    return value, (gamma(k + s, u) + gamma(s + 1, _U64)) * mag + (k + s) * eta


def _within(actual: float, expected: float, bound: float) -> bool:
    if math.isnan(actual) and math.isnan(expected):
        return True
    return actual == expected or abs(actual - expected) <= bound


_Tied = tuple[float, list[int], int]  # (upstream gradient, candidate rows, last maximizer)


def _tie_components(tied: list[_Tied]) -> list[tuple[list[int], list[_Tied]]]:
    """Group tied bags whose candidate rows overlap (union-find over rows)."""
    parent: dict[int, int] = {}

    def find(v: int) -> int:
        parent.setdefault(v, v)
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for _, cands, _ in tied:
        for v in cands[1:]:
            parent[find(v)] = find(cands[0])
    groups: dict[int, tuple[list[int], list[_Tied]]] = {}
    for item in tied:
        root = find(item[1][0])
        groups.setdefault(root, ([], []))[1].append(item)
    for v in list(parent):
        root = find(v)
        if root in groups:
            groups[root][0].append(v)
    return list(groups.values())


def _search_assignment(
    rows: list[int],
    bags: list[_Tied],
    fixed: dict[int, list[float]],
    target: dict[int, float],
    u: float,
    eta: float,
) -> dict[int, tuple[float, float]] | None:
    """Search for an assignment of the tied ``bags`` to rows that matches ``target``.

    Tries the last maximizer of every bag first (a scatter kernel's choice), then a
    depth-first search pruned by the interval that the unassigned bags can still add to each
    row. Returns the exact value and bound of each row under the first matching assignment,
    or ``None`` if none matches. Past :data:`MAX_TIE_SEARCH` steps it checks what every
    valid assignment satisfies instead (the component's total is conserved, and each row
    lies in its interval): if that holds the rows are accepted (infinite bound), never a
    false alarm; if not, ``None``.
    """
    n = len(bags)
    assigned: dict[int, list[float]] = {v: list(fixed.get(v, ())) for v in rows}

    def leaf() -> dict[int, tuple[float, float]] | None:
        result = {v: _sum_and_bound(assigned[v], 0, u, eta) for v in rows}
        if all(_within(target[v], *result[v]) for v in rows):
            return result
        return None

    for g, _, last in bags:
        assigned[last].append(g)
    found = leaf()
    if found is not None:
        return found
    assigned = {v: list(fixed.get(v, ())) for v in rows}
    # Per row: what the bags from t on can still add at least / at most.
    lo = {v: [0.0] * (n + 1) for v in rows}
    hi = {v: [0.0] * (n + 1) for v in rows}
    for t in range(n - 1, -1, -1):
        g, cands, _ = bags[t]
        for v in rows:
            add = v in cands
            lo[v][t] = lo[v][t + 1] + (min(g, 0.0) if add else 0.0)
            hi[v][t] = hi[v][t + 1] + (max(g, 0.0) if add else 0.0)
    reach = {
        v: _exact_sum(abs(x) for x in fixed.get(v, ())) + sum(abs(g) for g, c, _ in bags if v in c)
        for v in rows
    }
    kmax = {v: len(fixed.get(v, ())) + sum(1 for _, c, _ in bags if v in c) for v in rows}
    # Sound pruning: the loosest bound a row can get, plus float64 slack for the naive sums.
    slack = {
        v: (gamma(kmax[v], u) + gamma(1, _U64) + 4 * (kmax[v] + 1) * _U64) * reach[v]
        + kmax[v] * eta
        for v in rows
    }
    partial = {v: math.fsum(assigned[v]) for v in rows}
    steps = 0

    def feasible(t: int) -> bool:
        return all(
            math.isnan(target[v])
            or partial[v] + lo[v][t] - slack[v] <= target[v] <= partial[v] + hi[v][t] + slack[v]
            for v in rows
        )

    def visit(t: int) -> dict[int, tuple[float, float]] | None:
        nonlocal steps
        steps += 1
        if steps > MAX_TIE_SEARCH:
            raise _SearchExhausted
        if t == n:
            return leaf()
        if not feasible(t):
            return None
        g, cands, _ = bags[t]
        for v in cands:
            saved = partial[v]
            assigned[v].append(g)
            partial[v] = saved + g
            found = visit(t + 1)
            assigned[v].pop()
            partial[v] = saved  # restored exactly, so that no rounding drifts
            if found is not None:
                return found
        return None

    try:
        return visit(0)
    except _SearchExhausted:
        pass
    # Too many assignments to try: accept only what every valid assignment satisfies.
    partial = {v: math.fsum(fixed.get(v, ())) for v in rows}  # the search left it mid-way
    terms = [x for v in rows for x in fixed.get(v, ())] + [g for g, _, _ in bags]
    total = _exact_sum(terms)
    count = len(terms)
    total_bound = (gamma(count, u) + gamma(2, _U64)) * _exact_sum(map(abs, terms)) + count * eta
    actual = _exact_sum(target[v] for v in rows)
    if not _within(actual, total, total_bound) or not feasible(0):
        return None
    return {v: (target[v], math.inf) for v in rows}


class _SearchExhausted(Exception):
    pass


def _problem(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
    dtype: torch.dtype | None = None,
) -> _BagProblem:
    del sparse
    return _BagProblem(
        input,
        weight,
        offsets,
        max_norm,
        norm_type,
        scale_grad_by_freq,
        mode,
        per_sample_weights,
        include_last_offset,
        padding_idx,
        dtype,
    )


def reference_embedding_bag(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact bag reduction in float64 on the CPU, and the table after ``max_norm``.

    Takes ``F.embedding_bag``'s arguments (``scale_grad_by_freq`` and ``sparse`` do not change
    the forward and are accepted so that a call's arguments pass through unchanged). Each
    ``sum`` is correctly rounded (``math.fsum``), ``mean`` divides it by the bag's number of
    non-padding ids, ``max`` takes the element-wise maximum (NaN if the column holds one).
    Empty bags, and bags of padding only, give zeros. With ``max_norm`` every row referenced
    anywhere in ``input`` is renormalized first, as ``F.embedding_bag`` does.

    Args:
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without, all in ``[0, V)``.
        weight: ``(V, D)`` floating table (not modified).
        offsets: ``(B,)`` bag starts (``(B + 1,)`` with ``include_last_offset``).
        max_norm: renormalize the referenced rows whose ``norm_type``-norm exceeds it.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: ignored by the forward.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: ignored by the forward.
        per_sample_weights: weights of the input's shape (``mode="sum"`` only).
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: row left out of every bag (negative counts from the end).

    Returns:
        ``(out, table)``: ``out`` of shape ``(B, D)`` and the (renormalized) ``(V, D)``
        table, both float64 on the CPU.

    Raises:
        ValueError: offsets, ranks, mode or ``per_sample_weights`` that the reference refuses.
        IndexError: an id outside ``[0, V)``.
    """
    problem = _problem(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    return problem.forward()[0], problem.table


def embedding_bag_error_bound(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
    *,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Per-element bound on ``|out - exact|`` for a bag reduction computed in ``dtype``.

    ``(gamma_{k+s}(u) + gamma_{s+1}(u_64)) A + R + (k + s) eta`` for a bag of ``k``
    non-padding ids, with ``s = 0`` (sum), ``1`` (with ``per_sample_weights``) or ``2``
    (mean); zero for ``max`` without ``max_norm``, for empty bags and where the exact value is
    not finite. See the module documentation for the derivation.

    Args:
        input: ids, as for :func:`reference_embedding_bag`.
        weight: ``(V, D)`` table before any renorm.
        offsets: bag starts.
        max_norm: renorm threshold (adds the renorm perturbation ``R``).
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: ignored.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: ignored.
        per_sample_weights: weights of the input's shape.
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: row left out of every bag.
        dtype: dtype the candidate computes in (default: the weight's).

    Returns:
        ``(B, D)`` float64 bounds on the CPU.
    """
    problem = _problem(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx, dtype,
    )  # fmt: skip
    return problem.forward()[1]


def reference_embedding_bag_grad(
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> BagGradients:
    """The gradients of a bag call in float64, with exactly rounded sums.

    Row ``v`` of the table's gradient sums ``c_i * grad_output[b_i]`` over the occurrences
    ``i`` of ``v`` in the bags, with ``c_i = 1`` (sum), ``per_sample_weights[i]`` or
    ``1 / (ids in bag b_i)`` (mean), divided by the number of occurrences under
    ``scale_grad_by_freq``. In ``max`` mode each bag's gradient goes, per column, to the first
    id that attains the maximum (``F.embedding_bag``'s choice; the checks of
    :mod:`embedding_equivalence.testing` accept any maximizing id). The padding row, and rows
    that occur in no bag, get exact zeros; so do the ``per_sample_weights`` of padding ids and
    of ids after the last offset.

    Args:
        input: ids, as for :func:`reference_embedding_bag`.
        weight: ``(V, D)`` table before any renorm (``max`` and ``per_sample_weights`` need
            its values).
        grad_output: ``(B, D)`` upstream gradient.
        offsets: bag starts.
        max_norm: renorm threshold.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: divide row ``v`` by how often ``v`` occurs in the bags.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: ignored (the values are the same).
        per_sample_weights: weights of the input's shape.
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: row left out of every bag.

    Returns:
        :class:`BagGradients` of the table ``(V, D)`` and of ``per_sample_weights`` (or
        ``None``), float64 on the CPU.
    """
    problem = _problem(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    grad, _ = problem.weight_grad(grad_output)
    psw = problem.psw_grad(grad_output)[0] if per_sample_weights is not None else None
    return BagGradients(grad, psw)


def embedding_bag_gradient_error_bound(
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    offsets: torch.Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
    *,
    dtype: torch.dtype | None = None,
) -> BagGradients:
    """Per-element bounds on the gradients of :func:`reference_embedding_bag_grad`.

    Table: ``(gamma_{k+s}(u) + gamma_{s+1}(u_64)) A / c + (k + s) eta`` for a row with ``k``
    occurrences, ``s = 0, 1, 2`` (sum, weighted sum, mean) plus 2 under
    ``scale_grad_by_freq`` (then ``c = k``, else ``c = 1``); in ``max`` mode ``k`` counts the
    bags whose maximum the row holds (under the first-maximum assignment). Zero for rows that
    must get an exact zero. ``per_sample_weights``:
    ``(gamma_{D+1}(u) + gamma_2(u_64)) sum_d (|W| + r) |G| + sum_d r |G| + (D + 1) eta``.
    See the module documentation for the derivation.

    Args:
        input: ids, as for :func:`reference_embedding_bag`.
        weight: ``(V, D)`` table before any renorm.
        grad_output: ``(B, D)`` upstream gradient.
        offsets: bag starts.
        max_norm: renorm threshold.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: whether the gradient is divided by the counts.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: ignored.
        per_sample_weights: weights of the input's shape.
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: row left out of every bag.
        dtype: dtype the candidate computes in (default: the weight's).

    Returns:
        :class:`BagGradients` of float64 bounds on the CPU.
    """
    problem = _problem(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx, dtype,
    )  # fmt: skip
    _, bound = problem.weight_grad(grad_output)
    psw = problem.psw_grad(grad_output)[1] if per_sample_weights is not None else None
    return BagGradients(bound, psw)
