"""torch's own sharded embeddings (DTensor, tensor parallelism) under verify_sharded_embedding.

What the verifier finds in torch 2.13 (CPU, gloo) is pinned here: each defect is a strict
xfail with the smallest call that shows it, run on a real process group, so that a torch
release that fixes it turns the test red and the note in the docs gets updated.

The module is in the slow tier (it starts process groups); its world-size-2 groups share their
ranks (``shared_workers``): each test takes over the ranks the previous one left running.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from embedding_equivalence.distributed import verify_sharded_embedding
from embedding_equivalence.distributed._group import WorkerGroup
from embedding_equivalence.oracle.call import Call
from shared_ranks import shared_workers

pytestmark = pytest.mark.slow

SEED = 0


@pytest.fixture(scope="module", autouse=True)
def _shared_ranks() -> Iterator[None]:
    """One world-size-2 group for the module (a group that fails is restarted)."""
    with shared_workers():
        yield


@pytest.fixture
def two_ranks() -> Iterator[WorkerGroup]:
    with WorkerGroup(2) as group:
        yield group


def _call(vocab: int, ids: list[int], **options: object) -> Call:
    """A small call: table ``arange`` (exact values), upstream gradient of ones."""
    weight = torch.arange(vocab * 2, dtype=torch.float32).reshape(vocab, 2).requires_grad_()
    input = torch.tensor(ids)
    return Call(input, weight, dict(options), grad_output=torch.ones(len(ids), 2))


def _errors(group: WorkerGroup, candidate: str, call: Call, sharding: str) -> list[str]:
    return [
        f"rank {o.rank}: {type(o.error).__name__}: {o.error}"
        for o in group.run(candidate, call, sharding)
        if o.error is not None
    ]


@pytest.mark.parametrize(
    ("candidate", "sharding", "options"),
    [
        ("checked_dtensor_embedding", "vocab", ("padding_idx", "scale_grad_by_freq")),
        ("dtensor_embedding", "dim", ("padding_idx", "scale_grad_by_freq")),
        ("checked_rowwise_parallel", "vocab", ("padding_idx", "scale_grad_by_freq")),
        ("colwise_parallel", "dim", ("padding_idx", "scale_grad_by_freq")),
    ],
    ids=["F.embedding-vocab", "F.embedding-dim", "RowwiseParallel", "ColwiseParallel"],
)
def test_torch_dtensor_embeddings_pass_at_world_size_2(
    candidate: str, sharding: str, options: tuple[str, ...]
) -> None:
    report = verify_sharded_embedding(
        f"sharded_candidates:{candidate}", sharding=sharding, options=options, seed=SEED
    )
    assert report.passed, str(report)


@pytest.mark.xfail(
    strict=True,
    reason="torch 2.13.0+cpu: F.embedding on a Shard(0) DTensor raises 'index_select(): self "
    "indexing axis dim should be positive' on a rank that holds no rows (V=4 over 3 ranks: "
    "2, 2, 0), while the other ranks wait in the reduction",
)
def test_torch_dtensor_embedding_with_an_empty_trailing_shard() -> None:
    with WorkerGroup(3) as group:
        errors = _errors(group, "sharded_candidates:dtensor_embedding", _call(4, [0]), "vocab")
    assert errors == []


@pytest.mark.xfail(
    strict=True,
    reason="torch 2.13.0+cpu: F.embedding on a Shard(0) DTensor returns zeros for an id "
    ">= V instead of raising: every rank masks it as another rank's id",
)
def test_torch_dtensor_embedding_refuses_an_id_out_of_range(two_ranks: WorkerGroup) -> None:
    errors = _errors(two_ranks, "sharded_candidates:dtensor_embedding", _call(2, [2]), "vocab")
    assert len(errors) == 2


@pytest.mark.xfail(
    strict=True,
    reason="torch 2.13.0+cpu: aten.embedding_renorm_ has no DTensor sharding strategy, so "
    "F.embedding(max_norm=...) on a sharded table raises NotImplementedError",
)
@pytest.mark.parametrize("sharding", ["vocab", "dim"])
def test_torch_dtensor_embedding_takes_max_norm(two_ranks: WorkerGroup, sharding: str) -> None:
    call = _call(3, [0, 2], max_norm=1.0)
    assert _errors(two_ranks, "sharded_candidates:dtensor_embedding", call, sharding) == []


def test_rowwise_parallel_defaults_expect_sharded_ids(two_ranks: WorkerGroup) -> None:
    # RowwiseParallel's input_layouts default to Shard(-1): ids that are the same on every
    # rank are taken as the shards of a longer input, and the output has world_size times
    # as many rows. Replicated ids need input_layouts=Replicate().
    call = _call(3, [0, 2])
    call.grad_output = None  # the forward shows it; the backward then fails on the shape
    outcomes = two_ranks.run("sharded_candidates:rowwise_parallel_default_layouts", call, "vocab")
    assert [o.error for o in outcomes] == [None, None]
    assert [tuple(o.output.shape) for o in outcomes] == [(4, 2), (4, 2)]  # type: ignore[union-attr]
