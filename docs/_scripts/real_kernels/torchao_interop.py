"""torchao's int8 embedding, verified: its lookup and its quantizer.

torchao quantizes an ``nn.Embedding`` in place with
``quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)))``:
the weight becomes an ``IntxUnpackedToInt8Tensor`` holding int8 ``qdata`` ``(V, D)`` and one
scale and int8 zero point per row, ``w = (q - zp) * scale``: this package's ``"int8"``
scheme. Two properties make it the embedding function of the table it was given:

1. **the lookup**: its forward is the exact dequantization of its own stored table, looked
   up, within the bound of
   [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]
   ([`torchao_int8_embedding`][] runs torchao's kernel on any drawn table, so that verifier
   checks it directly);
2. **the quantizer**: every element of the stored table is within the scheme's quantization
   bound of the float table it came from (half a step, ``scale / 2``, plus what computing
   ``w / scale`` in float32 may add: ``quantization_error_bound``, here).

[`verify_torchao_embedding`][] checks both on drawn float tables whose rows span many orders
of magnitude, through the same engine, report and replayable counterexample as the other
verifiers. torchao is optional: ``pip install --no-deps torchao`` (its wheel declares no
dependency that this package does not already install); every function here imports it
when called and says how to install it if it is missing.

This is the adapter of the entry ``torchao_int8`` of "Real kernels, verified", beside the
other libraries' adapters; it is not part of the installed package, and reads the package's
engine (its cases, judge and runner) the way the package's own verifiers do. A user verifies
their own int8 kernel with ``verify_quantized_embedding``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from embedding_equivalence._draw.recipes import IdsRecipe as _IdsRecipe
from embedding_equivalence._draw.recipes import WeightRecipe as _WeightRecipe
from embedding_equivalence._draw.tensors import SEEDS as _SEEDS
from embedding_equivalence._draw.tensors import ids_recipes as _ids_recipes
from embedding_equivalence._engine.arguments import DEFAULT_MAX_EXAMPLES as _DEFAULT_MAX_EXAMPLES
from embedding_equivalence._engine.arguments import resolve_arguments as _resolve_arguments
from embedding_equivalence._engine.check import EquivalenceError as _EquivalenceError
from embedding_equivalence._engine.driver import Part as _Part
from embedding_equivalence._engine.driver import Verification as _Verification
from embedding_equivalence._engine.driver import drive as _drive
from embedding_equivalence._engine.report import QuantizedRun as _QuantizedRun
from embedding_equivalence._engine.report import VerificationReport as _VerificationReport
from embedding_equivalence.forms.quantized import QuantizedTable as _QuantizedTable
from embedding_equivalence.forms.quantized import check_scheme as _check_scheme
from embedding_equivalence.forms.quantized import dequantize_rowwise as _dequantize_rowwise
from embedding_equivalence.oracle.bounds import subnormal_loss as _subnormal_loss
from embedding_equivalence.oracle.bounds import unit_roundoff as _unit_roundoff
from embedding_equivalence.oracle.call import Call as _Call
from embedding_equivalence.oracle.quantized import COMPUTE_DTYPE as _COMPUTE_DTYPE
from embedding_equivalence.oracle.quantized import QuantizedOracle as _QuantizedOracle

__all__ = [
    "TORCHAO_INSTALL",
    "quantization_error_bound",
    "quantize_with_torchao",
    "torchao_int8_embedding",
    "unpack_torchao_weight",
    "verify_torchao_embedding",
]

#: How to install torchao next to a CPU build of torch.
TORCHAO_INSTALL = "pip install --no-deps torchao"


def _torchao() -> Any:
    try:
        return importlib.import_module("torchao.quantization")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"real_kernels.torchao_interop needs torchao: {TORCHAO_INSTALL}") from exc


def quantize_with_torchao(weight: torch.Tensor, config: Any = None) -> torch.nn.Embedding:
    """An ``nn.Embedding`` of ``weight``, quantized in place by torchao's ``quantize_``.

    Args:
        weight: the float ``(V, D)`` table.
        config: a torchao config; default
            ``IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))``, one
            scale and zero point per row.

    Returns:
        The module; its ``weight`` is torchao's quantized tensor.
    """
    tq = _torchao()
    if config is None:
        from torchao.quantization.granularity import PerAxis

        config = tq.IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    module = torch.nn.Sequential(torch.nn.Embedding.from_pretrained(weight.detach().clone()))
    tq.quantize_(module, config, filter_fn=lambda m, _: isinstance(m, torch.nn.Embedding))
    return module[0]  # type: ignore[return-value]


def unpack_torchao_weight(weight: Any) -> _QuantizedTable:
    """The ``"int8"`` table that a per-row ``IntxUnpackedToInt8Tensor`` stores.

    Args:
        weight: the ``weight`` of a module quantized by [`quantize_with_torchao`][].

    Returns:
        ``qdata``, the scales as ``(V,)`` and the zero points as int32 ``(V,)``.

    Raises:
        TypeError: ``weight`` is not a per-row int8 torchao tensor.
    """
    qdata = getattr(weight, "qdata", None)
    scale = getattr(weight, "scale", None)
    zero_point = getattr(weight, "zero_point", None)
    if not all(isinstance(t, torch.Tensor) for t in (qdata, scale, zero_point)):
        raise TypeError(
            f"unpack_torchao_weight: expected torchao's IntxUnpackedToInt8Tensor, got "
            f"{type(weight).__name__}; quantize with quantize_with_torchao(weight)"
        )
    assert isinstance(qdata, torch.Tensor)
    assert isinstance(scale, torch.Tensor)
    assert isinstance(zero_point, torch.Tensor)
    v = qdata.shape[0]
    if qdata.dtype != torch.int8 or scale.numel() != v or zero_point.numel() != v:
        raise TypeError(
            f"unpack_torchao_weight: expected int8 data with one scale and zero point per row "
            f"(PerAxis(0)), got {qdata.dtype} data, scale {tuple(scale.shape)} and zero point "
            f"{tuple(zero_point.shape)}"
        )
    return _QuantizedTable(qdata, scale.reshape(v), zero_point.reshape(v).to(torch.int32), "int8")


def torchao_int8_embedding(
    input: torch.Tensor,
    qweight: torch.Tensor,
    scale: torch.Tensor,
    zero_point: torch.Tensor | None,
) -> torch.Tensor:
    """Torchao's embedding of an ``"int8"`` table: ``F.embedding`` on its int8 tensor.

    The table is wrapped in torchao's ``IntxUnpackedToInt8Tensor`` (the tensor that
    ``quantize_`` puts in a quantized ``nn.Embedding``; int8 zero points, zeros for a
    symmetric table), and ``F.embedding`` dispatches to torchao's kernel. The signature is
    the one [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding]
    calls.
    """
    tq = _torchao()
    v, d = qweight.shape
    zp = torch.zeros(v, dtype=torch.int8) if zero_point is None else zero_point.to(torch.int8)
    tensor = tq.IntxUnpackedToInt8Tensor(
        qweight, scale.reshape(v, 1), zp.reshape(v, 1).to(qweight.device), torch.int8,
        (1, d), scale.dtype, None,
    )  # fmt: skip
    return F.embedding(input, tensor)


@dataclass(frozen=True)
class _TorchaoCase:
    """A float table (rows scaled by drawn powers of two) and ids to look up after torchao.

    Attributes:
        table: the ``N(0, 1)`` table before the rows are scaled.
        row_exponents: row ``r`` is multiplied by ``2 ** row_exponents[r % len]``.
        ids: the ids.
        invalid: always ``None``: the quantizer is given valid tables only.
    """

    table: _WeightRecipe
    row_exponents: tuple[int, ...]
    ids: _IdsRecipe
    invalid: str | None = None

    def weight(self) -> torch.Tensor:
        """The float table torchao quantizes."""
        w = self.table.values().to(torch.float64)
        exps = torch.tensor(self.row_exponents, dtype=torch.float64)
        rows = torch.arange(w.shape[0]) % len(self.row_exponents)
        return (w * torch.pow(2.0, exps[rows])[:, None]).to(self.table.dtype)

    def call(self, backward: bool = False) -> _Call:
        """Quantize with torchao, check the quantizer, and return the lookup's call.

        Raises:
            _EquivalenceError: an element of torchao's table is further from the float table
                than the scheme's quantization bound.
        """
        weight = self.weight()
        try:
            quantized = quantize_with_torchao(weight)
        except Exception as exc:  # a valid table: quantizing it must not fail
            raise _EquivalenceError(
                f"torchao's quantize_ raised {type(exc).__name__}: {exc}, on a valid "
                f"{tuple(weight.shape)} {weight.dtype} table",
                self.source(),
            ) from exc
        table = unpack_torchao_weight(quantized.weight)
        _check_quantization(weight, table, self.source())
        return _Call(
            self.ids.build(),
            table.qweight,
            extra={"scale": table.scale, "zero_point": table.zero_point},
            output_dtype_of="scale",
            weight_name="qweight",
        )

    def source(self, fn: str = "candidate", backward: bool = False, preamble: str = "") -> str:
        """A runnable snippet: the float table, torchao's quantization, the lookup."""
        dt = str(self.table.dtype)
        v, d = self.table.num_embeddings, self.table.embedding_dim
        lines = [
            "import sys",
            "",
            "import torch",
            "",
            'sys.path.insert(0, "docs/_scripts")  # from the root of the repository',
            "from real_kernels import torchao_interop as eta",
        ]
        lines.append(preamble.rstrip("\n") or "candidate = eta.torchao_int8_embedding")
        lines += [
            "",
            self.ids.source("input"),
            f"weight = torch.randn({v}, {d}, dtype=torch.float64, "
            f"generator=torch.Generator().manual_seed({self.table.seed}))",
            f"exponents = torch.tensor({list(self.row_exponents)}, dtype=torch.float64)",
            f"weight = (weight * torch.pow(2.0, exponents[torch.arange({v}) % "
            f"{len(self.row_exponents)}])[:, None]).to({dt})",
            "qweight, scale, zero_point, _ = eta.unpack_torchao_weight(",
            "    eta.quantize_with_torchao(weight).weight",
            ")",
            f"out = {fn}(input, qweight, scale, zero_point)",
            "print(out)",
        ]
        return "\n".join(lines)


