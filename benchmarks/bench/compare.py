"""The form-vs-raw comparison (``bench --compare``): each form beside the raw torch calls it wraps.

[`RAW_BASELINES`][] says which raw calls each public embedding form of
[`FORMS`][embedding_equivalence.forms.FORMS] is compared with; [`IMPLEMENTATIONS`][] is built
from the two. [`run_benchmark`][] times them, [`format_table`][] shows the ``form / raw``
ratios, and [`evaluate_targets`][] decides the three performance targets.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from embedding_equivalence.forms import registry

from .console import SectionedTable
from .timing import (
    MODES,
    EmbedFn,
    Implementation,
    Measurement,
    Mode,
    Timing,
    build_inputs,
    time_group,
)

__all__ = [
    "IMPLEMENTATIONS",
    "RATIO_NOTE",
    "RAW_BASELINES",
    "TargetResult",
    "comparison_table",
    "evaluate_targets",
    "format_table",
    "format_targets",
    "run_benchmark",
]

# --------------------------------------------------------------------------------------------
# The raw torch calls that the forms wrap. Each builds its one-hot inside the timed call.
# --------------------------------------------------------------------------------------------


def _raw_embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids, weight)


def _scatter_one_hot(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    one_hot = torch.zeros(ids.shape[0], weight.shape[0], dtype=weight.dtype, device=ids.device)
    return one_hot.scatter_(1, ids[:, None], 1)


def _raw_scatter_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _scatter_one_hot(ids, weight) @ weight


def _raw_f_one_hot_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight


def _raw_linear(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.linear(_scatter_one_hot(ids, weight), weight.t())


def _raw_sparse_mm(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n = ids.shape[0]
    indices = torch.stack([torch.arange(n, device=ids.device), ids])
    values = torch.ones(n, dtype=weight.dtype, device=ids.device)
    one_hot = torch.sparse_coo_tensor(indices, values, (n, weight.shape[0]), check_invariants=False)
    return torch.sparse.mm(one_hot, weight)


#: The raw torch calls each public embedding form is compared with: ``form name -> ((label,
#: call), ...)``. Every public embedding form of [`FORMS`][embedding_equivalence.forms.FORMS]
#: has an entry (a test checks it).
RAW_BASELINES: dict[str, tuple[tuple[str, EmbedFn], ...]] = {
    "lookup_embedding": (("F.embedding", _raw_embedding),),
    "matmul_embedding": (
        ("scatter one-hot @ W", _raw_scatter_matmul),
        ("F.one_hot.to(dtype) @ W", _raw_f_one_hot_matmul),
    ),
    "linear_embedding": (("F.linear(one-hot, W.t())", _raw_linear),),
    "sparse_matmul_embedding": (("sparse.mm(coo one-hot, W)", _raw_sparse_mm),),
}


def _implementations() -> tuple[Implementation, ...]:
    impls: list[Implementation] = []
    for f in registry.forms("embedding", public=True):
        dense = f.computes == "dense matmul"
        impls.append(Implementation(f.name, f.name, True, f.fn, dense))
        impls += [
            Implementation(label, f.name, False, fn, dense)
            for label, fn in RAW_BASELINES.get(f.name, ())
        ]
    return tuple(impls)


#: Every implementation, grouped by form (the public embedding forms of
#: [`FORMS`][embedding_equivalence.forms.FORMS], in its order); each form first, then its raw
#: baselines ([`RAW_BASELINES`][]).
IMPLEMENTATIONS: tuple[Implementation, ...] = _implementations()


@dataclass
class TargetResult:
    """Whether one performance target holds, with the numbers that decide it.

    Attributes:
        key: short identifier, ``"a"``, ``"b"`` or ``"c"``.
        description: what the target states.
        holds: True if it holds, False if not, ``None`` if it could not be measured.
        ratio: the deciding ratio (the worst one when several sizes are measured).
        limit: the largest ratio for which the target holds.
        details: one string per measured size, e.g.
            ``"V=1024 fwd+bwd: 1.230 ms vs 1.200 ms, ratio 1.025 (median of per-round ratios)"``.
    """

    key: str
    description: str
    holds: bool | None
    ratio: float | None
    limit: float
    details: list[str] = field(default_factory=list)


def run_benchmark(
    *,
    num_ids: int,
    dim: int,
    vocabs: Sequence[int],
    dtype: torch.dtype,
    seed: int,
    timing: Timing,
    implementations: Iterable[Implementation] = IMPLEMENTATIONS,
    progress: Callable[[str], None] | None = None,
    device: torch.device | str = "cpu",
) -> list[Measurement]:
    """Time every implementation in both modes at every vocabulary size.

    One group per form and mode: the form and its raw torch calls at every ``V``, timed
    interleaved by [`time_group`][], so that both the ``form / raw`` ratios and the ratios
    between sizes compare measurements taken under the same machine load. All
    implementations at one ``V`` see the same ids and weight (built by [`build_inputs`][]
    from ``seed + V``).

    Args:
        num_ids: ``N``, the number of ids.
        dim: ``D``, the embedding dimension.
        vocabs: the vocabulary sizes ``V``.
        dtype: floating dtype of the weight.
        seed: base seed of the inputs.
        timing: the threads, the clock, the seconds of measurement per implementation, size
            and mode, and the interleaved rounds per group (see [`time_group`][]).
        implementations: what to time; by default [`IMPLEMENTATIONS`][].
        progress: called with a one-line note before each group (e.g. to print to stderr).
        device: where the inputs live and the calls run.

    Returns:
        One [`Measurement`][] per (V, implementation, mode), in that order.
    """
    impls = list(implementations)
    inputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for v in vocabs:
        ids, weight = build_inputs(num_ids, v, dim, dtype, seed + v)
        inputs[v] = (ids.to(device), weight.to(device))
    groups: dict[str, list[Implementation]] = {}
    for impl in impls:
        groups.setdefault(impl.form, []).append(impl)
    found: dict[tuple[int, str, Mode], Measurement] = {}
    for form, members in groups.items():
        for mode in MODES:
            if progress is not None:
                progress(f"{mode} {form} and {len(members) - 1} raw call(s) at V={list(vocabs)}")
            cases = [(impl, *inputs[v]) for v in vocabs for impl in members]
            for m in time_group(cases, mode, timing):
                found[(m.vocab, m.name, mode)] = m
    return [found[(v, impl.name, mode)] for v in vocabs for impl in impls for mode in MODES]


# --------------------------------------------------------------------------------------------
# The table of ratios and the targets
# --------------------------------------------------------------------------------------------


def _find(
    measurements: Iterable[Measurement], name: str, vocab: int, mode: Mode
) -> Measurement | None:
    for m in measurements:
        if m.name == name and m.vocab == vocab and m.mode == mode:
            return m
    return None


def _ms(m: Measurement | None) -> str:
    if m is None:
        return "-"
    if m.median_ms is None:
        return "error"
    return f"{m.median_ms:.3f}"


def _ratio(
    num: Measurement | None, den: Measurement | None, *, paired: bool = True
) -> float | None:
    """``num / den``: the median of the per-round ratios if ``paired``, else of the medians.

    Paired ratios compare round ``r`` with round ``r``, which ran in the same interleaved
    sweep (see [`time_group`][]), so a change of machine load between rounds cancels out.
    Measurements from different groups fall back to the ratio of the medians.
    """
    if num is None or den is None or num.median_ms is None or den.median_ms is None:
        return None
    same_group = num.form == den.form and num.mode == den.mode
    if paired and same_group and num.round_ms and len(num.round_ms) == len(den.round_ms):
        pairs = list(zip(num.round_ms, den.round_ms, strict=True))
        if all(d > 0 for _, d in pairs):
            return statistics.median(n / d for n, d in pairs)
    if den.median_ms == 0:
        return None
    return num.median_ms / den.median_ms


def _ratio_str(r: float | None) -> str:
    return "" if r is None else f"{r:.3f}"


#: Said under the comparison table.
RATIO_NOTE = (
    "form/raw: median over the interleaved rounds of (form time / raw time) in that round; "
    "> 1 means the form is slower"
)


def comparison_table(measurements: Sequence[Measurement]) -> tuple[SectionedTable, list[str]]:
    """The measurements as a table, one row per (V, implementation), and the errors.

    Columns: forward and forward+backward median in ms; on the row of a raw torch call, the
    ratio ``form / raw`` of the form it is compared with (above 1: the form is slower), the
    median of the per-round ratios of the interleaved rounds. Failed cases show ``error``;
    their messages are returned beside the table.

    Args:
        measurements: as returned by [`run_benchmark`][].

    Returns:
        The table (one section per ``V``) and one line per failed case.
    """
    columns = ("V", "implementation", "fwd ms", "fwd+bwd ms", "form/raw fwd", "form/raw f+b")
    table = SectionedTable(columns, right=(0, 2, 3, 4, 5))
    errors: list[str] = []
    names = list(dict.fromkeys(m.name for m in measurements))
    for vocab in dict.fromkeys(m.vocab for m in measurements):
        first = True
        for name in names:
            fwd = _find(measurements, name, vocab, "fwd")
            fb = _find(measurements, name, vocab, "fwd+bwd")
            ref = fwd or fb
            if ref is None:
                continue
            r_fwd = r_fb = None
            if not ref.is_form:
                r_fwd = _ratio(_find(measurements, ref.form, vocab, "fwd"), fwd)
                r_fb = _ratio(_find(measurements, ref.form, vocab, "fwd+bwd"), fb)
            label = name if ref.is_form else f"  vs {name}"
            table.add_row(
                str(vocab) if first else "", label, _ms(fwd), _ms(fb), _ratio_str(r_fwd),
                _ratio_str(r_fb),
            )  # fmt: skip
            first = False
            errors.extend(
                f"V={vocab} {m.name} {m.mode}: {m.error}" for m in (fwd, fb) if m and m.error
            )
        table.add_section()
    return table, errors


def format_table(measurements: Sequence[Measurement]) -> str:
    """[`comparison_table`][] as plain text, with the ratio's meaning and the errors under it.

    Args:
        measurements: as returned by [`run_benchmark`][].

    Returns:
        The text, without a trailing newline.
    """
    table, errors = comparison_table(measurements)
    lines = [table.plain().rstrip(), "", RATIO_NOTE]
    if errors:
        lines.append("errors:")
        lines.extend(f"  {e}" for e in errors)
    return "\n".join(lines)


def _ratio_detail(
    label: str, num: Measurement | None, den: Measurement | None, *, paired: bool = True
) -> tuple[float | None, str]:
    r = _ratio(num, den, paired=paired)
    how = "median of per-round ratios" if paired else "ratio of medians"
    return r, f"{label}: {_ms(num)} ms vs {_ms(den)} ms, ratio {_ratio_str(r) or 'n/a'} ({how})"


def evaluate_targets(measurements: Sequence[Measurement]) -> list[TargetResult]:
    """Decide the three performance targets from the measurements.

    (a) ``lookup_embedding`` forward+backward / ``F.embedding`` forward+backward <= 1.10 at
    every ``V``; (b) ``matmul_embedding`` / scatter one-hot matmul <= 1.05 in both modes at
    every ``V`` (exact parity, with 5% for measurement noise); (c) ``sparse_matmul_embedding``
    forward at the largest ``V`` / at the smallest ``V`` <= 2. The ratio reported is the worst.

    Args:
        measurements: as returned by [`run_benchmark`][].

    Returns:
        One [`TargetResult`][] per target, in the order a, b, c.
    """
    vocabs = sorted({m.vocab for m in measurements})

    def decide(
        key: str, description: str, limit: float, pairs: list[tuple[float | None, str]]
    ) -> TargetResult:
        ratios = [r for r, _ in pairs if r is not None]
        details = [d for _, d in pairs]
        if not ratios or len(ratios) < len(pairs):
            return TargetResult(key, description, None, max(ratios, default=None), limit, details)
        worst = max(ratios)
        return TargetResult(key, description, worst <= limit, worst, limit, details)

    a = [
        _ratio_detail(
            f"V={v} fwd+bwd",
            _find(measurements, "lookup_embedding", v, "fwd+bwd"),
            _find(measurements, "F.embedding", v, "fwd+bwd"),
        )
        for v in vocabs
    ]
    b = [
        _ratio_detail(
            f"V={v} {mode}",
            _find(measurements, "matmul_embedding", v, mode),
            _find(measurements, "scatter one-hot @ W", v, mode),
        )
        for v in vocabs
        for mode in MODES
    ]
    c: list[tuple[float | None, str]] = []
    if len(vocabs) < 2:
        c.append((None, "needs at least two vocabulary sizes (--vocab)"))
    else:
        c.append(
            _ratio_detail(
                f"fwd V={vocabs[-1]} / V={vocabs[0]}",
                _find(measurements, "sparse_matmul_embedding", vocabs[-1], "fwd"),
                _find(measurements, "sparse_matmul_embedding", vocabs[0], "fwd"),
            )
        )
    return [
        decide("a", "lookup_embedding fwd+bwd within 10% of F.embedding", 1.10, a),
        decide(
            "b",
            "matmul_embedding no slower than the naive scatter one-hot @ W (5% noise allowed)",
            1.05,
            b,
        ),
        decide(
            "c",
            "sparse_matmul_embedding fwd at most 2x from smallest to largest V",
            2.0,
            c,
        ),
    ]


def format_targets(results: Sequence[TargetResult]) -> str:
    """Format the targets, one block each: verdict, worst ratio against the limit, details.

    Args:
        results: as returned by [`evaluate_targets`][].

    Returns:
        The text, without a trailing newline.
    """
    lines: list[str] = []
    for t in results:
        verdict = {True: "HOLDS", False: "FAILS", None: "NOT MEASURED"}[t.holds]
        ratio = "n/a" if t.ratio is None else f"{t.ratio:.3f}"
        lines.append(f"({t.key}) {t.description}: {verdict} (worst ratio {ratio} <= {t.limit}?)")
        lines.extend(f"      {d}" for d in t.details)
    return "\n".join(lines)
