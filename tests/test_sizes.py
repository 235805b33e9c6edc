"""The size knobs of the verifiers: vocab_sizes=, dims=, num_ids= (API and CLI)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import embedding_equivalence as ee
from embedding_equivalence._sizes import example_bytes
from embedding_equivalence.cli import main

SEEN: list[tuple[int, int, int]] = []


def recording_embedding(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.embedding`` that records ``(V, D, N)`` of each valid call."""
    if not input.is_floating_point():
        SEEN.append((weight.shape[0], weight.shape[1], input.numel()))
    return F.embedding(input, weight)


@pytest.fixture(autouse=True)
def _fresh_record() -> None:
    SEEN.clear()


def test_the_knobs_bound_every_drawn_call() -> None:
    report = ee.verify_embedding(
        recording_embedding, vocab_sizes=50_257, dims=(3, 5), num_ids=(100, 300),
        max_examples=15, seed=0,
    )  # fmt: skip
    assert report.passed, str(report)
    assert SEEN
    for vocab, dim, n in SEEN:
        assert vocab == 50_257
        assert 3 <= dim <= 5
        assert 100 <= n <= 300 or n == 1  # an invalid call has a single id


def test_a_strategy_is_a_knob_too() -> None:
    report = ee.verify_embedding(
        recording_embedding, vocab_sizes=st.sampled_from([7, 11]), dims=2, max_examples=10, seed=0
    )
    assert report.passed, str(report)
    assert {v for v, _, _ in SEEN} <= {7, 11}
    assert {d for _, d, _ in SEEN} == {2}


def test_bag_knobs() -> None:
    report = ee.verify_embedding_bag(
        F.embedding_bag, vocab_sizes=(1000, 2000), dims=4, modes=("sum",), max_examples=10, seed=0
    )
    assert report.passed, str(report)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"vocab_sizes": 0}, "vocab_sizes=0 must be a positive int"),
        ({"dims": (5, 2)}, "dims=(5, 2) must satisfy 1 <= min <= max"),
        ({"num_ids": (1, 2, 3)}, "num_ids=(1, 2, 3) must be an int, (min, max) or a strategy"),
        ({"vocab_sizes": "big"}, "vocab_sizes='big' must be a positive int"),
    ],
    ids=["zero", "reversed", "triple", "text"],
)
def test_malformed_knobs_are_refused(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        ee.verify_embedding(F.embedding, **knobs)


def test_a_largest_example_that_does_not_fit_is_refused_with_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The budget variable stands for the memory available (here: one byte short of the
    # CPU's share, host and device both being the CPU, then exactly enough).
    knobs: dict[str, Any] = {"vocab_sizes": 50_257, "dims": 32, "num_ids": 64}
    host, device = example_bytes(50_257, 32, 64, torch.float32)
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(host + device - 1))
    with pytest.raises(InvalidArgument, match=r"V=50257, D=32, N=64, torch\.float32\) needs"):
        ee.verify_embedding(F.embedding, dtypes=[torch.float32], **knobs)
    monkeypatch.setenv("EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES", str(host + device))
    report = ee.verify_embedding(
        F.embedding, dtypes=[torch.float32], max_examples=5, seed=0, **knobs
    )
    assert report.passed, str(report)


def test_the_cli_takes_the_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["verify", "--candidate", "test_sizes:recording_embedding", "--vocab-sizes", "30:40"]
    argv += ["--dims", "2", "--num-ids", "9", "--max-examples", "5", "--dtypes", "float32"]
    assert main([*argv, "--seed", "0"]) == 0
    assert SEEN
    assert all(30 <= v <= 40 and d == 2 and n in (9, 1) for v, d, n in SEEN)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vocab-sizes", "ten"], "'ten' is not N or LO:HI"),
        (["--dims", "8:2"], "'8:2' must satisfy 1 <= LO <= HI"),
        (["--bag", "--num-ids", "5"], "the bag verifier draws its own bags"),
    ],
    ids=["not-a-number", "reversed", "bag-num-ids"],
)
def test_the_cli_refuses_bad_knobs(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["verify", *argv]) == 2
    assert message in capsys.readouterr().err
