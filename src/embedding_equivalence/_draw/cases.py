"""The drawn calls: an embedding (or bag) call made of recipes, its tensors and its snippet.

A case holds only plain values: the recipes of its tensors (``recipes.py``), its options and
the seeds of its upstream gradient and per-sample weights. ``build()`` and ``call()`` make
fresh tensors each time, and ``source()`` writes a runnable snippet that makes the same
tensors and asserts the exact check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

import torch

from ..oracle.call import Call
from .recipes import (
    Entries,
    IdsRecipe,
    WeightRecipe,
    _randn,
    _randn_source,
    device_source,
    dtype_source,
    kwargs_source,
    run_source,
    sequence_source,
)


def snippet(
    preamble: str,
    helper: str,
    tensors: list[str],
    call: str,
    invalid: str | None,
    check: str,
    prepare: Sequence[str] = (),
    after: Sequence[str] = ("print(out)",),
) -> str:
    """A case's runnable snippet: it makes the tensors, checks the call exactly, then makes it.

    The check runs first, on the tensors as they were: a kernel that changes its arguments
    in place must meet them unchanged. An invalid case's snippet only makes the call, which
    must raise ([`refusal_source`][]).

    Args:
        preamble: lines placed after ``import torch`` (e.g. the import of the candidate).
        helper: the helper of ``testing`` that ``check`` calls.
        tensors: the lines that make the tensors.
        call: the call, e.g. ``candidate(input, weight)``.
        invalid: ``None``, or why the reference refuses the call.
        check: the exact check, a call of ``helper``.
        prepare: lines before the check (what it reads besides the tensors).
        after: the lines after ``out = call``.

    Returns:
        Python source.
    """
    lines = ["import torch", *([preamble.rstrip("\n")] if preamble else [])]
    if invalid is not None:
        return "\n".join([*lines, "", *tensors, *refusal_source(call, invalid)])
    lines += [f"from embedding_equivalence.testing import {helper}", "", *tensors, *prepare]
    lines += ["# The exact check: raises EquivalenceError while the bug is present.", check]
    return "\n".join([*lines, f"out = {call}", *after])


def refusal_source(call: str, invalid: str, printed: str = "") -> list[str]:
    """The end of an invalid case's snippet: ``call`` must raise, and fails if it returns.

    Args:
        call: the call, e.g. ``candidate(input, weight)``.
        invalid: why the reference refuses it, said when the call returns instead.
        printed: what the refusal's print starts with, e.g. ``dist.get_rank(), ``.

    Returns:
        The snippet's lines.
    """
    return [
        "try:",
        f"    out = {call}",
        "except Exception as error:",
        f'    print({printed}"refused, as it must be:", repr(error))',
        "else:",
        f"    raise AssertionError({('the call must raise (' + invalid + ')')!r})",
    ]


def _of_table(name: str, doc: str) -> Any:
    """A read-only property: the attribute ``name`` of the case's ``weight`` recipe."""
    return property(attrgetter(f"weight.{name}"), doc=doc)


class TableFacts:
    """The table's facts of a case, read from its ``weight`` recipe: ``V``, ``D``, dtype, device."""

    weight: WeightRecipe
    num_embeddings: int = _of_table("num_embeddings", "``V``.")
    embedding_dim: int = _of_table("embedding_dim", "``D``.")
    dtype: torch.dtype = _of_table("dtype", "The table's dtype.")
    device: str = _of_table("device", "The device of every tensor.")


