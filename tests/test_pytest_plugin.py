"""The pytest plugin, tested through pytester in a fresh pytest session."""

from __future__ import annotations

import pytest
import torch

from embedding_equivalence.strategies import available_devices


def test_device_dtype_fixture_ids_and_skips(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import torch

        def test_pair(embedding_device_dtype):
            device, dtype = embedding_device_dtype
            assert isinstance(dtype, torch.dtype)
            assert torch.zeros(1, device=device, dtype=dtype).dtype == dtype
        """
    )
    result = pytester.runpytest("-v", "-rs", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*test_pair?cpu-float32? PASSED*", "*test_pair?cpu-bfloat16? PASSED*"]
    )
    expected_skips = 0 if torch.cuda.is_available() else 4
    if "mps" not in available_devices():
        expected_skips += 3  # MPS has no float64
    if expected_skips:
        result.stdout.fnmatch_lines(["*SKIPPED*no * device on this machine*"])
    result.assert_outcomes(passed=4 + 7 - expected_skips, skipped=expected_skips)


def test_max_examples_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_budget(embedding_max_examples):
            assert embedding_max_examples == 7
        """
    )
    result = pytester.runpytest("--embedding-max-examples", "7", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_users_verification_through_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import embedding_equivalence as ee

        def wrong(input, weight):
            return weight[input] * 1.5

        def test_kernel(embedding_device_dtype, embedding_max_examples):
            device, dtype = embedding_device_dtype
            ee.verify_embedding(
                wrong, dtypes=[dtype], devices=[device], max_examples=embedding_max_examples,
                seed=0,
            ).raise_for_failure()
        """
    )
    result = pytester.runpytest(
        "-k", "cpu-float32", "--embedding-max-examples", "10", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*VerificationError*", "*Minimal counterexample*"])
