"""Move embedding tables between torch and Keras 3, copying, in the layout each side expects.

Keras' ``Embedding(input_dim=V, output_dim=D)`` holds the same ``(V, D)`` table as torch's
``nn.Embedding(num_embeddings=V, embedding_dim=D)``. The two dense layers store their weights
the other way round from each other:

| layer | weight | layout | the table ``W`` as that weight |
| --- | --- | --- | --- |
| ``keras.layers.Embedding(V, D)`` | ``embeddings`` | ``(V, D)`` | ``W`` |
| ``keras.layers.Dense(D, use_bias=False)`` | ``kernel`` | ``(in, out)`` | ``W``, no transpose |
| ``torch.nn.Embedding(V, D)`` | ``weight`` | ``(V, D)`` | ``W`` |
| ``torch.nn.Linear(V, D, bias=False)`` | ``weight`` | ``(out, in)`` | ``W.T`` |

so ``Dense(one_hot(ids, V))`` with ``kernel = W`` and ``Linear(one_hot(ids, V))`` with
``weight = W.T`` both equal ``W[ids]``. The helpers here convert layers and weights between
the four, and every one of them **copies**: on Keras' torch backend a variable's value is a
``torch.nn.Parameter``, and ``keras.Variable(t)`` (or an initializer that returns ``t``) keeps
``t``'s storage, so a table passed in by hand can stay shared with the torch module it came
from, and a training step of one would move the other. The helpers build each Keras layer
with a zeros initializer (no random draw, from Keras' or torch's generators) and then assign
a copy.

This is the docs' adapter between the two frameworks: the TensorFlow / Keras page runs it, and
``tests/test_keras.py`` checks it on each Keras backend; it is not part of the installed
package. The pages and the tests import it after ``sys.path.insert(0, "docs/_scripts")``, from
the repository's root, as ``import keras_interop``.

Keras is imported when a conversion is called, never when this module is imported; without
it the functions raise `ImportError` naming the extra to install (``pip install -e '.[docs]'``
in the repository's root: the docs' dependencies, Keras 3 among them). The functions that only
change a layout (``table_to_dense_kernel`` and friends) need torch alone.

**Where Keras and torch differ** (each found and pinned by ``tests/test_keras.py``, which
runs on Keras' torch backend and again on TensorFlow and on JAX):

- A negative id ``-V <= i < 0`` is read from the end of the table by Keras' ``Embedding``
  (``ops.take``'s "fill" convention: ``W[i + V]``), is an all-zero row in Keras' ``one_hot``
  (so ``Dense`` returns zeros), and raises `IndexError` in torch. Below ``-V`` and at
  ``V`` or above, Keras' torch and TensorFlow backends raise too; JAX returns a row of NaN
  (``jnp.take``'s "fill" mode), and every backend's ``one_hot`` but torch's (which raises
  at ``V`` or above) gives an all-zero row.
- Keras' ``Embedding`` casts floating ids (and int8/int16/uint8 ids) to int32, truncating
  ``2.7`` to ``2``; torch refuses them.
- ``mask_zero=True`` is not ``padding_idx=0``: it only attaches a mask (``ids != 0``) for the
  layers downstream. Row 0 is initialised like any other, is looked up as stored, and receives
  its full gradient. ``embedding_to_keras`` therefore refuses an embedding with a
  ``padding_idx`` rather than drop it silently.
- Keras' layers default to the ``float32`` policy whatever the table's dtype; loading a float64
  table into ``keras.layers.Embedding(V, D)`` rounds it. ``embedding_to_keras`` uses the
  table's dtype unless told otherwise.
- On the torch backend, Keras' type promotion maps float64 to float32 (to match JAX's
  default), so ``Dense(dtype="float64")`` returns **float32**: the float64 row rounded, and a
  gradient summed in float32 (keras-team/keras#23704); TensorFlow and JAX multiply in
  float64. ``Embedding(dtype="float64")`` stays float64 on all three, except on JAX without
  ``jax_enable_x64`` (``JAX_ENABLE_X64=1``), where JAX stores every float64 array as float32
  (with a `UserWarning`): both layers return float32, and a round trip returns float32.
- Under ``mixed_float16`` both layers keep float32 variables and return float16, equal to
  the float32 row rounded to float16; their gradients are float16-accurate: the Embedding looks
  up in a float16 copy of the table, the Dense accumulates in float32 and rounds the result to
  float16. Where one id occurs several times, the torch and JAX backends sum its gradient rows
  in float16; TensorFlow casts them to float32 first (its gather's gradient is an
  ``IndexedSlices``), so there the sum is float32-accurate.
- Keras' ``Dense`` wants at least a batch dimension (``min_ndim=2``): the one-hot of a 0-d id
  is refused, where ``Embedding`` (like torch) embeds a 0-d id.
- Options of ``nn.Embedding`` with no Keras counterpart: ``padding_idx``, ``max_norm``,
  ``scale_grad_by_freq``, ``sparse`` (Keras' torch backend gives dense gradients).
"""

