"""The pytest plugin, tested through pytester in a fresh pytest session."""

from __future__ import annotations

import pytest
import torch

import embedding_equivalence as ee
from embedding_equivalence.pytest_plugin import DEVICES_ENV, selected_devices
from embedding_equivalence.strategies import available_devices, supported_float_dtypes

PAIR_TEST = """
    import torch

    def test_pair(embedding_device_dtype):
        device, dtype = embedding_device_dtype
        assert isinstance(dtype, torch.dtype)
        assert torch.zeros(1, device=device, dtype=dtype).dtype == dtype

    def test_device(embedding_device):
        assert torch.zeros(1, device=embedding_device).device.type == embedding_device
    """


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-v", "-rs", "-p", "no:cacheprovider", *args)


@pytest.fixture(autouse=True)
def _no_devices_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from detection, whatever the outer session was given."""
    monkeypatch.delenv(DEVICES_ENV, raising=False)


def test_only_present_devices_are_generated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PAIR_TEST)
    result = _run(pytester)
    result.stdout.fnmatch_lines(
        ["*test_pair?cpu-float32? PASSED*", "*test_pair?cpu-bfloat16? PASSED*"]
    )
    present = available_devices()
    pairs = sum(len(supported_float_dtypes(device)) for device in present)
    result.assert_outcomes(passed=pairs + len(present))
    assert "SKIPPED" not in result.stdout.str()
    for absent in {"cuda", "mps"} - set(present):
        result.stdout.no_fnmatch_line(f"*{absent}*")


def test_env_cpu_gives_only_cpu_rows(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEVICES_ENV, "cpu")
    pytester.makepyfile(PAIR_TEST)
    result = _run(pytester)
    result.assert_outcomes(passed=4 + 1)
    result.stdout.fnmatch_lines(
        [
            "*test_pair?cpu-float32? PASSED*",
            "*test_pair?cpu-float64? PASSED*",
            "*test_pair?cpu-float16? PASSED*",
            "*test_pair?cpu-bfloat16? PASSED*",
            "*test_device?cpu? PASSED*",
        ]
    )
    result.stdout.no_fnmatch_line("*cuda*")
    result.stdout.no_fnmatch_line("*mps*")


# No machine has both CUDA and MPS, so this list is never empty.
@pytest.mark.parametrize("absent", [d for d in ("cuda", "mps") if d not in available_devices()])
def test_env_demanding_an_absent_device_fails_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, absent: str
) -> None:
    monkeypatch.setenv(DEVICES_ENV, f"cpu,{absent}")
    pytester.makepyfile(PAIR_TEST)
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{DEVICES_ENV}='cpu,{absent}' demands {absent}, which is not present*(present: cpu*"]
    )
    result.stdout.no_fnmatch_line("*PASSED*")


def test_env_unknown_device_fails_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEVICES_ENV, "cpu,tpu")
    pytester.makepyfile(PAIR_TEST)
    result = _run(pytester, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown device kind 'tpu'; known device kinds: cpu, cuda, mps*"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", available_devices()),
        ("  ", available_devices()),
        ("cpu", ["cpu"]),
        (" CPU , cpu ", ["cpu"]),
    ],
    ids=["empty", "blank", "cpu", "case-spaces-duplicates"],
)
def test_selected_devices_parsing(value: str, expected: list[str]) -> None:
    assert selected_devices({DEVICES_ENV: value}) == expected
    assert selected_devices({}) == available_devices()


@pytest.mark.parametrize("value", [",", "cpu,gpu", "cuda:0"])
def test_selected_devices_refuses_bad_names(value: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"{DEVICES_ENV}=.* known device kinds: cpu"):
        selected_devices({DEVICES_ENV: value})


def test_max_examples_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_budget(embedding_max_examples):
            assert embedding_max_examples == 7
        """
    )
    result = pytester.runpytest("--embedding-max-examples", "7", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_bad_budget_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_budget(embedding_max_examples):\n    pass\n")
    result = pytester.runpytest("--embedding-max-examples", "0", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--embedding-max-examples*'0' must be at least 1*"])
    assert "pytest_plugin" not in result.stderr.str()  # no plugin source shown


@pytest.fixture(scope="session")
def _verification_imported() -> None:
    """Import what a verification imports lazily, in this process, before pytester runs one.

    An in-process pytester run removes from ``sys.modules`` what it imported; torch's lazily
    imported ``torch._inductor.test_operators`` then registers its TORCH_LIBRARY a second time
    on the next import, and a later verification in this session fails. Once imported here,
    before the first run that needs them, the modules stay: a run removes only its own.
    """
    ee.verify_embedding(
        ee.lookup_embedding, dtypes=[torch.float32], devices=["cpu"], max_examples=1, seed=0
    )


@pytest.mark.usefixtures("_verification_imported")
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
    result.stdout.fnmatch_lines(
        ["*embedding_equivalence.EquivalenceError*", "*Minimal counterexample*"]
    )


ROWS_TEST = """
    import json

    import torch

    import embedding_equivalence as ee

    def recording(candidate, **kwargs):
        '''Writes what the row asked for, then runs one cheap verification.'''
        with open("calls.jsonl", "a") as calls:
            calls.write(json.dumps({k: str(v) for k, v in kwargs.items()}) + "\\n")
        return ee.verify_embedding(
            candidate, dtypes=[torch.float32], devices=["cpu"], max_examples=1,
            boundaries=False, seed=kwargs["seed"],
        )

    def test_kernel(embedding_verify):
        report = embedding_verify(ee.lookup_embedding, verifier=recording, seed=0)
        assert report.passed

    def test_owned_arguments_are_refused(embedding_verify):
        embedding_verify(ee.lookup_embedding, max_examples=3)

    def test_narrowed(embedding_verify):
        dtypes = ["float16", torch.float32]  # a dtype or its name, as the verifiers take them
        assert embedding_verify(ee.lookup_embedding, verifier=recording, dtypes=dtypes, seed=0)

    def test_integer_dtypes(embedding_verify):
        embedding_verify(ee.lookup_embedding, dtypes=[torch.int64])
    """


def _run_rows(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[pytest.RunResult, list[dict[str, str]]]:
    """``ROWS_TEST`` on the CPU's rows; the result and what each row asked ``recording`` for."""
    import json

    monkeypatch.setenv(DEVICES_ENV, "cpu")
    pytester.makepyfile(ROWS_TEST)
    result = _run(pytester, *args)
    calls = pytester.path / "calls.jsonl"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return result, [json.loads(line) for line in lines]


@pytest.mark.usefixtures("_verification_imported")
def test_embedding_verify_runs_the_boundary_phase_once_per_device(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, calls = _run_rows(
        pytester, monkeypatch, "--embedding-max-examples", "7", "-k", "test_kernel"
    )
    names = [
        "boundaries",
        *(str(dt).removeprefix("torch.") for dt in supported_float_dtypes("cpu")),
    ]
    result.stdout.fnmatch_lines([f"*test_kernel?cpu-{name}? PASSED*" for name in names])
    result.assert_outcomes(passed=len(names))
    dtypes = [str(dt) for dt in supported_float_dtypes("cpu")]
    assert calls[0] == {
        "dtypes": str(tuple(supported_float_dtypes("cpu"))), "devices": "['cpu']",
        "boundaries": "True", "max_examples": "1", "seed": "0",
    }  # fmt: skip
    assert [(c["dtypes"], c["boundaries"], c["max_examples"]) for c in calls[1:]] == [
        (f"({dt},)", "False", "7") for dt in dtypes
    ]


@pytest.mark.usefixtures("_verification_imported")
def test_embedding_verify_narrows_the_rows_to_the_dtypes_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, calls = _run_rows(
        pytester, monkeypatch, "--embedding-max-examples", "7", "-k", "test_narrowed"
    )
    named = (torch.float32, torch.float16)
    rows = supported_float_dtypes("cpu")
    outside = [str(dt).removeprefix("torch.") for dt in rows if dt not in named]
    assert outside, "the CPU has dtypes beyond the two named"
    result.stdout.fnmatch_lines(
        [f"*{name} is not among the dtypes this test names (float16, float32)*" for name in outside]
    )
    result.assert_outcomes(passed=1 + len(named), skipped=len(outside))
    # The boundary row: the named dtypes in the device's order; then one row per named dtype.
    assert calls[0]["dtypes"] == str(tuple(dt for dt in rows if dt in named))
    assert [c["dtypes"] for c in calls[1:]] == [f"({dt},)" for dt in rows if dt in named]


@pytest.mark.parametrize(
    ("test", "refusal"),
    [
        pytest.param(
            "test_owned_arguments_are_refused",
            "embedding_verify sets max_examples for its row; call verify_embedding(...) "
            "directly to choose them",
            id="what-the-row-sets",
        ),
        pytest.param(
            "test_integer_dtypes",
            "dtypes contains torch.int64, which is not a floating dtype",
            id="dtypes-the-verifiers-refuse",
        ),
    ],
)
def test_embedding_verify_refuses(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, test: str, refusal: str
) -> None:
    result, _ = _run_rows(pytester, monkeypatch, "-k", f"{test} and float32")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*InvalidArgument: {refusal}*"])


@pytest.mark.slow  # the boundary phase in every dtype, to its N axis
@pytest.mark.usefixtures("_verification_imported")
def test_the_boundary_row_catches_a_size_bug_the_dtype_rows_miss(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEVICES_ENV, "cpu")
    pytester.makepyfile(
        """
        import torch.nn.functional as F

        def wrong_past_1024(input, weight):
            out = F.embedding(input, weight)
            return out if input.numel() <= 1024 else out * 2

        def test_kernel(embedding_verify):
            embedding_verify(wrong_past_1024, seed=0)
        """
    )
    result = _run(pytester, "--embedding-max-examples", "20")
    result.stdout.fnmatch_lines(["*test_kernel?cpu-boundaries? FAILED*", "*fails from N = 1,025*"])
    result.assert_outcomes(failed=1, passed=len(supported_float_dtypes("cpu")))
