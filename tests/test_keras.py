"""Keras 3 against torch (seed 004): ``Embedding(ids) == Dense(one_hot(ids)) == lookup``.

Keras runs on its torch backend (``KERAS_BACKEND=torch``, set below unless the environment
chooses another), so no TensorFlow is needed. The properties draw their cases from
``embedding_equivalence.strategies`` and compare forwards bit for bit and gradients with the
exact float64 gradient under the package's derived bound. Where Keras and torch differ, a test
pins the difference, most of them with the minimal example that Hypothesis shrinks to. The
docs' converters between the two, ``keras_interop`` (``docs/_scripts/keras_interop.py``, run by
the TensorFlow / Keras page), are checked here too.

The module runs unchanged on another Keras backend. Keras reads ``KERAS_BACKEND`` once per
process, so ``test_the_properties_on_another_backend`` reruns the module in a subprocess with
``KERAS_BACKEND=tensorflow`` and again with ``KERAS_BACKEND=jax`` (the ``tensorflow`` and
``jax`` extras, part of ``dev``: CI runs all three, in one ``pytest`` call); the tests of one
backend's behaviour skip themselves on the others, and the rerun checks that nothing else did.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import random
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import find, given, settings
from hypothesis import strategies as st
from torch import nn

import embedding_equivalence as ee
from embedding_equivalence import strategies as ees
from embedding_equivalence.testing import (
    compare_exact_or_bounded,
    gradient_error_bound,
    reference_embedding_grad,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))  # the docs' module keras_interop
import keras_interop as ki  # noqa: E402 (imports no Keras)

# Before Keras is imported: its backend is chosen once, at import. torch needs no TensorFlow.
os.environ.setdefault("KERAS_BACKEND", "torch")
if os.environ["KERAS_BACKEND"] == "tensorflow" and "triton" not in sys.modules:
    # Keep Triton out of a TensorFlow process. TensorFlow loads its extension with RTLD_GLOBAL
    # (tensorflow/python/pywrap_dlopen_global_flags.py), which makes the LLVM in
    # libtensorflow_framework and libtensorflow_cc the process's global definitions. Triton's
    # libtriton.so carries an LLVM of its own under the same symbol names; loaded afterwards,
    # it binds to TensorFlow's copies, registers its command-line options a second time in
    # TensorFlow's registry ("Option 'bitcode-mdindex-threshold' registered more than once")
    # and LLVM calls abort(). torch imports Triton lazily, from torch._dynamo, which a meta
    # tensor's normal_ (nn.Embedding(device="meta")) imports. A failed `import triton` is what
    # torch treats as "no Triton" (torch.utils._triton.has_triton_package), and nothing here
    # needs Triton. Importing Triton first would load, but its lazily bound calls could still
    # resolve into TensorFlow's LLVM later.
    sys.modules["triton"] = None  # type: ignore[assignment]  # `import triton` raises
if os.environ["KERAS_BACKEND"] == "jax":
    # Without jax_enable_x64, JAX stores every float64 array as float32 (with a UserWarning):
    # the float64 properties need it on, as a user who wants float64 on JAX must. The
    # TensorFlow / Keras page shows what the default configuration does instead.
    import jax

    jax.config.update("jax_enable_x64", True)
if (
    importlib.util.find_spec("keras") is None
    or int(importlib.metadata.version("keras").split(".")[0]) < 3
):
    pytest.skip("needs Keras 3: pip install -e '.[docs]'", allow_module_level=True)


class _Keras:
    """``keras``, imported at its first use.

    Every pytest-xdist worker collects this module, and importing Keras takes seconds: only
    the worker that runs these tests pays for it.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("keras"), name)


keras: Any = _Keras()

pytestmark = pytest.mark.keras

#: The backend Keras runs on: the one ``KERAS_BACKEND`` names (set above), read at its import.
BACKEND: str = os.environ["KERAS_BACKEND"]
TORCH_BACKEND_ONLY = pytest.mark.skipif(
    BACKEND != "torch", reason=f"pins the torch backend's behaviour; this run uses {BACKEND}"
)
#: A rerun's budget: EMBEDDING_KERAS_MAX_EXAMPLES caps the profile's examples per property.
RERUN_BUDGET = os.environ.get("EMBEDDING_KERAS_MAX_EXAMPLES")
if RERUN_BUDGET is not None:
    settings.register_profile(
        "keras-rerun",
        parent=settings(),  # the profile loaded so far
        max_examples=min(int(RERUN_BUDGET), settings().max_examples),
    )
    settings.load_profile("keras-rerun")
# A search, not a property: derandomized so the minimal example is the same on every run.
SEARCH = settings(settings.default, database=None, derandomize=True, max_examples=500)
DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.float64, id="float64")]
# Keras' get_weights() calls np.array() on the torch backend's tensors; numpy 2 warns that
# torch's Tensor.__array__ takes no copy= keyword. Harmless (it copies); only get_weights()
# triggers it, and the helpers under test never call it.
IGNORE_ARRAY_COPY = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
)


# --------------------------------------------------------------------------------------------
# Helpers: tensors across backends, gradients through Keras layers


def to_backend(t: torch.Tensor) -> Any:
    """``t`` as the backend's input (torch tensors, strides included, on the torch backend)."""
    if BACKEND == "torch":
        return t
    return keras.ops.convert_to_tensor(t.detach().cpu().numpy())


def to_torch(x: Any) -> torch.Tensor:
    """A backend tensor (or Keras variable) as a CPU torch tensor."""
    if BACKEND == "torch":
        value = x.value if isinstance(x, keras.Variable) else x
        return value.detach().cpu()
    if BACKEND == "tensorflow":
        # Not convert_to_numpy: it calls np.array on an EagerTensor, whose __array__ takes no
        # copy= keyword, which numpy 2 warns about; .numpy() gives the same array.
        return torch.from_numpy(np.array(keras.ops.convert_to_tensor(x).numpy(), copy=True))
    # A JAX Variable's __array__ has the same defect; its value (a jax.Array) has not.
    value = keras.ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(value.dtype) == "bfloat16":  # numpy has no bfloat16
        return to_torch(keras.ops.cast(value, "float32")).to(torch.bfloat16)
    return torch.from_numpy(np.array(keras.ops.convert_to_numpy(value), copy=True))


def assignable(t: torch.Tensor) -> Any:
    """A value for ``Variable.assign`` on this backend."""
    return t.detach().clone() if BACKEND == "torch" else t.detach().cpu().numpy()


