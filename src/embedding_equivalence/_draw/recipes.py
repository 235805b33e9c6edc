"""Replayable recipes for the tensors of a test case, and the Python that rebuilds them.

A recipe holds only drawn values (ints, floats, names), never a tensor. ``build()`` makes the
tensor and ``source()`` writes Python that makes the very same tensor, bit for bit, so that
every counterexample is a runnable snippet. The helpers that write values as Python
([`dtype_source`][], [`float_source`][], [`kwargs_source`][]) serve every snippet of the
package. The cases made of recipes are in ``cases.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

#: Layouts of the weight: how the ``(V, D)`` view sits in its storage.
WEIGHT_LAYOUTS = ("contiguous", "transposed", "sliced", "offset")
#: Layouts of the ids.
IDS_LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")


def run_source(source: str, **names: Any) -> dict[str, Any]:
    """Run ``source`` with ``torch`` and ``names`` in scope; return the names it made."""
    namespace: dict[str, Any] = {"torch": torch, **names}
    exec(source, namespace)
    return namespace


def dtype_source(dtype: torch.dtype) -> str:
    """Python source naming ``dtype``, e.g. ``torch.float16``."""
    return str(dtype)


def device_source(device: str) -> str:
    """Python source that moves a tensor to ``device``: ``.to('cuda')``, nothing for the CPU."""
    return f".to({device!r})" if device != "cpu" else ""


def float_source(x: float) -> str:
    """Python source for a float that round-trips exactly (``inf``/``nan`` included)."""
    return repr(float(x)) if math.isfinite(x) else f"float('{float(x)}')"  # inf, -inf, nan


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
            ``N(0, 1)`` in float64 and cast: a large table (past ``2**31`` elements, say) is then
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
        """The table's values as a contiguous CPU tensor of ``dtype``, by [`source`][]'s lines."""
        return run_source("\n".join(self._drawn("weight")))["weight"]

    def build(self, requires_grad: bool = False) -> torch.Tensor:
        """Make the tensor, on ``device`` and in ``layout``, by running [`source`][].

        The snippet of a counterexample is then the very code that made the tensor.

        Args:
            requires_grad: make it a leaf that requires grad.

        Returns:
            The ``(V, D)`` table.
        """
        # The snippet's own code: the same tensor by design.
        return run_source(self.source())["weight"].requires_grad_(requires_grad)

    def source(self, name: str = "weight") -> str:
        """Python that rebuilds the tensor exactly (assumes ``import torch``)."""
        v, d, dt = self.num_embeddings, self.embedding_dim, dtype_source(self.dtype)
        lines = self._drawn(name)
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

    def _drawn(self, name: str) -> list[str]:
        """The lines of [`source`][] that draw the values and write the specials, on the CPU.

        A draw in ``(-3e-8, 0)`` underflows to ``-0.0`` in float16; ``-0.0 + 0.0 == +0.0``,
        so the only ``-0.0`` entries are the drawn specials. (A native draw, ``-1 + 2 u``, is
        never ``-0.0``, and a large table is not passed over once more.)
        """
        v, d, dt = self.num_embeddings, self.embedding_dim, dtype_source(self.dtype)
        generator = f"generator=torch.Generator().manual_seed({self.seed})"
        if self.native:
            made = f"torch.empty({v}, {d}, dtype={dt}).uniform_(-1, 1, {generator})"
        else:
            made = f"torch.randn({v}, {d}, dtype=torch.float64, {generator}).to({dt}) + 0.0"
        specials = [f"{name}[{r}, {c}] = {float_source(x)}" for r, c, x in self.specials]
        return [f"{name} = {made}", *specials]


@dataclass(frozen=True)
class IdsRun:
    """``count`` ids ``(start + step * i) % modulo`` for ``i`` in ``range(count)``.

    A long input (a boundary example has up to ``2**17`` ids) is written as a few runs, so that
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
    return f"torch.tensor({list(values)!r})" if runs is None else _runs_source(runs)


