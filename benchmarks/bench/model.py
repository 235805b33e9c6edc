"""The roofline model: what each form should cost in time and in memory, from its shapes.

[`MODEL_FORMULAS`][] states each model as text (it is saved in ``bench.json``);
[`model_time`][] evaluates it with a machine's
[`Calibration`][bench.calibration.Calibration], and
[`analytic_memory_bytes`][] counts the bytes a call allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from embedding_equivalence.forms.memory import format_bytes

from .calibration import Calibration, gemm_k
from .timing import MODES, Mode

__all__ = ["MODEL_FORMULAS", "ModelTime", "analytic_memory_bytes", "model_time"]

_GATHER = "N*gather(D*s, V*D*s)"
_DENSE_GRAD = " + V*D*s / Z(V*D*s) + N*scatter_add(D*s, V*D*s)"
_SPARSE = "N*sparse_rows(D*s, V*D*s)"
_SPARSE_BWD = " + 2*V*D*s / Z2(V*D*s) + N*sparse_rows_t(D*s, V*D*s)"
_ONE_HOT = "N*V*s / Z(N*V*s) + 2*N*V*D / F_fwd(N, D)"
_ONE_HOT_BWD = " + 2*N*V*D / F_bwd(N, D)"

#: The model of each form and mode, as text, without the form's fixed cost per call ``c``
#: which every model adds (``s``: itemsize; ``gather``, ``scatter_add``, ``sparse_rows``,
#: ``sparse_rows_t``: seconds per row of that primitive of
#: [`ROW_PRIMITIVES`][bench.calibration.ROW_PRIMITIVES], for rows of
#: ``D*s`` bytes of a ``V*D*s``-byte table; ``Z``: zero-fill bandwidth at that many bytes,
#: ``Z2`` of two such buffers zeroed one after the other;
#: ``F``: GEMM throughput at ``(N, D)``). See [`model_time`][].
MODEL_FORMULAS: dict[str, dict[str, str]] = {
    "lookup": {"fwd": _GATHER, "fwd+bwd": _GATHER + _DENSE_GRAD},
    "lookup_sparse_grad": {"fwd": _GATHER, "fwd+bwd": _GATHER},
    "one_hot": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "linear": {"fwd": _ONE_HOT, "fwd+bwd": _ONE_HOT + _ONE_HOT_BWD},
    "sparse_mm": {"fwd": _SPARSE, "fwd+bwd": _SPARSE + _SPARSE_BWD},
}


@dataclass(frozen=True)
class ModelTime:
    """The model time of one case: the sum of its terms.

    Attributes:
        seconds: the total, ``overhead + roofline``.
        roofline: the bandwidth and throughput terms alone.
        overhead: the fixed cost per call of the form (see [`Calibration`][]).
        terms: ``(description, seconds)`` per term, e.g.
            ``("gather 1024 rows at 24.5 ns", 2.5e-05)``.
    """

    seconds: float
    roofline: float
    overhead: float
    terms: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        """The terms as one line, e.g. ``"gather 1024 rows at 24.5 ns: 0.0251 ms"``.

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

    With ``s = itemsize``, rows of ``r = D·s`` bytes and a table of ``T = V·D·s`` bytes
    (formulas in [`MODEL_FORMULAS`][]), the terms are:

    - lookup forward: ``N`` rows gathered at random positions of the table, at the measured
      seconds per row ``gather(r, T)``, which follows the row's size and where in the cache
      hierarchy a table of ``T`` bytes lives (rows beyond the calibration's base count at the
      cost measured beyond it, see
      [`rows_seconds`][bench.calibration.Calibration.rows_seconds]);
    - dense gradient (lookup backward): a zeroed ``T``-byte buffer at the zero-fill bandwidth,
      plus ``N`` rows added into it at ``scatter_add(r, T)`` per row;
    - sparse gradient: nothing (its values and indices are views of ``G`` and of the ids);
    - sparse matmul forward: one row per stored one at ``sparse_rows(r, T)`` (torch's
      sparse-dense product, which also zeroes its ``N x D`` output twice); its backward,
      ``one_hot.T @ G``, zeroes two ``V x D`` buffers (``2·T`` bytes at the bandwidth of such
      a pair, ``Z2(T)``) and adds ``N`` rows into one at ``sparse_rows_t(r, T)``;
    - one-hot matmul and linear: building the one-hot, ``N·V·s`` bytes at the zero-fill
      bandwidth, plus ``2·N·V·D`` FLOP at the forward GEMM throughput, plus as many at the
      backward GEMM throughput for forward+backward (both measured at ``K = gemm_k(N, V, s)``).

    A row primitive missing from the calibration (a device without a sparse ``addmm_``, or a
    calibration from before they were measured) is counted as a copy of its rows, ``2·N·r``
    bytes at the copy bandwidth.

    Args:
        model: a key of [`MODEL_FORMULAS`][].
        mode: ``"fwd"`` or ``"fwd+bwd"``.
        num_ids: ``N``, the number of ids.
        vocab: ``V``, the rows of the weight.
        dim: ``D``, the columns of the weight.
        itemsize: ``s``, bytes per element of the weight's dtype.
        calibration: the measured bandwidths, per-row costs, throughputs and per-call costs.

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
    row, table = d * s, v * d * s
    terms: list[tuple[str, float]] = []

    def memory(what: str, nbytes: int, bandwidth: Callable[[float], float]) -> None:
        bw = bandwidth(nbytes)
        terms.append((f"{what} {format_bytes(nbytes)} at {bw / 1e9:.3g} GB/s", nbytes / bw))

    def rows(what: str, primitive: str) -> None:
        seconds = calibration.rows_seconds(primitive, n, row, table)
        if seconds is None:
            memory(f"{what} (as a copy)", 2 * n * row, calibration.copy_bandwidth)
        else:
            terms.append((f"{what} {n} rows at {seconds / n * 1e9:.3g} ns", seconds))

    def gemm(what: str, which: str) -> None:
        rate = calibration.gemm_flops(n, gemm_k(n, v, s), d, which)
        flops = 2 * n * v * d
        terms.append((f"{what} {flops:.3g} FLOP at {rate / 1e9:.3g} GFLOP/s", flops / rate))

    if model in ("one_hot", "linear"):
        memory("build one-hot", n * v * s, calibration.zero_fill_bandwidth)
        gemm("GEMM", "fwd")
        if mode == "fwd+bwd":
            gemm("GEMM one_hot.T @ G", "bwd")
    elif model == "sparse_mm":
        rows("sparse rows", "sparse_rows")
        if mode == "fwd+bwd":
            memory("zero grad x2", 2 * table, lambda _: calibration.zero_pair_bandwidth(table))
            rows("sparse rows into grad", "sparse_rows_t")
    else:
        rows("gather", "gather")
        if mode == "fwd+bwd" and model == "lookup":
            memory("zero grad", table, calibration.zero_fill_bandwidth)
            rows("scatter-add", "scatter_add")
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