def ramp(*shape: int) -> torch.Tensor:
    """A float32 tensor of distinct, exactly representable values: no random draw at all."""
    return torch.arange(float(np.prod(shape))).reshape(shape) / 4 - 1


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def keras_pair(table: torch.Tensor, dtype: str) -> tuple[Any, Any]:
    """Keras ``Embedding`` and bias-free ``Dense`` holding ``table``, as the seed builds them."""
    v, d = table.shape
    # zeros initializers: no random draw (the tables are assigned right away).
    embedding = keras.layers.Embedding(v, d, embeddings_initializer="zeros", dtype=dtype)
    embedding.build()
    embedding.embeddings.assign(assignable(table))
    dense = keras.layers.Dense(d, use_bias=False, kernel_initializer="zeros", dtype=dtype)
    dense.build((None, v))
    dense.kernel.assign(assignable(ki.table_to_dense_kernel(table)))  # (in, out): no transpose
    return embedding, dense


def one_hot_input(ids: torch.Tensor, num_classes: int) -> Any:
    """``keras.ops.one_hot`` of the ids; 0-d ids get a batch dim (Dense needs ndim >= 2)."""
    x = ids.reshape(1) if ids.dim() == 0 else ids
    return keras.ops.one_hot(to_backend(x), num_classes)


