r"""The exact float64 reference of ``F.embedding_bag`` and its derived error bounds.

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
the [`renorm_error_bound`][] of the entry: the candidate's renormalized entry differs from
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
more than [`MAX_TIE_SEARCH`][] search steps, its rows are not checked (never a false alarm;
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
from typing import Any, NamedTuple

import torch

from .._cases import Call
from ..forms.options import BAG_MODES
from .bounds import (
    U64,
    exact_sum,
    gamma,
    nan_max,
    renorm_error_bound,
    subnormal_loss,
    sum_and_bound,
    unit_roundoff,
    within,
)
from .embedding import flat_ids, referenced_rows, renormed_table
from .expected import ExpectedRows, RowDigests, table_as_it_was
from .max_ties import search_assignment, tie_components

__all__ = [
    "BagGradients",
    "BagOracle",
    "embedding_bag_error_bound",
    "embedding_bag_gradient_error_bound",
    "reference_embedding_bag",
    "reference_embedding_bag_grad",
]


class BagGradients(NamedTuple):
    """Gradients (or their bounds) of one bag call, float64 on the CPU."""

    weight: torch.Tensor
    """``(V, D)``: of the table."""
    per_sample_weights: torch.Tensor | None
    """Of the input's shape: of ``per_sample_weights`` (``None`` without them)."""


def _column_sums(rows: list[list[float]], dim: int) -> list[float]:
    return [exact_sum(col) for col in zip(*rows, strict=True)] if rows else [0.0] * dim


def _check_bag_input(
    input: torch.Tensor,
    offsets: torch.Tensor | None,
    include_last_offset: bool,
    num_embeddings: int,
    mode: str,
    per_sample_weights: torch.Tensor | None,
) -> None:
    if mode not in BAG_MODES:
        raise ValueError(f"mode must be one of {BAG_MODES}, got {mode!r}")
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
    ids = flat_ids(input)
    if any(not 0 <= v < num_embeddings for v in ids):
        raise IndexError(f"an id lies outside [0, {num_embeddings})")
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError("per_sample_weights needs mode='sum'")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError("per_sample_weights must have the input's shape")


