r"""The exact float64 reference and the error bounds that the candidates are held to.

The oracle is written from the definitions, with Python's exactly rounded ``math.fsum`` for
every sum, and never calls an embedding kernel, so a bug in torch's own kernels is caught too.

**Forward.** ``out[n] = W[ids[n]]`` copies a row: no arithmetic, so a correct forward is
exact and the bound is zero. With ``max_norm`` the referenced rows are first rescaled to
``r * max_norm / (||r||_p + 1e-7)`` when ``||r||_p > max_norm``; the candidate computes the
norm in floating point, so there the bound is relative (see :func:`renorm_error_bound`).

**Backward.** Row ``v`` of the weight's gradient is the sum of the ``k = count(v)`` upstream
gradient rows whose id is ``v``:

.. math:: g_v = \sum_{n:\,\mathrm{ids}_n = v} G_n .

Any order of ``k - 1`` floating-point additions with unit roundoff at most ``u``, followed by
at most one rounding to the output dtype, satisfies the recursive-summation bound (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 4.4 and Lemma 3.1):

.. math:: |\hat g_v - g_v| \le \gamma_k \sum_n |G_n|, \qquad
          \gamma_k = \frac{k u}{1 - k u}\quad (k u < 1).

``scale_grad_by_freq`` divides by ``k``: one rounding of ``1/k`` and one of the product (or of
each scaled term) add two to the count, giving ``gamma_{k+2}``. The oracle itself rounds
twice in float64 (the correctly rounded ``fsum`` and the division), which adds
``2 u_{64} \sum |G_n| / k``; and a result in the subnormal range can lose up to half the
smallest subnormal per rounding. Every gradient entry is therefore held to

.. math:: |\hat g_{v,d} - g_{v,d}| \le \big(\gamma_{k+s}(u) + 2 u_{64}\big)
          \frac{\sum_n |G_{n,d}|}{c} + (k + s)\,\eta ,

with ``s = 2, c = k`` under ``scale_grad_by_freq`` (else ``s = 0, c = 1``), ``u`` the unit
roundoff of the dtype (``eps / 2``: ``2^-11`` for float16, ``2^-8`` for bfloat16, ``2^-24``
for float32, ``2^-53`` for float64) and ``eta`` half its smallest subnormal. The padding row
and rows that no id references must be exactly zero. Nothing here is tuned by hand.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

__all__ = [
    "gamma",
    "gradient_error_bound",
    "reference_embedding",
    "reference_embedding_grad",
    "renorm_error_bound",
    "unit_roundoff",
]

_U64 = 2.0**-53


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff ``u = eps / 2`` of a floating dtype: the largest relative rounding error.

    Args:
        dtype: a floating ``torch.dtype``.

    Returns:
        ``2**-11`` for float16, ``2**-8`` for bfloat16, ``2**-24`` for float32, ``2**-53`` for
        float64.

    Raises:
        TypeError: ``dtype`` is not floating point.
    """
    if not dtype.is_floating_point:
        raise TypeError(f"unit_roundoff: {dtype} is not a floating dtype")
    return torch.finfo(dtype).eps / 2


def gamma(k: int, u: float) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``; ``inf`` when ``k u >= 1`` (no bound exists).

    Args:
        k: number of roundings.
        u: unit roundoff.

    Returns:
        The constant of the recursive-summation bound.
    """
    ku = k * u
    return math.inf if ku >= 1 else ku / (1 - ku)


def _flat_ids(input: torch.Tensor) -> list[int]:
    return [int(i) for i in input.detach().reshape(-1).cpu().tolist()]


def _norm(row: list[float], p: float) -> float:
    if math.isinf(p):
        return max((abs(x) for x in row), default=0.0)
    if p == 1:
        return math.fsum(abs(x) for x in row)
    if p == 2:
        return math.sqrt(math.fsum(x * x for x in row))
    return math.fsum(abs(x) ** p for x in row) ** (1 / p)


def reference_embedding(
    input: torch.Tensor,
    weight: torch.Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact forward in float64 on the CPU, and the table after ``max_norm``'s renorm.

    ``padding_idx`` does not change the forward (the padding row is looked up like any other);
    it is accepted so that a call's keyword arguments can be passed through unchanged.

    Args:
        input: ids of any shape ``(*batch)``, all in ``[0, V)``.
        weight: ``(V, D)`` floating table (not modified).
        padding_idx: ignored by the forward.
        max_norm: rescale the referenced rows whose ``norm_type``-norm exceeds it.
        norm_type: the ``p`` of the p-norm.

    Returns:
        ``(out, table)``: ``out`` of shape ``(*batch, D)`` and the (renormalized) ``(V, D)``
        table, both float64 on the CPU.
    """
    del padding_idx
    table = weight.detach().to(device="cpu", dtype=torch.float64).clone()
    ids = _flat_ids(input)
    if max_norm is not None:
        for v in sorted(set(ids)):
            row = table[v].tolist()
            norm = _norm(row, norm_type)
            if norm > max_norm:
                scale = max_norm / (norm + 1e-7)
                table[v] = torch.tensor([x * scale for x in row], dtype=torch.float64)
    rows = [table[v] for v in ids]
    dim = table.shape[1]
    out = torch.stack(rows) if rows else torch.zeros(0, dim, dtype=torch.float64)
    return out.reshape(*input.shape, dim), table


