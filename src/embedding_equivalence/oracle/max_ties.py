"""``max`` bags: which of the rows that tie for a bag's maximum took its gradient.

In ``max`` mode the upstream gradient of a bag goes, per column, to one maximizing entry.
Where several rows tie, every choice is a valid (sub)gradient and kernels differ, so the check
searches for an assignment of tied bags to rows that explains the candidate's gradient within
the bound (see [`embedding_equivalence.oracle.bag`][] for the derivation).
"""

from __future__ import annotations

import math

from .bounds import U64, exact_sum, gamma, sum_and_bound, within

__all__ = ["MAX_TIE_SEARCH", "Tied", "search_assignment", "tie_components"]

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
        root = find(v)
        if root in groups:
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
        if all(within(target[v], *result[v]) for v in rows):
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

    try:
        return visit(0)
    except _SearchExhausted:
        pass
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