from __future__ import annotations

import typing
from types import ModuleType
from typing import Any

import torch
from torch import nn

from embedding_equivalence.forms.dtypes import dtype_name as _dtype_name
from embedding_equivalence.forms.modules import MatmulEmbedding as _MatmulEmbedding

if typing.TYPE_CHECKING:  # pragma: no cover - annotations only; Keras is imported lazily
    import keras

__all__ = [
    "dense_kernel_to_linear_weight",
    "dense_kernel_to_table",
    "dense_to_keras_embedding",
    "dense_to_linear",
    "embedding_to_keras",
    "keras_embedding_to_dense",
    "keras_embedding_to_torch",
    "linear_to_dense",
    "linear_weight_to_dense_kernel",
    "table_to_dense_kernel",
]

_INSTALL = "pip install -e '.[docs]'"

# --------------------------------------------------------------------------------------------
# Keras, imported on first use


def _keras(fn: str) -> ModuleType:
    """Import Keras 3, or raise an ImportError that names the extra to install."""
    try:
        import keras
    except ImportError as exc:
        raise ImportError(
            f"{fn} needs Keras 3, which could not be imported ({exc}); install it with "
            f"{_INSTALL} (Keras then runs on the torch backend with KERAS_BACKEND=torch)"
        ) from exc
    version = getattr(keras, "__version__", "0")
    if int(version.split(".")[0]) < 3:
        raise ImportError(
            f"{fn} needs Keras 3, found Keras {version} (tf.keras 2 is not supported); "
            f"upgrade with {_INSTALL}"
        )
    return keras


def _to_torch(keras_: ModuleType, value: Any) -> torch.Tensor:
    """A fresh, contiguous torch copy of a Keras variable or backend tensor."""
    # On the torch backend the copy stays where Keras keeps the variable; elsewhere the CPU.
    if keras_.backend.backend() == "torch":
        tensor = value.value if isinstance(value, keras_.Variable) else value
        return tensor.detach().clone(memory_format=torch.contiguous_format)
    import numpy as np  # a dependency of Keras

    if keras_.backend.standardize_dtype(value.dtype) == "bfloat16":
        # numpy has no bfloat16: go through float32, which holds every bfloat16 exactly.
        array = _to_numpy(keras_, keras_.ops.cast(value, "float32"))
        return torch.from_numpy(np.array(array, copy=True)).to(torch.bfloat16)
    return torch.from_numpy(np.array(_to_numpy(keras_, value), copy=True))


def _to_numpy(keras_: ModuleType, value: Any) -> Any:
    """A numpy array of a Keras variable or tensor on a backend other than torch.

    ``keras.ops.convert_to_numpy`` calls ``np.array`` on what it is given, and numpy 2 warns
    (`DeprecationWarning`) when that object's ``__array__`` takes no ``copy=`` keyword: a
    TensorFlow ``EagerTensor``'s, and a Keras ``Variable``'s on JAX. ``EagerTensor.numpy()``
    gives the same array without the warning; on JAX the variable's value (a ``jax.Array``)
    converts cleanly.
    """
    tensor = keras_.ops.convert_to_tensor(value)
    if keras_.backend.backend() == "tensorflow":
        return tensor.numpy()
    return keras_.ops.convert_to_numpy(tensor)


def _to_keras(keras_: ModuleType, tensor: torch.Tensor) -> Any:
    """A copy of ``tensor`` that ``Variable.assign`` accepts on the current backend."""
    t = tensor.detach()
    if keras_.backend.backend() == "torch":
        return t.clone(memory_format=torch.contiguous_format)
    if t.dtype == torch.bfloat16:
        t = t.float()  # exact; assign casts back to the variable's bfloat16
    return t.cpu().numpy().copy()


