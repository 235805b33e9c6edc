"""Replayable recipes for the tensors of a test case, and the case itself.

A recipe holds only drawn values (ints, floats, names), never a tensor. ``build()`` makes the
tensor and ``source()`` writes Python that makes the very same tensor, bit for bit, so that
every counterexample is a runnable snippet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

__all__ = [
    "BagTensors",
    "Call",
    "EmbeddingBagCase",
    "EmbeddingCase",
    "IdsRecipe",
    "IdsRun",
    "TableFacts",
    "WeightRecipe",
    "dtype_source",
    "float_source",
]

#: Layouts of the weight: how the ``(V, D)`` view sits in its storage.
WEIGHT_LAYOUTS = ("contiguous", "transposed", "sliced", "offset")
#: Layouts of the ids.
IDS_LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")


def dtype_source(dtype: torch.dtype) -> str:
    """Python source naming ``dtype``, e.g. ``torch.float16``."""
    return str(dtype)


def float_source(x: float) -> str:
    """Python source for a float that round-trips exactly (``inf``/``nan`` included)."""
    if math.isnan(x):
        return "float('nan')"
    if math.isinf(x):
        return "float('inf')" if x > 0 else "float('-inf')"
    return repr(float(x))


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@dataclass(frozen=True)
class WeightRecipe:
    """A ``(V, D)`` table: ``N(0, 1)`` float64 draws from a seeded generator, cast to ``dtype``.

    Attributes:
        num_embeddings: ``V``.
        embedding_dim: ``D``.
        dtype: floating dtype of the table.
        device: device string, e.g. ``"cpu"``.
        seed: seed of the ``torch.Generator`` that draws the values (on the CPU, in float64).
        specials: ``(row, col, value)`` entries written after the draw (``inf``, ``nan``,
            ``-0.0``, ...), in order.
        layout: one of ``"contiguous"``, ``"transposed"`` (a ``.t()`` view of a ``(D, V)``
            tensor), ``"sliced"`` (every other column of a ``(V, 2D)`` tensor) or ``"offset"``
            (rows ``1..V`` of a ``(V + 1, D)`` tensor).
        native: draw the values in ``dtype`` itself, uniformly in ``[-1, 1)``, rather than
            ``N(0, 1)`` in float64 and cast: a large table (past 2**31 elements, say) is then
            built without a float64 copy, at its own size and in a third of the time. The rows
            stay distinguishable: each holds ``D`` independent draws.
    """

    num_embeddings: int
    embedding_dim: int
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    seed: int = 0
    specials: tuple[tuple[int, int, float], ...] = ()
    layout: str = "contiguous"
    native: bool = False

    def values(self) -> torch.Tensor:
        """The table's values as a contiguous CPU tensor of ``dtype``."""
        v, d = self.num_embeddings, self.embedding_dim
        if self.native:
            w = torch.empty(v, d, dtype=self.dtype).uniform_(-1, 1, generator=_generator(self.seed))
        else:
            w = torch.randn(v, d, generator=_generator(self.seed), dtype=torch.float64)
            # A draw in (-3e-8, 0) underflows to -0.0 in float16; -0.0 + 0.0 == +0.0, so the
            # only -0.0 entries are the drawn specials. (A native draw, -1 + 2 u, is never
            # -0.0, and a large table is not passed over once more.)
            w = w.to(self.dtype).add_(0.0)
        for row, col, value in self.specials:
            w[row, col] = value
        return w

    def build(self, requires_grad: bool = False) -> torch.Tensor:
        """Make the tensor, on ``device`` and in ``layout``.

        Args:
            requires_grad: make it a leaf that requires grad.

        Returns:
            The ``(V, D)`` table.
        """
        values = self.values().to(self.device)
        v, d = self.num_embeddings, self.embedding_dim
        if self.layout == "contiguous":
            w = values
        elif self.layout == "transposed":
            w = values.t().contiguous().t()
        elif self.layout == "sliced":
            base = torch.zeros(v, 2 * d, dtype=self.dtype, device=self.device)
            base[:, ::2] = values
            w = base[:, ::2]
        elif self.layout == "offset":
            base = torch.zeros(v + 1, d, dtype=self.dtype, device=self.device)
            base[1:] = values
            w = base[1:]
        else:  # pragma: no cover - guarded by the strategies
            raise ValueError(f"unknown weight layout {self.layout!r}")
        return w.requires_grad_(requires_grad)

    def source(self, name: str = "weight") -> str:
        """Python that rebuilds the tensor exactly (assumes ``import torch``)."""
        v, d, dt = self.num_embeddings, self.embedding_dim, dtype_source(self.dtype)
        generator = f"generator=torch.Generator().manual_seed({self.seed})"
        if self.native:
            lines = [f"{name} = torch.empty({v}, {d}, dtype={dt}).uniform_(-1, 1, {generator})"]
        else:
            lines = [
                f"{name} = torch.randn({v}, {d}, dtype=torch.float64, {generator}).to({dt}) + 0.0"
            ]
        lines += [f"{name}[{r}, {c}] = {float_source(x)}" for r, c, x in self.specials]
        if self.device != "cpu":
            lines.append(f"{name} = {name}.to({self.device!r})")
        dev = f", device={self.device!r}" if self.device != "cpu" else ""
        if self.layout == "transposed":
            lines.append(f"{name} = {name}.t().contiguous().t()  # strides (1, V)")
        elif self.layout == "sliced":
            lines.append(f"base = torch.zeros({v}, {2 * d}, dtype={dt}{dev})")
            lines.append(f"base[:, ::2] = {name}")
            lines.append(f"{name} = base[:, ::2]  # every other column: strides (2D, 2)")
        elif self.layout == "offset":
            lines.append(f"base = torch.zeros({v + 1}, {d}, dtype={dt}{dev})")
            lines.append(f"base[1:] = {name}")
            lines.append(f"{name} = base[1:]  # a view at storage offset D")
        lines.append(f"{name}.requires_grad_(True)")
        return "\n".join(lines)


