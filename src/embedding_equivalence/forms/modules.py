"""Module side: a matmul drop-in for ``nn.Embedding``, and Embedding <-> Linear conversion."""

from __future__ import annotations

from typing import TypeVar

import torch
from torch import nn

from .matmul import matmul_embedding
from .validation import normalize_padding_idx

_M = TypeVar("_M", nn.Linear, nn.Embedding)


class MatmulEmbedding(nn.Module):
    """A drop-in for `torch.nn.Embedding` whose forward is ``one_hot(ids, V) @ weight``.

    Same constructor arguments, same parameter name (``weight``, shape ``(V, D)``), same
    ``state_dict`` keys and the same initialisation as ``nn.Embedding`` (``N(0, 1)`` with the
    padding row zeroed), so a checkpoint moves between the two unchanged::

        emb = nn.Embedding(10, 4, padding_idx=0)
        mm = MatmulEmbedding(10, 4, padding_idx=0)
        mm.load_state_dict(emb.state_dict())

    The forward calls [`matmul_embedding`][embedding_equivalence.matmul_embedding], so it builds a
    dense ``(N, V)`` one-hot: use it to study or test the equivalence, not to train a large
    vocabulary. It matches ``nn.Embedding`` under every autograd mode: reverse and forward mode,
    double backward, and the ``torch.func`` transforms (``grad``, ``jvp``, ``jacrev``, ``jacfwd``,
    ``vmap`` over tables) through ``torch.func.functional_call(module, {"weight": w}, (ids,))``;
    a padding position gets no gradient at all, even a non-finite one.

    Args:
        num_embeddings: ``V``, the size of the vocabulary.
        embedding_dim: ``D``, the size of each embedding vector.
        padding_idx: row that receives no gradient and is initialised to zeros; negative
            values count from the end.
        max_norm: rescale referenced rows in place to at most this norm at each forward.
        norm_type: the ``p`` of the p-norm for ``max_norm``.
        scale_grad_by_freq: divide each row's gradient by its id's frequency in the batch.
        sparse: accepted for signature compatibility; must be False, because a dense product
            gives a dense gradient (use ``nn.Embedding(..., sparse=True)`` for sparse gradients).
        _weight: initial ``(V, D)`` table, used as the parameter's data (as ``nn.Embedding``).
        _freeze: create the parameter with ``requires_grad=False``.
        device: device of the parameter.
        dtype: dtype of the parameter.

    Raises:
        ValueError: ``sparse=True``, a ``_weight`` of the wrong shape, or ``padding_idx``
            outside ``[-V, V)``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: torch.Tensor | None = None,
        _freeze: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if sparse:
            raise ValueError(
                "MatmulEmbedding(sparse=True): a dense one-hot product has a dense gradient; "
                "use torch.nn.Embedding(num_embeddings, embedding_dim, sparse=True) or "
                "embedding_equivalence.lookup_embedding(input, weight, sparse=True)"
            )
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = normalize_padding_idx(padding_idx, num_embeddings, "MatmulEmbedding")
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        shape = (num_embeddings, embedding_dim)
        if _weight is not None and tuple(_weight.shape) != shape:
            raise ValueError(
                f"MatmulEmbedding: _weight has shape {tuple(_weight.shape)}, expected "
                f"(num_embeddings, embedding_dim) = ({num_embeddings}, {embedding_dim})"
            )
        initial = torch.empty(shape, device=device, dtype=dtype) if _weight is None else _weight
        self.weight = nn.Parameter(initial, requires_grad=not _freeze)
        if _weight is None:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, 1)`` and zero the padding row, as ``nn.Embedding`` does."""
        nn.init.normal_(self.weight)
        if self.padding_idx is not None:
            with torch.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Embed ``input`` (ids of any shape) as ``one_hot(input, V) @ weight``.

        Args:
            input: int64 or int32 ids of any shape ``(*batch)``.

        Returns:
            ``(*batch, D)`` embeddings.
        """
        options = (self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq)
        return matmul_embedding(input, self.weight, *options)

    #: Describes the options as ``nn.Embedding`` does: its own ``extra_repr``, which reads the
    #: attributes of the same names.
    extra_repr = nn.Embedding.extra_repr

    @classmethod
    def from_pretrained(
        cls,
        embeddings: torch.Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> MatmulEmbedding:
        """Create a ``MatmulEmbedding`` from a ``(V, D)`` table, like ``nn.Embedding``'s.

        The table is used as the parameter's data (not copied), exactly as in ``nn.Embedding``.

        Args:
            embeddings: ``(V, D)`` floating table.
            freeze: if True the parameter does not require grad.
            padding_idx: see the class.
            max_norm: see the class.
            norm_type: see the class.
            scale_grad_by_freq: see the class.
            sparse: see the class (must be False).

        Returns:
            The new module.

        Raises:
            ValueError: ``embeddings`` is not 2-D.
        """
        if embeddings.dim() != 2:
            raise ValueError(
                f"MatmulEmbedding.from_pretrained: embeddings must be 2-D (V, D), got shape "
                f"{tuple(embeddings.shape)}"
            )
        options = (padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
        rows, cols = embeddings.shape
        return cls(rows, cols, *options, _weight=embeddings, _freeze=freeze)


def embedding_to_linear(embedding: nn.Embedding | MatmulEmbedding) -> nn.Linear:
    """Convert an embedding to a bias-free ``nn.Linear(V, D)`` whose weight is a copy of ``W.T``.

    ``linear(one_hot(ids, V).to(W.dtype))`` then equals ``embedding(ids)``. The weight is
    cloned: the seed notebooks' ``nn.Parameter(embedding.weight.T)`` shares storage with the
    embedding (a transpose is a view), so a training step of one would silently move the other.
    Options that ``nn.Linear`` cannot express (``padding_idx``, ``max_norm``,
    ``scale_grad_by_freq``, ``sparse``) do not carry over.

    Args:
        embedding: an ``nn.Embedding`` or [`MatmulEmbedding`][].

    Returns:
        ``nn.Linear(V, D, bias=False)`` with ``weight`` of shape ``(D, V)``, contiguous, on the
        embedding's device and dtype, with the same ``requires_grad``.

    Raises:
        TypeError: ``embedding`` is neither of the accepted modules.
    """
    if not isinstance(embedding, (nn.Embedding, MatmulEmbedding)):
        raise TypeError(
            f"embedding_to_linear: expected nn.Embedding or MatmulEmbedding, got "
            f"{type(embedding).__name__}"
        )
    v, d, dtype = embedding.num_embeddings, embedding.embedding_dim, embedding.weight.dtype
    return _with_transposed(nn.Linear(v, d, bias=False, device="meta", dtype=dtype), embedding)


def linear_to_embedding(linear: nn.Linear) -> nn.Embedding:
    """Convert a bias-free ``nn.Linear(V, D)`` to ``nn.Embedding(V, D)`` with a copy of ``W.T``.

    The inverse of [`embedding_to_linear`][]; the weight is cloned, never aliased.

    Args:
        linear: ``nn.Linear`` with ``bias=None`` (a bias would add a constant row to every
            embedding, which a lookup cannot express).

    Returns:
        ``nn.Embedding(in_features, out_features)`` on the linear layer's device and dtype, with
        the same ``requires_grad``.

    Raises:
        TypeError: ``linear`` is not an ``nn.Linear``.
        ValueError: ``linear`` has a bias.
    """
    if not isinstance(linear, nn.Linear):
        raise TypeError(f"linear_to_embedding: expected nn.Linear, got {type(linear).__name__}")
    if linear.bias is not None:
        raise ValueError(
            "linear_to_embedding: the linear layer has a bias, so it is an embedding plus a "
            "constant vector; create it as nn.Linear(V, D, bias=False) or drop the bias "
            "explicitly with linear.bias = None before converting"
        )
    v, d, dtype = linear.in_features, linear.out_features, linear.weight.dtype
    return _with_transposed(nn.Embedding(v, d, device="meta", dtype=dtype), linear)


def _with_transposed(module: _M, source: nn.Module) -> _M:
    """``module``, built on the meta device, given storage and a copy of ``source.weight.T``.

    Built on the meta device and then given storage: no initial draw, so the conversion
    leaves the global RNG untouched. The copy requires grad when ``source.weight`` does.
    """
    weight = source.weight
    assert isinstance(weight, torch.Tensor)
    module = module.to_empty(device=weight.device)
    with torch.no_grad():
        module.weight.copy_(weight.detach().t())
    module.weight.requires_grad_(weight.requires_grad)
    return module
