"""``MatmulEmbedding`` against ``nn.Embedding``, and the Embedding <-> Linear conversions.

Module constructors draw their initial weights from torch's global generator; every test here
runs inside ``torch.random.fork_rng()`` (the autouse fixture below), so the suite leaves the
global RNG state as it found it, and tests that compare initialisations seed it explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from embedding_equivalence import MatmulEmbedding, embedding_to_linear, linear_to_embedding


@pytest.fixture(autouse=True)
def _restore_global_rng() -> Iterator[None]:
    """Leave torch's global RNG as it was: module constructors and conversions draw from it."""
    with torch.random.fork_rng():
        yield


def seeded_pair(seed: int, *args: object, **kwargs: object) -> tuple[nn.Embedding, MatmulEmbedding]:
    """``nn.Embedding(*args, **kwargs)`` and ``MatmulEmbedding(*args, **kwargs)`` from one seed."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        embedding = nn.Embedding(*args, **kwargs)  # type: ignore[arg-type]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        matmul = MatmulEmbedding(*args, **kwargs)  # type: ignore[arg-type]
    return embedding, matmul


def table(v: int, d: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    """A ``(v, d)`` table of distinct quarter-integers, exact in every float dtype."""
    return ((torch.arange(v * d, dtype=torch.float64) - 5) / 4).reshape(v, d).to(device, dtype)


OPTIONS = [
    pytest.param({}, id="defaults"),
    pytest.param({"padding_idx": 0}, id="padding_idx0"),
    pytest.param({"padding_idx": -1}, id="padding_idx-1"),
    pytest.param({"max_norm": 1.0}, id="max_norm"),
    pytest.param({"max_norm": 2.0, "norm_type": 1.0}, id="max_norm_p1"),
    pytest.param({"max_norm": 1.0, "norm_type": float("inf")}, id="max_norm_pinf"),
    pytest.param({"scale_grad_by_freq": True}, id="scale_grad_by_freq"),
    pytest.param(
        {"padding_idx": 2, "max_norm": 1.5, "norm_type": 3.0, "scale_grad_by_freq": True},
        id="all",
    ),
]

ATTRIBUTES = [
    "num_embeddings",
    "embedding_dim",
    "padding_idx",
    "max_norm",
    "norm_type",
    "scale_grad_by_freq",
    "sparse",
]

# --------------------------------------------------------------------------------------------
# MatmulEmbedding is a drop-in for nn.Embedding


@pytest.mark.parametrize("options", OPTIONS)
def test_same_constructor_arguments_and_attributes(options: dict[str, object]) -> None:
    embedding, matmul = seeded_pair(0, 7, 3, **options)
    for name in ATTRIBUTES:
        assert getattr(matmul, name) == getattr(embedding, name), name


@pytest.mark.parametrize("options", OPTIONS)
def test_extra_repr_equals_nn_embedding(options: dict[str, object]) -> None:
    embedding, matmul = seeded_pair(0, 7, 3, **options)
    assert matmul.extra_repr() == embedding.extra_repr()
    assert repr(matmul) == "Matmul" + repr(embedding)


@pytest.mark.parametrize("options", OPTIONS)
def test_same_init_under_the_same_seed(
    options: dict[str, object], embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    embedding, matmul = seeded_pair(1234, 10, 4, device=device, dtype=float_dtype, **options)
    assert matmul.weight.dtype == float_dtype
    assert matmul.weight.device.type == device
    assert matmul.weight.requires_grad
    assert isinstance(matmul.weight, nn.Parameter)
    assert torch.equal(matmul.weight, embedding.weight)


@pytest.mark.parametrize("padding_idx", [0, 3, -1], ids=lambda p: f"pad{p}")
def test_padding_row_is_zeroed_at_init(padding_idx: int) -> None:
    _, matmul = seeded_pair(5, 6, 4, padding_idx=padding_idx)
    row = padding_idx % 6
    assert torch.equal(matmul.weight[row], torch.zeros(4))
    others = [v for v in range(6) if v != row]
    assert bool((matmul.weight[others] != 0).all())


def test_reset_parameters_draws_like_nn_embedding() -> None:
    embedding, matmul = seeded_pair(0, 6, 4, padding_idx=1)
    with torch.random.fork_rng():
        torch.manual_seed(99)
        embedding.reset_parameters()
    with torch.random.fork_rng():
        torch.manual_seed(99)
        matmul.reset_parameters()
    assert torch.equal(matmul.weight, embedding.weight)


def test_state_dict_keys_and_values_are_interchangeable() -> None:
    embedding, _ = seeded_pair(0, 6, 4, padding_idx=2)
    _, matmul = seeded_pair(1, 6, 4, padding_idx=2)
    assert list(matmul.state_dict()) == list(embedding.state_dict()) == ["weight"]
    assert not torch.equal(matmul.weight, embedding.weight)

    matmul.load_state_dict(embedding.state_dict())  # strict by default
    assert torch.equal(matmul.weight, embedding.weight)

    other, _ = seeded_pair(2, 6, 4, padding_idx=2)
    other.load_state_dict(matmul.state_dict())
    assert torch.equal(other.weight, matmul.weight)
    assert other.weight.data_ptr() != matmul.weight.data_ptr()  # load_state_dict copies


def test_parameters_are_named_like_nn_embedding() -> None:
    embedding, matmul = seeded_pair(0, 6, 4)
    matmul_names = [(n, p.shape) for n, p in matmul.named_parameters()]
    embedding_names = [(n, p.shape) for n, p in embedding.named_parameters()]
    assert matmul_names == embedding_names
    assert list(matmul.buffers()) == []


@pytest.mark.parametrize("options", OPTIONS)
def test_forward_and_gradient_equal_nn_embedding(
    options: dict[str, object], embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    embedding, matmul = seeded_pair(7, 6, 4, device=device, dtype=float_dtype, **options)
    # Off the CPU with max_norm, the reference is nn.Embedding on the CPU: torch's CUDA renorm
    # (2.11) leaves rows unchanged with norm_type=inf (benchmarks/cuda_renorm_probe.py). The
    # renorm off the CPU takes the norms all at once, so the renormed rows are close, not equal.
    renorm_elsewhere = device != "cpu" and "max_norm" in options
    if renorm_elsewhere:
        embedding = embedding.cpu()
    # Counts 1, 2 and 4 (and integer gradients): every sum and every 1/count is exact.
    ids = torch.tensor([[1, 4, 1, 2], [4, 4, 4, 5]], device=device)
    grad_out = torch.arange(8 * 4).reshape(2, 4, 4).to(device, float_dtype) % 9
    out = matmul(ids)
    expected = embedding(ids.to(embedding.weight.device))
    assert out.dtype == expected.dtype
    # max_norm renormalizes both tables in place in the same way.
    if renorm_elsewhere:
        torch.testing.assert_close(out.cpu(), expected)
        torch.testing.assert_close(matmul.weight.cpu(), embedding.weight)
    else:
        assert torch.equal(out, expected)
        assert torch.equal(matmul.weight, embedding.weight)
    out.backward(grad_out)
    expected.backward(grad_out.to(expected.device))
    assert matmul.weight.grad is not None
    assert embedding.weight.grad is not None
    assert torch.equal(matmul.weight.grad.cpu(), embedding.weight.grad.cpu())


def test_training_step_matches_nn_embedding() -> None:
    embedding, matmul = seeded_pair(3, 6, 4, padding_idx=0)
    ids = torch.tensor([[0, 1, 2], [2, 5, 0]])
    target = torch.arange(24.0).reshape(2, 3, 4) / 8
    for module in (embedding, matmul):
        optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
        loss = (module(ids) - target).square().sum()
        loss.backward()
        optimizer.step()
    assert torch.equal(matmul.weight, embedding.weight)
    assert torch.equal(matmul.weight[0], torch.zeros(4))  # padding row: zero and never updated


def test_sparse_true_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^MatmulEmbedding\(sparse=True\): .*sparse=True"):
        MatmulEmbedding(6, 4, sparse=True)


def test_padding_idx_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^MatmulEmbedding: padding_idx=6 "):
        MatmulEmbedding(6, 4, padding_idx=6)


def test_weight_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^MatmulEmbedding: _weight has shape \(4, 6\)"):
        MatmulEmbedding(6, 4, _weight=torch.zeros(4, 6))


@pytest.mark.parametrize("freeze", [True, False], ids=["frozen", "trainable"])
def test_from_pretrained(freeze: bool) -> None:
    weights = table(5, 3)
    matmul = MatmulEmbedding.from_pretrained(weights, freeze=freeze, padding_idx=1)
    embedding = nn.Embedding.from_pretrained(weights, freeze=freeze, padding_idx=1)
    assert isinstance(matmul, MatmulEmbedding)
    assert matmul.weight.requires_grad is (not freeze)
    assert matmul.weight.requires_grad == embedding.weight.requires_grad
    assert torch.equal(matmul.weight, weights)  # the padding row is not zeroed, as in torch
    # Like nn.Embedding.from_pretrained, the table becomes the parameter's data (no copy).
    assert matmul.weight.data_ptr() == weights.data_ptr() == embedding.weight.data_ptr()
    for name in ATTRIBUTES:
        assert getattr(matmul, name) == getattr(embedding, name), name
    ids = torch.tensor([4, 1, 0])
    assert torch.equal(matmul(ids), embedding(ids))


def test_from_pretrained_default_is_frozen() -> None:
    matmul = MatmulEmbedding.from_pretrained(table(5, 3))
    assert not matmul.weight.requires_grad


def test_from_pretrained_options_carry_over() -> None:
    weights = table(5, 3)
    matmul = MatmulEmbedding.from_pretrained(
        weights, padding_idx=-1, max_norm=2.0, norm_type=1.0, scale_grad_by_freq=True
    )
    embedding = nn.Embedding.from_pretrained(
        weights.clone(), padding_idx=-1, max_norm=2.0, norm_type=1.0, scale_grad_by_freq=True
    )
    assert matmul.extra_repr() == embedding.extra_repr()


@pytest.mark.parametrize("shape", [(5,), (2, 5, 3)], ids=["1d", "3d"])
def test_from_pretrained_not_2d(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"^MatmulEmbedding\.from_pretrained: .*2-D"):
        MatmulEmbedding.from_pretrained(torch.zeros(shape))


def test_from_pretrained_sparse_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^MatmulEmbedding\(sparse=True\)"):
        MatmulEmbedding.from_pretrained(table(5, 3), sparse=True)


# --------------------------------------------------------------------------------------------
# embedding_to_linear / linear_to_embedding


def embedding_from(weights: torch.Tensor, requires_grad: bool = True) -> nn.Embedding:
    embedding = nn.Embedding.from_pretrained(weights, freeze=not requires_grad)
    return embedding


def linear_from(weight: torch.Tensor, requires_grad: bool = True) -> nn.Linear:
    """``nn.Linear(V, D, bias=False)`` whose ``(D, V)`` weight is ``weight``."""
    out_features, in_features = weight.shape
    linear = nn.Linear(
        in_features, out_features, bias=False, device=weight.device, dtype=weight.dtype
    )
    with torch.no_grad():
        linear.weight.copy_(weight)
    linear.weight.requires_grad_(requires_grad)
    return linear


@pytest.mark.parametrize("kind", ["nn.Embedding", "MatmulEmbedding"])
def test_embedding_to_linear_shape_values_and_dtype(
    kind: str, embedding_device_dtype: tuple[str, torch.dtype]
) -> None:
    device, float_dtype = embedding_device_dtype
    weights = table(6, 4, float_dtype, device)
    embedding: nn.Module = (
        embedding_from(weights)
        if kind == "nn.Embedding"
        else MatmulEmbedding.from_pretrained(weights, freeze=False)
    )
    linear = embedding_to_linear(embedding)  # type: ignore[arg-type]
    assert isinstance(linear, nn.Linear)
    assert linear.bias is None
    assert (linear.in_features, linear.out_features) == (6, 4)
    assert linear.weight.shape == (4, 6)
    assert linear.weight.dtype == float_dtype
    assert linear.weight.device.type == device
    assert linear.weight.is_contiguous()
    assert torch.equal(linear.weight, weights.T)
    # The point of the conversion: the linear layer on the one-hot is the embedding.
    ids = torch.tensor([[5, 0, 2], [2, 2, 1]], device=device)
    one_hot = F.one_hot(ids, 6).to(float_dtype)
    assert torch.equal(linear(one_hot), embedding(ids))


def test_linear_to_embedding_shape_values_and_dtype(
    embedding_device_dtype: tuple[str, torch.dtype],
) -> None:
    device, float_dtype = embedding_device_dtype
    weight = table(4, 6, float_dtype, device)  # (D, V) = (4, 6)
    linear = linear_from(weight)
    embedding = linear_to_embedding(linear)
    assert type(embedding) is nn.Embedding
    assert (embedding.num_embeddings, embedding.embedding_dim) == (6, 4)
    assert embedding.weight.shape == (6, 4)
    assert embedding.weight.dtype == float_dtype
    assert embedding.weight.device.type == device
    assert torch.equal(embedding.weight, weight.T)
    ids = torch.tensor([3, 0, 5, 5], device=device)
    assert torch.equal(embedding(ids), linear(F.one_hot(ids, 6).to(float_dtype)))


def test_embedding_to_linear_does_not_share_storage() -> None:
    embedding = embedding_from(table(6, 4))
    linear = embedding_to_linear(embedding)
    assert linear.weight.data_ptr() != embedding.weight.data_ptr()
    before = linear.weight.detach().clone()
    with torch.no_grad():
        embedding.weight.add_(1.0)
    assert torch.equal(linear.weight, before)
    with torch.no_grad():
        linear.weight.mul_(2.0)
    assert torch.equal(embedding.weight, table(6, 4) + 1.0)


def test_linear_to_embedding_does_not_share_storage() -> None:
    linear = linear_from(table(4, 6))
    embedding = linear_to_embedding(linear)
    assert embedding.weight.data_ptr() != linear.weight.data_ptr()
    before = embedding.weight.detach().clone()
    with torch.no_grad():
        linear.weight.add_(1.0)
    assert torch.equal(embedding.weight, before)
    with torch.no_grad():
        embedding.weight.mul_(2.0)
    assert torch.equal(linear.weight, table(4, 6) + 1.0)


def test_embedding_to_linear_training_step_leaves_the_embedding() -> None:
    embedding = embedding_from(table(6, 4))
    linear = embedding_to_linear(embedding)
    optimizer = torch.optim.SGD(linear.parameters(), lr=1.0)
    linear(torch.eye(6)).sum().backward()
    optimizer.step()
    assert torch.equal(linear.weight, table(6, 4).T - 1.0)
    assert torch.equal(embedding.weight, table(6, 4))


@pytest.mark.parametrize("requires_grad", [True, False], ids=["trainable", "frozen"])
def test_requires_grad_carries_over(requires_grad: bool) -> None:
    linear = embedding_to_linear(embedding_from(table(6, 4), requires_grad=requires_grad))
    assert linear.weight.requires_grad is requires_grad
    embedding = linear_to_embedding(linear_from(table(4, 6), requires_grad=requires_grad))
    assert embedding.weight.requires_grad is requires_grad


def test_conversions_return_leaf_parameters() -> None:
    embedding = embedding_from(table(6, 4))
    linear = embedding_to_linear(embedding)
    back = linear_to_embedding(linear)
    for parameter in (linear.weight, back.weight):
        assert isinstance(parameter, nn.Parameter)
        assert parameter.is_leaf
        assert parameter.grad_fn is None


def test_round_trip_is_identity(embedding_device_dtype: tuple[str, torch.dtype]) -> None:
    device, float_dtype = embedding_device_dtype
    weights = table(6, 4, float_dtype, device)
    embedding = embedding_from(weights)
    back = linear_to_embedding(embedding_to_linear(embedding))
    assert torch.equal(back.weight, embedding.weight)
    assert back.weight.dtype == float_dtype
    assert back.weight.data_ptr() != embedding.weight.data_ptr()

    linear = linear_from(table(4, 6, float_dtype, device))
    linear_back = embedding_to_linear(linear_to_embedding(linear))
    assert torch.equal(linear_back.weight, linear.weight)


def test_linear_with_bias_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^linear_to_embedding: .*bias"):
        linear_to_embedding(nn.Linear(6, 4))


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(lambda: nn.Linear(6, 4, bias=False), id="Linear"),
        pytest.param(lambda: nn.EmbeddingBag(6, 4), id="EmbeddingBag"),
        pytest.param(lambda: table(6, 4), id="Tensor"),
    ],
)
def test_embedding_to_linear_wrong_type(module: object) -> None:
    with pytest.raises(TypeError, match=r"^embedding_to_linear: expected nn\.Embedding"):
        embedding_to_linear(module())  # type: ignore[operator]


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(lambda: nn.Embedding(6, 4), id="Embedding"),
        pytest.param(lambda: MatmulEmbedding(6, 4), id="MatmulEmbedding"),
        pytest.param(lambda: table(4, 6), id="Tensor"),
    ],
)
def test_linear_to_embedding_wrong_type(module: object) -> None:
    with pytest.raises(TypeError, match=r"^linear_to_embedding: expected nn\.Linear"):
        linear_to_embedding(module())  # type: ignore[operator]


# --------------------------------------------------------------------------------------------
# The seed notebook's pitfall, which embedding_to_linear avoids


@pytest.mark.parametrize(
    "notebook_parameter",
    [
        pytest.param(lambda w: nn.Parameter(w.T), id="Parameter(weight.T)"),
        pytest.param(lambda w: nn.Parameter(w.T.detach()), id="Parameter(weight.T.detach())"),
    ],
)
def test_notebook_parameter_transpose_aliases_storage(notebook_parameter: object) -> None:
    embedding = embedding_from(table(4, 5))
    linear = linear_from(torch.zeros(5, 4))
    # The seed notebook: linear.weight = torch.nn.Parameter(embedding.weight.T.detach())
    linear.weight = notebook_parameter(embedding.weight)  # type: ignore[operator]
    assert linear.weight.data_ptr() == embedding.weight.data_ptr()  # a transpose is a view
    assert not linear.weight.is_contiguous()
    # A training step of the linear layer silently moves the embedding too.
    optimizer = torch.optim.SGD(linear.parameters(), lr=1.0)
    linear(torch.eye(4)).sum().backward()
    optimizer.step()
    assert torch.equal(embedding.weight, table(4, 5) - 1.0)
    # ... which the conversion does not do.
    converted = embedding_to_linear(embedding)
    assert converted.weight.data_ptr() != embedding.weight.data_ptr()
