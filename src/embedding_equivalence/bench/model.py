"""The roofline model: what each form should cost in time and in memory, from its shapes.

[`MODEL_FORMULAS`][] states each model as text (it is saved in ``bench.json``);
[`model_time`][] evaluates it with a machine's
[`Calibration`][embedding_equivalence.bench.calibration.Calibration], and
[`analytic_memory_bytes`][] counts the bytes a call allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..forms.validation import format_bytes
from .calibration import Calibration, gemm_k
from .timing import MODES, Mode

__all__ = ["MODEL_FORMULAS", "ModelTime", "analytic_memory_bytes", "model_time"]

_GATHER = "2*N*D*s / B(2*N*D*s)"
_DENSE_GRAD = " + V*D*s / Z(V*D*s) + 3*N*D*s / B(3*N*D*s)"
_ONE_HOT = "N*V*s / Z(N*V*s) + 2*N*V*D / F_fwd(N, D)"
_ONE_HOT_BWD = " + 2*N*V*D / F_bwd(N, D)"

#: The model of each form and mode, as text (``s``: itemsize; ``B``, ``Z``: copy and zero-fill
#: bandwidth at that many bytes; ``F``: GEMM throughput at ``(N, D)``). See [`model_time`][].
MODEL_FORMULAS: dict[str, dict[str, str]] = {
    "lookup": {"fwd": _GATHER, "fwd+bwd": _GATHER + _DENSE_GRAD},
    "lookup_sparse_grad": {"fwd": _GATHER, "fwd+bwd": _GATHER},
    "one_hot": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "linear": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "sparse_mm": {"fwd": _GATHER, "fwd+bwd": _GATHER + _DENSE_GRAD},
}


@dataclass(frozen=True)
class ModelTime:
    """The model time of one case: the sum of its terms.

    Attributes:
        seconds: the total, ``overhead + roofline``.
        roofline: the bandwidth and throughput terms alone.
        overhead: the fixed cost per call of the form (see [`Calibration`][]).
        terms: ``(description, seconds)`` per term, e.g.
            ``("gather 2.0 MiB at 21.3 GB/s", 9.8e-05)``.
    """

    seconds: float
    roofline: float
    overhead: float
    terms: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        """The terms as one line, e.g. ``"gather 2.0 MiB at 21.3 GB/s: 0.098 ms"``.

        Returns:
            The terms joined by ``" + "``.
        """
        return " + ".join(f"{what}: {t * 1e3:.3g} ms" for what, t in self.terms)


def model_time(
    model: str,
    mode: Mode,
    num_ids: int,
    vocab: int,
    dim: int,
    itemsize: int,
    calibration: Calibration,
) -> ModelTime:
    """The model time of one case: the form's fixed cost per call plus its roofline.

    Memory-bound terms are ``bytes / bandwidth`` with the bandwidth measured at that byte count;
    compute-bound terms are ``FLOP / throughput``. With ``s = itemsize`` (formulas in
    [`MODEL_FORMULAS`][]):

    - gather (lookup and sparse matmul forward): ``2·N·D·s`` bytes at the copy bandwidth;
    - dense gradient (backward of the lookup and the sparse matmul): a zeroed ``V·D·s`` buffer
      at the zero-fill bandwidth, plus a scatter-add of ``3·N·D·s`` bytes at the copy bandwidth;
    - sparse gradient: nothing (its values and indices are views of ``G`` and of the ids);
    - one-hot matmul and linear: building the one-hot, ``N·V·s`` bytes at the zero-fill
      bandwidth, plus ``2·N·V·D`` FLOP at the forward GEMM throughput, plus as many at the
      backward GEMM throughput for forward+backward (both measured at ``K = gemm_k(N, V, s)``).

    Args:
        model: a key of [`MODEL_FORMULAS`][].
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``, the number of ids.
        vocab: ``V``, the rows of the weight.
        dim: ``D``, the columns of the weight.
        itemsize: ``s``, bytes per element of the weight's dtype.
        calibration: the measured bandwidths, throughputs and per-call costs.

    Returns:
        The [`ModelTime`][].

    Raises:
        ValueError: an unknown ``model`` or ``mode``.
    """
    if model not in MODEL_FORMULAS:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODEL_FORMULAS)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    n, v, d, s = num_ids, vocab, dim, itemsize
    terms: list[tuple[str, float]] = []

    def memory(what: str, nbytes: int, bandwidth: Callable[[float], float]) -> None:
        bw = bandwidth(nbytes)
        terms.append((f"{what} {format_bytes(nbytes)} at {bw / 1e9:.3g} GB/s", nbytes / bw))

    def gemm(what: str, which: str) -> None:
        rate = calibration.gemm_flops(n, gemm_k(n, v, s), d, which)
        flops = 2 * n * v * d
        terms.append((f"{what} {flops:.3g} FLOP at {rate / 1e9:.3g} GFLOP/s", flops / rate))

    if model in ("one_hot", "linear"):
        memory("build one-hot", n * v * s, calibration.zero_fill_bandwidth)
        gemm("GEMM", "fwd")
        if mode == "fwd+bwd":
            gemm("GEMM one_hot.T @ G", "bwd")
    else:
        memory("gather", 2 * n * d * s, calibration.copy_bandwidth)
        if mode == "fwd+bwd" and model != "lookup_sparse_grad":
            memory("zero grad", v * d * s, calibration.zero_fill_bandwidth)
            memory("scatter-add", 3 * n * d * s, calibration.copy_bandwidth)
    roofline = sum(t for _, t in terms)
    overhead = calibration.call_overhead(model, mode)
    if overhead:
        terms.insert(0, ("call overhead", overhead))
    return ModelTime(overhead + roofline, roofline, overhead, tuple(terms))


def analytic_memory_bytes(
    model: str, mode: Mode, num_ids: int, vocab: int, dim: int, itemsize: int
) -> int:
    """The memory one call allocates beyond its inputs, counted from the shapes.

    The output ``N·D·s``; the dense one-hot ``N·V·s`` (kept for the backward); a dense gradient
    ``V·D·s``; the sparse one-hot's indices and values ``N·(2·8 + s)``. A sparse gradient
    adds nothing: its values and indices are views of the upstream gradient and of the ids.

    Args:
        model: which form, a key of [`MODEL_FORMULAS`][].
        mode: ``"fwd"``, or ``"fwd+bwd"``, which adds the gradient.
        num_ids: ``N``, the rows of the output and of a one-hot.
        vocab: ``V``, the columns of a one-hot and the rows of a dense gradient.
        dim: ``D``, the columns of the output and of a dense gradient.
        itemsize: ``s``, bytes per element of the weight's dtype.

    Returns:
        Bytes.

    Raises:
        ValueError: an unknown ``model``.
    """
    if model not in MODEL_FORMULAS:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODEL_FORMULAS)}")
    n, v, d, s = num_ids, vocab, dim, itemsize
    total = n * d * s
    dense_grad = v * d * s if mode == "fwd+bwd" else 0
    if model in ("one_hot", "linear"):
        total += n * v * s + dense_grad
    elif model == "sparse_mm":
        total += n * (2 * 8 + s) + dense_grad
    elif model == "lookup":
        total += dense_grad
    return total