def forward_backward(
    layer: Any, variable: Any, inputs: Any, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``out = layer(inputs)`` and the gradient of ``<out, grad_output>`` w.r.t. ``variable``.

    The torch backend's variables are ``nn.Parameter``s, so torch autograd backpropagates
    through the Keras layer; on TensorFlow a ``GradientTape`` does the same, and on JAX
    ``jax.vjp`` of the layer's call with the variable's value swapped in by a
    ``keras.StatelessScope`` (the call still goes through ``Layer.__call__``, whose autocast
    reads a float32 variable as float16 under ``mixed_float16``, as in a model's step).
    """
    if BACKEND == "torch":
        param = variable.value
        param.grad = None
        out = layer(inputs)
        out.backward(grad_output.reshape(out.shape).to(out.device, out.dtype))
        assert param.grad is not None
        return out.detach().cpu(), param.grad.detach().cpu()
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            out = layer(inputs)
        upstream = tf.reshape(tf.convert_to_tensor(grad_output.numpy(), dtype=out.dtype), out.shape)
        (grad,) = tape.gradient(out, [variable], output_gradients=[upstream])
        return to_torch(out), to_torch(tf.convert_to_tensor(grad))
    if BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        def call(value: Any) -> Any:
            with keras.StatelessScope(state_mapping=[(variable, value)]):
                return layer(inputs)

        out, vjp = jax.vjp(call, variable.value)
        upstream = jnp.asarray(grad_output.numpy(), dtype=out.dtype).reshape(out.shape)
        (grad,) = vjp(upstream)
        return to_torch(out), to_torch(grad)
    pytest.fail(f"no gradient through Keras on the {BACKEND} backend here")


def dense_result_dtype(dtype: torch.dtype) -> torch.dtype:
    """The torch backend's matmul maps float64 to float32 (Keras' type promotion).

    TensorFlow's matmul and JAX's (``jnp.matmul``, with x64 on) multiply in float64.
    """
    return torch.float32 if dtype == torch.float64 and BACKEND == "torch" else dtype


def grad_error(
    what: str,
    grad: torch.Tensor,
    ids: torch.Tensor,
    grad_output: torch.Tensor,
    dtype: torch.dtype,
) -> str | None:
    """``None`` if ``grad`` is within the package's bound of the exact gradient, else why not.

    Rows that no id references must be exactly zero; the referenced rows go through the oracle
    (``reference_embedding_grad``, ``gradient_error_bound``) on the ids renumbered to
    ``0..R-1``. The bound is per row, so this is the same check at O(R) instead of the
    oracle's O(V) Python loop over V up to 262,144.
    """
    rows, compact = torch.unique(ids.reshape(-1).long(), return_inverse=True)
    unreferenced = torch.ones(grad.shape[0], dtype=torch.bool)
    unreferenced[rows] = False
    if bool(grad[unreferenced].ne(0).any()):
        row = int(unreferenced.nonzero()[grad[unreferenced].ne(0).any(dim=1)][0])
        return f"{what}[{row}] is not zero, but no id references row {row}"
    if rows.numel() == 0:
        return None
    compact = compact.reshape(ids.shape)
    expected, _, _ = reference_embedding_grad(compact, grad_output, rows.numel())
    bound = gradient_error_bound(compact, grad_output, rows.numel(), dtype)
    message, _ = compare_exact_or_bounded(f"{what}[rows]", grad[rows], expected, bound)
    return None if message is None else f"{message}; rows = {rows.tolist()}"


def assert_grad_within_bound(
    what: str,
    grad: torch.Tensor,
    ids: torch.Tensor,
    grad_output: torch.Tensor,
    dtype: torch.dtype,
) -> None:
    message = grad_error(what, grad, ids, grad_output, dtype)
    assert message is None, message


# --------------------------------------------------------------------------------------------
# The equivalence: Embedding == Dense on one-hot == lookup, forward and backward


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_and_dense_on_one_hot_are_the_lookup(dtype: torch.dtype) -> None:
    """Forward bit for bit, gradients within the derived bound, for both Keras layers.

    The Dense layer's float64 case is float32 on the torch backend (Keras' type promotion
    maps float64 to float32): there it returns the float64 row rounded to float32 and sums its
    gradient in float32, which the float32 bound covers.
    """

    @given(case=ees.embedding_cases(dtype=dtype, device="cpu"))
    def check(case: ees.EmbeddingCase) -> None:
        ids, table = case.build(requires_grad=False)
        v = case.num_embeddings
        embedding, dense = keras_pair(table, dtype_name(dtype))
        expected = ee.lookup_embedding(ids, table)
        grad_output = case.grad_output()

        out, grad = forward_backward(embedding, embedding.embeddings, to_backend(ids), grad_output)
        assert out.dtype == dtype
        assert torch.equal(out, expected)
        assert_grad_within_bound("embeddings.grad", grad, ids, grad_output, dtype)

        dense_dtype = dense_result_dtype(dtype)
        g = grad_output.to(dense_dtype)
        out_d, grad_d = forward_backward(dense, dense.kernel, one_hot_input(ids, v), g)
        assert out_d.dtype == dense_dtype
        assert torch.equal(out_d.reshape(expected.shape), expected.to(dense_dtype))
        assert_grad_within_bound("kernel.grad", grad_d, ids, g, dense_dtype)

    check()


@given(case=ees.embedding_cases(dtype=torch.float32, device="cpu"))
def test_mixed_float16_is_float16_accurate(case: ees.EmbeddingCase) -> None:
    """``mixed_float16``: float32 variables, float16 outputs equal to the rounded rows.

    Both gradients hold to the *float16* bound: the Embedding looks up and accumulates in a
    float16 copy of the table, the Dense accumulates in float32 and rounds to float16.
    """
    ids, table = case.build(requires_grad=False)
    v = case.num_embeddings
    embedding, dense = keras_pair(table, "mixed_float16")
    assert to_torch(embedding.embeddings).dtype == torch.float32
    assert to_torch(dense.kernel).dtype == torch.float32
    expected = ee.lookup_embedding(ids, table).to(torch.float16)
    g = case.grad_output().to(torch.float16)

    out, grad = forward_backward(embedding, embedding.embeddings, to_backend(ids), g)
    assert out.dtype == torch.float16
    assert torch.equal(out, expected)
    assert grad.dtype == torch.float32
    # TensorFlow casts the gather's float16 IndexedSlices to float32 before it sums them.
    summed_in = torch.float32 if BACKEND == "tensorflow" else torch.float16
    assert_grad_within_bound("embeddings.grad", grad, ids, g, summed_in)

    out_d, grad_d = forward_backward(dense, dense.kernel, one_hot_input(ids, v), g)
    assert torch.equal(out_d.reshape(expected.shape), expected)
    assert_grad_within_bound("kernel.grad", grad_d, ids, g, torch.float16)


def test_mixed_float16_sums_a_repeated_ids_gradients_in_the_backends_precision() -> None:
    """Id 0 twice, upstream gradients 1 and 2**-11: their float16 sum is 1, the float32 one not.

    The torch backend looks the float16 copy of the table up, so autograd sums the two rows in
    float16, and so does JAX's vjp; TensorFlow's gather gradient is an ``IndexedSlices`` of
    float16 rows that is cast to the float32 variable's dtype and only then summed.
    """
    embedding, _ = keras_pair(torch.zeros(1, 1), "mixed_float16")
    g = torch.tensor([[1.0], [2.0**-11]], dtype=torch.float16)
    ids = torch.tensor([0, 0])
    _, grad = forward_backward(embedding, embedding.embeddings, to_backend(ids), g)
    in_float16 = (g[0] + g[1]).to(torch.float32)
    in_float32 = g[0].to(torch.float32) + g[1].to(torch.float32)
    assert not torch.equal(in_float16, in_float32)  # the case tells the two sums apart
    expected = in_float32 if BACKEND == "tensorflow" else in_float16
    assert torch.equal(grad, expected.reshape(1, 1))


@pytest.mark.skipif(  # on TensorFlow no case misses it: the sum is taken in float32
    BACKEND == "tensorflow", reason="TensorFlow sums in float32; this run uses tensorflow"
)
def test_mixed_float16_gradient_is_not_float32_accurate() -> None:
    """The minimal case where the mixed-precision Embedding's gradient misses the float32 bound.

    Two occurrences of one id: their float16 upstream gradients are summed in float16.
    """

    def misses_float32_bound(case: ees.EmbeddingCase) -> bool:
        ids, table = case.build(requires_grad=False)
        embedding, _ = keras_pair(table, "mixed_float16")
        g = case.grad_output().to(torch.float16)
        _, grad = forward_backward(embedding, embedding.embeddings, to_backend(ids), g)
        return grad_error("grad", grad, ids, g, torch.float32) is not None

    case = find(
        ees.embedding_cases(dtype=torch.float32, device="cpu"),
        misses_float32_bound,
        settings=SEARCH,
    )
    assert (case.num_embeddings, case.embedding_dim, len(case.ids.values)) == (1, 1, 2)
    assert case.ids.values == (0, 0)
    ids, table = case.build(requires_grad=False)
    embedding, _ = keras_pair(table, "mixed_float16")
    g = case.grad_output().to(torch.float16)
    _, grad = forward_backward(embedding, embedding.embeddings, to_backend(ids), g)
    assert grad_error("grad", grad, ids, g, torch.float16) is None
    # The sum rounded to float16, not to float32:
    assert torch.equal(grad, (g[0] + g[1]).to(torch.float32).reshape(1, 1))


def test_float64_dense_returns_float32_on_torch() -> None:
    """keras-team/keras#23704: on the torch backend a float64 ``Dense`` rounds to float32."""
    table = torch.tensor([[0.1]], dtype=torch.float64)
    embedding, dense = keras_pair(table, "float64")
    ids = torch.tensor([0])
    out = to_torch(embedding(to_backend(ids)))
    assert out.dtype == torch.float64
    assert out.item() == 0.1
    out_d = to_torch(dense(one_hot_input(ids, 1)))
    assert to_torch(dense.kernel).dtype == torch.float64
    if BACKEND == "torch":
        assert out_d.dtype == torch.float32
        assert out_d.item() == float(np.float32(0.1)) != 0.1
    else:
        assert out_d.dtype == torch.float64
        assert out_d.item() == 0.1


def test_default_policy_rounds_a_float64_table() -> None:
    """``keras.layers.Embedding(V, D)`` is float32 whatever it is given; the helper keeps dtype."""
    table = torch.tensor([[0.1, 1 / 3]], dtype=torch.float64)
    plain = keras.layers.Embedding(1, 2, weights=[table.numpy()])
    assert torch.equal(to_torch(plain.embeddings), table.to(torch.float32))
    kept = ki.embedding_to_keras(table)
    assert torch.equal(to_torch(kept.embeddings), table)
    assert kept.dtype_policy.name == "float64"


# --------------------------------------------------------------------------------------------
# Where Keras and torch differ: ids


def test_dense_refuses_the_one_hot_of_a_0d_id() -> None:
    """Keras' Embedding takes a 0-d id (like torch); Dense needs a batch dim (ndim >= 2)."""
    embedding, dense = keras_pair(torch.eye(3), "float32")
    assert torch.equal(to_torch(embedding(to_backend(torch.tensor(2)))), torch.eye(3)[2])
    with pytest.raises(ValueError, match="expected min_ndim=2, found ndim=1"):
        dense(keras.ops.one_hot(to_backend(torch.tensor(2)), 3))