def _keras_layer(layer: object, kind: str, fn: str) -> ModuleType:
    """Keras, once ``layer`` is checked: a built ``keras.layers.<kind>``, not quantized."""
    keras_ = _keras(fn)
    if not isinstance(layer, getattr(keras_.layers, kind)):
        raise TypeError(f"{fn}: expected keras.layers.{kind}, got {type(layer).__name__}")
    if not getattr(layer, "built", False):
        raise ValueError(
            f"{fn}: the layer is not built, so it has no weights yet; build it first "
            f"(layer.build(input_shape)) or call it once on an input"
        )
    if (mode := getattr(layer, "quantization_mode", None)) is not None:
        raise ValueError(
            f"{fn}: the layer is quantized ({mode!r}); convert the float layer before quantizing it"
        )
    return keras_


def _keras_kernel(dense: Any, fn: str, target: str, bias: bool) -> tuple[ModuleType, torch.Tensor]:
    """Keras, and a copy of a checked ``keras.layers.Dense``'s kernel as a torch tensor.

    The layer must be built, not quantized, without an activation (which ``target``, what
    the layer becomes, cannot express) and, unless ``bias``, without a bias.
    """
    keras_ = _keras_layer(dense, "Dense", fn)
    if dense.use_bias and not bias:
        raise ValueError(
            f"{fn}: the Dense layer has a bias, so on one-hot input it is an embedding plus a "
            f"constant vector; create it with use_bias=False"
        )
    if dense.activation is not keras_.activations.linear:
        name = getattr(dense.activation, "__name__", repr(dense.activation))
        raise ValueError(
            f"{fn}: the Dense layer applies activation {name!r} after the product, which "
            f"{target} cannot express; create it with activation=None"
        )
    return keras_, _to_torch(keras_, dense.kernel)


def _keras_table(layer: Any, fn: str) -> tuple[ModuleType, torch.Tensor]:
    """Keras, and a copy of a checked ``keras.layers.Embedding``'s table as a torch tensor."""
    keras_ = _keras_layer(layer, "Embedding", fn)
    return keras_, _to_torch(keras_, layer.embeddings)


def _keras_embedding(keras_: ModuleType, table: torch.Tensor, trainable: Any, **kwargs: Any) -> Any:
    """A built ``keras.layers.Embedding`` holding a copy of ``table`` (trainable unless None).

    Built with zeros, so that nothing is drawn from any random generator, then assigned.
    """
    layer = keras_.layers.Embedding(*table.shape, embeddings_initializer="zeros", **kwargs)
    layer.build()
    layer.embeddings.assign(_to_keras(keras_, table))
    if trainable is not None:
        layer.trainable = trainable
    return layer


def _keras_dense(
    keras_: ModuleType, kernel: torch.Tensor, bias: torch.Tensor | None, trainable: Any, dtype: Any
) -> Any:
    """A built ``keras.layers.Dense`` holding copies of an ``(in, out)`` kernel and the bias.

    Built with zeros, so that nothing is drawn from any random generator, then assigned.
    """
    inputs, units = kernel.shape
    dense = keras_.layers.Dense(
        units, use_bias=bias is not None, kernel_initializer="zeros", bias_initializer="zeros",
        dtype=dtype,
    )  # fmt: skip
    dense.build((None, inputs))
    dense.kernel.assign(_to_keras(keras_, kernel))
    if bias is not None:
        dense.bias.assign(_to_keras(keras_, bias))
    dense.trainable = trainable
    return dense


# --------------------------------------------------------------------------------------------
# Layouts (torch only)


def _copy_2d(weight: Any, fn: str, what: str, *, transpose: bool = False) -> torch.Tensor:
    """A contiguous, detached copy of a 2-D ``weight`` (or of its transpose)."""
    t = torch.as_tensor(weight).detach()
    if t.dim() != 2:
        raise ValueError(f"{fn}: {what} must be 2-D, got shape {tuple(t.shape)}")
    return (t.t() if transpose else t).clone(memory_format=torch.contiguous_format)


