"""Catch rates: how reliably, and how fast, the verifiers catch every planted bug, over seeds.

Runs every mutant of the project's catalogues (``tests/mutants.py``, ``tests/bag_mutants.py``,
``tests/quantized_mutants.py``, ``tests/sharded_mutants.py``, the compiled mutants of
``tests/mutants.py``, as family ``value`` the value-range kernels of ``tests/value_mutants.py``
and as family ``purity`` the kernels with side effects of ``tests/purity_mutants.py``, each
under its own verifier) under seeds ``0 .. K - 1`` with each
verifier's default settings (only the options, scheme or sharding that a mutant's bug needs),
on one thread, and prints per
mutant: how many seeds caught it, the rate, how many of those catches came from the boundary
phase, the median examples and the median seconds to the report (shrinking included), and the
slowest run; then per family the median time to catch beside the time of a passing run (a
right kernel of the family, verified the same way under ``--control-seeds`` seeds: what a
correct kernel's author waits); and the load average before and after (the seconds depend on
it). A compiled
mutant is compiled afresh for every seed (dynamo's caches are reset), as a user's run would
be. Progress goes to stderr; the exit status is 1 if any mutant was missed under any seed.

The goal (issue 19): every mutant caught under every one of 30 seeds, median time to catch at
most 2 s. Sharded runs start worker processes (a few seconds each), so the sharded family
defaults to fewer seeds (``--sharded-seeds``); the output says so. ``row_offset_in_int32``
lives only in tables of more than ``2**31`` elements: ``--large`` runs it on
``ee.large_table_sizes(torch.float16)`` (``V = 2**21 + 8`` rows of ``D = 1024``, 4 GiB) with 5
examples a seed, under at most 3 seeds, and with it ``blocked_vocab_parallel``, a vocab-parallel
kernel wrong only at the inner shard edge of shards past 2**16 rows, on a table of ``2**17 + 2``
rows built shard by shard over 2 ranks.

Usage::

    python benchmarks/catch_rates.py                               # every family, K = 30
    python benchmarks/catch_rates.py --seeds 5 --families embedding,bag
    python benchmarks/catch_rates.py --families value             # the value boundaries
    python benchmarks/catch_rates.py --mutants grid_drops_partial_block --seeds 100
    python benchmarks/catch_rates.py --json docs/catch-rates.json  # the Verify page's table
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
# The catalogues live with the tests; the sharded workers import their mutants by name, with
# this process's sys.path.
sys.path.insert(0, str(ROOT / "tests"))

import embedding_equivalence as ee  # noqa: E402
from bag_mutants import BAG_MUTANTS  # noqa: E402
from embedding_equivalence.distributed import (  # noqa: E402
    verify_sharded_embedding,
    vocab_parallel_embedding,
)
from mutants import LARGE_TABLE_MUTANTS, MUTANTS, compiled_mutants  # noqa: E402
from purity_mutants import PURITY_MUTANTS  # noqa: E402
from quantized_mutants import QUANTIZED_MUTANTS  # noqa: E402
from sharded_mutants import EDGE_D, EDGE_V, SHARDED_LARGE_MUTANTS, SHARDED_MUTANTS  # noqa: E402
from value_mutants import VALUE_BAG_MUTANTS, VALUE_MUTANTS, VALUE_QUANTIZED_MUTANTS  # noqa: E402

FAMILIES = ("embedding", "bag", "quantized", "sharded", "compiled", "value", "purity")
#: The sizes of the large-table run: the package's preset just past 2**31 elements, so the
#: last rows' ``id * D`` leaves int32; float16 keeps the table at 4 GiB.
_LARGE_V, _LARGE_D = ee.large_table_sizes(torch.float16)
LARGE = {
    "vocab_sizes": _LARGE_V,
    "embedding_dims": _LARGE_D,
    "dtypes": [torch.float16],
    "max_examples": 5,
}
GOAL_SECONDS = 2.0


def _compiled_control(seed: int) -> Any:
    torch._dynamo.reset()
    return ee.verify_embedding(torch.compile(F.embedding), seed=seed)


#: A right kernel per family, verified as that family's mutants are: the passing run's time.
#: The compiled family's is compiled afresh (dynamo's caches reset), as a user's run would be.
CONTROLS: dict[str, tuple[str, Callable[[int], Any]]] = {
    "embedding": ("F.embedding", lambda seed: ee.verify_embedding(F.embedding, seed=seed)),
    "bag": (
        "lookup_embedding_bag",
        lambda seed: ee.verify_embedding_bag(ee.lookup_embedding_bag, seed=seed),
    ),
    "quantized": (
        "lookup_quantized_embedding, int8",
        lambda seed: ee.verify_quantized_embedding(
            functools.partial(ee.lookup_quantized_embedding, scheme="int8"),
            scheme="int8",
            seed=seed,
        ),
    ),
    "sharded": (
        "vocab_parallel_embedding",
        lambda seed: verify_sharded_embedding(vocab_parallel_embedding, seed=seed),
    ),
    "compiled": ("torch.compile(F.embedding)", _compiled_control),
    "value": ("F.embedding", lambda seed: ee.verify_embedding(F.embedding, seed=seed)),
    "purity": (
        "F.embedding, deterministic",
        lambda seed: ee.verify_embedding(F.embedding, seed=seed, deterministic=True),
    ),
}


@dataclass
class Entry:
    """One mutant of one family, and its runs.

    Attributes:
        family: the catalogue (``embedding``, ``bag``, ``quantized``, ``sharded``,
            ``compiled``, ``value`` or ``large``).
        name: the mutant's name.
        bug: the first sentence of its description.
        needs: what its run asks for beyond the defaults (options, scheme, sharding, sizes).
        verify: runs the verifier on it with a seed; returns the report.
        runs: ``(seed, report or exception)`` of each run.
    """

    family: str
    name: str
    bug: str
    needs: str
    verify: Callable[[int], Any]
    runs: list[tuple[int, Any]] = field(default_factory=list)


def _first_sentence(text: str | None) -> str:
    words = " ".join((text or "").split())
    return words.split(". ", 1)[0].rstrip(".") + "."


def _options(options: tuple[str, ...]) -> str:
    return ", ".join(options)


def _verifier_entries(
    family: str, embedding: list[Any], bag: list[Any], quantized: list[Any]
) -> Iterator[Entry]:
    """The entries of catalogues of ``F.embedding``, bag and quantized kernels, as ``family``."""
    for m in embedding:
        yield Entry(
            family, m.name, _first_sentence(m.fn.__doc__), _options(m.options),
            lambda seed, m=m: ee.verify_embedding(
                m.fn, options=m.options, backward=m.backward, seed=seed
            ),
        )  # fmt: skip
    for m in bag:
        yield Entry(
            family, m.name, _first_sentence(m.doc), _options(m.options),
            lambda seed, m=m: ee.verify_embedding_bag(m.fn, options=m.options, seed=seed),
        )  # fmt: skip
    for m in quantized:
        yield Entry(
            family, m.name, _first_sentence(m.doc), f"scheme={m.scheme}",
            lambda seed, m=m: ee.verify_quantized_embedding(m.fn, scheme=m.scheme, seed=seed),
        )  # fmt: skip


def _entries(families: tuple[str, ...], large: bool) -> Iterator[Entry]:
    if "embedding" in families:
        yield from _verifier_entries("embedding", MUTANTS, [], [])
    if "bag" in families:
        yield from _verifier_entries("bag", [], BAG_MUTANTS, [])
    if "quantized" in families:
        yield from _verifier_entries("quantized", [], [], list(QUANTIZED_MUTANTS))
    if "sharded" in families:
        for m in SHARDED_MUTANTS:
            needs = ", ".join(x for x in (f"sharding={m.sharding}", _options(m.options)) if x)
            yield Entry(
                "sharded", m.name, _first_sentence(m.fn.__doc__), needs,
                lambda seed, m=m: verify_sharded_embedding(
                    m.fn, sharding=m.sharding, options=m.options, seed=seed
                ),
            )  # fmt: skip
    if "compiled" in families:
        for i, m in enumerate(compiled_mutants()):

            def verify(seed: int, i: int = i) -> Any:
                torch._dynamo.reset()  # compiled afresh, as in a user's run
                fresh = compiled_mutants()[i]
                return ee.verify_embedding(
                    fresh.fn, options=fresh.options, backward=fresh.backward, seed=seed
                )

            original = getattr(m.fn, "_torchdynamo_orig_callable", m.fn)
            yield Entry("compiled", m.name, _first_sentence(original.__doc__), "", verify)
    if "value" in families:
        yield from _verifier_entries(
            "value", VALUE_MUTANTS, VALUE_BAG_MUTANTS, VALUE_QUANTIZED_MUTANTS
        )
    if "purity" in families:
        verifiers = {
            "embedding": lambda m, seed: ee.verify_embedding(
                m.fn, options=m.options, seed=seed, deterministic=m.deterministic
            ),
            "bag": lambda m, seed: ee.verify_embedding_bag(
                m.fn, options=m.options, seed=seed, deterministic=m.deterministic
            ),
            "quantized": lambda m, seed: ee.verify_quantized_embedding(
                m.fn, scheme="int8", seed=seed, deterministic=m.deterministic
            ),
        }
        for m in PURITY_MUTANTS:
            needs = ", ".join(
                x for x in (_options(m.options), "deterministic" * m.deterministic) if x
            )
            yield Entry(
                "purity", m.name, _first_sentence(m.fn.__doc__), needs,
                lambda seed, m=m: verifiers[m.verifier](m, seed),
            )  # fmt: skip
    if large:
        for m in LARGE_TABLE_MUTANTS:
            yield Entry(
                "large", m.name, _first_sentence(m.fn.__doc__),
                f"V = {_LARGE_V:,}, D = {_LARGE_D:,}, float16, 5 examples",
                lambda seed, m=m: ee.verify_embedding(
                    m.fn, options=m.options, backward=m.backward, seed=seed, **LARGE
                ),
            )  # fmt: skip
        for m in SHARDED_LARGE_MUTANTS:
            yield Entry(
                "large", m.name, _first_sentence(m.fn.__doc__),
                f"sharding={m.sharding}, V = {EDGE_V:,}, D = {EDGE_D}, float32, 5 examples",
                lambda seed, m=m: verify_sharded_embedding(
                    m.fn, sharding=m.sharding, options=m.options, seed=seed,
                    vocab_sizes=EDGE_V, embedding_dims=EDGE_D, dtypes=[torch.float32],
                    max_examples=5, timeout=120.0,
                ),
            )  # fmt: skip


def _caught(outcome: Any) -> bool:
    return not isinstance(outcome, BaseException) and not outcome.passed


def _summary(entry: Entry) -> dict[str, Any]:
    """The entry's figures, as the JSON stores them."""
    caught = [r for _, r in entry.runs if _caught(r)]
    in_phase = [r for r in caught if getattr(r, "boundary", None) is not None]
    boundaries = collections.Counter(r.boundary for r in in_phase)
    errors = [
        f"seed {s}: {type(r).__name__}: {r}" for s, r in entry.runs if isinstance(r, BaseException)
    ]
    return {
        "family": entry.family,
        "name": entry.name,
        "bug": entry.bug,
        "needs": entry.needs,
        "seeds": len(entry.runs),
        "caught": len(caught),
        "missed_seeds": [s for s, r in entry.runs if not _caught(r)],
        "errors": errors,
        "caught_in_boundary_phase": len(in_phase),
        "boundary": boundaries.most_common(1)[0][0] if boundaries else None,
        "median_examples": statistics.median(r.examples for r in caught) if caught else None,
        "median_seconds": round(statistics.median(r.elapsed for r in caught), 3)
        if caught
        else None,
        "max_seconds": round(max(r.elapsed for r in caught), 3) if caught else None,
    }