@dataclass(frozen=True)
class IdsRun:
    """``count`` ids ``(start + step * i) % modulo`` for ``i`` in ``range(count)``.

    A long input (a boundary example has up to 2**17 ids) is written as a few runs, so that
    its snippet is a short expression rather than thousands of literals.

    Attributes:
        start: the first id.
        count: how many ids.
        step: the difference between neighbours.
        modulo: wrap the ids into ``[0, modulo)``, or ``None``.
    """

    start: int
    count: int
    step: int = 1
    modulo: int | None = None

    def values(self) -> list[int]:
        """The ids as Python ints."""
        ids = [self.start + self.step * i for i in range(self.count)]
        return ids if self.modulo is None else [i % self.modulo for i in ids]

    def tensor(self, dtype: torch.dtype) -> torch.Tensor:
        """The ids as a 1-D CPU tensor of ``dtype``."""
        if self.count <= 8:
            return torch.tensor(self.values(), dtype=torch.int64).to(dtype)
        ids = torch.arange(self.count, dtype=torch.int64) * self.step + self.start
        return (ids if self.modulo is None else ids % self.modulo).to(dtype)

    def source(self) -> str:
        """Python for the same ids as an int64 tensor."""
        if self.count <= 8:
            return f"torch.tensor({self.values()!r})"
        text = f"torch.arange({self.count})"
        if self.step != 1:
            text += f" * {self.step}"
        if self.start:
            text += f" + {self.start}"
        if self.modulo is not None:
            text = f"({text}) % {self.modulo}" if " " in text else f"{text} % {self.modulo}"
        return text


def runs_of(values: Sequence[int], most: int = 4) -> tuple[IdsRun, ...] | None:
    """``values`` as at most ``most`` arithmetic ``IdsRun``s, or ``None`` if it takes more."""
    runs: list[IdsRun] = []
    i = 0
    while i < len(values):
        step = values[i + 1] - values[i] if i + 1 < len(values) else 1
        j = i + 1
        while j < len(values) and values[j] - values[j - 1] == step:
            j += 1
        runs.append(IdsRun(values[i], j - i, step))
        if len(runs) > most:
            return None
        i = j
    return tuple(runs)


