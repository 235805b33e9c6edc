"""The ``torchrun`` scripts of sharded failures assert, on every rank.

A counterexample is a test: the script that ``verify_sharded_embedding`` writes must exit
non-zero on every rank while the bug is there and 0 once it is fixed. The fast tier reads the
scripts (they compile, call the exact check, print no results to compare by eye, and issue no
collective after the check); the slow tier runs each under ``torchrun --standalone
--nproc-per-node 2`` with a sharded mutant and with the kernel without its bug: a table built
whole by every rank (``Shard(0)``, and ``Shard(1)`` with ``max_norm``), a table drawn shard by
shard (a gradient bug on rank 0's rows only, which every rank must still report), and a call
that the reference refuses. Each launcher runs in a session of its own; it and its workers are
ended on the way out, whatever happened.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from embedding_equivalence._draw.cases import EmbeddingCase
from embedding_equivalence._draw.recipes import IdsRecipe, WeightRecipe
from embedding_equivalence.distributed._large import LargeShardedCase
from embedding_equivalence.distributed._verify import sharded_snippet
from torchrun_verify import Launcher, logs, wait_gone

TESTS = Path(__file__).resolve().parent
#: Seconds for a launcher to start two ranks (each imports torch) and for them to run a script.
LAUNCH = 240.0


@dataclass(frozen=True)
class Repro:
    """A failing case, the kernel whose bug it shows, and the same kernel without the bug."""

    case: EmbeddingCase | LargeShardedCase
    sharding: str
    mutant: str
    fixed: str
    check: str  # the call that checks the result: the script must make it

    def script(self, candidate: str, device: str = "cpu") -> str:
        module, _, name = candidate.partition(":")
        preamble = f"from {module} import {name} as candidate"
        return sharded_snippet(self.sharding, 2, device)(self.case, True, preamble)


def _ids(*values: int) -> IdsRecipe:
    return IdsRecipe(values, (len(values),))


REPROS = {
    # The gradient times the world: a differentiated all-reduce.
    "vocab": Repro(
        EmbeddingCase(_ids(1, 4, 4), WeightRecipe(5, 3, torch.float32, "cpu", 0), {}, 1),
        "vocab", "sharded_mutants:all_reduce_differentiated",
        "sharded_mutants:correct_vocab_parallel", "assert_backward_equivalent",
    ),
    # max_norm measured on a rank's columns; the right kernel renorms shards of Shard(1), which
    # are copies of the table's columns.
    "dim-max_norm": Repro(
        EmbeddingCase(
            _ids(0, 2, 2), WeightRecipe(4, 5, torch.float32, "cpu", 2), {"max_norm": 1.0}, 3
        ),
        "dim", "sharded_mutants:max_norm_of_local_columns",
        "sharded_mutants:correct_dim_parallel", "assert_backward_equivalent",
    ),
    # Each unowned id counted on the rank's row 0: rows 0 and 9 are rank 0's and rank 1's, so
    # only rank 0's gradient is wrong; its own shard's check alone would pass on rank 1.
    "large": Repro(
        LargeShardedCase(
            _ids(0, 9), WeightRecipe(10, 4, torch.float32, "cpu", 3),
            {"scale_grad_by_freq": True}, 7,
        ),
        "vocab", "sharded_mutants:frequency_counts_masked_ids",
        "sharded_mutants:correct_vocab_parallel", "compare_exact_or_bounded",
    ),
    # An id past the table: torch's vocab-sharded lookup reads it as zeros instead of refusing.
    "invalid": Repro(
        EmbeddingCase(
            _ids(0, 5), WeightRecipe(5, 3, torch.float32, "cpu", 0), {}, 1, "an id is out of range"
        ),
        "vocab", "sharded_candidates:dtensor_embedding",
        "sharded_candidates:checked_dtensor_embedding", "sharded",
    ),
}  # fmt: skip


def _calls(node: ast.AST) -> list[str]:
    """The names of the functions that ``node`` calls (``f`` or the ``x.f`` of ``x.f()``)."""
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            found.append(name)
    return found


@pytest.mark.parametrize("name", ["vocab", "dim-max_norm", "large"])
def test_the_script_checks_the_result_and_prints_nothing_to_compare(name: str) -> None:
    script = REPROS[name].script(REPROS[name].mutant)
    tree = ast.parse(compile(script, "repro.py", "exec", ast.PyCF_ONLY_AST))
    body = [s for s in tree.body if not isinstance(s, ast.FunctionDef)]
    calls = [_calls(statement) for statement in body]
    first = next(i for i, c in enumerate(calls) if REPROS[name].check in c)
    after = {f for c in calls[first:] for f in c}
    collectives = {"all_reduce", "full_tensor", "barrier", "sharded", "candidate", "backward"}
    assert not after & collectives, after  # a rank whose check fails leaves none waiting
    assert "destroy_process_group" in after or name == "large"  # after the collectives there
    assert all("print" not in c for c in calls), script


def test_the_script_of_a_refused_call_asserts_that_it_raised() -> None:
    script = REPROS["invalid"].script(REPROS["invalid"].mutant)
    tree = ast.parse(script)
    (attempt,) = [s for s in tree.body if isinstance(s, ast.Try)]
    assert isinstance(attempt.orelse[0], ast.Raise)
    assert "AssertionError('the call must raise (an id is out of range)')" in script
    assert "embedding_equivalence.testing" not in script


@pytest.mark.parametrize("name", sorted(REPROS))
def test_the_script_for_cuda_moves_what_the_ranks_compute_and_uses_nccl(name: str) -> None:
    script = REPROS[name].script(REPROS[name].mutant, "cuda")
    compile(script, "repro.py", "exec")
    assert 'dist.init_process_group("nccl")' in script
    assert 'init_device_mesh("cuda"' in script
    assert "input.to('cuda')" in script or "input = input.to('cuda')" in script


def test_a_large_script_sums_the_ranks_pieces_before_it_checks() -> None:
    script = REPROS["large"].script(REPROS["large"].mutant)
    assert script.index("dist.all_reduce(got)") < script.index("dist.destroy_process_group()")
    assert script.index("dist.destroy_process_group()") < script.index("assert ")


def _torchrun(script: str, tmp_path: Path) -> tuple[int, str]:
    """Run ``script`` on two ranks under ``torchrun --standalone``: its exit status, its log."""
    tmp_path.mkdir()
    path = tmp_path / "repro.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(path),
    ]  # fmt: skip
    log = tmp_path / "node0.log"  # the name that torchrun_verify.logs reads
    with log.open("w") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
            start_new_session=True,
        )  # fmt: skip
    launcher = Launcher(0, process)
    try:
        left = wait_gone([launcher], LAUNCH)
        assert not left, f"still running after {LAUNCH:g} s: {left}\n{logs(tmp_path)}"
    finally:
        launcher.kill()
    assert process.returncode is not None
    return process.returncode, log.read_text(errors="replace")


#: torchrun's summary of a failed run: each failed rank and its exit status.
_EXIT = re.compile(r"rank\s*: (\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*: (-?\d+)")
#: What a rank prints when it aborts as its process ends, after the script ran to its end: a
#: thread of torch's (gloo's) still joinable at exit, about one run in 50 on a loaded machine.
#: Torch's, not the script's: such a run of the fixed kernel is run again, once.
_ABORT_AT_EXIT = "terminate called without an active exception"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REPROS))
def test_the_script_fails_on_every_rank_with_the_bug_and_passes_without(
    name: str, tmp_path: Path
) -> None:
    repro = REPROS[name]
    status, log = _torchrun(repro.script(repro.mutant), tmp_path / "mutant")
    assert status != 0, log
    exits = {int(rank): int(code) for rank, code in _EXIT.findall(log)}
    assert sorted(exits) == [0, 1], log  # torchrun saw every rank fail
    assert all(code != 0 for code in exits.values()), exits
    for rank in (0, 1):  # each rank's own check failed (before torchrun stopped the other)
        failed = rf"^\[rank{rank}\]: \S*(EquivalenceError|AssertionError): "
        assert re.search(failed, log, re.M), log
    status, log = _torchrun(repro.script(repro.fixed), tmp_path / "fixed")
    if status != 0 and _ABORT_AT_EXIT in log and not re.search(r"^\[rank\d+\]: ", log, re.M):
        status, log = _torchrun(repro.script(repro.fixed), tmp_path / "fixed-again")
    assert status == 0, log
    assert "Traceback" not in log, log