def _row(s: dict[str, Any]) -> str:
    rate = s["caught"] / s["seeds"] if s["seeds"] else 0.0
    examples = "-" if s["median_examples"] is None else f"{s['median_examples']:g}"
    seconds = "-" if s["median_seconds"] is None else f"{s['median_seconds']:.2f}"
    slowest = "-" if s["max_seconds"] is None else f"{s['max_seconds']:.2f}"
    return (
        f"{s['family']:10s} {s['name']:38s} {s['caught']:>3d}/{s['seeds']:<3d} {rate:6.0%} "
        f"{s['caught_in_boundary_phase']:>6d} {examples:>8s} {seconds:>8s} {slowest:>8s}"
    )


def _header() -> str:
    return (
        f"{'family':10s} {'mutant':38s} {'caught':>7s} {'rate':>6s} {'phase':>6s} "
        f"{'examples':>8s} {'median s':>8s} {'max s':>8s}"
    )


def _totals(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    every = [s for s in summaries if s["caught"] == s["seeds"]]
    medians = [s["median_seconds"] for s in summaries if s["median_seconds"] is not None]
    slow = [s["name"] for s in summaries if (s["median_seconds"] or 0) > GOAL_SECONDS]
    runs = sum(s["seeds"] for s in summaries)
    missed = sum(s["seeds"] - s["caught"] for s in summaries)
    return {
        "mutants": len(summaries),
        "caught_under_every_seed": len(every),
        "runs": runs,
        "missed_runs": missed,
        "median_of_median_seconds": round(statistics.median(medians), 3) if medians else None,
        "median_above_goal": slow,
        "goal_met": missed == 0 and not slow,
    }


def _families(
    summaries: list[dict[str, Any]], controls: dict[str, list[Any]]
) -> dict[str, dict[str, Any]]:
    """Per family: the median time to catch beside the passing run of its right kernel."""
    out = {}
    for family in dict.fromkeys(s["family"] for s in summaries):
        rows = [s for s in summaries if s["family"] == family]
        medians = [s["median_seconds"] for s in rows if s["median_seconds"] is not None]
        runs = controls.get(family, [])
        passed = [r for r in runs if not isinstance(r, BaseException) and r.passed]
        out[family] = {
            "mutants": len(rows),
            "caught_under_every_seed": sum(s["caught"] == s["seeds"] for s in rows),
            "median_seconds_to_catch": round(statistics.median(medians), 3) if medians else None,
            "control": CONTROLS[family][0] if family in CONTROLS else None,
            "control_runs": len(runs),
            "control_passed": len(passed),
            "control_median_seconds": round(statistics.median(r.elapsed for r in passed), 3)
            if passed
            else None,
        }
    return out


def _run_controls(families: list[str], seeds: int) -> dict[str, list[Any]]:
    """Verify each family's right kernel under ``seeds`` seeds (a failure is reported)."""
    runs: dict[str, list[Any]] = {}
    for family in families:
        if family not in CONTROLS:
            continue
        name, verify = CONTROLS[family]
        for seed in range(seeds):
            try:
                outcome: Any = verify(seed)
            except Exception as exc:
                outcome = exc
            runs.setdefault(family, []).append(outcome)
            what = (
                f"ERROR {type(outcome).__name__}: {outcome}"
                if isinstance(outcome, BaseException)
                else f"{'passed' if outcome.passed else 'FAILED'}, {outcome.elapsed:.2f} s"
            )
            print(f"[{family}] control {name} seed {seed}: {what}", file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    """Run the catalogues; print the table; exit 1 if a mutant was missed under any seed."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds 0 .. K-1 (default 30)")
    parser.add_argument(
        "--sharded-seeds", type=int, default=3,
        help="seeds for the sharded family (default 3: each run starts worker processes)",
    )  # fmt: skip
    parser.add_argument(
        "--families", default=",".join(FAMILIES),
        help=f"comma-separated, from {', '.join(FAMILIES)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--mutants", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--control-seeds", type=int, default=3,
        help="seeds of each family's passing run of a right kernel (default 3; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--large", action="store_true",
        help="also run the large-table mutants (a 4 GiB float16 table, about 10 GiB peak)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the results there (docs/catch-rates.json)")
    args = parser.parse_args(argv)
    families = tuple(f.strip() for f in args.families.split(",") if f.strip())
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; choose from {', '.join(FAMILIES)}")
    names = {n.strip() for n in args.mutants.split(",") if n.strip()}
    torch.set_num_threads(1)

    entries = [e for e in _entries(families, args.large) if not names or e.name in names]
    seeds = {f: args.seeds for f in (*FAMILIES, "large")}
    seeds["sharded"] = args.sharded_seeds
    if args.large:
        seeds["large"] = min(args.seeds, 3)
    load_before = os.getloadavg()[0]
    for entry in entries:
        k = seeds[entry.family]
        for seed in range(k):
            start = time.perf_counter()
            try:
                outcome: Any = entry.verify(seed)
            except Exception as exc:  # a verifier that raises is a miss, reported as such
                outcome = exc
            entry.runs.append((seed, outcome))
            if isinstance(outcome, BaseException):
                what = f"ERROR {type(outcome).__name__}: {outcome}"
            elif outcome.passed:
                what = f"MISSED ({outcome.examples} examples, {outcome.elapsed:.2f} s)"
            else:
                where = "boundary phase" if getattr(outcome, "boundary", None) else "random"
                what = f"caught in {outcome.examples} examples ({where}), {outcome.elapsed:.2f} s"
            print(
                f"[{entry.family}] {entry.name} seed {seed}: {what} "
                f"[{time.perf_counter() - start:.1f} s]",
                file=sys.stderr, flush=True,
            )  # fmt: skip

    ran = sorted({e.family for e in entries}, key=[*FAMILIES, "large"].index)
    controls = _run_controls(ran, args.control_seeds)
    load_after = os.getloadavg()[0]
    summaries = [_summary(e) for e in entries]
    totals = _totals(summaries)
    families_table = _families(summaries, controls)
    print(
        "Seeds: "
        + ", ".join(f"{f} {seeds[f]}" for f in ran)
        + (
            " (sharded: fewer seeds, each run starts worker processes)"
            if "sharded" in ran and seeds["sharded"] != args.seeds
            else ""
        )
        + f"; one thread; torch {torch.__version__}, hypothesis {hypothesis.__version__}; "
        f"load average {load_before:.2f} before, {load_after:.2f} after"
    )
    print("phase: catches made by the boundary phase; examples and seconds: medians of the catches")
    print(_header())
    for s in summaries:
        print(_row(s))
    for s in summaries:
        if s["missed_seeds"]:
            print(f"MISSED {s['family']}/{s['name']} under seeds {s['missed_seeds']}")
        for error in s["errors"]:
            print(f"ERROR {s['family']}/{s['name']} {error}")
    print("\nper family: median seconds to catch (over the mutants' medians) and of a passing run")
    print(
        f"{'family':10s} {'mutants':>7s} {'every seed':>10s} {'catch s':>8s} {'pass s':>8s}  "
        "right kernel"
    )
    for family, f in families_table.items():
        catch = (
            "-" if f["median_seconds_to_catch"] is None else f"{f['median_seconds_to_catch']:.2f}"
        )
        passing = (
            "-" if f["control_median_seconds"] is None else f"{f['control_median_seconds']:.2f}"
        )
        failed = f["control_runs"] - f["control_passed"]
        note = f" ({failed} of {f['control_runs']} runs did not pass)" if failed else ""
        print(
            f"{family:10s} {f['mutants']:>7d} {f['caught_under_every_seed']:>10d} {catch:>8s} "
            f"{passing:>8s}  {f['control'] or '-'}{note}"
        )
    print(
        f"caught {totals['caught_under_every_seed']} of {totals['mutants']} mutants under every "
        f"seed; {totals['missed_runs']} of {totals['runs']} runs missed; median of the medians "
        f"{totals['median_of_median_seconds']} s; median above {GOAL_SECONDS:g} s: "
        f"{', '.join(totals['median_above_goal']) or 'none'}"
    )
    if args.json is not None:
        data = {
            "versions": {"torch": torch.__version__, "hypothesis": hypothesis.__version__},
            "seeds": {f: seeds[f] for f in ran},
            "threads": 1,
            "load_average": {"before": round(load_before, 2), "after": round(load_after, 2)},
            "settings": "each verifier's defaults; only the options, scheme, sharding or sizes "
            "that a mutant's bug needs",
            "goal_seconds": GOAL_SECONDS,
            "control_seeds": args.control_seeds,
            "mutants": summaries,
            "families": families_table,
            "totals": totals,
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    controls_failed = any(f["control_passed"] < f["control_runs"] for f in families_table.values())
    return 1 if totals["missed_runs"] or controls_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