def _bad_ids(case: ees.EmbeddingCase) -> bool:
    """An invalid case whose ids are the problem (not its padding_idx, which Keras lacks)."""
    return case.invalid is not None and not case.invalid.startswith("padding_idx")


@given(case=ees.embedding_cases(dtype=torch.float32, device="cpu", invalid=True).filter(_bad_ids))
def test_ids_torch_refuses(case: ees.EmbeddingCase) -> None:
    """Ids that torch refuses, and what Keras does with each.

    - ``-V <= id < 0``: Keras' Embedding reads ``W[id + V]``; its ``one_hot`` is all zeros, so
      Dense returns a zero row.
    - ``id < -V`` or ``id >= V``: Keras raises too, but on JAX, whose ``jnp.take`` returns a
      row of NaN there (its "fill" mode); ``one_hot`` is a zero row on JAX and TensorFlow.
    - floating ids: Keras' Embedding casts them to int32 and looks them up.
    """
    ids, table = case.build(requires_grad=False)
    v = case.num_embeddings
    embedding, dense = keras_pair(table, "float32")
    with pytest.raises((IndexError, TypeError)):
        ee.lookup_embedding(ids, table)
    assert case.invalid is not None
    if case.invalid.startswith("floating"):
        out = to_torch(embedding(to_backend(ids)))
        assert torch.equal(out, ee.lookup_embedding(ids.long(), table))
        return
    outside = (ids < -v) | (ids >= v)
    if BACKEND == "jax":
        wrapped = torch.where(ids < 0, ids + v, ids).clamp(0, v - 1)
        expected = torch.where(outside[..., None], torch.nan, ee.lookup_embedding(wrapped, table))
        out = to_torch(embedding(to_backend(ids)))
        assert torch.equal(out.isnan(), expected.isnan())
        assert torch.equal(out.nan_to_num(), expected.nan_to_num())
        out_d = to_torch(dense(one_hot_input(ids, v))).reshape(out.shape)
        looked_up = ee.lookup_embedding(ids.clamp(0, v - 1), table)
        assert torch.equal(out_d, torch.where(((ids < 0) | outside)[..., None], 0.0, looked_up))
        return
    if bool(outside.any()):
        with pytest.raises(Exception) as info:  # noqa: PT011 - the type depends on the backend
            embedding(to_backend(ids))
        if BACKEND == "torch":
            assert info.type is IndexError
        return
    wrapped = torch.where(ids < 0, ids + v, ids)
    out = to_torch(embedding(to_backend(ids)))
    assert torch.equal(out, ee.lookup_embedding(wrapped, table))
    out_d = to_torch(dense(one_hot_input(ids, v))).reshape(out.shape)
    looked_up = ee.lookup_embedding(ids.clamp(min=0), table)
    assert torch.equal(out_d, torch.where((ids < 0)[..., None], 0.0, looked_up))


def test_minimal_negative_id() -> None:
    """The smallest negative id that Keras' Embedding looks up: ``-1`` with ``V = 1``."""

    def keras_accepts(case: ees.EmbeddingCase) -> bool:
        if case.invalid is None or not case.invalid.startswith("negative id"):
            return False
        ids, table = case.build(requires_grad=False)
        embedding, _ = keras_pair(table, "float32")
        try:
            embedding(to_backend(ids))
        except Exception:  # Keras refuses it as well
            return False
        return True

    case = find(
        ees.embedding_cases(dtype=torch.float32, device="cpu", invalid=True),
        keras_accepts,
        settings=SEARCH,
    )
    # One id, -1, on a table of one row (0-d or of shape (1,): Hypothesis orders them by its
    # choice sequence, which the strategy's structure decides).
    assert (case.num_embeddings, case.ids.values) == (1, (-1,))
    assert case.ids.shape in ((), (1,))
    ids, table = case.build(requires_grad=False)
    embedding, dense = keras_pair(table, "float32")
    assert torch.equal(to_torch(embedding(to_backend(ids))), table[0].expand(*ids.shape, -1))
    assert to_torch(dense(one_hot_input(ids, 1))).eq(0).all()
    with pytest.raises(IndexError):
        F.embedding(ids, table)
    with pytest.raises(IndexError, match="lookup_embedding"):
        ee.lookup_embedding(ids, table)


#: What each backend's Embedding does with an id past either end of the table.
OUT_OF_RANGE_LOOKUP = {"torch": "IndexError", "tensorflow": "InvalidArgumentError", "jax": "NaN"}


@pytest.mark.parametrize("bad_id", [pytest.param(3, id="V"), pytest.param(-4, id="-V-1")])
def test_ids_out_of_both_ranges(bad_id: int) -> None:
    """Past either end: torch and TensorFlow raise, JAX returns NaN; ``one_hot`` is zeros.

    Except torch's ``one_hot``, which raises for an id of ``V`` or more.
    """
    table = ramp(3, 2)
    embedding, _ = keras_pair(table, "float32")
    ids = to_backend(torch.tensor([bad_id]))
    if OUT_OF_RANGE_LOOKUP[BACKEND] == "NaN":
        assert to_torch(embedding(ids)).isnan().all()
    else:
        with pytest.raises(Exception) as info:  # noqa: PT011 - the type depends on the backend
            embedding(ids)
        assert info.type.__name__ == OUT_OF_RANGE_LOOKUP[BACKEND]
    if BACKEND == "torch" and bad_id >= 0:
        with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
            keras.ops.one_hot(ids, 3)
    else:  # every other one_hot maps an id outside [0, V) to a zero row
        assert not to_torch(keras.ops.one_hot(ids, 3)).any()


