"""verify_sharded_embedding and the sharded forms, on real process groups (gloo on the CPU).

Starting worker processes takes about 2 s at world size 2 on an idle machine (many times that
under load), so the verifications that leave their ranks healthy share them: the tests of
``TestOnSharedRanks`` run inside ``shared_workers`` (``tests/shared_ranks.py``), where each
verification takes over the ranks that the previous one left running, as PyTorch's
``MultiProcContinousTest`` shares one group among its tests. The fast tier runs one form at a
small budget and one sharded mutant there; the slow tier (``-m slow``) adds the package's forms
at world sizes 2 and 3, the whole catalogue of buggy sharded kernels, the three failure modes of
sharded code (a rank that raises, hangs or dies, each on a group of its own) and a run under
``torchrun``. An autouse fixture checks after every test that no worker was left behind but
the shared ones, and the class's fixture that none is left once it ends.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from embedding_equivalence.distributed import shard_range, verify_sharded_embedding
from embedding_equivalence.distributed._boundaries import around_world_multiples, sharded_boundaries
from embedding_equivalence.distributed._group import GroupFailure, WorkerGroup
from embedding_equivalence.distributed._verify import sharded_embedding_cases
from embedding_equivalence.oracle.call import Call
from embedding_equivalence.strategies import supported_float_dtypes
from forked import server_pids
from sharded_mutants import SHARDED_MUTANTS, ShardedMutant
from shared_ranks import running_pids, shared_pids, shared_workers

TESTS = Path(__file__).resolve().parent
ALL_OPTIONS = ("padding_idx", "max_norm", "scale_grad_by_freq")
SEED = 0


#: A spawned rank's command line (``python -m ...``; a server's names the module too).
_SPAWNED_WORKER = b"-m\0embedding_equivalence.distributed._worker"


def _workers() -> list[int]:
    """Pids of this process's children that run a worker of the package, and of the ranks
    forked for it (``tests/forked.py``: its server's children)."""
    servers, pids = server_pids(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        spawned = ppid == os.getpid() and _SPAWNED_WORKER in cmdline
        if spawned or ppid in servers:
            pids.append(int(entry.name))
    return pids


@pytest.fixture(autouse=True)
def _no_worker_left_behind() -> Iterator[None]:
    yield
    if sys.platform.startswith("linux"):
        left = set(_workers()) - set(shared_pids())
        assert not left, "a worker process outlived its verification"


# --- no processes: chunking, strategies, arguments -----------------------------------------


@given(size=st.integers(0, 40), world=st.integers(1, 6))
def test_shard_range_is_torch_chunking(size: int, world: int) -> None:
    sizes = [len(c) for c in torch.arange(size).chunk(world)] if size else []
    sizes += [0] * (world - len(sizes))
    ranges = [shard_range(size, world, r) for r in range(world)]
    assert [stop - start for start, stop in ranges] == sizes
    assert [start for start, _ in ranges] == [sum(sizes[:r]) for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_cases_reach_an_empty_trailing_shard_and_d_below_the_world(world: int) -> None:
    from hypothesis import find

    cases = sharded_embedding_cases(world_size=world)
    empty = find(
        cases,
        lambda c: (
            shard_range(c.num_embeddings, world, world - 1) == (c.num_embeddings, c.num_embeddings)
        ),
        settings=settings(max_examples=2000, database=None),
    )
    assert math.ceil(empty.num_embeddings / world) * (world - 1) >= empty.num_embeddings
    narrow = find(
        cases,
        lambda c: c.embedding_dim < world,
        settings=settings(max_examples=2000, database=None),
    )
    assert narrow.embedding_dim < world


BAD_CALLS = [
    pytest.param({"candidate": "no_colon"}, "expected MODULE:FUNCTION", id="reference"),
    pytest.param({"candidate": "sharded_mutants:missing"}, "cannot be imported", id="missing"),
    pytest.param({"candidate": lambda i, w: w}, "lambda", id="lambda"),
    pytest.param({"sharding": "row"}, "sharding='row' must be one of", id="sharding"),
    pytest.param({"world_size": 0}, "world_size=0 must be a positive int", id="world"),
    pytest.param({"timeout": 0}, "timeout=0 must be a positive", id="timeout"),
    pytest.param({"startup_timeout": -1}, "startup_timeout=-1 must be a positive", id="startup"),
    pytest.param({"devices": ["cuda:7"]}, "not available here", id="device"),
    pytest.param({"options": ("sparse",)}, "'sparse'", id="sparse"),
    pytest.param({"max_examples": 0}, "max_examples=0 must be a positive int", id="budget"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CALLS)
def test_bad_arguments_are_refused_before_any_process_starts(
    kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"candidate": "sharded_mutants:correct_vocab_parallel"}
    arguments.update(kwargs)
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        verify_sharded_embedding(**arguments)  # type: ignore[arg-type]


def test_more_nccl_ranks_than_gpus_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """nccl takes one GPU per rank: two ranks on one GPU are refused before any rank starts.

    On a GPU machine nccl's own refusal ("Duplicate GPU detected") used to fail every call as if
    the kernel had (``docs/cuda-results.json``, check nccl-2).
    """
    from embedding_equivalence.distributed._group import gpus_short

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert gpus_short(1, "cuda", None, "world_size=") is None
    assert gpus_short(4, "cpu", None, "world_size=") is None
    assert gpus_short(2, "cuda", "gloo", "world_size=") is None  # gloo shares a GPU
    message = gpus_short(2, "cuda", None, "--world-size ")
    assert message is not None
    assert message.startswith("--world-size 2: 2 ranks over nccl need 2 GPUs")
    assert message.endswith("pass --world-size 1 or less")


def test_a_candidate_of_the_running_script_is_refused_with_what_to_do() -> None:
    def local(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return weight[input]

    local.__module__ = "__main__"
    local.__qualname__ = "local"
    with pytest.raises(InvalidArgument, match=r"script being run.*top level of a module"):
        verify_sharded_embedding(local)


# --- on shared ranks: the forms, the controls, the catalogue -------------------------------


@pytest.fixture(scope="class")
def _shared_ranks() -> Iterator[None]:
    """One group per world size for the whole class, ended by pid when the class is done."""
    with shared_workers():
        yield
    if sys.platform.startswith("linux"):
        assert _workers() == [], "a shared worker outlived the class"


def _call(vocab: int, ids: list[int]) -> Call:
    """A small call: table ``arange`` (exact values), upstream gradient of ones."""
    weight = torch.arange(vocab * 2, dtype=torch.float32).reshape(vocab, 2).requires_grad_()
    return Call(torch.tensor(ids), weight, {}, grad_output=torch.ones(len(ids), 2))


FORMS = [
    pytest.param("vocab_parallel_embedding", "vocab", 2, id="vocab-2"),
    pytest.param("vocab_parallel_embedding", "vocab", 3, id="vocab-3"),
    pytest.param("vocab_parallel_matmul_embedding", "vocab", 2, id="vocab-matmul-2"),
    pytest.param("dim_parallel_embedding", "dim", 2, id="dim-2"),
    pytest.param("dim_parallel_embedding", "dim", 3, id="dim-3"),
]


@pytest.mark.usefixtures("_shared_ranks")
class TestOnSharedRanks:
    """Verifications that leave their ranks healthy: each takes over the previous one's."""

    def test_a_form_passes_at_a_small_budget(self) -> None:
        # The fast tier's sharded verification: the whole boundary phase, 5 random examples.
        report = verify_sharded_embedding(
            "embedding_equivalence.distributed:vocab_parallel_embedding",
            options=ALL_OPTIONS, max_examples=5, seed=SEED,
        )  # fmt: skip
        assert report.passed, str(report)
        assert report.examples == 5 + report.boundary_examples
        assert report.sharded is not None
        assert report.sharded.group_starts <= 1  # 0 when it took over the ranks of an earlier test

    def test_the_next_group_takes_over_the_kept_ranks(self) -> None:
        reference = "embedding_equivalence.distributed:vocab_parallel_embedding"
        with WorkerGroup(2) as first:
            outcomes = first.run(reference, _call(3, [0, 2]), "vocab")
            pids = running_pids(first)
        assert [o.error for o in outcomes] == [None, None]
        assert set(pids) <= set(shared_pids())  # closed in good health: kept running
        with WorkerGroup(2) as second:
            outcomes = second.run(reference, _call(5, [4, 1, 4]), "vocab")
            reuses = getattr(second, "reuses", 0)  # counted by shared_ranks
            assert (running_pids(second), second.starts, reuses) == (pids, 0, 1)
        assert [o.error for o in outcomes] == [None, None]
        expected = torch.arange(10.0).reshape(5, 2)[[4, 1, 4]]
        assert all(torch.equal(o.output, expected) for o in outcomes)  # type: ignore[arg-type]

    @pytest.mark.parametrize("seed", [1, 2])  # the catch does not depend on the seed
    def test_a_kernel_wrong_when_v_is_not_a_multiple_of_the_world_is_caught_at_once(
        self, seed: int
    ) -> None:
        report = verify_sharded_embedding(
            "sharded_mutants:offset_from_own_shard_size", max_examples=1, seed=seed
        )
        assert not report.passed
        assert report.boundary == "fails from V = 3; passes at 2"
        assert report.failure is not None
        assert re.search(r"^out\[", report.failure)
        assert report.counterexample is not None
        assert report.counterexample.startswith("# Run with: torchrun --nproc-per-node 2 repro.py")
        assert "weight = torch.randn(3, 3" in report.counterexample
        assert "distribute_tensor(weight, mesh, [Shard(0)]" in report.counterexample

    @pytest.mark.slow
    @pytest.mark.parametrize(("form", "sharding", "world"), FORMS)
    def test_the_package_forms_pass_with_every_option(
        self, form: str, sharding: str, world: int
    ) -> None:
        report = verify_sharded_embedding(
            f"embedding_equivalence.distributed:{form}",
            sharding=sharding, world_size=world, options=ALL_OPTIONS, seed=SEED,
        )  # fmt: skip
        assert report.passed, str(report)
        phase = list(sharded_boundaries(sharding, world, ALL_OPTIONS, report.dtypes, ("cpu",)))
        assert report.boundary_examples == len(phase)
        assert report.examples == 100 + len(phase)  # the default budget
        assert report.sharded is not None
        assert report.sharded.world_size == world
        assert report.sharded.group_starts <= 1  # no restart: no rank ever waited on another

    @pytest.mark.slow
    @pytest.mark.parametrize(
        ("control", "sharding"),
        [("correct_vocab_parallel", "vocab"), ("correct_dim_parallel", "dim")],
    )
    def test_the_hand_written_kernels_pass_without_their_bugs(
        self, control: str, sharding: str
    ) -> None:
        report = verify_sharded_embedding(
            f"sharded_mutants:{control}", sharding=sharding, options=ALL_OPTIONS, seed=SEED
        )
        assert report.passed, str(report)

    @pytest.mark.slow
    @pytest.mark.parametrize("mutant", [pytest.param(m, id=m.name) for m in SHARDED_MUTANTS])
    def test_every_sharded_mutant_is_caught(self, mutant: ShardedMutant) -> None:
        report = verify_sharded_embedding(
            mutant.fn, sharding=mutant.sharding, options=mutant.options, seed=SEED
        )
        assert not report.passed, f"{mutant.name} was not caught:\n{report}"
        assert report.failure is not None
        assert re.search(mutant.symptom, report.failure), report.failure
        assert report.counterexample is not None
        assert report.counterexample.startswith("# Run with: torchrun --nproc-per-node 2 repro.py")
        assert f"from sharded_mutants import {mutant.name} as candidate" in report.counterexample

    @pytest.mark.slow
    def test_a_group_that_failed_is_not_kept(self) -> None:
        with WorkerGroup(2) as group, pytest.raises(GroupFailure, match="rank 1 died"):
            group.run("sharded_candidates:dies_on_rank_1", _call(3, [0, 2]), "vocab")
        assert running_pids(group) == []
        if sys.platform.startswith("linux"):
            assert set(_workers()) == set(shared_pids())  # the failed ranks were ended


# --- the failure modes of sharded code, each on a group of its own --------------------------


@pytest.mark.spawned_ranks
def test_start_up_has_its_own_timeout() -> None:
    group = WorkerGroup(2, timeout=60, startup_timeout=0.01)
    message = r"did not connect while starting \(start-up timeout 0\.01 s\)"
    with pytest.raises(GroupFailure, match=message):
        group.start()
    assert running_pids(group) == []


@pytest.mark.slow
@pytest.mark.spawned_ranks  # fresh interpreters, as the verifier starts them
def test_start_up_is_not_bounded_by_the_call_timeout() -> None:
    # A call timeout far below a start on a loaded machine: the ranks still join.
    with WorkerGroup(2, timeout=0.5) as group:
        group.start()
        assert len(running_pids(group)) == 2
        assert group.starts == 1


@pytest.mark.slow
def test_importing_the_candidate_is_start_up_not_a_call() -> None:
    # The module sleeps 4 s when imported; a call may take 3 s: the ranks import it before
    # the first call, under the start-up timeout, and every call is well within its own.
    report = verify_sharded_embedding(
        "slow_import_candidate:vocab_parallel_embedding",
        seed=SEED, max_examples=3, boundaries=False, timeout=3,
    )  # fmt: skip
    assert report.passed, report.failure
    assert report.examples == 3


@pytest.mark.slow
def test_a_rank_that_raises_while_the_others_wait_is_a_failing_report() -> None:
    # The random phase alone: its shrinking calls again after the failure, on a restarted group.
    report = verify_sharded_embedding(
        "sharded_candidates:raises_on_rank_1", seed=SEED, boundaries=False
    )
    assert report.boundary_examples == 0  # boundaries=False: no boundary phase
    assert report.boundary is None
    assert not report.passed
    assert report.failure is not None
    assert re.search(r"on rank 1 raised ValueError: rank 1 refuses", report.failure)
    assert "Traceback on rank 1:" in report.failure
    assert 'raise ValueError("rank 1 refuses")' in report.failure
    assert report.sharded is not None
    assert report.sharded.group_starts >= 2


@pytest.mark.slow
def test_a_rank_that_hangs_is_reported_with_its_stack_within_the_timeout() -> None:
    report = verify_sharded_embedding("sharded_candidates:hangs_on_rank_1", seed=SEED, timeout=3)
    assert not report.passed
    assert report.failure is not None
    assert "did not finish the call (timeout 3 s)" in report.failure
    assert "rank 1" in report.failure
    assert re.search(r"line \d+ in hangs_on_rank_1", report.failure)  # faulthandler's stack
    assert report.examples == 1  # no shrinking on a hung group
    assert report.counterexample is not None


@pytest.mark.slow
def test_a_rank_that_dies_is_reported_with_its_exit_status() -> None:
    report = verify_sharded_embedding("sharded_candidates:dies_on_rank_1", seed=SEED)
    assert not report.passed
    assert report.failure is not None
    assert "rank 1 died while running the call" in report.failure
    assert "(exit status 3)" in report.failure
    assert report.examples == 1


# --- the boundary phase --------------------------------------------------------------------


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_the_sizes_cross_every_way_torch_chunks_a_dimension(world: int) -> None:
    sizes = around_world_multiples(world, 4096)
    assert set(range(1, world)) <= set(sizes)  # trailing ranks empty
    for k in (1, 2, 3, 4, 256):
        assert {world * k - 1, world * k, world * k + 1} - {0} <= set(sizes)
    assert set(around_world_multiples(world, 1024, 4)) <= set(sizes)
    assert max(around_world_multiples(world, 1024, 4)) > 1024 // 2  # within 2x of the limit
    shares = {
        tuple(b - a for a, b in (shard_range(v, world, r) for r in range(world))) for v in sizes
    }
    if world >= 2:
        assert any(s[-1] == 0 for s in shares)  # an empty trailing shard
        assert any(0 < s[-1] < s[0] for s in shares)  # a short last shard


@pytest.mark.parametrize("sharding", ["vocab", "dim"])
@pytest.mark.parametrize("world", [2, 3])
def test_sharded_boundaries_sit_at_every_shard_edge(sharding: str, world: int) -> None:
    dtypes = [torch.float32, torch.bfloat16]
    phase = list(sharded_boundaries(sharding, world, ALL_OPTIONS, dtypes, ("cpu",)))
    again = sharded_boundaries(sharding, world, ALL_OPTIONS, dtypes, ("cpu",))
    assert [(b.label, b.case) for b in phase] == [(b.label, b.case) for b in again]  # data
    axes = [b.axis for b in phase]
    assert axes[0] == ("V" if sharding == "vocab" else "D")  # a chunking bug is named by size
    assert {"edge", "options", "value", "bad input", "V", "D"} <= set(axes)
    assert "sparse" not in {k for b in phase for k in b.case.kwargs}
    vocab = [b for b in phase if b.axis == "V"]
    factor = 2 if sharding == "vocab" else 4  # the axis that is not split is sparser
    assert [b.value for b in vocab] == list(around_world_multiples(world, 4096, factor))
    for b in vocab:
        v = b.case.num_embeddings
        ranges = [shard_range(v, world, r) for r in range(world)]
        edges = {i for start, stop in ranges if stop > start for i in (start, stop - 1)}
        assert set(b.case.ids.values) == edges | {0, v - 1}
        padding = b.case.kwargs["padding_idx"]
        owner = max(r for r, (start, stop) in enumerate(ranges) if start <= padding < stop)
        assert padding == ranges[owner][0]  # the first row of the last rank with rows
        assert all(start == stop for start, stop in ranges[owner + 1 :])
        assert b.make is not None
        assert b.make(v) == b.case  # bisection rebuilds it
    widths = [b.case.embedding_dim for b in phase if b.axis == "D"]
    assert widths == list(around_world_multiples(world, 1024, 6 - factor))
    assert any(b.case.ids.shape == () for b in phase if b.axis == "edge")
    assert any(0 in b.case.ids.shape for b in phase if b.axis == "edge")
    bad = {b.case.invalid for b in phase if b.axis == "bad input"}
    # A row per rank: no empty shard, whose own failure would pass for a refusal.
    w = world
    assert {"negative id -1", f"id {w} >= V = {w}", f"padding_idx={w} outside [-{w}, {w})"} <= bad
    assert f"padding_idx={-w - 1} outside [-{w}, {w})" in bad
    on_cuda = sharded_boundaries(sharding, world, ALL_OPTIONS, dtypes, ("cuda",))
    assert all(b.axis != "bad input" and b.case.device == "cpu" for b in on_cuda)


# --- under torchrun ------------------------------------------------------------------------


#: Verified in turn by one torchrun launch (two ranks), the last one a rank that raises:
#: ``(id, candidate, sharding, the report's failure or None for a pass)``.
UNDER_TORCHRUN = [
    ("dim-form", "embedding_equivalence.distributed:dim_parallel_embedding", "dim", None),
    ("mutant", "sharded_mutants:all_reduce_missing", "vocab", r"out\["),
    (
        "a-rank-raises",
        "sharded_candidates:raises_on_rank_1",
        "vocab",
        r".* on rank 1 raised ValueError",
    ),
]


@pytest.fixture(scope="module")
def under_torchrun(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``torchrun --standalone`` launch that verifies every candidate of ``UNDER_TORCHRUN``.

    The launch (a launcher and two ranks, each importing torch) costs more than the three
    verifications it runs, so the tests below share it, as they would share a process group.
    """
    out = tmp_path_factory.mktemp("torchrun")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(TESTS / "torchrun_verify.py"), ",".join(c for _, c, _, _ in UNDER_TORCHRUN),
        ",".join(s for _, _, s, _ in UNDER_TORCHRUN), "20", str(out), "3",
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index", "sharding", "failure"),
    [pytest.param(i, s, f, id=name) for i, (name, _, s, f) in enumerate(UNDER_TORCHRUN)],
)
def test_under_torchrun_every_rank_gets_the_report(
    under_torchrun: Path, index: int, sharding: str, failure: str | None
) -> None:
    lines = [(under_torchrun / str(index) / f"rank{r}.txt").read_text() for r in range(2)]
    assert [line.split(":")[0] for line in lines] == ["rank 0 of 2", "rank 1 of 2"]
    for line in lines:
        assert f"passed={failure is None}" in line
        assert "world=2" in line
        if failure is None:
            phase = list(
                sharded_boundaries(sharding, 2, (), supported_float_dtypes("cpu"), ("cpu",))
            )
            assert f"examples={20 + len(phase)} (boundaries {len(phase)})" in line
        else:
            assert re.search(f"failure={failure}", line), line


@pytest.mark.slow
def test_under_torchrun_a_hung_rank_is_reported_and_exits_with_its_stack(tmp_path: Path) -> None:
    """Rank 0 reports the hung rank; the hung rank then exits, so torchrun ends the job."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(TESTS / "torchrun_verify.py"), "sharded_candidates:hangs_on_rank_1", "vocab", "20",
        str(tmp_path), "3",
    ]  # fmt: skip
    # Without the exit, torchrun would wait for rank 1's hour-long sleep: the timeout fails it.
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode != 0, proc.stdout + proc.stderr  # rank 1 exited 1
    line = (tmp_path / "rank0.txt").read_text()
    assert "passed=False" in line
    assert "a rank did not report within 16 s" in line, line  # 2 x 3 s + 10 s
    assert not (tmp_path / "rank1.txt").exists()  # the hung rank never returned
    assert "rank 1 (node 0) is still inside the candidate's call" in proc.stderr, proc.stderr
    assert re.search(r'File ".*sharded_candidates.py", line \d+ in hangs_on_rank_1', proc.stderr)


#: Two ranks of a ``TorchrunGroup`` (``RANK`` from the environment): rank 0 closes its groups
#: between two calls, as its heartbeat does when it finds a rank lost there, and sends its
#: report; rank 1 waits for the next call on the inbox. Rank 0 then stays until rank 1 is done.
_CLOSE_BETWEEN_CALLS = """
import time
from datetime import timedelta
import torch.distributed as dist
from embedding_equivalence._engine.report import VerificationReport
from embedding_equivalence.distributed._torchrun import TorchrunGroup
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
store = dist.distributed_c10d._get_default_store()
group = TorchrunGroup("cpu", timeout=5.0)
if dist.get_rank() == 0:
    group._lost_between_collectives()
    group.finish(VerificationReport(candidate="c", passed=False, examples=1, counterexample=None,
        failure="rank 0's report", worst_error=0.0, seed=0, elapsed=0.0, devices=("cpu",)))
    store.wait(["done"], timedelta(seconds=90))
else:
    start = time.monotonic()
    report = group.serve()
    print(f"{time.monotonic() - start:.1f} s: {report.failure}", flush=True)
    store.set("done", "1")
"""


@pytest.mark.slow
def test_a_rank_that_closes_its_groups_wakes_the_rank_waiting_on_it(tmp_path: Path) -> None:
    """Gloo closes a group's connections with the group's last reference: a rank that breaks
    its groups keeps none, so a peer waiting on it wakes at once, not when its process exits
    (torchrun would then stop the peer before it reported)."""
    from torchrun_verify import free_port

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    env |= {"WORLD_SIZE": "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", _CLOSE_BETWEEN_CALLS], env={**env, "RANK": str(rank)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        )
        for rank in (0, 1)
    ]  # fmt: skip
    try:
        outputs = [rank.communicate(timeout=240)[0] for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    seconds, failure = outputs[1].strip().splitlines()[-1].split(" s: ")
    assert failure == "rank 0's report", outputs[1]
    # Rank 1 wakes from the inbox (an hour's timeout) once rank 0 closes it, and finds rank 0's
    # report in the store; it waited 90 s, until rank 0 exited, while rank 0 kept a reference.
    assert float(seconds) < 30.0, outputs[1]


# --- the heartbeat's rules, without processes ------------------------------------------------


def _liveness(peers: list[tuple[str, str, int]], *, rank: int = 0) -> Any:
    """A ``Liveness`` of rank ``rank`` over ``peers`` (node, host, pid), with no store."""
    from embedding_equivalence.distributed._liveness import Liveness, Peer

    liveness = Liveness.__new__(Liveness)
    liveness.rank = rank
    liveness.peers = [Peer(r, node, host, pid) for r, (node, host, pid) in enumerate(peers)]
    liveness.me = liveness.peers[rank]
    liveness.store_lost = False
    now = time.monotonic()
    liveness._beats = {p.rank: (b"1", now) for p in liveness.peers}
    return liveness


def test_a_rank_on_another_host_is_lost_when_its_beat_stops_for_the_limit() -> None:
    from embedding_equivalence.distributed._liveness import _LOST_AFTER

    me = os.getpid()
    liveness = _liveness(
        [("node 0", "a", me), ("node 0", "a", me), ("node 1", "b", 1), ("node 1", "b", 1)]
    )
    now = time.monotonic()
    liveness._beats[2] = (b"7", now - _LOST_AFTER - 1)  # stopped beating past the limit
    liveness._beats[3] = (b"7", now - _LOST_AFTER + 3)  # stopped, within the limit
    assert liveness.lost_now() == [2]
    liveness._beats[3] = (b"7", now - _LOST_AFTER - 1)
    assert liveness.lost_now() == [2, 3]
    assert liveness.describe([2, 3]) == "ranks 2, 3 (node 1, all of its ranks)"
    assert liveness.describe([2]) == "rank 2 (node 1, which has ranks 2, 3)"


def test_when_the_store_stops_answering_rank_0s_node_is_lost() -> None:
    me = os.getpid()
    liveness = _liveness(
        [("node 0", "a", 1), ("node 0", "a", 1), ("node 1", "b", me), ("node 1", "b", me)],
        rank=2,
    )
    assert liveness.lost_now() == []  # every beat is fresh
    liveness.store_lost = True  # the store lives with rank 0's launcher
    assert liveness.lost_now() == [0, 1]


def test_a_rank_on_this_host_is_lost_when_its_process_is_gone() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    me = os.getpid()
    liveness = _liveness(
        [("node 0", "a", me), ("node 0", "a", int(gone.stdout)), ("node 0", "a", me)]
    )
    liveness._beats[1] = (b"1", time.monotonic())  # a fresh beat does not keep it alive
    assert liveness.lost_now() == [1]