def quantization_error_bound(
    weight: torch.Tensor, scale: torch.Tensor, scheme: str, *, compute: torch.dtype = _COMPUTE_DTYPE
) -> torch.Tensor:
    """How far a correct round-to-nearest quantizer may move each element of ``weight``.

    For the integer schemes the stored value is ``round(w / s) + zp``; computing ``w / s``
    in ``compute`` adds at most ``u_c |w / s|`` before the rounding, and ``|w / s|`` is at
    most the number of steps (255 for int8, 15 for uint4), so
    ``|dequantize(q) - w| <= s (1/2 + steps * u_c)``. For float8, ``q = fl8(fl_c(w / s))``
    gives ``|dequantize(q) - w| <= (u_8 + u_c + u_8 u_c) |w| + s eta_8``.

    Args:
        weight: the ``(V, D)`` table before quantization.
        scale: ``(V,)`` per-row scales.
        scheme: the scheme's name.
        compute: the least precise dtype the quantizer computes ``w / s`` in.

    Returns:
        ``(V, D)`` float64 bounds.

    Raises:
        ValueError: an unknown scheme, or shapes that do not match.
    """
    s = _check_scheme(scheme, "quantization_error_bound")
    w = weight.detach().cpu().to(torch.float64)
    if w.dim() != 2 or tuple(scale.shape) != (w.shape[0],):
        raise ValueError(
            f"quantization_error_bound: weight must be (V, D) and scale (V,), got "
            f"{tuple(w.shape)} and {tuple(scale.shape)}"
        )
    sc = scale.detach().cpu().to(torch.float64)[:, None]
    # The weight's own dtype does not enter: its values are exact in float32, and a quantizer
    # that divides in a narrower dtype (bfloat16: up to a whole step more) is not admitted.
    u_c = _unit_roundoff(compute)
    if s.is_float8:
        u_8 = _unit_roundoff(s.storage)
        return (u_8 + u_c + u_8 * u_c) * w.abs() + sc * _subnormal_loss(s.storage)
    steps = s.qmax - s.qmin
    return (0.5 + steps * u_c) * sc.expand_as(w)