def test_the_keras_page_measures_what_these_tests_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Keras page's side-by-side table, measured on this run's backend, agrees with the pins.

    The page runs ``docs/_scripts/keras_backends.py`` in a process per backend; here its
    measurement runs in this process, on the backend this run uses (JAX with x64 on).
    """
    spec = importlib.util.spec_from_file_location(
        "keras_backends", ROOT / "docs" / "_scripts" / "keras_backends.py"
    )
    assert spec is not None
    assert spec.loader is not None
    page = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, page)  # its dataclass looks its module up
    spec.loader.exec_module(page)
    result = page.measure()
    lookup = OUT_OF_RANGE_LOOKUP[BACKEND]
    past_the_end = "a row of NaN" if lookup == "NaN" else f"raises `{lookup}`"
    assert result["embedding"] == {
        "V": past_the_end,
        "-1": f"row {page.V - 1}",
        "-V-1": past_the_end,
    }
    one_hot_past_the_end = "raises `RuntimeError`" if BACKEND == "torch" else "a zero row"
    assert result["one_hot"] == {
        "V": one_hot_past_the_end,
        "-1": "a zero row",
        "-V-1": "a zero row",
    }
    assert result["float64_embedding"]["out"] == "float64 (exact)"
    dense = dtype_name(dense_result_dtype(torch.float64))
    assert (
        result["float64_dense"]["out"]
        == f"{dense} ({'exact' if dense == 'float64' else 'rounded'})"
    )
    assert result["float64_dense"]["stored"] == "float64"


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(np.array([2.7, 0.2], dtype=np.float32), id="float32"),
        pytest.param(np.array([2, 0], dtype=np.int16), id="int16"),
        pytest.param(np.array([2, 0], dtype=np.uint8), id="uint8"),
        pytest.param(np.array([2, 0], dtype=np.int8), id="int8"),
    ],
)
def test_keras_casts_other_id_dtypes_to_int32(ids: np.ndarray) -> None:
    """Keras' Embedding truncates any other dtype to int32; torch accepts int64/int32 only."""
    table = torch.arange(12.0).reshape(3, 4)
    embedding, _ = keras_pair(table, "float32")
    out = to_torch(embedding(keras.ops.convert_to_tensor(ids)))
    assert torch.equal(out, table[[2, 0]])
    with pytest.raises(TypeError):
        ee.lookup_embedding(torch.from_numpy(ids), table)


# --------------------------------------------------------------------------------------------
# mask_zero is not padding_idx


@given(case=ees.embedding_cases(dtype=torch.float32, device="cpu"))
def test_mask_zero_only_masks(case: ees.EmbeddingCase) -> None:
    """``mask_zero=True``: same outputs and gradients as without it, plus ``mask = ids != 0``."""
    ids, table = case.build(requires_grad=False)
    layer = ki.embedding_to_keras(table, mask_zero=True)
    x = to_backend(ids)
    grad_output = case.grad_output()
    out, grad = forward_backward(layer, layer.embeddings, x, grad_output)
    assert torch.equal(out, ee.lookup_embedding(ids, table))
    assert_grad_within_bound("embeddings.grad", grad, ids, grad_output, torch.float32)
    assert torch.equal(to_torch(layer.compute_mask(x)), ids != 0)


def test_mask_zero_is_not_padding_idx_minimal() -> None:
    """The minimal case: one id 0 in a 1 x 1 table; torch's padding row gets no gradient."""

    def differ(case: ees.EmbeddingCase) -> bool:
        ids, table = case.build(requires_grad=False)
        layer = ki.embedding_to_keras(table, mask_zero=True)
        _, keras_grad = forward_backward(
            layer, layer.embeddings, to_backend(ids), case.grad_output()
        )
        w = table.clone().requires_grad_(True)
        F.embedding(ids, w, padding_idx=0).backward(case.grad_output())
        assert w.grad is not None
        return not torch.equal(keras_grad, w.grad)

    case = find(ees.embedding_cases(dtype=torch.float32, device="cpu"), differ, settings=SEARCH)
    assert (case.num_embeddings, case.embedding_dim, case.ids.values, case.ids.shape) == (
        1,
        1,
        (0,),
        (),
    )
    ids, table = case.build(requires_grad=False)
    layer = ki.embedding_to_keras(table, mask_zero=True)
    out, grad = forward_backward(layer, layer.embeddings, to_backend(ids), case.grad_output())
    assert torch.equal(out, table[0])  # not zeroed
    assert torch.equal(grad, case.grad_output().reshape(1, 1))  # the full gradient
    # torch's padding row: zero gradient, and zero at initialisation.
    with torch.random.fork_rng():
        torch.manual_seed(0)
        assert not nn.Embedding(3, 2, padding_idx=0).weight[0].any()


def test_embedding_to_keras_refuses_padding_idx() -> None:
    embedding = nn.Embedding.from_pretrained(ramp(4, 2), freeze=False, padding_idx=0)
    with pytest.raises(ValueError, match=r"padding_idx=0 .*mask_zero=True is not padding_idx=0"):
        ki.embedding_to_keras(embedding)
    layer = ki.embedding_to_keras(embedding.weight)  # the table alone
    assert torch.equal(to_torch(layer.embeddings), embedding.weight.detach())


# --------------------------------------------------------------------------------------------
# The seed notebook (004), on Keras 3


SEED_WEIGHTS = textwrap.dedent(
    """\
    [array([[0.  , 0.  , 0.  , 0.  , 0.  ],
           [0.11, 0.11, 0.11, 0.11, 0.11],
           [0.22, 0.22, 0.22, 0.22, 0.22],
           [0.33, 0.33, 0.33, 0.33, 0.33]], dtype=float32)]"""
)
SEED_OUTPUT = textwrap.dedent(
    """\
    array([[0.22, 0.22, 0.22, 0.22, 0.22],
           [0.33, 0.33, 0.33, 0.33, 0.33],
           [0.11, 0.11, 0.11, 0.11, 0.11]], dtype=float32)"""
)
SEED_ONE_HOT = "[[0. 0. 1. 0.]\n [0. 0. 0. 1.]\n [0. 1. 0. 0.]]"