class BagOracle:
    """The exact reference of one ``F.embedding_bag`` call (the ``Oracle`` seam).

    The call is parsed once: the bags, the referenced rows (renormalized by ``max_norm``) and
    the constants of the bounds. Takes ``F.embedding_bag``'s arguments; ``sparse`` (and any
    other option that does not change the values) is accepted and ignored.

    Args:
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without, all in ``[0, V)``.
        weight: the ``(V, D)`` table before the call, read here: its referenced rows, and
            with ``max_norm`` the renormed rows and what tells the rows the call changes (a
            copy, or a digest of each row of a large table; see
            [`table_as_it_was`][embedding_equivalence.oracle.expected.table_as_it_was]). The
            candidate may then renormalize the table in place.
        offsets: bag starts (``(B + 1,)`` with ``include_last_offset``), or ``None``.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        max_norm: renorm threshold, or ``None``.
        norm_type: the ``p`` of the p-norm.
        scale_grad_by_freq: divide row ``v``'s gradient by its count in the bags.
        per_sample_weights: weights of the input's shape (``mode="sum"``), or ``None``.
        include_last_offset: ``offsets`` ends with the end of the last bag.
        padding_idx: row left out of every bag (negative counts from the end).
        dtype: dtype the candidate computes in (default: the weight's).
        **_: ignored options (``sparse``).

    Raises:
        ValueError: offsets, ranks, mode or ``per_sample_weights`` that the reference refuses.
        IndexError: an id outside ``[0, V)``.
    """

    output_shape_text = "(B, D)"

    def __init__(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        offsets: torch.Tensor | None = None,
        *,
        mode: str = "mean",
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        per_sample_weights: torch.Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        dtype: torch.dtype | None = None,
        **_: Any,
    ) -> None:
        num_embeddings, dim = weight.shape
        _check_bag_input(
            input, offsets, include_last_offset, num_embeddings, mode, per_sample_weights
        )
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        ids = flat_ids(input)
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
        self.sample_weights: list[float] | None = None
        if per_sample_weights is not None:
            weights = per_sample_weights.detach().reshape(-1).cpu().tolist()
            self.sample_weights = [float(x) for x in weights]
        self._weight = weight
        self._max_norm = max_norm
        self._norm_type = norm_type
        self._table: torch.Tensor | None = None
        referenced = sorted({ids[i] for bag in self.bags for i in bag})
        #: the (renormalized) float64 rows of the table that some bag references
        values = referenced_rows(weight, referenced, max_norm, norm_type).tolist()
        self.rows: dict[int, list[float]] = dict(zip(referenced, values, strict=True))
        dt = dtype or weight.dtype
        self.renorm_bounds: dict[int, list[float]] | None = None
        if max_norm is not None and referenced:
            originals = referenced_rows(weight, referenced, None, norm_type)
            bound = renorm_error_bound(originals, max_norm, dt)
            # Zero where the entry itself is not finite; infinite where no bound exists
            # ((D + 3) u >= 1: every value passes there).
            self.renorm_bounds = {
                v: [b if math.isfinite(w) else 0.0 for b, w in zip(brow, wrow, strict=True)]
                for v, brow, wrow in zip(
                    referenced, bound.tolist(), originals.tolist(), strict=True
                )
            }
        self.dtype = dt
        self._renormed: tuple[list[int], torch.Tensor, torch.Tensor] | None = None
        self._before: torch.Tensor | RowDigests | None = None
        if max_norm is not None:  # read now: the candidate renormalizes the table in place
            every = sorted(set(ids))
            self._renormed = (
                every,
                referenced_rows(weight, every, max_norm, norm_type),
                renorm_error_bound(referenced_rows(weight, every, None, norm_type), max_norm, dt),
            )
            self._before = table_as_it_was(weight)
        self.u = unit_roundoff(dt)
        self.eta = subnormal_loss(dt)
        #: extra roundings per term (besides the k of a plain sum)
        self.extra_roundings = 2 if mode == "mean" else int(self.sample_weights is not None)
        #: how often each row occurs in the bags (scale_grad_by_freq's divisor)
        self.counts: dict[int, int] = defaultdict(int)
        for i in range(end):
            self.counts[ids[i]] += 1

    @property
    def table(self) -> torch.Tensor:
        """The whole ``(V, D)`` table in float64 after ``max_norm`` (computed on first use).

        Read from the weight passed in, when first asked: for the reference functions, whose
        weight nothing modifies; the judge asks [`renormed`][] instead.
        """
        if self._table is None:
            self._table = renormed_table(self._weight, self.ids, self._max_norm, self._norm_type)
        return self._table

    # -- the Oracle seam ----------------------------------------------------------------------

    @classmethod
    def for_call(cls, call: Call) -> BagOracle:
        """The oracle of ``call`` (its ``weight`` must be the table as it was before the call)."""
        return cls(call.input, call.weight, call.offsets, **call.kwargs)

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact ``(B, D)`` reduction and its bound (signs of zeros are not compared)."""
        return self.forward()

    def renormed(self) -> ExpectedRows | None:
        """Every row referenced anywhere in ``input`` after the renorm; the rest untouched."""
        if self._renormed is None:
            return None
        rows, values, bound = self._renormed
        return ExpectedRows(rows, values, bound, self.num_embeddings, rest=self._before)

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """The table's gradient on the referenced rows (``max``: first maximum of each bag)."""
        rows, grad, bound = self.weight_grad_rows(grad_output)
        return ExpectedRows(rows, grad, bound, self.num_embeddings)

    def weight_grad_explaining(
        self, grad_output: torch.Tensor, actual: torch.Tensor
    ) -> ExpectedRows | None:
        """``max`` only: the assignment of tied bags to rows that explains ``actual``."""
        if self.mode != "max":
            return None
        rows, grad, bound = self.max_grad_matching(grad_output, actual)
        return ExpectedRows(
            rows, grad, bound, self.num_embeddings,
            note=" (in max mode any maximizing row of a bag may take its gradient; no such "
            "choice explains this one)",
        )  # fmt: skip

    def per_sample_weights_grad(
        self, grad_output: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The gradient of ``per_sample_weights`` and its bound, or ``None`` without them."""
        return None if self.sample_weights is None else self.psw_grad(grad_output)

    def _coefficient(self, i: int) -> float:
        return 1.0 if self.sample_weights is None else self.sample_weights[i]

    def _renorm_bound(self, v: int) -> list[float]:
        return self.renorm_bounds[v] if self.renorm_bounds is not None else [0.0] * self.dim

    # -- forward -----------------------------------------------------------------------------

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out, bound)``, both ``(B, D)`` float64."""
        dim, u, eta, s = self.dim, self.u, self.eta, self.extra_roundings
        out: list[list[float]] = []
        bound: list[list[float]] = []
        for bag in self.bags:
            k = len(bag)
            if k == 0:
                out.append([0.0] * dim)
                bound.append([0.0] * dim)
                continue
            xs = [self.rows[self.ids[i]] for i in bag]
            rbs = [self._renorm_bound(self.ids[i]) for i in bag]
            if self.mode == "max":
                values = [nan_max(col) for col in zip(*xs, strict=True)]
                slack = [max(col) for col in zip(*rbs, strict=True)]
            else:
                cs = [self._coefficient(i) for i in bag]
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
                g = gamma(k + s, u) + gamma(s + 1, U64)
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
                    grad[r][d], bound[r][d] = sum_and_bound(ts, 0, self.u, self.eta)
        else:
            s = self.extra_roundings + (2 if self.scale_grad_by_freq else 0)
            for v, occ in self._occurrences().items():
                k = len(occ)
                if self.mode == "mean":
                    terms_ = [[x / len(self.bags[b]) for x in g[b]] for b, _ in occ]
                else:
                    terms_ = [[self._coefficient(i) * x for x in g[b]] for b, i in occ]
                sums = _column_sums(terms_, self.dim)
                mags = _column_sums([[abs(x) for x in row] for row in terms_], self.dim)
                div = self.counts[v] if self.scale_grad_by_freq else 1
                gam = gamma(k + s, self.u) + gamma(s + 1, U64)
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

    def weight_grad_full(self, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
        gam = gamma(d + 1, self.u) + gamma(2, U64)
        for b, bag in enumerate(self.bags):
            for i in bag:
                x, r = self.rows[self.ids[i]], self._renorm_bound(self.ids[i])
                value = exact_sum(a * c for a, c in zip(x, g[b], strict=True))
                mag = exact_sum((abs(a) + e) * abs(c) for a, e, c in zip(x, r, g[b], strict=True))
                pert = exact_sum(e * abs(c) for e, c in zip(r, g[b], strict=True))
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
                (self.ids[i], self.rows[self.ids[i]][d], self._renorm_bound(self.ids[i])[d])
                for i in bag
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
        """Like [`weight_grad_rows`][], under the tie assignment that explains ``actual``.

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
            for comp_rows, comp_bags in tie_components(tied):
                if all(
                    within(target[v], float(grad[position[v], d]), float(bound[position[v], d]))
                    for v in comp_rows
                ):
                    continue
                found = search_assignment(comp_rows, comp_bags, fixed, target, self.u, self.eta)
                if found is None:
                    continue
                for v, (value, slack) in found.items():
                    grad[position[v], d], bound[position[v], d] = value, slack
        return rows, grad, bound


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
    del sparse  # the values are the same
    problem = BagOracle(
        input, weight, offsets, mode=mode, max_norm=max_norm, norm_type=norm_type,
        per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
        padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq,
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
        input: ids, as for [`reference_embedding_bag`][].
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
    del sparse  # the values are the same
    problem = BagOracle(
        input, weight, offsets, mode=mode, max_norm=max_norm, norm_type=norm_type,
        per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
        padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq, dtype=dtype,
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
    [`embedding_equivalence.testing`][] accept any maximizing id). The padding row, and rows
    that occur in no bag, get exact zeros; so do the ``per_sample_weights`` of padding ids and
    of ids after the last offset.

    Args:
        input: ids, as for [`reference_embedding_bag`][].
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
        [`BagGradients`][] of the table ``(V, D)`` and of ``per_sample_weights`` (or
        ``None``), float64 on the CPU.
    """
    del sparse  # the values are the same
    problem = BagOracle(
        input, weight, offsets, mode=mode, max_norm=max_norm, norm_type=norm_type,
        per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
        padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq,
    )  # fmt: skip
    grad, _ = problem.weight_grad_full(grad_output)
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
    """Per-element bounds on the gradients of [`reference_embedding_bag_grad`][].

    Table: ``(gamma_{k+s}(u) + gamma_{s+1}(u_64)) A / c + (k + s) eta`` for a row with ``k``
    occurrences, ``s = 0, 1, 2`` (sum, weighted sum, mean) plus 2 under
    ``scale_grad_by_freq`` (then ``c = k``, else ``c = 1``); in ``max`` mode ``k`` counts the
    bags whose maximum the row holds (under the first-maximum assignment). Zero for rows that
    must get an exact zero. ``per_sample_weights``:
    ``(gamma_{D+1}(u) + gamma_2(u_64)) sum_d (|W| + r) |G| + sum_d r |G| + (D + 1) eta``.
    See the module documentation for the derivation.

    Args:
        input: ids, as for [`reference_embedding_bag`][].
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
        [`BagGradients`][] of float64 bounds on the CPU.
    """
    del sparse  # the values are the same
    problem = BagOracle(
        input, weight, offsets, mode=mode, max_norm=max_norm, norm_type=norm_type,
        per_sample_weights=per_sample_weights, include_last_offset=include_last_offset,
        padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq, dtype=dtype,
    )  # fmt: skip
    _, bound = problem.weight_grad_full(grad_output)
    psw = problem.psw_grad(grad_output)[1] if per_sample_weights is not None else None
    return BagGradients(bound, psw)
