"""Every form refuses bad input with the same exception type and a message naming itself.

Each test is parametrized over the six forms (four public, two private lookups); the messages
must start with ``"<function name>: "`` so that a user can tell which call failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import embedding_equivalence as ee
from embedding_equivalence import (
    OneHotTooLargeError,
)
from embedding_equivalence import strategies as ees
from embedding_equivalence.forms.dtypes import INTEGER_TABLE_DTYPES
from registry import form_params

Form = Callable[..., torch.Tensor]

FORMS = form_params("embedding")
DENSE_ONE_HOT_FORMS = form_params("embedding", where=lambda f: f.computes == "dense matmul")
NO_DENSE_ONE_HOT_FORMS = form_params(
    "embedding", where=lambda f: f.public and f.computes != "dense matmul"
)

V, D = 4, 3


def weight4x3() -> torch.Tensor:
    return torch.arange(float(V * D)).reshape(V, D)


def starts_with(form: Form, *fragments: str) -> str:
    """A ``match=`` pattern: the message starts with the form's name and contains ``fragments``."""
    pattern = rf"^{re.escape(form.__name__)}: "
    for fragment in fragments:
        pattern += rf"(?s:.*){re.escape(fragment)}"
    return pattern


# --------------------------------------------------------------------------------------------
# ids out of range