@IGNORE_ARRAY_COPY
def test_seed_004_on_keras_3() -> None:
    """The notebook's cells, with the three changes Keras 3 needs, print the same arrays."""
    idx = keras.ops.convert_to_tensor([2, 3, 1])
    num_idx = keras.ops.max(idx) + 1
    out_dim = 5
    fake_weights = np.array(
        [
            [0.00, 0.00, 0.00, 0.00, 0.00],
            [0.11, 0.11, 0.11, 0.11, 0.11],
            [0.22, 0.22, 0.22, 0.22, 0.22],
            [0.33, 0.33, 0.33, 0.33, 0.33],
        ]
    )
    # 1. Keras 3 wants a Python int for input_dim (tf.keras 2 took the tensor).
    with pytest.raises(ValueError, match="`input_dim` must be a positive integer"):
        keras.layers.Embedding(input_dim=num_idx, output_dim=out_dim, weights=[fake_weights])
    embedding = keras.layers.Embedding(
        name="my_embedding", input_dim=int(num_idx), output_dim=out_dim, weights=[fake_weights]
    )
    model = keras.Sequential([embedding])
    model.compile()
    assert repr(embedding.get_weights()) == SEED_WEIGHTS
    assert repr(to_torch(embedding(idx)).numpy()) == SEED_OUTPUT

    onehot = keras.ops.one_hot(idx, int(num_idx))
    assert str(to_torch(onehot).numpy()) == SEED_ONE_HOT

    # 2. Keras 3's Dense takes no weights= argument, and 3. input_shape= is deprecated.
    with pytest.raises(ValueError, match="Unrecognized keyword arguments passed to Dense"):
        keras.layers.Dense(units=out_dim, use_bias=False, weights=[fake_weights])
    with pytest.warns(UserWarning, match="Do not pass an `input_shape`"):
        keras.layers.Dense(units=out_dim, use_bias=False, input_shape=(3, 4))
    linear = keras.layers.Dense(name="my_dense", units=out_dim, use_bias=False)
    linear.build((None, int(num_idx)))
    linear.set_weights([fake_weights])  # the (in, out) kernel is the table: no transpose
    model = keras.Sequential([linear])
    model.compile()
    assert repr(linear.get_weights()) == SEED_WEIGHTS
    assert repr(to_torch(linear(onehot)).numpy()) == SEED_OUTPUT


# --------------------------------------------------------------------------------------------
# The conversion helpers: values, names, dtypes, and copies (never shared storage)


@given(
    weight=ees.embedding_weights(
        ees.vocab_sizes(max_value=64),
        ees.embedding_dims(max_value=8),
        dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
    )
)
def test_round_trips_are_exact(weight: torch.Tensor) -> None:
    """torch -> Keras -> torch keeps every bit and the dtype, through every helper."""
    layer = ki.embedding_to_keras(weight)
    back = ki.keras_embedding_to_torch(layer)
    assert back.weight.dtype == weight.dtype
    assert torch.equal(back.weight.detach().cpu(), weight)
    through_dense = ki.keras_embedding_to_torch(
        ki.dense_to_keras_embedding(ki.keras_embedding_to_dense(layer))
    )
    assert torch.equal(through_dense.weight.detach().cpu(), weight)
    linear = nn.Linear(*weight.shape, bias=False, device="meta", dtype=weight.dtype).to_empty(
        device="cpu"
    )
    with torch.no_grad():
        linear.weight.copy_(weight.t())  # a (D, V) weight: in_features = D, out_features = V
    linear_back = ki.dense_to_linear(ki.linear_to_dense(linear))
    assert torch.equal(linear_back.weight.detach().cpu(), linear.weight.detach())


def test_layouts() -> None:
    table = torch.arange(6.0).reshape(3, 2)
    assert torch.equal(ki.table_to_dense_kernel(table), table)  # (in, out) = (V, D)
    assert torch.equal(ki.dense_kernel_to_table(table), table)
    assert torch.equal(ki.linear_weight_to_dense_kernel(table.t()), table)
    assert torch.equal(ki.dense_kernel_to_linear_weight(table), table.t())
    for fn in (
        ki.table_to_dense_kernel,
        ki.dense_kernel_to_table,
        ki.linear_weight_to_dense_kernel,
        ki.dense_kernel_to_linear_weight,
    ):
        out = fn(table)
        assert out.is_contiguous()
        assert out.untyped_storage().data_ptr() != table.untyped_storage().data_ptr()
        with pytest.raises(ValueError, match=f"^{fn.__name__}: .* must be 2-D"):
            fn(torch.zeros(3))
    array = table.numpy()
    copied = ki.table_to_dense_kernel(array)
    array[0, 0] = 100.0
    assert copied[0, 0] == 0.0  # a numpy input is copied too


def test_dense_on_one_hot_equals_linear_on_one_hot() -> None:
    """``linear_to_dense``: Keras' ``x @ kernel`` equals torch's ``F.linear(x, weight)``."""
    weight = torch.arange(12.0).reshape(3, 4) / 8  # nn.Linear(4, 3): (out, in)
    linear = nn.Linear(4, 3, bias=False, device="meta").to_empty(device="cpu")
    with torch.no_grad():
        linear.weight.copy_(weight)
    dense = ki.linear_to_dense(linear)
    x = F.one_hot(torch.tensor([3, 0, 3]), 4).float()
    assert torch.equal(to_torch(dense(to_backend(x))), linear(x).detach())


def test_keras_names_the_dimensions_input_dim_and_output_dim() -> None:
    embedding = _embedding(7, 3)
    layer = ki.embedding_to_keras(embedding)
    assert (layer.input_dim, layer.output_dim) == (
        embedding.num_embeddings,
        embedding.embedding_dim,
    )
    back = ki.keras_embedding_to_torch(layer)
    assert (back.num_embeddings, back.embedding_dim) == (7, 3)
    dense = ki.keras_embedding_to_dense(layer)
    assert (dense.units, tuple(to_torch(dense.kernel).shape)) == (3, (7, 3))


def _embedding(v: int = 5, d: int = 3) -> nn.Embedding:
    return nn.Embedding.from_pretrained(ramp(v, d), freeze=False)


def _linear() -> nn.Linear:
    linear = nn.Linear(5, 3, device="meta").to_empty(device="cpu")  # no initial draw
    with torch.no_grad():
        linear.weight.copy_(ramp(3, 5))
        linear.bias.copy_(ramp(3) + 8.0)
    return linear


def _keras_embedding() -> Any:
    return ki.embedding_to_keras(_embedding())


def _keras_dense() -> Any:
    return ki.linear_to_dense(_linear())


def _torch_weights(module: nn.Module) -> list[torch.Tensor]:
    return [p for p in module.parameters()]


def _keras_weights(layer: Any) -> list[Any]:
    return list(layer.weights)


