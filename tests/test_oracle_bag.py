"""The bag oracle against an independent exact computation, on drawn calls.

The oracle groups the ids of all bags (and of all rows) at once and sums each group over a
slice (``segment_sums``). Here every bag and every row is walked in Python, and each sum is
taken exactly in ``fractions.Fraction`` and rounded once (IEEE rules for ``inf`` and
``nan``): the values must be equal, and the bounds, computed from the module's formulas on
those sums, equal too. Tables mix wide magnitudes, small integers (ties in ``max``), signed
zeros, subnormals and non-finite values; all randomness comes from Hypothesis (a drawn seed
into a ``torch.Generator``).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

from embedding_equivalence._draw.boundaries import bag_boundaries
from embedding_equivalence._draw.boundary_data import LIMITS
from embedding_equivalence.oracle.bag import BagOracle
from embedding_equivalence.oracle.bounds import U64, gamma, subnormal_loss, unit_roundoff
from embedding_equivalence.oracle.embedding import referenced_rows
from embedding_equivalence.testing import (
    embedding_bag_error_bound,
    embedding_bag_gradient_error_bound,
    reference_embedding_bag,
    reference_embedding_bag_grad,
    renorm_error_bound,
)

SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324, 1e-310]


def exact(terms: list[float]) -> float:
    """The exact sum rounded once: IEEE's ``nan`` and ``inf``, else a ``Fraction`` sum."""
    if any(math.isnan(t) for t in terms) or (math.inf in terms and -math.inf in terms):
        return math.nan
    if math.inf in terms or -math.inf in terms:
        return math.inf if math.inf in terms else -math.inf
    total = sum(map(Fraction, terms), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def nan_max(values: list[float]) -> float:
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def _values(gen: torch.Generator, shape: tuple[int, ...], kind: str) -> torch.Tensor:
    if kind == "integers":  # ties in max, exact sums
        return torch.randint(-2, 3, shape, generator=gen).double()
    scale = torch.exp2(torch.randint(-40, 40, shape, generator=gen).double())
    values = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
    if kind == "special":
        flat = values.reshape(-1)
        picks = torch.randint(0, 4 * len(SPECIAL), (flat.numel(),), generator=gen)
        for i, p in enumerate(picks.tolist()):
            if p < len(SPECIAL):
                flat[i] = SPECIAL[p]
    return values


@st.composite
def bag_calls(draw: st.DrawFn) -> tuple[tuple[torch.Tensor, ...], dict[str, Any], torch.Tensor]:
    """``(args, kwargs, grad_output)`` of a small ``F.embedding_bag`` call."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1), label="seed"))
    v, d, n = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(0, 24))
    kind = draw(st.sampled_from(["wide", "integers", "special"]), label="values")
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]))
    weight = _values(gen, (v, d), kind).to(dtype)
    ids = torch.randint(0, v, (n,), generator=gen)
    mode = draw(st.sampled_from(["sum", "mean", "max"]), label="mode")
    kwargs: dict[str, Any] = {"mode": mode}
    if draw(st.booleans()) and n:  # a 2-D input
        length = draw(st.sampled_from([x for x in range(1, n + 1) if n % x == 0]))
        args: tuple[torch.Tensor, ...] = (ids.reshape(n // length, length), weight)
        bags = n // length
    else:
        count = draw(st.integers(1 if n else 0, 8), label="bags")
        starts = torch.sort(torch.randint(0, n + 1, (count,), generator=gen)).values
        starts[:1] = 0
        bags = count
        if count and draw(st.booleans()):
            kwargs["include_last_offset"] = True
            bags -= 1
        args = (ids, weight, starts)
    if draw(st.booleans()):
        kwargs["padding_idx"] = draw(st.integers(-v, v - 1))
    if draw(st.booleans()):
        kwargs["max_norm"] = draw(st.sampled_from([0.5, 2.0]))
        kwargs["norm_type"] = draw(st.sampled_from([1.0, 2.0, math.inf]))
    if mode != "max" and draw(st.booleans()):
        kwargs["scale_grad_by_freq"] = True
    if mode == "sum" and draw(st.booleans()):
        kwargs["per_sample_weights"] = _values(gen, tuple(args[0].shape), kind).to(dtype)
    grad_output = _values(gen, (bags, d), draw(st.sampled_from(["wide", "integers", "special"])))
    return args, kwargs, grad_output


class _Walk:
    """The call walked bag by bag in Python: what each bag holds, and each entry's values."""

    def __init__(self, args: tuple[torch.Tensor, ...], kwargs: dict[str, Any]) -> None:
        input, weight = args[0], args[1]
        v, self.d = weight.shape
        flat = input.reshape(-1).tolist()
        if input.dim() == 2:
            b, length = input.shape
            bounds = [(i * length, (i + 1) * length) for i in range(b)]
        else:
            offs = args[2].tolist()
            end = len(flat)
            if kwargs.get("include_last_offset"):
                end, offs = offs[-1], offs[:-1]
            bounds = list(zip(offs, [*offs[1:], end] if offs else [], strict=True))
        padding = kwargs.get("padding_idx")
        padding = None if padding is None else padding % v
        #: per bag, the positions of its ids that count
        self.bags = [[i for i in range(lo, hi) if flat[i] != padding] for lo, hi in bounds]
        self.ids = flat
        every = sorted(set(flat))
        max_norm, norm_type = kwargs.get("max_norm"), kwargs.get("norm_type", 2.0)
        rows = referenced_rows(weight, every, max_norm, norm_type).tolist()
        self.x = dict(zip(every, rows, strict=True))
        self.r = {i: [0.0] * self.d for i in every}
        if max_norm is not None and every:
            original = referenced_rows(weight, every, None, norm_type)
            bound = renorm_error_bound(original, max_norm, weight.dtype)
            bound = torch.where(original.isfinite(), bound, torch.zeros_like(bound))
            self.r = dict(zip(every, bound.tolist(), strict=True))
        psw = kwargs.get("per_sample_weights")
        self.c = [1.0] * len(flat) if psw is None else psw.double().reshape(-1).tolist()
        self.weighted = psw is not None


def _check(actual: torch.Tensor, expected: list, what: str) -> None:
    want = torch.tensor(expected, dtype=torch.float64).reshape(actual.shape)
    same = (actual == want) | (actual.isnan() & want.isnan())
    assert bool(same.all()), f"{what}: {actual.tolist()} != {want.tolist()}"


@settings(max_examples=150, deadline=None)  # deadline: torch's first calls are slow
@given(call=bag_calls())
def test_the_oracle_equals_an_exact_walk_of_the_bags(call: tuple) -> None:
    args, kwargs, grad_output = call
    note(f"args={args}, kwargs={kwargs}, grad_output={grad_output}")
    walk = _Walk(args, kwargs)
    mode, u, eta = kwargs["mode"], unit_roundoff(args[1].dtype), subnormal_loss(args[1].dtype)
    d = walk.d
    g = grad_output.tolist()
    # Forward.
    s = 2 if mode == "mean" else int(walk.weighted)
    out, bound = [], []
    for bag in walk.bags:
        k = len(bag)
        xs = [walk.x[walk.ids[i]] for i in bag]
        rs = [walk.r[walk.ids[i]] for i in bag]
        if k == 0:
            out.append([0.0] * d)
            bound.append([0.0] * d)
        elif mode == "max":
            top = [nan_max([x[j] for x in xs]) for j in range(d)]
            slack = [max(r[j] for r in rs) for j in range(d)]
            out.append(top)
            bound.append([b if math.isfinite(t) else 0.0 for t, b in zip(top, slack, strict=True)])
        else:
            cs = [walk.c[i] for i in bag]
            value = [exact([c * x[j] for c, x in zip(cs, xs, strict=True)]) for j in range(d)]
            mag = [
                exact([abs(c) * (abs(x[j]) + r[j]) for c, x, r in zip(cs, xs, rs, strict=True)])
                for j in range(d)
            ]
            pert = [exact([abs(c) * r[j] for c, r in zip(cs, rs, strict=True)]) for j in range(d)]
            if mode == "mean":
                value, mag, pert = ([t / k for t in row] for row in (value, mag, pert))
            gam = gamma(k + s, u) + gamma(s + 1, U64)
            out.append(value)
            bound.append(
                [
                    gam * a + p + (k + s) * eta if math.isfinite(y) else 0.0
                    for y, a, p in zip(value, mag, pert, strict=True)
                ]
            )
    _check(reference_embedding_bag(*args, **kwargs)[0], out, "out")
    _check(embedding_bag_error_bound(*args, **kwargs), bound, "bound")
    # The table's gradient: occurrences of each row, or (max) the first maximum of each bag.
    terms: dict[int, list[list[float]]] = {}
    for b, bag in enumerate(walk.bags):
        if mode == "max":
            for j in range(d):
                column = [walk.x[walk.ids[i]][j] for i in bag]
                if column:
                    top = nan_max(column)
                    first = next(
                        i for i, x in zip(bag, column, strict=True)
                        if x == top or (math.isnan(x) and math.isnan(top))
                    )  # fmt: skip
                    terms.setdefault(walk.ids[first], [[] for _ in range(d)])[j].append(g[b][j])
            continue
        for i in bag:
            row = terms.setdefault(walk.ids[i], [[] for _ in range(d)])
            for j in range(d):
                t = g[b][j] / len(bag) if mode == "mean" else walk.c[i] * g[b][j]
                row[j].append(t)
    num_rows = args[1].shape[0]
    grad = [[0.0] * d for _ in range(num_rows)]
    grad_bound = [[0.0] * d for _ in range(num_rows)]
    scaled = kwargs.get("scale_grad_by_freq", False)
    s = 0 if mode == "max" else s + (2 if scaled else 0)
    for row, columns in terms.items():
        k_row = len(columns[0]) if mode != "max" else 0
        for j, ts in enumerate(columns):
            k = k_row if mode != "max" else len(ts)
            div = k if scaled else 1
            total, mag = exact(ts), exact([abs(t) for t in ts])
            gam = gamma(k + s, u) + gamma(s + 1, U64)
            grad[row][j] = total / div
            slack = gam * mag / div + (k + s) * eta
            grad_bound[row][j] = slack if math.isfinite(total) else 0.0
    grads = reference_embedding_bag_grad(args[0], args[1], grad_output, *args[2:], **kwargs)
    bounds = embedding_bag_gradient_error_bound(args[0], args[1], grad_output, *args[2:], **kwargs)
    _check(grads.weight, grad, "weight.grad")
    _check(bounds.weight, grad_bound, "weight.grad bound")
    # The gradient of per_sample_weights: one dot product per id in a bag.
    if not walk.weighted:
        assert grads.per_sample_weights is None
        return
    psw = [0.0] * len(walk.ids)
    psw_bound = [0.0] * len(walk.ids)
    gam = gamma(d + 1, u) + gamma(2, U64)
    for b, bag in enumerate(walk.bags):
        for i in bag:
            x, r = walk.x[walk.ids[i]], walk.r[walk.ids[i]]
            value = exact([x[j] * g[b][j] for j in range(d)])
            mag = exact([(abs(x[j]) + r[j]) * abs(g[b][j]) for j in range(d)])
            pert = exact([r[j] * abs(g[b][j]) for j in range(d)])
            psw[i] = value
            psw_bound[i] = gam * mag + pert + (d + 1) * eta if math.isfinite(value) else 0.0
    assert grads.per_sample_weights is not None
    assert bounds.per_sample_weights is not None
    _check(grads.per_sample_weights, psw, "per_sample_weights.grad")
    _check(bounds.per_sample_weights, psw_bound, "per_sample_weights.grad bound")


def test_a_misspelt_option_is_refused() -> None:
    ids, weight, offsets = torch.tensor([0, 1]), torch.ones(2, 2), torch.tensor([0])
    with pytest.raises(TypeError, match="unexpected keyword argument 'padding_indx'"):
        reference_embedding_bag(ids, weight, offsets, padding_indx=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "axis",
    [
        "bag length",
        pytest.param("bags", marks=pytest.mark.slow),  # 2**17 bags summed in Python
        pytest.param("empty bags", marks=pytest.mark.slow),
    ],
)
def test_the_largest_bag_boundaries_are_exact(axis: str) -> None:
    """At the top of each bag axis (2**16 ids in a bag, 2**17 bags, 2**16 empty bags at each
    end): sums equal the exact ones, computed here without grouping."""
    top = max(
        (b for b in bag_boundaries((), ("sum",), [torch.float64], ["cpu"]) if b.axis == axis),
        key=lambda b: b.value,
    )
    assert top.value == LIMITS[axis]
    tensors = top.case.build(requires_grad=False)
    oracle = BagOracle(tensors.input, tensors.weight, tensors.offsets, mode="sum")
    out, _ = oracle.forward()
    rows = tensors.weight[tensors.input].tolist()
    starts = [*tensors.offsets.tolist(), tensors.input.shape[0]]
    expected = [
        [exact([row[j] for row in rows[lo:hi]]) for j in range(tensors.weight.shape[1])]
        for lo, hi in itertools.pairwise(starts)
    ]
    _check(out, expected, axis)