@pytest.mark.parametrize(
    ("ids", "value", "where"),
    [
        pytest.param(torch.tensor([[0, 1], [4, 0]]), 4, "input[1, 0]", id="too_large_2d"),
        pytest.param(torch.tensor([0, 1, 2, 3, 100]), 100, "input[4]", id="too_large_1d"),
        pytest.param(torch.tensor([[0, 1], [2, -1]]), -1, "input[1, 1]", id="negative_2d"),
        pytest.param(torch.tensor([[[0]], [[-4]]]), -4, "input[1, 0, 0]", id="negative_3d"),
        pytest.param(torch.tensor(7), 7, "input (0-d)", id="too_large_0d"),
        pytest.param(torch.tensor([5, -1]), 5, "input[0]", id="first_offender_named"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_id_out_of_range(
    form: Form, ids: torch.Tensor, value: int, where: str, index_dtype: torch.dtype
) -> None:
    with pytest.raises(IndexError, match=starts_with(form, f"{where} = {value}", f"{V} rows")):
        form(ids.to(index_dtype), weight4x3())


@pytest.mark.parametrize("form", FORMS)
def test_id_out_of_range_message_in_full(form: Form) -> None:
    with pytest.raises(IndexError) as info:
        form(torch.tensor([[0, 1], [4, 0]]), weight4x3())
    message = str(info.value)
    assert message.startswith(
        f"{form.__name__}: input[1, 0] = 4 is out of range for a weight with 4 rows; "
        "ids must lie in [0, 3]"
    )


@pytest.mark.parametrize("form", FORMS)
def test_negative_id_message_says_negative_ids_do_not_count_from_the_end(form: Form) -> None:
    with pytest.raises(IndexError, match=starts_with(form, "input[0, 1] = -1", "negative ids")):
        form(torch.tensor([[0, -1]]), weight4x3())


# --------------------------------------------------------------------------------------------
# dtypes and ranks


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float64, torch.float16, torch.int16, torch.uint8, torch.int8, torch.bool],
    ids=lambda d: str(d).removeprefix("torch."),
)
@pytest.mark.parametrize("form", FORMS)
def test_ids_of_a_wrong_dtype(form: Form, dtype: torch.dtype) -> None:
    ids = torch.tensor([0, 1]).to(dtype)
    with pytest.raises(TypeError, match=starts_with(form, str(dtype))):
        form(ids, weight4x3())


@pytest.mark.parametrize("form", FORMS)
def test_float_ids_are_refused_not_truncated(form: Form) -> None:
    with pytest.raises(TypeError, match=starts_with(form, "refused rather than truncated")):
        form(torch.tensor([0.0, 1.7]), weight4x3())


@pytest.mark.parametrize("form", FORMS)
def test_ids_not_a_tensor(form: Form) -> None:
    with pytest.raises(TypeError, match=starts_with(form, "list")):
        form([0, 1], weight4x3())


@pytest.mark.parametrize("form", FORMS)
def test_weight_not_a_tensor(form: Form) -> None:
    with pytest.raises(TypeError, match=starts_with(form, "weight", "list")):
        form(torch.tensor([0]), [[0.0, 1.0]])


@pytest.mark.parametrize(
    ("shape", "shown"),
    [
        pytest.param((4,), "(4)", id="1d"),
        pytest.param((2, 4, 3), "(2, 4, 3)", id="3d"),
        pytest.param((), "()", id="0d"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_weight_not_2d(form: Form, shape: tuple[int, ...], shown: str) -> None:
    weight = torch.zeros(shape)
    with pytest.raises(ValueError, match=starts_with(form, "2-D", f"got shape {shown}")):
        form(torch.tensor([0]), weight)


@pytest.mark.parametrize("form", FORMS)
def test_1d_weight_message_shows_the_fix(form: Form) -> None:
    with pytest.raises(ValueError, match=starts_with(form, "weight.unsqueeze(0)")):
        form(torch.tensor([0]), torch.zeros(4))


# Every form refuses a bool table; all but lookup_embedding refuse an integer one (the lookup
# takes it: test_integer_tables_are_looked_up).
NON_FLOAT_TABLES = [
    pytest.param(form.values[0], dtype, id=f"{form.id}-{str(dtype).removeprefix('torch.')}")
    for form in FORMS
    for dtype in (torch.int64, torch.int32, torch.bool)
    if dtype == torch.bool or form.values[0] is not ee.lookup_embedding
]


@pytest.mark.parametrize(("form", "dtype"), NON_FLOAT_TABLES)
def test_integer_weight(form: Form, dtype: torch.dtype) -> None:
    weight = torch.zeros(V, D, dtype=dtype)
    with pytest.raises(TypeError, match=starts_with(form, "floating point", str(dtype))):
        form(torch.tensor([0]), weight)
    if dtype != torch.bool:  # the message points to the lookup, and says why
        with pytest.raises(TypeError, match=r"lookup_embedding\(input, weight\)"):
            form(torch.tensor([0]), weight)


@given(
    ids=ees.token_ids(9),
    dtype=st.sampled_from(INTEGER_TABLE_DTYPES),
    seed=st.integers(0, 2**31 - 1),
    padding_idx=st.none() | st.integers(-9, 8),
)
def test_integer_tables_are_looked_up(
    ids: torch.Tensor, dtype: torch.dtype, seed: int, padding_idx: int | None
) -> None:
    # As torch's nn.Embedding.from_pretrained allows: forward only, values exactly torch's.
    low = 0 if dtype == torch.uint8 else -100
    table = torch.randint(low, 100, (9, 4), generator=torch.Generator().manual_seed(seed))
    table = table.to(dtype)
    out = ee.lookup_embedding(ids, table, padding_idx=padding_idx)
    assert out.dtype == dtype
    assert torch.equal(out, F.embedding(ids, table, padding_idx=padding_idx))


def test_an_integer_table_refuses_max_norm() -> None:
    table = torch.zeros(V, D, dtype=torch.int8)
    with pytest.raises(TypeError, match=r"^lookup_embedding: max_norm needs a floating table"):
        ee.lookup_embedding(torch.tensor([0]), table, max_norm=1.0)


# --------------------------------------------------------------------------------------------
# options


@pytest.mark.parametrize("padding_idx", [4, 100, -5, -100], ids=lambda p: f"pad{p}")
@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_out_of_range(form: Form, padding_idx: int) -> None:
    with pytest.raises(
        ValueError, match=starts_with(form, f"padding_idx={padding_idx} ", "[-4, 4)")
    ):
        form(torch.tensor([0]), weight4x3(), padding_idx=padding_idx)


@pytest.mark.parametrize("padding_idx", [-4, 3], ids=lambda p: f"pad{p}")
@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_at_the_bounds_is_accepted(form: Form, padding_idx: int) -> None:
    form(torch.tensor([0, 3]), weight4x3(), padding_idx=padding_idx)


@pytest.mark.parametrize(
    "padding_idx",
    [
        pytest.param(1.0, id="float"),
        pytest.param(True, id="bool"),
        pytest.param("0", id="str"),
        pytest.param(torch.tensor(0), id="tensor"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_not_int(form: Form, padding_idx: object) -> None:
    with pytest.raises(TypeError, match=starts_with(form, "padding_idx must be an int")):
        form(torch.tensor([0]), weight4x3(), padding_idx=padding_idx)


@pytest.mark.parametrize(
    "max_norm",
    [
        pytest.param(-1.0, id="negative"),
        pytest.param(-1e-30, id="tiny_negative"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(float("-inf"), id="-inf"),
        pytest.param(float("nan"), id="nan"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_max_norm_negative_or_not_finite(form: Form, max_norm: float) -> None:
    weight = weight4x3()
    before = weight.clone()
    with pytest.raises(ValueError, match=starts_with(form, f"max_norm={max_norm!r}")):
        form(torch.tensor([0, 3]), weight, max_norm=max_norm)
    assert torch.equal(weight, before)  # refused before any in-place renorm


@pytest.mark.parametrize("form", FORMS)
def test_max_norm_not_a_number(form: Form) -> None:
    with pytest.raises(TypeError, match=starts_with(form, "max_norm")):
        form(torch.tensor([0]), weight4x3(), max_norm="1.0")


@pytest.mark.parametrize(
    "norm_type",
    [
        pytest.param(0.0, id="zero"),
        pytest.param(-1.0, id="negative"),
        pytest.param(float("-inf"), id="-inf"),
        pytest.param(float("nan"), id="nan"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_norm_type_not_positive(form: Form, norm_type: float) -> None:
    with pytest.raises(ValueError, match=starts_with(form, f"norm_type={norm_type!r}")):
        form(torch.tensor([0]), weight4x3(), max_norm=1.0, norm_type=norm_type)


@pytest.mark.parametrize("form", FORMS)
def test_norm_type_checked_without_max_norm(form: Form) -> None:
    with pytest.raises(ValueError, match=starts_with(form, "norm_type=0")):
        form(torch.tensor([0]), weight4x3(), norm_type=0)


# --------------------------------------------------------------------------------------------
# devices


@pytest.mark.parametrize(
    ("ids_device", "weight_device"),
    [
        pytest.param("cpu", "meta", id="ids_cpu-weight_meta"),
        pytest.param("meta", "cpu", id="ids_meta-weight_cpu"),
    ],
)
@pytest.mark.parametrize("form", FORMS)
def test_device_mismatch(form: Form, ids_device: str, weight_device: str) -> None:
    ids = torch.tensor([0, 1], device=ids_device)
    weight = torch.zeros(V, D, device=weight_device)
    with pytest.raises(
        ValueError, match=starts_with(form, f"input is on {ids_device}", f"on {weight_device}")
    ):
        form(ids, weight)


@pytest.mark.parametrize("form", FORMS)
def test_device_mismatch_with_the_accelerator(form: Form, accelerator: torch.device) -> None:
    with pytest.raises(ValueError, match=starts_with(form, "input is on cpu")):
        form(torch.tensor([0, 1]), weight4x3().to(accelerator))


# --------------------------------------------------------------------------------------------
# The order of the checks: the first problem in the documented order is the one reported.


@pytest.mark.parametrize("form", FORMS)
def test_dtype_checked_before_range(form: Form) -> None:
    with pytest.raises(TypeError, match=starts_with(form)):
        form(torch.tensor([100.0]), weight4x3())


@pytest.mark.parametrize("form", FORMS)
def test_padding_idx_checked_before_range(form: Form) -> None:
    with pytest.raises(ValueError, match=starts_with(form, "padding_idx=9")):
        form(torch.tensor([100]), weight4x3(), padding_idx=9)


# --------------------------------------------------------------------------------------------
# The dense one-hot memory refusal


def huge_weight() -> torch.Tensor:
    """A ``(2**50, 4)`` float32 table without allocating it: one row, expanded (stride 0)."""
    return torch.zeros(1, 4).expand(2**50, 4)


@pytest.mark.parametrize("form", DENSE_ONE_HOT_FORMS)
def test_dense_one_hot_too_large_is_refused(form: Form) -> None:
    # 2 ids x 2**50 rows x 4 bytes = 2**53 bytes = 8 PiB.
    with pytest.raises(OneHotTooLargeError) as info:
        form(torch.tensor([0, 1]), huge_weight())
    message = str(info.value)
    assert message.startswith(f"{form.__name__}: ")
    assert "8.0 PiB" in message
    assert f"2 ids x {2**50} rows x 4 bytes" in message
    assert "lookup_embedding" in message
    assert "sparse_matmul_embedding" in message
    assert "nothing was allocated" in message


def test_one_hot_too_large_error_is_a_memory_error() -> None:
    assert issubclass(ee.OneHotTooLargeError, MemoryError)


@pytest.mark.parametrize("form", DENSE_ONE_HOT_FORMS)
def test_one_hot_refused_before_the_range_check(form: Form) -> None:
    # An id that is out of range as well: the memory refusal comes first, before any id is read.
    with pytest.raises(OneHotTooLargeError, match=starts_with(form)):
        form(torch.tensor([0, -1]), huge_weight())


@pytest.mark.parametrize("form", NO_DENSE_ONE_HOT_FORMS)
def test_forms_without_a_dense_one_hot_accept_a_huge_table(form: Form) -> None:
    out = form(torch.tensor([0, 1]), huge_weight())
    assert torch.equal(out, torch.zeros(2, 4))


ENV = "EMBEDDING_EQUIVALENCE_MAX_ONE_HOT_BYTES"


@pytest.mark.parametrize("form", DENSE_ONE_HOT_FORMS)
def test_env_var_budget_refuses_a_small_one_hot(
    form: Form, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 ids x 4 rows x 4 bytes = 32 bytes, over a budget of 31 bytes.
    monkeypatch.setenv(ENV, "31")
    with pytest.raises(OneHotTooLargeError, match=starts_with(form, "32 B", "31 B")):
        form(torch.tensor([0, 1]), torch.zeros(4, 3))


@pytest.mark.parametrize("form", DENSE_ONE_HOT_FORMS)
def test_env_var_budget_accepts_a_one_hot_that_fits(
    form: Form, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "32")
    out = form(torch.tensor([0, 1]), weight4x3())
    assert torch.equal(out, weight4x3()[:2])


@pytest.mark.parametrize("form", DENSE_ONE_HOT_FORMS)
def test_env_var_budget_counts_the_weight_dtype(
    form: Form, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Same 2 x 4 one-hot: 16 bytes in float16, 64 bytes in float64.
    monkeypatch.setenv(ENV, "32")
    form(torch.tensor([0, 1]), weight4x3().half())
    with pytest.raises(OneHotTooLargeError, match=starts_with(form, "64 B", "torch.float64")):
        form(torch.tensor([0, 1]), weight4x3().double())


@pytest.mark.parametrize("form", NO_DENSE_ONE_HOT_FORMS)
def test_env_var_budget_does_not_affect_forms_without_a_one_hot(
    form: Form, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "1")
    out = form(torch.tensor([0, 1]), weight4x3())
    assert torch.equal(out, weight4x3()[:2])