def sequence_source(values: Sequence[int]) -> str:
    """A 1-D int64 tensor of ``values`` as Python: a short expression when it is a few runs."""
    runs = runs_of(values) if len(values) > 16 else None
    if runs is None:
        return f"torch.tensor({list(values)!r})"
    parts = [run.source() for run in runs]
    if len(parts) == 1:
        return f"({parts[0]})" if " " in parts[0] else parts[0]  # ready for ".to(...)"
    return "torch.cat([" + ", ".join(parts) + "])"


@dataclass(frozen=True)
class IdsRecipe:
    """Integer ids (or, for an invalid case, floats) given by their values and shape.

    Attributes:
        values: the ids in row-major order.
        shape: the logical shape (``()`` for a 0-d tensor).
        dtype: the dtype (int64 or int32 for valid cases).
        device: device string.
        layout: ``"contiguous"``, ``"transposed"`` (last two dims stored swapped),
            ``"sliced"`` (every other element of a wider tensor) or ``"expanded"`` (a size-1
            leading dim broadcast with stride 0; ``values`` then repeat).
        runs: ``values`` as ``IdsRun``s (see ``from_runs``), so that the tensor and its
            source are short expressions; empty for ids given by their values alone.
    """

    values: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.int64
    device: str = "cpu"
    layout: str = "contiguous"
    runs: tuple[IdsRun, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_runs(
        cls,
        runs: tuple[IdsRun, ...],
        shape: tuple[int, ...] | None = None,
        dtype: torch.dtype = torch.int64,
        device: str = "cpu",
        layout: str = "contiguous",
    ) -> IdsRecipe:
        """The ids of ``runs`` one after the other, in ``shape`` (default 1-D)."""
        values = tuple(i for run in runs for i in run.values())
        return cls(values, (len(values),) if shape is None else shape, dtype, device, layout, runs)

    def _tensor(self) -> torch.Tensor:
        if not self.runs:
            return torch.tensor(self.values, dtype=self.dtype)
        return torch.cat([run.tensor(self.dtype) for run in self.runs])

    def build(self) -> torch.Tensor:
        """Make the ids tensor on ``device`` in ``layout``."""
        t = self._tensor().reshape(self.shape).to(self.device)
        if self.layout == "contiguous" or len(self.shape) == 0:
            return t
        if self.layout == "transposed":
            if len(self.shape) < 2:
                return t
            return t.transpose(-1, -2).contiguous().transpose(-1, -2)
        if self.layout == "sliced":
            base = torch.zeros((*self.shape[:-1], 2 * self.shape[-1]), dtype=self.dtype)
            base = base.to(self.device)
            base[..., ::2] = t
            return base[..., ::2]
        if self.layout == "expanded":
            return t[:1].expand(self.shape) if self.shape[0] > 0 else t
        raise ValueError(f"unknown ids layout {self.layout!r}")  # pragma: no cover

    def source(self, name: str = "input") -> str:
        """Python that rebuilds the tensor exactly (assumes ``import torch``)."""
        dt = dtype_source(self.dtype)
        shape = repr(tuple(self.shape))
        dev = f".to({self.device!r})" if self.device != "cpu" else ""
        if self.runs and len(self.values) > 16:  # long: a short expression, not literals
            parts = [run.source() for run in self.runs]
            ids = parts[0] if len(parts) == 1 else "torch.cat([" + ", ".join(parts) + "])"
            if " " in ids and len(parts) == 1:  # "torch.arange(n) % m" before ".to(...)"
                ids = f"({ids})"
            line = f"{name} = {ids}.to({dt}).reshape({shape}){dev}"
        else:
            if self.dtype.is_floating_point:
                vals = "[" + ", ".join(float_source(float(x)) for x in self.values) + "]"
            else:
                vals = repr(list(self.values))
            line = f"{name} = torch.tensor({vals}, dtype={dt}).reshape({shape}){dev}"
        if self.layout == "transposed" and len(self.shape) >= 2:
            line += f"\n{name} = {name}.transpose(-1, -2).contiguous().transpose(-1, -2)"
        elif self.layout == "sliced" and len(self.shape) >= 1:
            wide = (*self.shape[:-1], 2 * self.shape[-1])
            line += (
                f"\nbase = torch.zeros({wide!r}, dtype={dt}){dev}\nbase[..., ::2] = {name}"
                f"\n{name} = base[..., ::2]  # non-contiguous view"
            )
        elif self.layout == "expanded" and len(self.shape) >= 1 and self.shape[0] > 0:
            line += f"\n{name} = {name}[:1].expand({shape})  # stride 0 in dim 0"
        return line


@dataclass
class Call:
    """The tensors and arguments of one call, fresh from a case (or given by the user).

    The call is ``fn(input, weight, **kwargs)``, or ``fn(input, weight, offsets, **kwargs)``
    when [`offsets`][] is set (``F.embedding_bag``'s positional third argument).

    Attributes:
        input: the ids.
        weight: the ``(V, D)`` table (a leaf that requires grad when the gradient is checked).
        kwargs: keyword arguments (options, ``mode``, the ``per_sample_weights`` tensor).
        offsets: bag starts, or ``None``.
        grad_output: the upstream gradient for the backward pass, or ``None`` (forward only).
        extra: more positional arguments after those, by name (a quantized table's
            ``scale`` and ``zero_point``, which may be ``None``).
        output_dtype_of: the argument whose dtype the output must have (``"weight"``, or
            ``"scale"`` for a quantized table).
        weight_name: what the table is called in messages (``"qweight"`` when quantized).
    """

    input: torch.Tensor
    weight: torch.Tensor
    kwargs: dict[str, Any] = field(default_factory=dict)
    offsets: torch.Tensor | None = None
    grad_output: torch.Tensor | None = None
    extra: dict[str, torch.Tensor | None] = field(default_factory=dict)
    output_dtype_of: str = "weight"
    weight_name: str = "weight"

    @property
    def args(self) -> tuple[torch.Tensor | None, ...]:
        """The positional arguments."""
        first = (self.input, self.weight) if self.offsets is None else (
            self.input, self.weight, self.offsets
        )  # fmt: skip
        return first + self.extra_args

    @property
    def extra_args(self) -> tuple[torch.Tensor | None, ...]:
        """The values of [`extra`][]."""
        return tuple(self.extra.values())

    @property
    def output_dtype(self) -> torch.dtype:
        """The dtype the output must have (that of the argument [`output_dtype_of`][])."""
        name = self.output_dtype_of
        source = self.weight if name == "weight" else self.extra[name]
        assert source is not None
        return source.dtype

    @property
    def per_sample_weights(self) -> torch.Tensor | None:
        """The ``per_sample_weights`` tensor, if the call passes one."""
        psw = self.kwargs.get("per_sample_weights")
        return psw if isinstance(psw, torch.Tensor) else None


def _randn_source(
    name: str, shape: tuple[int, ...], seed: int, dtype: torch.dtype, device: str
) -> str:
    dev = f".to({device!r})" if device != "cpu" else ""
    return (
        f"{name} = torch.randn({shape!r}, dtype=torch.float64, "
        f"generator=torch.Generator().manual_seed({seed})).to({dtype_source(dtype)}){dev}"
    )


def _randn(shape: tuple[int, ...], seed: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    g = torch.randn(shape, generator=_generator(seed), dtype=torch.float64)
    return g.to(dtype).to(device)


def kwargs_source(kwargs: Mapping[str, Any]) -> str:
    """Keyword arguments as Python source, e.g. ``, padding_idx=-1, max_norm=float('inf')``."""
    parts = []
    for key, value in kwargs.items():
        text = float_source(value) if isinstance(value, float) else repr(value)
        parts.append(f", {key}={text}")
    return "".join(parts)


class TableFacts:
    """The table's facts of a case, read from its ``weight`` recipe: ``V``, ``D``, dtype, device."""

    weight: WeightRecipe

    @property
    def num_embeddings(self) -> int:
        """``V``."""
        return self.weight.num_embeddings

    @property
    def embedding_dim(self) -> int:
        """``D``."""
        return self.weight.embedding_dim

    @property
    def dtype(self) -> torch.dtype:
        """The table's dtype."""
        return self.weight.dtype

    @property
    def device(self) -> str:
        """The device of every tensor."""
        return self.weight.device


class _CaseBase(TableFacts):
    """What both kinds of case share: the table's facts, the upstream gradient, the snippet."""

    weight: WeightRecipe
    ids: IdsRecipe
    grad_seed: int
    invalid: str | None

    def _grad_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def grad_output(self) -> torch.Tensor:
        """The upstream gradient, ``N(0, 1)`` in float64 cast to the table's dtype and device."""
        return _randn(self._grad_shape(), self.grad_seed, self.dtype, self.device)

    def grad_output_source(self, name: str = "grad_output") -> str:
        """Python that rebuilds [`grad_output`][]."""
        return _randn_source(name, self._grad_shape(), self.grad_seed, self.dtype, self.device)

    def _source_parts(self) -> tuple[list[str], str, str]:
        """What the snippet adds: tensor lines, the call's arguments, the gradients printed."""
        raise NotImplementedError

    def _check_source(self, fn: str, backward: bool) -> tuple[str, str]:
        """The snippet's exact check: the helper of ``testing`` it imports, and its call."""
        raise NotImplementedError

    def source(self, fn: str = "candidate", backward: bool = True, preamble: str = "") -> str:
        """A runnable snippet that makes the tensors and calls ``fn`` on them.

        Args:
            fn: the name the snippet calls.
            backward: also run the backward pass with [`grad_output`][].
            preamble: lines placed after ``import torch`` (e.g. the import of ``fn``).

        Returns:
            Python source.
        """
        lines = ["import torch"]
        if preamble:
            lines.append(preamble.rstrip("\n"))
        helper, check = self._check_source(fn, backward)
        if self.invalid is None:
            lines.append(f"from embedding_equivalence.testing import {helper}")
        lines += ["", self.ids.source("input"), self.weight.source("weight")]
        extra, arguments, grads = self._source_parts()
        lines += extra
        if self.invalid is not None:
            lines += [
                "try:",
                f"    out = {fn}({arguments})",
                "except Exception as error:",
                '    print("refused, as it must be:", repr(error))',
                "else:",
                f"    raise AssertionError({('the call must raise (' + self.invalid + ')')!r})",
            ]
            return "\n".join(lines)
        lines.append("table = weight.detach().clone()  # before the call: max_norm renorms it")
        lines.append(f"out = {fn}({arguments})")
        if backward:
            lines.append(self.grad_output_source())
            lines.append("out.backward(grad_output)")
            lines.append(f"print(out, {grads})")
        else:
            lines.append("print(out)")
        lines.append("# The exact check: raises EquivalenceError while the bug is present.")
        lines.append(check)
        return "\n".join(lines)


@dataclass(frozen=True)
class EmbeddingCase(_CaseBase):
    """One drawn call ``fn(input, weight, **kwargs)`` with its upstream gradient.

    Every attribute is a plain value, so the case is hashable, printable and replayable:
    [`build`][] makes fresh tensors each time (an implementation with ``max_norm`` modifies
    its weight in place), and `source()` writes the Python that makes them.

    Attributes:
        ids: recipe of ``input``.
        weight: recipe of ``weight``.
        kwargs: keyword options passed to the function (only those drawn).
        grad_seed: seed of the upstream gradient ``grad_output`` (``N(0, 1)`` in float64,
            cast to the weight's dtype), of shape ``(*input.shape, D)``.
        invalid: ``None`` for a valid call, else why the reference rejects it (the candidate
            must raise too).
    """

    ids: IdsRecipe
    weight: WeightRecipe
    # Not hashed (a dict is not hashable); still compared, so equal cases hash equal.
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    grad_seed: int = 0
    invalid: str | None = None

    def build(self, requires_grad: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh ``(input, weight)`` tensors."""
        return self.ids.build(), self.weight.build(requires_grad=requires_grad)

    def call(self, backward: bool = True) -> Call:
        """A fresh `Call`; with ``backward``, a leaf weight and the upstream gradient."""
        input, weight = self.build(requires_grad=backward)
        grad_output = self.grad_output() if backward else None
        return Call(input, weight, dict(self.kwargs), grad_output=grad_output)

    def _grad_shape(self) -> tuple[int, ...]:
        return (*self.ids.shape, self.embedding_dim)

    def kwargs_source(self) -> str:
        """The keyword arguments as Python source, e.g. ``, padding_idx=-1``."""
        return kwargs_source(self.kwargs)

    def _source_parts(self) -> tuple[list[str], str, str]:
        return [], f"input, weight{self.kwargs_source()}", "weight.grad"

    def _check_source(self, fn: str, backward: bool) -> tuple[str, str]:
        if backward:
            call = f"{fn}, input, table, grad_output{self.kwargs_source()}"
            return "assert_backward_equivalent", f"assert_backward_equivalent({call})"
        call = f"{fn}, input, table{self.kwargs_source()}"
        return "assert_forward_equivalent", f"assert_forward_equivalent({call})"


class BagTensors(NamedTuple):
    """The tensors of one [`EmbeddingBagCase`][], fresh from `EmbeddingBagCase.build`."""

    input: torch.Tensor
    """The ids: ``(N,)`` with ``offsets``, ``(B, L)`` without."""
    weight: torch.Tensor
    """The ``(V, D)`` table."""
    offsets: torch.Tensor | None
    """Bag starts (``None`` for a 2-D input)."""
    per_sample_weights: torch.Tensor | None
    """Weights of the ids' shape and the table's dtype, or ``None``."""


@dataclass(frozen=True)
class EmbeddingBagCase(_CaseBase):
    """One drawn call ``fn(input, weight[, offsets], mode=mode, **kwargs)`` and its gradient.

    Like [`EmbeddingCase`][], every attribute is a plain value: [`build`][] makes fresh
    tensors each time and `source()` writes the Python that makes the same tensors. The
    call follows ``F.embedding_bag``'s signature: ``offsets`` is passed positionally (third)
    when it is not ``None``, ``mode`` always by keyword, and ``per_sample_weights`` by keyword
    when `per_sample_weights_seed` is set (see [`arguments`][]).

    Attributes:
        ids: recipe of ``input``: ``(N,)`` with ``offsets``, ``(B, L)`` without.
        weight: recipe of ``weight``.
        offsets: the bag starts (plus the end of the last bag under
            ``include_last_offset=True``), or ``None`` (a 2-D input).
        offsets_dtype: dtype of the ``offsets`` tensor (the ids' dtype in drawn cases).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        kwargs: the other keyword options drawn (``padding_idx``, ``max_norm`` and
            ``norm_type``, ``scale_grad_by_freq``, ``sparse``, ``include_last_offset``).
        per_sample_weights_seed: ``None``, or the seed of ``per_sample_weights``: ``N(0, 1)``
            float64 draws of the ids' shape, cast to the table's dtype.
        grad_seed: seed of the upstream gradient, ``N(0, 1)`` in float64 cast to the table's
            dtype, of shape ``(B, D)``.
        invalid: ``None`` for a valid call, else why the reference rejects it.
    """

    ids: IdsRecipe
    weight: WeightRecipe
    offsets: tuple[int, ...] | None = None
    offsets_dtype: torch.dtype = torch.int64
    mode: str = "mean"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    per_sample_weights_seed: int | None = None
    grad_seed: int = 0
    invalid: str | None = None

    def __hash__(self) -> int:
        return hash(
            (
                self.ids,
                self.weight,
                self.offsets,
                self.offsets_dtype,
                self.mode,
                tuple(sorted(self.kwargs.items())),
                self.per_sample_weights_seed,
                self.grad_seed,
                self.invalid,
            )
        )

    @property
    def num_bags(self) -> int:
        """``B``, the number of bags (rows of the output) of a valid case."""
        if len(self.ids.shape) == 2 or self.offsets is None:
            return self.ids.shape[0] if self.ids.shape else 0
        if self.kwargs.get("include_last_offset", False):
            return max(len(self.offsets) - 1, 0)
        return len(self.offsets)

    def build(self, requires_grad: bool = True) -> BagTensors:
        """Fresh tensors; ``weight`` (and ``per_sample_weights``) are leaves if ``requires_grad``.

        Args:
            requires_grad: make ``weight`` and ``per_sample_weights`` leaves that require grad.

        Returns:
            ``(input, weight, offsets, per_sample_weights)``.
        """
        offsets = None
        if self.offsets is not None:
            offsets = torch.tensor(self.offsets, dtype=self.offsets_dtype).to(self.device)
        psw = None
        if self.per_sample_weights_seed is not None:
            psw = _randn(self.ids.shape, self.per_sample_weights_seed, self.dtype, self.device)
            psw.requires_grad_(requires_grad)
        return BagTensors(
            self.ids.build(), self.weight.build(requires_grad=requires_grad), offsets, psw
        )

    def arguments(
        self, tensors: BagTensors | None = None
    ) -> tuple[tuple[torch.Tensor, ...], dict[str, Any]]:
        """The positional and keyword arguments of the call, from ``tensors`` or a fresh build.

        Args:
            tensors: tensors from [`build`][] (default: build new ones).

        Returns:
            ``(args, kwargs)``: ``(input, weight)`` or ``(input, weight, offsets)``, and
            ``mode``, the options and ``per_sample_weights``.
        """
        t = self.build() if tensors is None else tensors
        args = (t.input, t.weight) if t.offsets is None else (t.input, t.weight, t.offsets)
        kwargs: dict[str, Any] = {"mode": self.mode, **self.kwargs}
        if t.per_sample_weights is not None:
            kwargs["per_sample_weights"] = t.per_sample_weights
        return args, kwargs

    def call(self, backward: bool = True) -> Call:
        """A fresh `Call`; with ``backward``, leaves and the upstream gradient."""
        tensors = self.build(requires_grad=backward)
        _, kwargs = self.arguments(tensors)
        grad_output = self.grad_output() if backward else None
        return Call(tensors.input, tensors.weight, kwargs, tensors.offsets, grad_output)

    def _grad_shape(self) -> tuple[int, ...]:
        return (self.num_bags, self.embedding_dim)

    def kwargs_source(self) -> str:
        """The keyword arguments as Python source, e.g. ``, mode='sum', padding_idx=-1``."""
        text = kwargs_source({"mode": self.mode, **self.kwargs})
        if self.per_sample_weights_seed is not None:
            text += ", per_sample_weights=per_sample_weights"
        return text

    def _source_parts(self) -> tuple[list[str], str, str]:
        lines = []
        arguments = "input, weight"
        dev = f".to({self.device!r})" if self.device != "cpu" else ""
        if self.offsets is not None:
            lines.append(
                f"offsets = {sequence_source(self.offsets)}"
                f".to({dtype_source(self.offsets_dtype)}){dev}"
            )
            arguments += ", offsets"
        grads = "weight.grad"
        if self.per_sample_weights_seed is not None:
            shape, seed = tuple(self.ids.shape), self.per_sample_weights_seed
            lines.append(
                _randn_source("per_sample_weights", shape, seed, self.dtype, self.device)
                + ".requires_grad_(True)"
            )
            grads += ", per_sample_weights.grad"
        return lines, arguments + self.kwargs_source(), grads

    def _check_source(self, fn: str, backward: bool) -> tuple[str, str]:
        offsets = "offsets" if self.offsets is not None else "None"
        if backward:
            call = f"{fn}, input, table, {offsets}, grad_output{self.kwargs_source()}"
            return "assert_bag_backward_equivalent", f"assert_bag_backward_equivalent({call})"
        call = f"{fn}, input, table, {offsets}{self.kwargs_source()}"
        return "assert_bag_forward_equivalent", f"assert_bag_forward_equivalent({call})"