def _check_quantization(weight: torch.Tensor, table: _QuantizedTable, repro: str) -> None:
    exact = _dequantize_rowwise(*table, dtype=torch.float64)
    error = (exact - weight.to(torch.float64)).abs()
    bound = quantization_error_bound(weight, table.scale, "int8")
    bad = ~(error <= bound)
    if bool(bad.any()):
        r, c = (int(i) for i in bad.nonzero()[0])
        raise _EquivalenceError(
            f"torchao's quantizer stored weight[{r}, {c}] = {float(weight[r, c])!r} as "
            f"{float(exact[r, c])!r}: an error of {float(error[r, c]):.6g}, above the bound "
            f"{float(bound[r, c]):.6g} (half a step, scale / 2 = {float(table.scale[r]) / 2:.6g}, "
            f"plus float32's rounding of w / scale); {int(bad.sum())} of {bad.numel()} elements",
            repro,
        )


@st.composite
def _torchao_cases(
    draw: st.DrawFn, dtypes: tuple[torch.dtype, ...], dims: tuple[int, int]
) -> _TorchaoCase:
    """Float tables with rows scaled by ``2**-20`` to ``2**20`` (as the dtype allows).

    The exponents stay 4 binades inside the dtype's normal range, so that ``N(0, 1)`` draws
    (below 2**3 in magnitude) neither overflow nor become subnormal; a constant row of ones
    may be included.
    """
    v = draw(st.integers(1, 64), label="V")
    d = draw(st.integers(*dims), label="D")
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    info = torch.finfo(dtype)
    lo = max(-20, math.ceil(math.log2(float(info.smallest_normal))) + 4)
    hi = min(20, math.floor(math.log2(float(info.max))) - 4)
    exps = draw(st.lists(st.integers(lo, hi), min_size=1, max_size=4), label="exponents")
    specials = tuple(
        (r, c, 1.0) for r in draw(st.lists(st.integers(0, v - 1), max_size=1)) for c in range(d)
    )  # a constant row
    table = _WeightRecipe(v, d, dtype, "cpu", draw(_SEEDS, label="seed"), specials)
    ids = draw(_ids_recipes(v, None, torch.int64, "cpu", 0, 2, 0, 8, ("contiguous",), 64))
    note(f"torchao case: V={v}, D={d}, dtype={dtype}, row exponents={exps}")
    return _TorchaoCase(table, tuple(exps), ids)