def _runs_source(runs: Sequence[IdsRun]) -> str:
    """The ids of ``runs``, one after the other, as Python: an expression ready for ``.to()``."""
    parts = [run.source() for run in runs]
    if len(parts) == 1:
        return f"({parts[0]})" if " " in parts[0] else parts[0]  # "torch.arange(n) % m"
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

    def build(self) -> torch.Tensor:
        """Make the ids tensor on ``device`` in ``layout``.

        The values are made directly (the literal of a long input takes long to parse), then
        laid out by the very lines of [`source`][] that lay out the snippet's.
        """
        if self.runs:
            t = torch.cat([run.tensor(self.dtype) for run in self.runs])
        else:
            t = torch.tensor(self.values, dtype=self.dtype)
        placed = "\n".join(self._placed("input"))  # the snippet's own code
        return run_source(placed, input=t.reshape(self.shape).to(self.device))["input"]

    def source(self, name: str = "input") -> str:
        """Python that rebuilds the tensor exactly (assumes ``import torch``)."""
        dt = dtype_source(self.dtype)
        if self.runs and len(self.values) > 16:  # long: a short expression, not literals
            made = f"{_runs_source(self.runs)}.to({dt})"
        elif self.dtype.is_floating_point:
            vals = ", ".join(float_source(float(x)) for x in self.values)
            made = f"torch.tensor([{vals}], dtype={dt})"
        else:
            made = f"torch.tensor({list(self.values)!r}, dtype={dt})"
        line = f"{name} = {made}.reshape({tuple(self.shape)!r}){device_source(self.device)}"
        return "\n".join([line, *self._placed(name)])

    def _placed(self, name: str) -> list[str]:
        """The lines that lay out ``name``, on its device: none for a contiguous input."""
        dt, shape = dtype_source(self.dtype), repr(tuple(self.shape))
        lines: list[str] = []
        if self.layout == "transposed" and len(self.shape) >= 2:
            lines.append(f"{name} = {name}.transpose(-1, -2).contiguous().transpose(-1, -2)")
        elif self.layout == "sliced" and len(self.shape) >= 1:
            wide = (*self.shape[:-1], 2 * self.shape[-1])
            lines += [
                f"base = torch.zeros({wide!r}, dtype={dt}){device_source(self.device)}",
                f"base[..., ::2] = {name}",
                f"{name} = base[..., ::2]  # non-contiguous view",
            ]
        elif self.layout == "expanded" and len(self.shape) >= 1 and self.shape[0] > 0:
            lines.append(f"{name} = {name}[:1].expand({shape})  # stride 0 in dim 0")
        return lines


#: Entries ``(row, column, value)`` written into a tensor's ``(-1, last dim)`` view after its
#: seeded draw, in order (the boundary phase's values at the limits of a dtype).
Entries = tuple[tuple[int, int, float], ...]


def _randn_source(
    name: str, shape: tuple[int, ...], seed: int, dtype: torch.dtype, device: str, at: Entries = ()
) -> str:
    lines = [
        f"{name} = torch.randn({shape!r}, dtype=torch.float64, generator=torch.Generator()"
        f".manual_seed({seed})).to({dtype_source(dtype)}){device_source(device)}"
    ]
    lines += [f"{name}.view(-1, {shape[-1]})[{r}, {c}] = {float_source(x)}" for r, c, x in at]
    return "\n".join(lines)


def _randn(
    shape: tuple[int, ...], seed: int, dtype: torch.dtype, device: str, at: Entries = ()
) -> torch.Tensor:
    """``N(0, 1)`` float64 draws cast to ``dtype``, then the entries ``at`` written."""
    return run_source(_randn_source("g", shape, seed, dtype, device, at))["g"]


def kwargs_source(kwargs: Mapping[str, Any]) -> str:
    """Keyword arguments as Python source, e.g. ``, padding_idx=-1, max_norm=float('inf')``."""
    texts = {k: float_source(x) if isinstance(x, float) else repr(x) for k, x in kwargs.items()}
    return "".join(f", {key}={text}" for key, text in texts.items())
