"""``max`` bags: their maxima, the first maximum's gradient, and which tied row took it.

In ``max`` mode the upstream gradient of a bag goes, per column, to one maximizing entry.
Where several rows tie, every choice is a valid (sub)gradient and kernels differ, so the check
searches for an assignment of tied bags to rows that explains the candidate's gradient within
the bound (see [`embedding_equivalence.oracle.bag`][] for the derivation). [`MaxBags`][] is
the ``max`` half of [`BagOracle`][embedding_equivalence.oracle.bag.BagOracle], which parses
the call; the search itself is [`search_assignment`][].
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import defaultdict
from itertools import accumulate

import torch

from .bounds import (
    U64,
    exact_sum,
    gamma,
    gammas,
    grouped_sums,
    sum_and_bound,
    within,
    zero_where_not_finite,
)

#: Search steps allowed per tied component in the ``max`` gradient check.
MAX_TIE_SEARCH = 20_000

#: A tied bag: (upstream gradient, candidate rows, last maximizer).
Tied = tuple[float, list[int], int]


def tie_components(tied: list[Tied]) -> list[tuple[list[int], list[Tied]]]:
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
    groups: dict[int, tuple[list[int], list[Tied]]] = {}
    for item in tied:
        root = find(item[1][0])
        groups.setdefault(root, ([], []))[1].append(item)
    for v in list(parent):
        if (root := find(v)) in groups:
            groups[root][0].append(v)
    return list(groups.values())


def search_assignment(
    rows: list[int],
    bags: list[Tied],
    fixed: dict[int, list[float]],
    target: dict[int, float],
    u: float,
    eta: float,
) -> dict[int, tuple[float, float]] | None:
    """Search for an assignment of the tied ``bags`` to rows that matches ``target``.

    Tries the last maximizer of every bag first (a scatter kernel's choice), then a
    depth-first search pruned by the interval that the unassigned bags can still add to each
    row. Returns the exact value and bound of each row under the first matching assignment,
    or ``None`` if none matches. Past [`MAX_TIE_SEARCH`][] steps it checks what every
    valid assignment satisfies instead (the component's total is conserved, and each row
    lies in its interval): if that holds the rows are accepted (infinite bound), never a
    false alarm; if not, ``None``.
    """
    n = len(bags)
    assigned: dict[int, list[float]] = {v: list(fixed.get(v, ())) for v in rows}

    def leaf() -> dict[int, tuple[float, float]] | None:
        result = {v: sum_and_bound(assigned[v], 0, u, eta) for v in rows}
        return result if all(within(target[v], *result[v]) for v in rows) else None

    for g, _, last in bags:
        assigned[last].append(g)
    if (found := leaf()) is not None:
        return found
    assigned = {v: list(fixed.get(v, ())) for v in rows}
    # Per row: what the bags from t on can still add at least / at most.
    lo = {v: [0.0] * (n + 1) for v in rows}
    hi = {v: [0.0] * (n + 1) for v in rows}
    for t in range(n - 1, -1, -1):
        g, cands, _ = bags[t]
        for v in rows:
            lo[v][t] = lo[v][t + 1] + (min(g, 0.0) if v in cands else 0.0)
            hi[v][t] = hi[v][t + 1] + (max(g, 0.0) if v in cands else 0.0)
    reach = {
        v: exact_sum(abs(x) for x in fixed.get(v, ())) + sum(abs(g) for g, c, _ in bags if v in c)
        for v in rows
    }
    kmax = {v: len(fixed.get(v, ())) + sum(1 for _, c, _ in bags if v in c) for v in rows}
    # Sound pruning: the loosest bound a row can get, plus float64 slack for the naive sums.
    slack = {
        v: (gamma(kmax[v], u) + gamma(1, U64) + 4 * (kmax[v] + 1) * U64) * reach[v] + kmax[v] * eta
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

    with contextlib.suppress(_SearchExhausted):
        return visit(0)
    # Too many assignments to try: accept only what every valid assignment satisfies.
    partial = {v: math.fsum(fixed.get(v, ())) for v in rows}  # the search left it mid-way
    terms = [x for v in rows for x in fixed.get(v, ())] + [g for g, _, _ in bags]
    total = exact_sum(terms)
    count = len(terms)
    total_bound = (gamma(count, u) + gamma(2, U64)) * exact_sum(map(abs, terms)) + count * eta
    actual = exact_sum(target[v] for v in rows)
    if not within(actual, total, total_bound) or not feasible(0):
        return None
    return {v: (target[v], math.inf) for v in rows}


class _SearchExhausted(Exception):
    """Raised inside the search when it passes [`MAX_TIE_SEARCH`][] steps."""


class MaxBags:
    """The ``max`` mode of [`BagOracle`][embedding_equivalence.oracle.bag.BagOracle], its base.

    The oracle parses the call into the tensors annotated here (see its ``__init__``); this
    half reads them for the bags' maxima, the gradient under the first-maximum assignment,
    and the search over the tied bags.
    """

    # Set by BagOracle.__init__, which says what each holds.
    dim: int
    lengths: torch.Tensor
    bag_of: torch.Tensor
    row_of: torch.Tensor
    row_ids: torch.Tensor
    values: torch.Tensor
    renorm_bounds: torch.Tensor | None
    u: float
    eta: float

    # -- the terms ---------------------------------------------------------------------------

    def _entries(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, r)``: the ``(M, D)`` values of the positions' rows and their renorm bounds."""
        x = self.values[self.row_of]
        if self.renorm_bounds is None:
            return x, torch.zeros_like(x)
        return x, self.renorm_bounds[self.row_of]

    def _upstream(self, grad_output: torch.Tensor) -> torch.Tensor:
        """``(B, D)`` float64 CPU copy of the upstream gradient."""
        g = grad_output.detach().to(device="cpu", dtype=torch.float64)
        return g.reshape(self.lengths.shape[0], self.dim)

    # -- the maxima and their gradient -------------------------------------------------------

    def _per_bag(self, values: torch.Tensor, reduce: str, empty: float) -> torch.Tensor:
        """``(B, D)``: the positions' ``(M, D)`` ``values`` reduced over each bag, per column.

        ``reduce`` is ``"amax"`` or ``"amin"``; a bag with no position gets ``empty``.
        """
        out = torch.full((self.lengths.shape[0], self.dim), empty, dtype=values.dtype)
        index = self.bag_of[:, None].expand_as(values)
        return out.scatter_reduce_(0, index, values, reduce, include_self=False)

    def _max_forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The column maxima of each bag (NaN if the column holds one), bound: max ``r``."""
        top = self._per_bag(x, "amax", 0.0)
        top[self._per_bag(x.isnan().to(torch.float64), "amax", 0.0) > 0] = math.nan
        return top, zero_where_not_finite(self._per_bag(r, "amax", 0.0), top)

    def _first_maxima(self) -> torch.Tensor:
        """``(B, D)``: per bag and column, the first position that holds the maximum.

        An index into ``positions`` (the first NaN if the column holds one); ``M`` for an
        empty bag.
        """
        x, r = self._entries()
        at = self._max_forward(x, r)[0][self.bag_of]
        m = x.shape[0]
        is_max = (x == at) | (x.isnan() & at.isnan())
        where = torch.arange(m, dtype=torch.int64)[:, None].expand_as(x)
        return self._per_bag(torch.where(is_max, where, m), "amin", m)

    def max_grad_rows(
        self, grad_output: torch.Tensor
    ) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """``(rows, grad, bound)`` under the first-maximum assignment (``F.embedding_bag``'s).

        Each bag's ``G[b, d]`` goes to the row of its first maximum in column ``d``; the
        referenced rows get ``(R, D)`` sums and bounds, every other row must be exactly zero.
        """
        g, first = self._upstream(grad_output), self._first_maxima()
        rows = self.row_ids.shape[0]
        filled = self.lengths > 0
        winner = self.row_of[first[filled]]  # (B', D): the row that takes G[b, d]
        column = torch.arange(self.dim, dtype=torch.int64).expand_as(winner)
        key = (winner * self.dim + column).reshape(-1)
        sums, mags, k = grouped_sums(key, g[filled].reshape(-1, 1), rows * self.dim)
        sums, mags = sums[:, 0], mags[:, 0]
        gam = gammas(k, self.u) + gamma(1, U64)
        slack = gam * mags + k.to(torch.float64) * self.eta
        bound = zero_where_not_finite(slack, sums)
        grad, bound = sums.reshape(rows, self.dim), bound.reshape(rows, self.dim)
        return self.row_ids.tolist(), grad, bound

    # -- ties ----------------------------------------------------------------------------------

    @functools.cached_property
    def _bag_lists(self) -> list[list[tuple[int, list[float], list[float]]]]:
        """Per bag, ``(row, values, renorm bounds)`` of each of its entries, in order."""
        x, r = self._entries()
        rows = self.row_ids[self.row_of].tolist()
        entries = list(zip(rows, x.tolist(), r.tolist(), strict=True))
        sizes = self.lengths.tolist()
        return [entries[end - k : end] for k, end in zip(sizes, accumulate(sizes), strict=True)]

    def _tied_columns(self) -> list[int]:
        """The columns in which some bag has more than one row that may hold its maximum."""
        x, r = self._entries()
        at = self._max_forward(x, r)[0][self.bag_of]
        floor = self._per_bag(x - r, "amax", 0.0)[self.bag_of]
        nan = at.isnan()
        exact = torch.where(nan, x.isnan(), x == at)
        near = ~nan & (x != at) & (x + r >= floor)
        chosen = exact | near
        # Distinct rows among each bag's candidates: the smallest and the largest differ.
        big = self.row_ids.shape[0]
        row = self.row_of[:, None].expand_as(x)
        low = self._per_bag(torch.where(chosen, row, big), "amin", big)
        high = self._per_bag(torch.where(chosen, row, -1), "amax", -1)
        tied = ((high > low) & (high >= 0)).any(0)
        # A NaN in x - r or x + r (an infinite row renormed) compares as nothing: search there.
        unclear = (x - r).isnan().any(0) | (x + r).isnan().any(0)
        return torch.nonzero(tied | unclear).reshape(-1).tolist()

    def _max_candidates(self, d: int) -> list[tuple[list[int], int]]:
        """Per bag, the distinct rows that may hold its maximum in column ``d``.

        The exact maximizers come first, in the order of the bag (the first of them is
        ``F.embedding_bag``'s choice), then the rows that the renorm's rounding may make the
        maximum. With each list, the last exact maximizer (a scatter kernel's choice); an
        empty bag gives ``([], -1)``.
        """
        result: list[tuple[list[int], int]] = []
        for bag in self._bag_lists:
            entries = [(v, x[d], r[d]) for v, x, r in bag]
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
        """Like [`max_grad_rows`][], under the tie assignment that explains ``actual``.

        ``actual`` is the candidate's ``(R, D)`` gradient on the same rows. Starts from the
        first-maximum assignment and, for each component of tied bags whose rows do not
        match, searches for another assignment; the first one that matches replaces the
        default. Components without a match keep the default, so that the comparison reports
        them. Only the columns with ties are searched (found for all bags at once).
        """
        rows, grad, bound = self.max_grad_rows(grad_output)
        position = {v: r for r, v in enumerate(rows)}
        g = self._upstream(grad_output).tolist()
        target_rows = actual.detach().to(device="cpu", dtype=torch.float64)
        for d in self._tied_columns():
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
                for v, (value, slack) in (found or {}).items():
                    grad[position[v], d], bound[position[v], d] = value, slack
        return rows, grad, bound