def verify_torchao_embedding(
    *,
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16),
    dims: tuple[int, int] = (1, 16),
    max_examples: int = _DEFAULT_MAX_EXAMPLES,
    seed: int | None = None,
) -> _VerificationReport:
    """Verify torchao's int8 embedding: its quantizer, then its lookup of what it stored.

    On each drawn float table (rows spanning ``2**-20`` to ``2**20`` where the dtype holds
    them, constant rows, the dtypes given), ``nn.Embedding`` is quantized with torchao's
    ``quantize_`` and its default per-row int8 config, and:

    1. every stored element is within the quantization bound of the float element;
    2. the module's forward on drawn ids equals the exact dequantization of its own table,
       looked up, within the bound of
       [`verify_quantized_embedding`][embedding_equivalence.verify_quantized_embedding].

    Args:
        dtypes: the float tables' dtypes.
        dims: the inclusive range of ``D`` drawn.
        max_examples: number of examples Hypothesis generates.
        seed: fix the run.

    Returns:
        A [`VerificationReport`][embedding_equivalence.VerificationReport] for
        [`torchao_int8_embedding`][]; a counterexample rebuilds the table, quantizes it with
        torchao and looks it up.

    Raises:
        ImportError: torchao is not installed (the message says how to install it).
        InvalidArgument: a dtype that is not floating, or a bad ``max_examples``.
    """
    _torchao()
    if not (isinstance(dims, tuple) and len(dims) == 2 and 1 <= dims[0] <= dims[1]):
        raise InvalidArgument(f"dims={dims!r} must be an inclusive range (lo, hi), 1 <= lo <= hi")
    args = _resolve_arguments(
        "verify_torchao_embedding", torchao_int8_embedding, dtypes=dtypes, devices=["cpu"],
        max_examples=max_examples, seed=seed, backward=False,
    )  # fmt: skip
    part = _Part(_torchao_cases(args.dtypes, dims))
    version = importlib.import_module("torchao").__version__
    record = _QuantizedRun("int8", source=f"torchao {version}, per row")
    factory: Callable[[_Call], Any] = _QuantizedOracle.factory("int8")
    description = _Verification(
        torchao_int8_embedding, args, factory, [lambda: part], {"quantized": record}
    )
    return _drive(description)