def reference_embedding_grad(
    input: torch.Tensor,
    grad_output: torch.Tensor,
    num_embeddings: int,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The weight's gradient in float64, with exactly rounded row sums.

    Args:
        input: ids of any shape ``(*batch)``.
        grad_output: upstream gradient ``(*batch, D)``.
        num_embeddings: ``V``.
        padding_idx: row whose gradient is zero (negative counts from the end).
        scale_grad_by_freq: divide row ``v`` by ``count(v)``.

    Returns:
        ``(grad, abs_sum, count)``: the ``(V, D)`` gradient, the ``(V, D)`` sums of
        ``|grad_output|`` that the error bound scales with (already divided by the count
        under ``scale_grad_by_freq``), and the ``(V,)`` id counts, all on the CPU.
    """
    ids = _flat_ids(input)
    dim = grad_output.shape[-1] if grad_output.dim() > 0 else 0
    g = grad_output.detach().to(device="cpu", dtype=torch.float64).reshape(len(ids), dim)
    rows = g.tolist()
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num_embeddings
    groups: dict[int, list[int]] = defaultdict(list)
    for n, v in enumerate(ids):
        groups[v].append(n)
    grad = torch.zeros(num_embeddings, dim, dtype=torch.float64)
    abs_sum = torch.zeros(num_embeddings, dim, dtype=torch.float64)
    count = torch.zeros(num_embeddings, dtype=torch.int64)
    for v, positions in groups.items():
        count[v] = len(positions)
        if v == padding_idx:
            continue
        divisor = len(positions) if scale_grad_by_freq else 1
        grad[v] = torch.tensor(
            [math.fsum(rows[n][d] for n in positions) / divisor for d in range(dim)],
            dtype=torch.float64,
        )
        abs_sum[v] = torch.tensor(
            [math.fsum(abs(rows[n][d]) for n in positions) / divisor for d in range(dim)],
            dtype=torch.float64,
        )
    return grad, abs_sum, count


def gradient_error_bound(
    input: torch.Tensor,
    grad_output: torch.Tensor,
    num_embeddings: int,
    dtype: torch.dtype,
    padding_idx: int | None = None,
    scale_grad_by_freq: bool = False,
) -> torch.Tensor:
    """Per-element bound on ``|grad - exact|`` for a ``(V, D)`` embedding gradient in ``dtype``.

    ``(gamma_{k+s}(u) + 2 u_64) * sum_n |G[n, d]| / c + (k + s) * eta`` for row ``v`` with
    ``k = count(v)``; see the module documentation for the derivation. Zero for the padding row
    and for rows that no id references (their gradient must be exactly zero).

    Args:
        input: ids of any shape ``(*batch)``.
        grad_output: upstream gradient ``(*batch, D)``.
        num_embeddings: ``V``.
        dtype: dtype in which the candidate computes the gradient.
        padding_idx: row that must have an exactly zero gradient.
        scale_grad_by_freq: whether the gradient is divided by the id counts.

    Returns:
        ``(V, D)`` float64 tensor of bounds on the CPU.
    """
    _, abs_sum, count = reference_embedding_grad(
        input, grad_output, num_embeddings, padding_idx, scale_grad_by_freq
    )
    u = unit_roundoff(dtype)
    eta = float(torch.finfo(dtype).smallest_normal) * torch.finfo(dtype).eps / 2
    extra = 2 if scale_grad_by_freq else 0
    k = count.to(torch.float64) + extra
    gam = torch.tensor([gamma(int(x), u) for x in k.tolist()], dtype=torch.float64)
    bound = (gam + 2 * _U64)[:, None] * abs_sum + (k * eta)[:, None]
    bound[count == 0] = 0.0
    if padding_idx is not None:
        bound[padding_idx] = 0.0
    return bound


def renorm_error_bound(
    weight: torch.Tensor, max_norm: float, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Per-element bound on a row renormalized by ``max_norm`` (relative to the original row).

    The candidate computes ``||r||_p`` with at most ``D`` roundings in the accumulation and one
    to the dtype (relative error ``gamma_{D+1}``), then multiplies by the scale (one more
    rounding, and one for the scale itself): ``gamma_{D+3}(u) |r|``. When ``||r||_p`` lies
    within that error of ``max_norm`` the candidate and the oracle may disagree on whether to
    rescale at all; the scale then differs from 1 by at most that error plus
    ``1e-7 / max_norm``, which is added. Plus ``2 u_64`` for the oracle's own roundings.

    Args:
        weight: the ``(V, D)`` table before the renorm.
        max_norm: the renorm threshold.
        dtype: dtype the candidate works in (default: the weight's).

    Returns:
        ``(V, D)`` float64 bounds on the CPU.
    """
    dt = dtype or weight.dtype
    dim = weight.shape[1]
    rel = gamma(dim + 3, unit_roundoff(dt)) + 2 * _U64
    if max_norm > 0:
        rel += 1e-7 / max_norm
    w = weight.detach().to(device="cpu", dtype=torch.float64).abs()
    return rel * w