def _bump_torch(weights: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for w in weights:
            w.add_(1.0)


def _bump_keras(weights: list[Any]) -> None:
    for w in weights:
        w.assign(assignable(to_torch(w) + 1.0))


def _snapshot(weights: list[Any], keras_side: bool) -> list[torch.Tensor]:
    return [to_torch(w).clone() if keras_side else w.detach().clone() for w in weights]


# (name, make the source, convert, source is a Keras layer, target is a Keras layer)
CONVERSIONS: list[tuple[str, Callable[[], Any], Callable[[Any], Any], bool, bool]] = [
    ("embedding_to_keras", _embedding, ki.embedding_to_keras, False, True),
    ("keras_embedding_to_torch", _keras_embedding, ki.keras_embedding_to_torch, True, False),
    ("keras_embedding_to_dense", _keras_embedding, ki.keras_embedding_to_dense, True, True),
    (
        "dense_to_keras_embedding",
        lambda: ki.keras_embedding_to_dense(_keras_embedding()),
        ki.dense_to_keras_embedding,
        True,
        True,
    ),
    ("linear_to_dense", _linear, ki.linear_to_dense, False, True),
    ("dense_to_linear", _keras_dense, ki.dense_to_linear, True, False),
]


@pytest.mark.parametrize(
    ("make", "convert", "source_keras", "target_keras"),
    [pytest.param(*c[1:], id=c[0]) for c in CONVERSIONS],
)
def test_conversions_copy(
    make: Callable[[], Any], convert: Callable[[Any], Any], source_keras: bool, target_keras: bool
) -> None:
    """Mutate either side after a conversion: the other side does not move."""
    source = make()
    target = convert(source)
    src_w = _keras_weights(source) if source_keras else _torch_weights(source)
    tgt_w = _keras_weights(target) if target_keras else _torch_weights(target)
    src_before = _snapshot(src_w, source_keras)
    tgt_before = _snapshot(tgt_w, target_keras)
    for a, b in zip(src_before, tgt_before, strict=True):  # same values, possibly transposed
        assert torch.equal(a, b) or torch.equal(a.t(), b)

    (_bump_keras if source_keras else _bump_torch)(src_w)
    assert all(
        torch.equal(a, b) for a, b in zip(_snapshot(tgt_w, target_keras), tgt_before, strict=True)
    )
    (_bump_keras if target_keras else _bump_torch)(tgt_w)
    after = _snapshot(src_w, source_keras)
    assert all(torch.equal(a, b + 1.0) for a, b in zip(after, src_before, strict=True))


@TORCH_BACKEND_ONLY
def test_a_keras_variable_keeps_the_tensor_it_is_given() -> None:
    """Why the helpers copy: on the torch backend ``keras.Variable(t)`` shares ``t``'s storage."""
    t = torch.zeros(2, 2)
    variable = keras.Variable(t)
    t.add_(1.0)
    assert variable.value.eq(1.0).all()  # moved with t
    param = nn.Parameter(torch.zeros(2, 2))
    assert keras.Variable(param).value is param
    # assign() copies into the existing parameter:
    layer = keras.layers.Embedding(2, 2, embeddings_initializer="zeros")
    layer.build()
    layer.embeddings.assign(t)
    t.add_(1.0)
    assert layer.embeddings.value.eq(1.0).all()


@TORCH_BACKEND_ONLY
def test_helpers_share_no_storage() -> None:
    weight = _embedding().weight
    layer: Any = ki.embedding_to_keras(weight)  # its variable's value is a torch Parameter here
    back = ki.keras_embedding_to_torch(layer)
    pointers = {
        weight.untyped_storage().data_ptr(),
        layer.embeddings.value.untyped_storage().data_ptr(),
        back.weight.untyped_storage().data_ptr(),
    }
    assert len(pointers) == 3


def test_trainable_follows_requires_grad() -> None:
    frozen = nn.Embedding.from_pretrained(torch.eye(3), freeze=True)
    layer = ki.embedding_to_keras(frozen)
    assert not layer.trainable
    assert not ki.keras_embedding_to_torch(layer).weight.requires_grad
    assert ki.embedding_to_keras(torch.eye(3)).trainable  # a bare table: Keras' default
    trainable = ki.embedding_to_keras(_embedding())
    assert trainable.trainable
    assert ki.keras_embedding_to_torch(trainable).weight.requires_grad


def test_explicit_dtype_policy() -> None:
    table = torch.tensor([[0.1, 1 / 3]], dtype=torch.float64)
    layer = ki.embedding_to_keras(table, dtype="mixed_float16")
    assert to_torch(layer.embeddings).dtype == torch.float32
    assert torch.equal(to_torch(layer.embeddings), table.float())
    assert to_torch(layer(to_backend(torch.tensor([0])))).dtype == torch.float16
    assert ki.keras_embedding_to_torch(layer).weight.dtype == torch.float32


def test_keras_embedding_to_torch_runs_no_initializer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module wraps the copied table: ``reset_parameters`` (and torch._dynamo) never run.

    ``nn.Embedding(device="meta")`` would initialise a meta table through torch._refs, which
    imports torch._dynamo and, where it is installed, Triton (see the top of this module).
    """

    def refuse(self: nn.Embedding) -> None:
        raise AssertionError("keras_embedding_to_torch ran nn.Embedding.reset_parameters")

    layer = _keras_embedding()
    monkeypatch.setattr(nn.Embedding, "reset_parameters", refuse)
    back = ki.keras_embedding_to_torch(layer)
    assert torch.equal(back.weight.detach().cpu(), to_torch(layer.embeddings))


def test_conversions_draw_no_random_numbers() -> None:
    """No initializer runs: torch's, Python's and numpy's global generators are untouched."""
    weight, linear = _embedding().weight, _linear()

    def state() -> tuple[Any, ...]:
        legacy: Any = np.random.get_state()  # noqa: NPY002 - the legacy global state is what we check
        return torch.random.get_rng_state(), random.getstate(), legacy[1].copy()

    before = state()
    layer = ki.embedding_to_keras(weight)
    ki.keras_embedding_to_torch(layer)
    ki.dense_to_keras_embedding(ki.keras_embedding_to_dense(layer))
    ki.dense_to_linear(ki.linear_to_dense(linear))
    after = state()
    assert torch.equal(before[0], after[0])
    assert before[1] == after[1]
    assert (before[2] == after[2]).all()


def _options_error(option: dict[str, Any]) -> None:
    embedding = nn.Embedding(4, 2, device="meta", **option)  # refused before its table is read
    with pytest.raises(ValueError, match=f"^embedding_to_keras: .*{next(iter(option))}="):
        ki.embedding_to_keras(embedding)


@pytest.mark.parametrize(
    "option",
    [{"padding_idx": 1}, {"max_norm": 1.0}, {"scale_grad_by_freq": True}],
    ids=["padding_idx", "max_norm", "scale_grad_by_freq"],
)
def test_options_keras_cannot_express_are_refused(option: dict[str, Any]) -> None:
    _options_error(option)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"^embedding_to_keras: expected nn\.Embedding"):
        ki.embedding_to_keras(nn.Linear(2, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be 2-D"):
        ki.embedding_to_keras(torch.zeros(3))
    with pytest.raises(TypeError, match="floating point"):
        ki.embedding_to_keras(torch.zeros(3, 2, dtype=torch.int64))
    with pytest.raises(
        TypeError, match=r"^keras_embedding_to_torch: expected keras.layers.Embedding"
    ):
        ki.keras_embedding_to_torch(keras.layers.Dense(2))
    with pytest.raises(ValueError, match="not built"):
        ki.keras_embedding_to_torch(keras.layers.Embedding(2, 2))
    with pytest.raises(ValueError, match="has a bias"):
        ki.dense_to_keras_embedding(ki.linear_to_dense(_linear()))
    relu = keras.layers.Dense(2, activation="relu", use_bias=False)
    relu.build((None, 3))
    with pytest.raises(ValueError, match="activation 'relu'"):
        ki.dense_to_linear(relu)
    with pytest.raises(TypeError, match=r"^linear_to_dense: expected nn\.Linear"):
        ki.linear_to_dense(_embedding())  # type: ignore[arg-type]


def test_without_keras_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keras", None)  # makes `import keras` fail
    with pytest.raises(ImportError, match=r"pip install -e '\.\[docs\]'"):
        ki.embedding_to_keras(torch.zeros(2, 2))
    assert torch.equal(ki.table_to_dense_kernel(torch.eye(2)), torch.eye(2))  # needs no Keras


def test_importing_the_package_and_the_converters_does_not_import_keras() -> None:
    code = (
        "import sys\n"
        "sys.path.insert(0, 'docs/_scripts')\n"
        "import embedding_equivalence, keras_interop\n"
        "assert 'keras' not in sys.modules, 'keras imported eagerly'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_the_keras_page_renders_the_reference_of_every_converter() -> None:
    # The TensorFlow / Keras page renders the module's reference with one `::: keras_interop`
    # block whose members list names every public function, and only those.
    assert list(ki.__all__) == sorted(ki.__all__)
    public = {
        n
        for n, v in vars(ki).items()
        if not n.startswith("_") and callable(v) and getattr(v, "__module__", "") == ki.__name__
    }
    assert public == set(ki.__all__)
    page = (ROOT / "docs" / "tensorflow-keras.md").read_text(encoding="utf-8")
    _, block = page.split("\n::: keras_interop\n")
    members = re.findall(r"^ +- (\w+)$", block.split("\n\n")[0], flags=re.MULTILINE)
    assert sorted(members) == sorted(ki.__all__)


# --------------------------------------------------------------------------------------------
# The same module on other Keras backends

#: The backends this module is rerun on besides torch, the main process's, each with the
#: environment its rerun adds. JAX's eager ops compile once per shape, so a property costs
#: about a compilation per example there: its rerun draws 10 examples a property (the dev
#: profile's budget, derandomized under CI). On the loaded 2-core machine, under the ci
#: profile, the JAX rerun took 50 to 90 s of wall time, TensorFlow's (40 examples) 25 to 35.
OTHER_BACKENDS: dict[str, dict[str, str]] = {
    "tensorflow": {"TF_CPP_MIN_LOG_LEVEL": "3"},
    "jax": {"EMBEDDING_KERAS_MAX_EXAMPLES": "10"},
}
#: Seconds a rerun may take; EMBEDDING_KERAS_BACKEND_TIMEOUT raises it on a slow machine.
BACKEND_TIMEOUT = float(os.environ.get("EMBEDDING_KERAS_BACKEND_TIMEOUT", "600"))


def _backend_param(name: str) -> Any:
    """A row per backend: skipped where it is not installed, except under CI.

    CI installs the ``dev`` extra, which includes the ``tensorflow`` and ``jax`` extras: there
    a missing backend fails the test instead of skipping it unseen.
    """
    missing = importlib.util.find_spec(name) is None
    reason = f"{name} not installed: pip install 'embedding-equivalence[{name}]'"
    skip = pytest.mark.skipif(missing and not os.environ.get("CI"), reason=reason)
    return pytest.param(name, id=name, marks=[skip])


def _junit_cases(report: Path) -> list[tuple[str, str | None]]:
    """``(test name, skip reason or None)`` for each test case of a JUnit XML report."""
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        skipped = case.find("skipped")
        cases.append((case.get("name", "?"), None if skipped is None else skipped.get("message")))
    return cases


@TORCH_BACKEND_ONLY  # the rerun itself runs on the other backend, where this row skips
@pytest.mark.slow
@pytest.mark.parametrize("backend", [_backend_param(b) for b in OTHER_BACKENDS])
def test_the_properties_on_another_backend(backend: str, tmp_path: Path) -> None:
    """Rerun this module with ``KERAS_BACKEND=backend`` in a fresh interpreter.

    Keras reads ``KERAS_BACKEND`` once, when it is first imported, so a backend needs a process
    of its own. The child's JUnit report must show that every test ran there but the pins of
    the torch backend's behaviour, which say in their skip reason which backend they saw.
    """
    assert importlib.util.find_spec(backend) is not None, (
        f"CI installs the dev extra, which includes {backend}: "
        f"pip install 'embedding-equivalence[{backend}]'"
    )
    report = tmp_path / "report.xml"
    env = {**os.environ, "KERAS_BACKEND": backend, **OTHER_BACKENDS[backend]}
    # One process (-n 0): the rerun is one module, and one backend once is enough memory.
    command = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-n", "0"]
    # A hung test dumps every thread's stack before the parent's timeout kills the child.
    command += [f"--junitxml={report}", "-o", f"faulthandler_timeout={BACKEND_TIMEOUT - 30:.0f}"]
    try:
        result = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=BACKEND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(
            f"KERAS_BACKEND={backend}: no result after {BACKEND_TIMEOUT:.0f} s (raise it with "
            f"EMBEDDING_KERAS_BACKEND_TIMEOUT)\n{output[-6000:]}"
        )
    assert result.returncode == 0, (
        f"KERAS_BACKEND={backend} pytest {__file__} failed:\n"
        + result.stdout[-6000:]
        + result.stderr[-3000:]
    )
    cases = _junit_cases(report)
    ran = [name for name, reason in cases if reason is None]
    skipped = {name: reason for name, reason in cases if reason is not None}
    assert ran, f"no test ran on {backend}: {skipped}"
    for name, reason in skipped.items():
        assert f"this run uses {backend}" in reason, f"{name} skipped on {backend}: {reason}"
