"""Side by side: the checks others use to call an embedding kernel right, and the verifiers.

Four checks judge the same kernels: the mutant catalogues of the test suite
(``tests/mutants.py``, ``tests/bag_mutants.py``, ``tests/value_mutants.py``'s embedding and bag
kernels, ``tests/purity_mutants.py``) and right kernels, among them two that are not bit for
bit torch's but lie within the derived bound. The three checks of others (``kernelbench``,
``library``, ``assert_close``) are reimplemented in ``benchmarks/checks_elsewhere.py`` from
their public descriptions (no code copied; its docstring says what each is and where its
numbers come from), and ``verify``: the package's ``ee.verify_embedding`` /
``ee.verify_embedding_bag`` / ``ee.verify_quantized_embedding`` at their defaults, with only
the options (and ``deterministic``) that a mutant's bug needs, as ``benchmarks/catch_rates.py``
runs them, under seeds ``0 .. K - 1``: a mutant counts as caught when every seed fails it, a
right kernel as flagged when any seed does.

A kernel that raises on a valid input is flagged. None of the three checks has a test for a
quantized lookup, so the one quantized purity mutant is not judged by them (counted as not
caught). The bag mutants and the size mutants of ``tests/mutants.py`` are one correct
hand-written kernel (``hand_written_bag``, ``blocked_embedding``, both judged among the right
kernels) with one bug each; where a check's case rejects that correct kernel (its float16 sums
are not torch's bit for bit), the case says nothing about the bug and is left out when the
check judges the mutant, as a maintainer would loosen or drop it to let the right kernel pass.

A flag on a right kernel is a false alarm, except where the verifier names the failure as
torch's own defect (``report.torch_defect``): then the kernel is torch's and the flag is a
finding, reported as such.

Usage::

    python benchmarks/other_checks.py                                # K = 3
    python benchmarks/other_checks.py --seeds 5 --json docs/other-checks.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
# The catalogues live with the tests.
sys.path.insert(0, str(ROOT / "tests"))

import embedding_equivalence as ee  # noqa: E402
from bag_mutants import BAG_MUTANTS, hand_written_bag  # noqa: E402
from mutants import MUTANTS, blocked_embedding  # noqa: E402
from purity_mutants import PURITY_MUTANTS  # noqa: E402
from value_mutants import VALUE_BAG_MUTANTS, VALUE_MUTANTS  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from checks_elsewhere import OTHER_CHECKS, Cases, CheckFailed  # noqa: E402

CHECKS = ("kernelbench", "library", "assert_close", "verify")
FAMILIES = ("embedding", "bag", "value", "purity", "right")
#: How the page and the table name them.
CHECK_TITLES = {
    "kernelbench": "KernelBench",
    "library": "Liger/FlagGems tests",
    "assert_close": "assert_close",
    "verify": "ee.verify_*",
}
FAMILY_TITLES = {
    "embedding": "embedding mutants",
    "bag": "bag mutants",
    "value": "value mutants",
    "purity": "purity mutants",
    "right": "right kernels",
}


# --------------------------------------------------------------------------------------------
# Right kernels that are not torch's bit for bit
# --------------------------------------------------------------------------------------------


def bag_summed_pairwise(
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
) -> torch.Tensor:
    """``F.embedding_bag`` whose sums add each bag's rows pairwise, in the table's own dtype.

    Modes ``sum`` and ``mean`` (also with ``per_sample_weights``) reduce each bag as a tree of
    pairwise additions, every one rounded to the input dtype, where torch's CPU kernel adds
    the rows one after the other; the mean divides once. In bfloat16 the two orders give
    different last bits, both within the recursive-summation bound (the pairwise one is the
    more accurate). Everything else (mode ``max``, the other options, bad input) is
    ``ee.lookup_embedding_bag``'s.
    """
    checked = ee.lookup_embedding_bag(
        input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, padding_idx,
    )  # fmt: skip
    if (
        mode == "max"
        or max_norm is not None
        or scale_grad_by_freq
        or sparse
        or include_last_offset
        or padding_idx is not None
    ):
        return checked
    flat = input.reshape(-1).long()
    n, dim = flat.shape[0], weight.shape[1]
    positions = torch.arange(n, device=flat.device)
    if input.dim() == 2:
        bags, length = input.shape
        starts = torch.arange(bags, device=flat.device) * length
    else:
        assert offsets is not None
        starts = offsets.long()
        bags = starts.shape[0]
        if bags == 0:
            return checked
    bag = (torch.searchsorted(starts, positions, right=True) - 1).clamp(min=0)
    rows = weight[flat]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1)[:, None]
    counts = torch.bincount(bag, minlength=bags) if n else bag.new_zeros(bags)
    longest, width = int(counts.max()) if bags and n else 0, 1
    while width < longest:
        width *= 2
    dense = rows.new_zeros(bags, width, dim).index_put((bag, positions - starts[bag]), rows)
    while dense.shape[1] > 1:  # one level of the tree: every sum rounds to the dtype
        dense = dense[:, 0::2] + dense[:, 1::2]
    out = dense[:, 0]
    if mode == "mean":
        out = out / counts.clamp(min=1)[:, None].to(out.dtype)
    return out


# --------------------------------------------------------------------------------------------
# The kernels under judgment
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """A kernel judged by every check.

    Attributes:
        family: ``embedding``, ``bag``, ``value``, ``purity`` (mutants) or ``right``.
        name: short id.
        fn: the kernel.
        kind: ``embedding`` (``F.embedding``'s signature), ``bag`` or ``quantized``.
        options: what the verifier must exercise for the bug to be reachable.
        backward: whether the verifier checks the gradient.
        deterministic: the bug shows only when two runs must agree bit for bit.
        base: the correct kernel the mutant is built on, where it is not torch's own
            function: a case of another check that rejects the base says nothing about the
            bug, and is left out when that check judges the mutant.
    """

    family: str
    name: str
    fn: Callable[..., torch.Tensor]
    kind: str
    options: tuple[str, ...] = ()
    backward: bool = True
    deterministic: bool = False
    base: Callable[..., torch.Tensor] | None = None


#: The mutants of ``tests/mutants.py`` built on its ``blocked_embedding``.
BLOCKED = frozenset(
    {
        "grid_drops_partial_block",
        "width_tail_dropped",
        "zero_rows_wider_than_1024",
        "ids_packed_in_int16",
        "padding_learns_past_768_ids",
        "freq_counter_in_uint8",
        "backward_drops_partial_block",
    }
)


def kernels() -> list[Kernel]:
    """Every kernel judged: the four mutant families, then the right kernels."""
    out = [
        Kernel(
            "embedding", m.name, m.fn, "embedding", m.options, m.backward,
            base=blocked_embedding if m.name in BLOCKED else None,
        )
        for m in MUTANTS
    ]  # fmt: skip
    out += [
        Kernel("bag", m.name, m.fn, "bag", m.options, base=hand_written_bag) for m in BAG_MUTANTS
    ]
    out += [
        Kernel("value", m.name, m.fn, "embedding", m.options, m.backward) for m in VALUE_MUTANTS
    ]
    out += [
        Kernel("value", m.name, m.fn, "bag", m.options, base=hand_written_bag)
        for m in VALUE_BAG_MUTANTS
    ]
    out += [
        Kernel("purity", m.name, m.fn, m.verifier, m.options, deterministic=m.deterministic)
        for m in PURITY_MUTANTS
    ]
    out += [
        Kernel("right", "F.embedding", F.embedding, "embedding"),
        Kernel("right", "ee.lookup_embedding", ee.lookup_embedding, "embedding"),
        Kernel("right", "ee.matmul_embedding", ee.matmul_embedding, "embedding"),
        Kernel("right", "F.embedding_bag", F.embedding_bag, "bag"),
        Kernel("right", "ee.lookup_embedding_bag", ee.lookup_embedding_bag, "bag"),
        Kernel("right", "ee.matmul_embedding_bag", ee.matmul_embedding_bag, "bag"),
        Kernel("right", "bag_summed_pairwise", bag_summed_pairwise, "bag"),
        # The catalogues' correct kernels, on which their mutants plant one bug each.
        Kernel("right", "blocked_embedding", blocked_embedding, "embedding"),
        Kernel("right", "hand_written_bag", hand_written_bag, "bag"),
    ]
    return out


@dataclass
class Verdict:
    """One check's judgment of one kernel.

    Attributes:
        flagged: the check rejects the kernel.
        detail: the first failing case and why (``None`` when it passes).
        judged: whether the check has a test for this kind of kernel at all.
        torch_defect: the verifier's diagnosis that the failure is torch's own.
        seeds: the verifier's runs (``None`` for the other checks).
        caught: how many of them failed.
        left_out: the cases left out because they reject the mutant's correct base.
    """

    flagged: bool
    detail: str | None = None
    judged: bool = True
    torch_defect: str | None = None
    seeds: int | None = None
    caught: int | None = None
    left_out: int = 0


def failing(cases: Cases) -> set[str]:
    """The labels of every case that fails."""
    out = set()
    for label, case in cases:
        try:
            case()
        except CheckFailed:
            out.add(label)
    return out


def _judge(cases: Cases, left_out: set[str] | frozenset[str] = frozenset()) -> Verdict:
    """Runs the cases in order, but those ``left_out``; the first that fails flags."""
    for label, case in cases:
        if label in left_out:
            continue
        try:
            case()
        except CheckFailed as flag:
            return Verdict(True, str(flag), left_out=len(left_out))
    return Verdict(False, left_out=len(left_out))


_BASE_FAILS: dict[tuple[str, Any], set[str]] = {}


def other_check(check: str, kernel: Kernel) -> Verdict:
    """One of the three checks on ``kernel``; a mutant skips the cases that reject its base."""
    cases = OTHER_CHECKS[check](kernel.fn, kernel.kind)
    if not cases:
        return Verdict(False, "no test of this kind", judged=False)
    left_out: set[str] = set()
    if kernel.base is not None:
        key = (check, kernel.base)
        if key not in _BASE_FAILS:
            _BASE_FAILS[key] = failing(OTHER_CHECKS[check](kernel.base, kernel.kind))
        left_out = _BASE_FAILS[key]
    return _judge(cases, left_out)


# --------------------------------------------------------------------------------------------
# The package's verifiers
# --------------------------------------------------------------------------------------------


def verify_report(kernel: Kernel, seed: int) -> Any:
    """The package's verifier for the kernel's kind: its defaults, and what the bug needs."""
    common: dict[str, Any] = {"seed": seed, "deterministic": kernel.deterministic or None}
    if kernel.kind == "embedding":
        return ee.verify_embedding(
            kernel.fn, options=kernel.options, backward=kernel.backward, **common
        )
    if kernel.kind == "bag":
        return ee.verify_embedding_bag(kernel.fn, options=kernel.options, **common)
    return ee.verify_quantized_embedding(kernel.fn, scheme="int8", **common)


def verify(kernel: Kernel, seeds: int) -> Verdict:
    """The verifier under seeds ``0 .. seeds - 1``.

    A mutant is caught when every seed fails it (the catch rate's standard: a bug found under
    some seeds is missed by some CI runs); a right kernel is flagged when any seed fails it.
    """
    caught, detail, defect = 0, None, None
    for seed in range(seeds):
        try:
            report = verify_report(kernel, seed)
        except Exception as exc:  # a verifier that raises has not caught anything
            detail = detail or f"seed {seed}: the verifier raised {type(exc).__name__}: {exc}"
            continue
        if not report.passed:
            caught += 1
            if detail is None:
                where = report.boundary or "a random example"
                detail = f"seed {seed}: {where}"
            defect = defect or report.torch_defect
    flagged = caught > 0 if kernel.family == "right" else caught == seeds
    return Verdict(flagged, detail, torch_defect=defect, seeds=seeds, caught=caught)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    """Every check's verdict on one kernel."""

    kernel: Kernel
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def false_alarm(self, check: str) -> bool:
        """A right kernel flagged, not for a defect the verifier names as torch's."""
        v = self.verdicts[check]
        return v.flagged and v.torch_defect is None


def judge(kernel: Kernel, seeds: int) -> Result:
    """Every check on ``kernel``; progress to stderr."""
    result = Result(kernel)
    for check in CHECKS:
        start = time.perf_counter()
        verdict = verify(kernel, seeds) if check == "verify" else other_check(check, kernel)
        result.verdicts[check] = verdict
        what = "flagged" if verdict.flagged else ("passed" if verdict.judged else "not judged")
        print(
            f"[{kernel.family}] {kernel.name} {check}: {what}"
            + (f" ({verdict.detail})" if verdict.flagged and verdict.detail else "")
            + f" [{time.perf_counter() - start:.1f} s]",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    return result


def totals(results: list[Result]) -> dict[str, dict[str, int]]:
    """Per family: ``total`` and, per check, the kernels flagged.

    For right kernels the false alarms: a defect the verifier names as torch's is not one.
    """
    out: dict[str, dict[str, int]] = {}
    for family in FAMILIES:
        rows = [r for r in results if r.kernel.family == family]
        if not rows:
            continue
        counts = {"total": len(rows)}
        for check in CHECKS:
            if family == "right":
                counts[check] = sum(r.false_alarm(check) for r in rows)
            else:
                counts[check] = sum(r.verdicts[check].flagged for r in rows)
        out[family] = counts
    return out


def markdown_table(sums: dict[str, dict[str, int]]) -> str:
    """The four checks side by side: bugs caught (mutants) and false alarms (right kernels)."""
    head = "| | " + " | ".join(CHECK_TITLES[c] for c in CHECKS) + " |"
    lines = [head, "|---|" + "---:|" * len(CHECKS)]
    for family, counts in sums.items():
        label = FAMILY_TITLES[family] + (" (false alarms)" if family == "right" else "")
        cells = [f"{counts[c]}/{counts['total']}" for c in CHECKS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _kernel_json(r: Result) -> dict[str, Any]:
    k = r.kernel
    return {
        "family": k.family,
        "name": k.name,
        "kind": k.kind,
        "needs": ", ".join((*k.options, *(("deterministic",) if k.deterministic else ()))),
        "flagged_by": [c for c in CHECKS if r.verdicts[c].flagged],
        "not_judged_by": [c for c in CHECKS if not r.verdicts[c].judged],
        "details": {c: r.verdicts[c].detail for c in CHECKS if r.verdicts[c].flagged},
        "cases_left_out": {c: r.verdicts[c].left_out for c in CHECKS if r.verdicts[c].left_out},
        "verify_seeds_caught": r.verdicts["verify"].caught,
        "torch_defect": r.verdicts["verify"].torch_defect,
    }


def main(argv: list[str] | None = None) -> int:
    """Judge every kernel with the four checks; print the per-family counts and the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="the verifiers' seeds (default 3)")
    parser.add_argument(
        "--json", type=Path, help="write the results there (docs/other-checks.json)"
    )
    parser.add_argument("--kernels", default="", help="comma-separated names (default: all)")
    args = parser.parse_args(argv)
    names = {n.strip() for n in args.kernels.split(",") if n.strip()}
    torch.set_num_threads(1)
    start = time.perf_counter()
    results = [judge(k, args.seeds) for k in kernels() if not names or k.name in names]
    seconds = time.perf_counter() - start
    sums = totals(results)
    for check in CHECKS:
        print(f"{CHECK_TITLES[check]}:")
        for family, counts in sums.items():
            what = "false alarms" if family == "right" else "bugs caught"
            print(f"  {FAMILY_TITLES[family]:18s} {what} {counts[check]}/{counts['total']}")
    for r in results:
        defect = r.verdicts["verify"].torch_defect
        if r.kernel.family == "right" and defect:
            print(f"{r.kernel.name}: flagged by the verifier for torch's own defect: {defect}")
        skipped = [CHECK_TITLES[c] for c in CHECKS if not r.verdicts[c].judged]
        if skipped:
            print(f"{r.kernel.name}: not judged by {', '.join(skipped)} (no test of its kind)")
    print()
    print(markdown_table(sums))
    print(
        f"\n{len(results)} kernels in {seconds:.0f} s; verifier seeds {args.seeds}; one thread; "
        f"torch {torch.__version__}, hypothesis {hypothesis.__version__}"
    )
    if args.json is not None:
        data = {
            "versions": {"torch": torch.__version__, "hypothesis": hypothesis.__version__},
            "seeds": args.seeds,
            "threads": 1,
            "checks": [{"key": c, "title": CHECK_TITLES[c]} for c in CHECKS],
            "families": [
                {"key": f, "title": FAMILY_TITLES[f], "right": f == "right"} for f in sums
            ],
            "totals": sums,
            "kernels": [_kernel_json(r) for r in results],
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