def table_to_dense_kernel(weight: Any) -> torch.Tensor:
    """The kernel of the Keras ``Dense`` that embeds one-hot input: a copy of the table itself.

    Keras stores a ``Dense`` kernel as ``(in, out)``, so the ``(V, D)`` embedding table is
    already the kernel of ``Dense(D, use_bias=False)`` on ``one_hot(ids, V)``: **no
    transpose**, unlike torch's ``nn.Linear`` (see ``linear_weight_to_dense_kernel``).

    Args:
        weight: ``(V, D)`` table: a tensor, or anything ``torch.as_tensor`` accepts (a numpy
            array from ``layer.get_weights()``).

    Returns:
        ``(V, D)`` contiguous copy, detached from any autograd graph.

    Raises:
        ValueError: ``weight`` is not 2-D.

    Examples:
        >>> import torch
        >>> from keras_interop import table_to_dense_kernel
        >>> table_to_dense_kernel(torch.arange(6.0).reshape(3, 2))
        tensor([[0., 1.],
                [2., 3.],
                [4., 5.]])
    """
    return _copy_2d(weight, "table_to_dense_kernel", "the table")


def dense_kernel_to_table(kernel: Any) -> torch.Tensor:
    """The embedding table of a bias-free Keras ``Dense`` kernel: a copy, no transpose.

    The inverse of ``table_to_dense_kernel``.

    Args:
        kernel: ``(in, out) = (V, D)`` kernel (tensor or array).

    Returns:
        ``(V, D)`` contiguous copy.

    Raises:
        ValueError: ``kernel`` is not 2-D.
    """
    return _copy_2d(kernel, "dense_kernel_to_table", "the kernel")


def linear_weight_to_dense_kernel(linear_weight: Any) -> torch.Tensor:
    """Keras ``Dense`` kernel ``(in, out)`` from a torch ``nn.Linear`` weight ``(out, in)``.

    A contiguous copy of ``linear_weight.T``: ``x @ kernel == F.linear(x, linear_weight)``.

    Args:
        linear_weight: ``(out, in)`` weight of ``nn.Linear`` (tensor or array).

    Returns:
        ``(in, out)`` contiguous copy, detached.

    Raises:
        ValueError: the weight is not 2-D.

    Examples:
        >>> import torch
        >>> from keras_interop import linear_weight_to_dense_kernel
        >>> linear_weight_to_dense_kernel(torch.tensor([[1.0, 2.0, 3.0]])).shape
        torch.Size([3, 1])
    """
    fn = "linear_weight_to_dense_kernel"
    return _copy_2d(linear_weight, fn, "the linear weight", transpose=True)


def dense_kernel_to_linear_weight(kernel: Any) -> torch.Tensor:
    """Torch ``nn.Linear`` weight ``(out, in)`` from a Keras ``Dense`` kernel ``(in, out)``.

    A contiguous copy of ``kernel.T``; the inverse of ``linear_weight_to_dense_kernel``.

    Args:
        kernel: ``(in, out)`` kernel (tensor or array, e.g. ``dense.get_weights()[0]``).

    Returns:
        ``(out, in)`` contiguous copy, detached.

    Raises:
        ValueError: the kernel is not 2-D.
    """
    return _copy_2d(kernel, "dense_kernel_to_linear_weight", "the kernel", transpose=True)


# --------------------------------------------------------------------------------------------
# Layers


def _table_of(embedding: Any, fn: str) -> tuple[torch.Tensor, bool | None]:
    """The table of a torch embedding (or a bare table) and whether it is trainable."""
    if isinstance(embedding, (nn.Embedding, _MatmulEmbedding)):
        options = {
            "padding_idx": embedding.padding_idx,
            "max_norm": embedding.max_norm,
            "scale_grad_by_freq": embedding.scale_grad_by_freq or None,
        }
        listed = ", ".join(f"{k}={v!r}" for k, v in options.items() if v is not None)
        if listed:
            raise ValueError(
                f"{fn}: keras.layers.Embedding has no counterpart of {listed} (mask_zero=True "
                f"is not padding_idx=0: it masks downstream layers but neither zeroes row 0 "
                f"nor its gradient); to move the table alone, pass {fn}(embedding.weight)"
            )
        return embedding.weight.detach(), embedding.weight.requires_grad
    if isinstance(embedding, torch.Tensor):
        if embedding.dim() != 2:
            raise ValueError(f"{fn}: the table must be 2-D (V, D), got {tuple(embedding.shape)}")
        if not embedding.dtype.is_floating_point:
            raise TypeError(f"{fn}: the table must be floating point, got {embedding.dtype}")
        return embedding.detach(), None
    raise TypeError(
        f"{fn}: expected nn.Embedding, MatmulEmbedding or a (V, D) tensor, got "
        f"{type(embedding).__name__}"
    )


