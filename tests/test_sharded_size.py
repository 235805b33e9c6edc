"""Sharded verification at the sizes that need sharding: each rank builds only its shard.

The fast tier checks the pieces without a process group: the table recipe (any range of rows
or columns is the same slice of the whole table, and its snippet source draws the same
values), the compact call (its oracle is the full table's, restricted to the referenced
rows), the boundary examples at the requested size (ids at every shard edge), and the judge of
the ranks' pieces (a row that no id references named by its global number). The slow tier
runs real process groups on tables of 2**22 elements and more: the package's forms pass, a
kernel wrong only at an interior shard edge of a large table is caught by the boundary phase
with one example, and no rank's peak memory comes near the whole table.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import embedding_equivalence.strategies as ees
from embedding_equivalence._draw.recipes import IdsRecipe, WeightRecipe
from embedding_equivalence._engine.check import EquivalenceError
from embedding_equivalence._engine.compare import zero_off_rows
from embedding_equivalence.distributed import (
    dim_parallel_embedding,
    shard_range,
    verify_sharded_embedding,
    vocab_parallel_embedding,
)
from embedding_equivalence.distributed._boundaries import (
    sharded_boundaries_at_size,
    sizes_at_the_top,
)
from embedding_equivalence.distributed._large import BlockTable, LargeShardedCase
from embedding_equivalence.distributed._large_judge import judge_large
from embedding_equivalence.distributed._large_rank import LargeOutcome, _first_unreferenced
from embedding_equivalence.oracle import EmbeddingOracle
from sharded_mutants import EDGE_D, EDGE_V, blocked_vocab_parallel

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


# --- the table recipe -------------------------------------------------------------------------


@st.composite
def _tables(draw: st.DrawFn) -> BlockTable:
    v = draw(st.integers(1, 300), label="V")
    d = draw(st.integers(1, 70), label="D")
    dtype = draw(st.sampled_from(DTYPES), label="dtype")
    return BlockTable(v, d, dtype, draw(st.integers(0, 2**32), label="seed"))


@given(table=_tables(), data=st.data())
def test_any_range_of_rows_and_columns_is_the_same_slice_of_the_whole_table(
    table: BlockTable, data: st.DataObject
) -> None:
    whole = table.rows(0, table.num_embeddings)
    lo = data.draw(st.integers(0, table.num_embeddings), label="lo")
    hi = data.draw(st.integers(lo, table.num_embeddings), label="hi")
    c0 = data.draw(st.integers(0, table.embedding_dim), label="c0")
    c1 = data.draw(st.integers(c0, table.embedding_dim), label="c1")
    assert torch.equal(table.rows(lo, hi, (c0, c1)), whole[lo:hi, c0:c1])
    rows = data.draw(st.lists(st.integers(0, table.num_embeddings - 1), max_size=12), label="rows")
    assert torch.equal(table.gather(rows), whole[rows])
    world = data.draw(st.integers(1, 5), label="world")
    rank = data.draw(st.integers(0, world - 1), label="rank")
    r0, r1 = shard_range(table.num_embeddings, world, rank)
    assert torch.equal(table.shard(0, world, rank), whole[r0:r1])
    d0, d1 = shard_range(table.embedding_dim, world, rank)
    assert torch.equal(table.shard(1, world, rank), whole[:, d0:d1])


@settings(max_examples=5)
@given(table=_tables())
def test_the_snippet_source_draws_the_same_table(table: BlockTable) -> None:
    namespace: dict[str, Any] = {"torch": torch}
    exec(table.source(), namespace)
    v, d = table.num_embeddings, table.embedding_dim
    assert torch.equal(namespace["table_rows"](0, v, 0, d), table.rows(0, v))


@given(table=_tables())
def test_rows_are_distinguishable(table: BlockTable) -> None:
    """Reading a wrong row must be seen: no two rows of a table of 8 or more columns agree."""
    if table.embedding_dim < 8:
        return
    whole = table.rows(0, table.num_embeddings)
    assert torch.unique(whole, dim=0).shape[0] == table.num_embeddings


# --- the compact call -------------------------------------------------------------------------


def _large(case: ees.EmbeddingCase) -> LargeShardedCase:
    return LargeShardedCase.of(case)


@given(
    case=ees.embedding_cases(
        options=("padding_idx", "max_norm", "scale_grad_by_freq"),
        dtype=st.sampled_from(DTYPES),
        device="cpu",
    ).map(_large)
)
def test_the_compact_oracle_is_the_full_one_on_the_referenced_rows(case: LargeShardedCase) -> None:
    call = case.call()
    full = case.table.rows(0, case.num_embeddings)
    ids = case.ids.build()
    whole = EmbeddingOracle(ids, full, **case.kwargs)
    compact = EmbeddingOracle.for_call(call)
    (out, bound), (c_out, c_bound) = whole.output(), compact.output()
    assert torch.equal(out, c_out)
    assert (bound is None) == (c_bound is None)
    if bound is not None and c_bound is not None:
        assert torch.equal(bound, c_bound)
    grad_output = case.grad_output()
    expected, c_expected = whole.weight_grad(grad_output), compact.weight_grad(grad_output)
    assert [call.rows[r] for r in c_expected.rows] == expected.rows
    assert torch.equal(expected.values, c_expected.values)
    assert torch.equal(expected.bound, c_expected.bound)
    renormed, c_renormed = whole.renormed(), compact.renormed()
    if renormed is not None and c_renormed is not None:
        assert torch.equal(renormed.values, c_renormed.values)


# --- the boundary examples at the requested size ----------------------------------------------


@pytest.mark.parametrize(("lo", "hi", "world", "expected"), [
    (2**24, 2**24, 4, (2**24,)),
    (1, 2**24, 4, (2**24 - 1, 2**24)),
    (1, 2**24 + 2, 4, (2**24 - 1, 2**24, 2**24 + 1, 2**24 + 2)),
    (1, 10, 3, (8, 9, 10)),
])  # fmt: skip
def test_the_sizes_at_the_top_are_the_largest_and_the_worlds_multiple_next_to_it(
    lo: int, hi: int, world: int, expected: tuple[int, ...]
) -> None:
    assert sizes_at_the_top(lo, hi, world) == expected


@pytest.mark.parametrize("sharding", ["vocab", "dim"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_examples_at_size_hold_ids_at_every_shard_edge(sharding: str, world: int) -> None:
    v, d = 2**24, 64
    boundaries = list(
        sharded_boundaries_at_size(
            sharding, world, ("padding_idx",), [torch.float32], (v, v), (d, d)
        )
    )
    assert boundaries
    for boundary in boundaries:
        case = boundary.case
        ids = set(case.ids.values)
        size = case.weight.num_embeddings
        for rank in range(world):
            start, stop = shard_range(size, world, rank)
            if stop > start:
                assert {start, stop - 1} <= ids, (rank, start, stop)
        assert case.ids.values.count(size - 1) >= 3  # the last row repeats
        assert case.kwargs["padding_idx"] in ids  # a shard edge of the last holding rank
        assert "every shard edge" in boundary.label


def test_the_examples_at_size_are_the_same_whatever_the_seed() -> None:
    """Data, not draws: built twice, the examples are equal."""

    def build() -> list[Any]:
        return [b.case for b in sharded_boundaries_at_size(
            "vocab", 4, (), [torch.float32, torch.float16], (1, 2**24), (64, 64))]  # fmt: skip

    assert build() == build()


# --- judging the ranks' pieces ----------------------------------------------------------------


def _compact(v: int = 1000, d: int = 4) -> tuple[LargeShardedCase, Any]:
    ids = IdsRecipe((999, 0, 500, 500), (4,))
    case = LargeShardedCase(ids, WeightRecipe(v, d, torch.float32, "cpu", 3), {}, 7)
    return case, case.call()


def _exact_pieces(case: LargeShardedCase, call: Any) -> list[LargeOutcome]:
    """What two correct ranks (``Shard(0)``) send back."""
    oracle = EmbeddingOracle.for_call(call)
    grad = oracle.weight_grad(call.grad_output).values.to(case.dtype)
    out = case.table.gather(list(case.ids.values)).reshape(4, case.embedding_dim)
    outcomes = []
    for rank in range(2):
        start, stop = shard_range(case.num_embeddings, 2, rank)
        mine = torch.tensor([start <= r < stop for r in call.rows])
        piece = torch.where(mine[:, None], grad, torch.zeros_like(grad))
        outcomes.append(LargeOutcome(output=out.clone(), requires_grad=True, weight_grad=piece,
                                     rank=rank))  # fmt: skip
    return outcomes


def test_the_ranks_pieces_of_a_correct_gradient_pass() -> None:
    case, call = _compact()
    judge_large(vocab_parallel_embedding, call, _exact_pieces(case, call), "vocab")


def test_a_wrong_referenced_row_is_named_by_its_global_number() -> None:
    case, call = _compact()
    outcomes = _exact_pieces(case, call)
    assert call.rows == (0, 500, 999)
    outcomes[1].weight_grad[2, 1] += 1.0  # type: ignore[index]  # global row 999
    with pytest.raises(EquivalenceError, match=r"weight\.grad\[999, 1\] = .* referenced rows'"):
        judge_large(vocab_parallel_embedding, call, outcomes, "vocab")


def test_a_gradient_on_a_row_that_no_id_references_is_named() -> None:
    case, call = _compact()
    outcomes = _exact_pieces(case, call)
    outcomes[0].stray = (499, 1, [0.5, 0.0, 0.0, 0.0])  # rank 0's last row
    with pytest.raises(EquivalenceError, match=r"weight\.grad\[499, :\] .* no id references"):
        judge_large(vocab_parallel_embedding, call, outcomes, "vocab")


# --- process groups, at size ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("form", "sharding"),
    [(vocab_parallel_embedding, "vocab"), (dim_parallel_embedding, "dim")],
    ids=["vocab", "dim"],
)
def test_the_forms_pass_on_a_table_built_shard_by_shard(form: Any, sharding: str) -> None:
    report = verify_sharded_embedding(
        form, sharding=sharding, world_size=2, vocab_sizes=EDGE_V, embedding_dims=EDGE_D,
        dtypes=[torch.float32], max_examples=2, seed=0, timeout=120.0,
        options=("padding_idx", "max_norm", "scale_grad_by_freq"),
    )  # fmt: skip
    assert report.passed, report.failure


@pytest.mark.slow
def test_a_kernel_wrong_only_at_an_inner_shard_edge_of_a_large_table_is_caught_at_size() -> None:
    """The boundary phase at size catches it with one example, whatever the seed."""
    report = verify_sharded_embedding(
        blocked_vocab_parallel, sharding="vocab", world_size=2, vocab_sizes=EDGE_V,
        embedding_dims=EDGE_D, dtypes=[torch.float32], max_examples=1, seed=1, timeout=120.0,
    )  # fmt: skip
    assert not report.passed
    assert report.boundary is not None
    assert "every shard edge" in report.boundary
    # The ids: each rank's first row (0, 65,537), rank 0's last row (65,536), V - 1 three times.
    assert math.ceil(EDGE_V / 2) - 1 == 65_536
    assert "out[2, 0] = 0, but the exact value is" in (report.failure or "")
    assert "table_rows" in (report.counterexample or "")


def _peak(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in text.splitlines() if x.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
@pytest.mark.spawned_ranks  # the peaks of ranks started as the verifier starts them
def test_no_rank_holds_the_whole_table() -> None:
    """A 1 GiB table over 4 ranks: each rank's peak stays below the table's size."""
    v, d = 2**23, 32
    peaks: dict[int, int] = {}
    done = threading.Event()

    def watch() -> None:
        me = os.getpid()
        while not done.wait(0.1):
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == me:
                    peaks[int(entry.name)] = max(
                        peaks.get(int(entry.name), 0), _peak(int(entry.name))
                    )

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        report = verify_sharded_embedding(
            vocab_parallel_embedding, sharding="vocab", world_size=4, vocab_sizes=v,
            embedding_dims=d, dtypes=[torch.float32], max_examples=1, seed=0, timeout=300.0,
        )  # fmt: skip
    finally:
        done.set()
        watcher.join()
    assert report.passed, report.failure
    table = v * d * 4
    ranks = sorted(peaks.values(), reverse=True)[:4]
    assert len(ranks) == 4
    # Each rank: its shard (256 MiB), its gradient (as much) and Python with torch.
    assert max(ranks) < table, [f"{p / 2**20:.0f} MiB" for p in ranks]


@given(
    rows=st.integers(1, 300),
    dim=st.sampled_from([1, 2, 3, 4, 8]),
    dtype=st.sampled_from(DTYPES),
    data=st.data(),
)
def test_a_rank_finds_the_first_row_that_no_id_references_but_got_a_gradient(
    rows: int, dim: int, dtype: torch.dtype, data: st.DataObject
) -> None:
    grad = torch.zeros(rows, dim, dtype=dtype)
    referenced = data.draw(st.sets(st.integers(0, rows - 1), max_size=5), label="referenced")
    for r in referenced:
        grad[r] = 1.5
    strays = data.draw(st.sets(st.integers(0, rows - 1), max_size=3), label="strays") - referenced
    for r in strays:
        grad[r, dim - 1] = 0.25
    signed = data.draw(st.sets(st.integers(0, rows - 1), max_size=2), label="-0.0 rows")
    for r in signed - referenced - strays:
        grad[r, 0] = -0.0  # equal to zero: not a stray
    index = torch.tensor(sorted(referenced), dtype=torch.int64)
    found = _first_unreferenced(
        lambda a, b: grad[a:b].ne(0).any(dim=1), rows, dim, index,
        clean=lambda a, b, inside: zero_off_rows(grad[a:b], inside),
    )  # fmt: skip
    assert found == ((min(strays), len(strays)) if strays else None)