class _CaseBase(TableFacts):
    """What both kinds of case share: the table's facts, the upstream gradient, the snippet."""

    ids: IdsRecipe
    grad_seed: int
    invalid: str | None
    grad_values: Entries

    def _grad_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def grad_output(self) -> torch.Tensor:
        """The upstream gradient, ``N(0, 1)`` in float64 cast to the table's dtype and device."""
        return run_source(self.grad_output_source("g"))["g"]  # the snippet's own code

    def grad_output_source(self, name: str = "grad_output") -> str:
        """Python that rebuilds [`grad_output`][]."""
        shape, at = self._grad_shape(), self.grad_values
        return _randn_source(name, shape, self.grad_seed, self.dtype, self.device, at)

    def _source_parts(self) -> tuple[list[str], str, str]:
        """What the snippet adds: tensor lines, the call's arguments, the gradients printed."""
        raise NotImplementedError

    #: What the helpers of ``testing`` that check this kind of case start with.
    _helper_prefix = "assert_"

    def kwargs_source(self) -> str:
        """The keyword arguments as Python source."""
        raise NotImplementedError

    def _check_arguments(self) -> list[str]:
        """The arguments of the exact check between the table and the upstream gradient."""
        return []

    def _check_source(self, fn: str, backward: bool) -> tuple[str, str]:
        """The snippet's exact check: the helper of ``testing`` it imports, and its call.

        ``assert_backward_equivalent(fn, input, table, grad_output, **kwargs)`` (of bags:
        ``assert_bag_...`` with ``offsets`` after the table), or the forward's without
        ``grad_output``.
        """
        helper = f"{self._helper_prefix}{'backward' if backward else 'forward'}_equivalent"
        arguments = [fn, "input", "table", *self._check_arguments()]
        arguments += ["grad_output"] if backward else []
        return helper, f"{helper}({', '.join(arguments)}{self.kwargs_source()})"

    def arguments_source(self) -> str:
        """The call's arguments as the snippet of [`source`][] names them."""
        return self._source_parts()[1]

    def source(self, fn: str = "candidate", backward: bool = True, preamble: str = "") -> str:
        """A runnable snippet that makes the tensors and calls ``fn`` on them.

        Args:
            fn: the name the snippet calls.
            backward: also run the backward pass with [`grad_output`][].
            preamble: lines placed after ``import torch`` (e.g. the import of ``fn``).

        Returns:
            Python source.
        """
        helper, check = self._check_source(fn, backward)
        extra, arguments, grads = self._source_parts()
        tensors = [self.ids.source("input"), self.weight.source("weight"), *extra]
        prepare = ["table = weight.detach().clone()  # as it is before the call, for the check"]
        after = ["print(out)"]
        if backward:
            prepare.append(self.grad_output_source())
            after = ["out.backward(grad_output)", f"print(out, {grads})"]
        call = f"{fn}({arguments})"
        return snippet(preamble, helper, tensors, call, self.invalid, check, prepare, after)


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
        grad_values: entries ``(row, column, value)`` written into the upstream gradient's
            ``(-1, D)`` view after its seeded draw: none, but in the boundary phase's value
            examples (``boundary_data.value_sets``).
    """

    ids: IdsRecipe
    weight: WeightRecipe
    # Not hashed (a dict is not hashable); still compared, so equal cases hash equal.
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    grad_seed: int = 0
    invalid: str | None = None
    # Not in the repr, which stays that of a drawn case: the snippet of source() writes them.
    grad_values: Entries = field(default=(), repr=False)

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
        grad_values: entries written into the upstream gradient after its seeded draw, as
            in [`EmbeddingCase`][].
    """

    ids: IdsRecipe
    weight: WeightRecipe
    offsets: tuple[int, ...] | None = None
    offsets_dtype: torch.dtype = torch.int64
    mode: str = "mean"
    # Not hashed (a dict is not hashable); still compared, so equal cases hash equal.
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    per_sample_weights_seed: int | None = None
    grad_seed: int = 0
    invalid: str | None = None
    # Not in the repr, which stays that of a drawn case: the snippet of source() writes them.
    grad_values: Entries = field(default=(), repr=False)

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
        offsets = psw = None
        if self.offsets is not None:
            offsets = torch.tensor(self.offsets, dtype=self.offsets_dtype).to(self.device)
        if self.per_sample_weights_seed is not None:
            psw = _randn(self.ids.shape, self.per_sample_weights_seed, self.dtype, self.device)
            psw.requires_grad_(requires_grad)
        ids, weight = self.ids.build(), self.weight.build(requires_grad=requires_grad)
        return BagTensors(ids, weight, offsets, psw)

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
        if self.offsets is not None:
            lines.append(
                f"offsets = {sequence_source(self.offsets)}"
                f".to({dtype_source(self.offsets_dtype)}){device_source(self.device)}"
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

    _helper_prefix = "assert_bag_"

    def _check_arguments(self) -> list[str]:
        return ["offsets" if self.offsets is not None else "None"]