def embedding_to_keras(
    embedding: nn.Embedding | _MatmulEmbedding | torch.Tensor,
    *,
    mask_zero: bool = False,
    dtype: Any = None,
    name: str | None = None,
) -> keras.layers.Embedding:
    """A built ``keras.layers.Embedding(input_dim=V, output_dim=D)`` holding a copy of the table.

    Keras names ``V`` and ``D`` ``input_dim`` and ``output_dim`` (torch: ``num_embeddings`` and
    ``embedding_dim``). The layer computes ``W[ids]`` with the same values and gradients as
    the torch module; see the module documentation for where the two differ (negative ids,
    float ids, ``mask_zero``, dtype policies).

    Args:
        embedding: ``nn.Embedding``, ``MatmulEmbedding``, or a
            ``(V, D)`` floating table. A module with ``padding_idx``, ``max_norm`` or
            ``scale_grad_by_freq`` is refused (Keras cannot express them); pass its
            ``.weight`` to move the table alone. ``sparse`` is dropped: Keras' gradients are
            dense, with the same values.
        mask_zero: passed to Keras: id 0 then produces a mask for the downstream layers. It
            does not act like ``padding_idx=0`` (row 0 keeps its values and its gradient).
        dtype: Keras dtype or dtype policy (``"float32"``, ``"mixed_float16"``, ...); default
            the table's dtype, so that no value is rounded. Another dtype casts the table to
            the policy's variable dtype.
        name: the layer's name (default: Keras chooses one).

    Returns:
        A built Keras ``Embedding`` whose ``embeddings`` variable is a copy of the table (on
        Keras' device). It is trainable unless the module's weight does not require grad.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``embedding`` is not one of the accepted types, or the table is not
            floating point.
        ValueError: the table is not 2-D, or the module uses an option Keras cannot express.

    Examples:
        ```python
        import os
        import sys

        os.environ.setdefault("KERAS_BACKEND", "torch")
        sys.path.insert(0, "docs/_scripts")  # from the repository's root
        import torch
        from keras_interop import embedding_to_keras

        table = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
        layer = embedding_to_keras(table)
        ids = torch.tensor([2, 3, 1])
        assert torch.equal(layer(ids), table[ids])
        ```
    """
    fn = "embedding_to_keras"
    table, trainable = _table_of(embedding, fn)
    keras_ = _keras(fn)
    dtype = dtype if dtype is not None else _dtype_name(table.dtype)
    return _keras_embedding(keras_, table, trainable, mask_zero=mask_zero, dtype=dtype, name=name)


def keras_embedding_to_torch(layer: keras.layers.Embedding) -> nn.Embedding:
    """``nn.Embedding(num_embeddings=input_dim, embedding_dim=output_dim)`` with a copy.

    The inverse of ``embedding_to_keras``. The module has the variable's dtype (float32
    under ``mixed_float16``, whose float16 compute dtype torch does not apply by itself) and,
    on Keras' torch backend, the variable's device (else the CPU). ``mask_zero`` does not
    become ``padding_idx``: the returned module computes the layer's outputs and gradients.
    A layer with LoRA enabled gives its effective table (base plus the low-rank update).

    Args:
        layer: a built ``keras.layers.Embedding``.

    Returns:
        ``nn.Embedding`` whose weight is a copy of the table, requiring grad if the layer is
        trainable.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``layer`` is not a ``keras.layers.Embedding``.
        ValueError: the layer is not built, or it is quantized.
    """
    _, table = _keras_table(layer, "keras_embedding_to_torch")
    # from_pretrained wraps the copy as it is: no initializer runs, so the global RNG is left
    # untouched. Not nn.Embedding(device="meta"): its normal_ on a meta tensor goes through
    # torch._refs, which imports torch._dynamo, which imports Triton where it is installed,
    # and Triton's LLVM aborts a process in which TensorFlow was imported first.
    return nn.Embedding.from_pretrained(table, freeze=not bool(layer.trainable))


def keras_embedding_to_dense(layer: keras.layers.Embedding) -> keras.layers.Dense:
    """A Keras ``Dense(output_dim, use_bias=False)`` with a copy of the table as its kernel.

    ``dense(keras.ops.one_hot(ids, input_dim))`` then equals ``layer(ids)``: the Keras form of
    ``embedding_to_linear``, with no transpose because Keras' kernel
    is ``(in, out)``. The Dense layer gets the embedding's dtype policy; note that on the
    torch backend a float64 ``Dense`` returns float32 (see the module documentation).
    ``mask_zero`` does not carry over.

    Args:
        layer: a built ``keras.layers.Embedding``.

    Returns:
        A built ``keras.layers.Dense`` with input dimension ``input_dim``.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``layer`` is not a ``keras.layers.Embedding``.
        ValueError: the layer is not built, or it is quantized.
    """
    keras_, table = _keras_table(layer, "keras_embedding_to_dense")
    return _keras_dense(keras_, table, None, layer.trainable, layer.dtype_policy)


def dense_to_keras_embedding(dense: keras.layers.Dense) -> keras.layers.Embedding:
    """A Keras ``Embedding(input_dim=in, output_dim=units)`` whose table copies the kernel.

    The inverse of ``keras_embedding_to_dense``.

    Args:
        dense: a built, bias-free ``keras.layers.Dense`` without activation.

    Returns:
        A built ``keras.layers.Embedding`` with the Dense layer's dtype policy.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``dense`` is not a ``keras.layers.Dense``.
        ValueError: the layer is not built or quantized, has a bias (a lookup cannot add a
            constant vector) or an activation.
    """
    keras_, kernel = _keras_kernel(dense, "dense_to_keras_embedding", "an Embedding", bias=False)
    return _keras_embedding(keras_, kernel, dense.trainable, dtype=dense.dtype_policy)


def linear_to_dense(linear: nn.Linear) -> keras.layers.Dense:
    """A built Keras ``Dense(out_features)`` with ``kernel = weight.T`` (and the bias), copied.

    Args:
        linear: ``nn.Linear``, with or without bias.

    Returns:
        ``keras.layers.Dense(out_features, use_bias=linear.bias is not None)`` built for input
        dimension ``in_features``, in the weight's dtype, trainable if the weight requires
        grad.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``linear`` is not an ``nn.Linear``.
    """
    if not isinstance(linear, nn.Linear):
        raise TypeError(f"linear_to_dense: expected nn.Linear, got {type(linear).__name__}")
    keras_, weight = _keras("linear_to_dense"), linear.weight
    kernel, dtype = linear_weight_to_dense_kernel(weight), _dtype_name(weight.dtype)
    return _keras_dense(keras_, kernel, linear.bias, weight.requires_grad, dtype)


def dense_to_linear(dense: keras.layers.Dense) -> nn.Linear:
    """``nn.Linear(in, units)`` with ``weight = kernel.T`` (and the bias), copied.

    The inverse of ``linear_to_dense``. The module has the kernel variable's dtype and, on
    Keras' torch backend, its device (else the CPU).

    Args:
        dense: a built ``keras.layers.Dense`` without activation.

    Returns:
        ``nn.Linear`` with ``bias`` if the Dense layer has one, requiring grad if the layer is
        trainable.

    Raises:
        ImportError: Keras 3 is not installed.
        TypeError: ``dense`` is not a ``keras.layers.Dense``.
        ValueError: the layer is not built, is quantized, or has an activation.
    """
    keras_, kernel = _keras_kernel(dense, "dense_to_linear", "nn.Linear", bias=True)
    linear = nn.Linear(*kernel.shape, bias=dense.use_bias, device="meta", dtype=kernel.dtype)
    linear = linear.to_empty(device=kernel.device)  # no initial draw
    with torch.no_grad():
        linear.weight.copy_(kernel.t())
        if linear.bias is not None:
            linear.bias.copy_(_to_torch(keras_, dense.bias))
    return linear.requires_grad_(bool(dense.trainable))
