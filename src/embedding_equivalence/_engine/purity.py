"""What a kernel must not do to the caller's memory and state, checked on every example.

``F.embedding`` is a pure function of its arguments, apart from ``max_norm``'s documented
in-place renorm of the rows it references. A runner ([`run_in_process`][] and the ranks of a
process group) checks, around every call of the candidate:

- **read-only inputs** ([`Before`][]): the ids, offsets, per-sample weights, a quantized
  table's scales and zero points, the table (bit for bit; with ``max_norm`` the oracle judges
  the table instead) and, around the backward pass, the upstream gradient. A table past
  ``COPY_MAX_BYTES`` bytes is remembered by a digest of each row, never copied whole;
- **an owned result** ([`shared_input`][]): the output shares no memory with an argument;
- **a second call** ([`call_again`][]) on the same tensors, after the values of the table are
  negated in place (as an optimizer step updates a table; negation is exact, so the exact
  output of the second call is the negation of the first's): the first call's output must
  not change (no static output buffer handed out twice), and the second output must be the
  new one (no state kept between calls, no answer cached by address). The second call runs
  with torch's deterministic algorithms on, which fill the memory that ``torch.empty`` and
  its like allocate with NaN: memory the kernel allocates and does not write cannot pass as
  zeros (a ``torch.compile``d candidate's second call keeps the first's state, to reach the
  same graph: see [`call_again`][]). The table is negated back afterwards.

[`run_in_process`]: embedding_equivalence._engine.check.run_in_process
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ..oracle.call import Call
from ..oracle.expected import RowDigests
from .names import is_compiled
from .repro import format_float

#: What ``F.embedding`` leaves unchanged, by argument.
_NOUNS = {
    "input": "its ids",
    "offsets": "its offsets",
    "per_sample_weights": "its per-sample weights",
    "grad_output": "the upstream gradient (other consumers of it, a tied head or a residual "
    "branch, would see the change)",
}


def reference_of(call: Call) -> str:
    """The torch function a call is judged against, for messages."""
    if call.output_dtype_of != "weight":
        return "a quantized lookup"
    bag = call.offsets is not None or "mode" in call.kwargs
    return "F.embedding_bag" if bag else "F.embedding"


def _named(call: Call) -> list[tuple[str, torch.Tensor]]:
    """The call's tensor arguments by name (the table as ``call.weight_name``)."""
    named = {"input": call.input, call.weight_name: call.weight, "offsets": call.offsets}
    named |= call.extra | call.kwargs
    return [(k, v) for k, v in named.items() if isinstance(v, torch.Tensor)]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as integers of the same width: equal exactly when the bits are."""
    t = t.detach()
    if t.dtype == torch.bool or not (t.is_floating_point() or t.is_complex()):
        return t
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(width[t.element_size()])


def same_bits(a: object, b: torch.Tensor, *, negated: bool = False) -> bool:
    """Whether ``a`` is ``b`` (or ``-b``), bit for bit: a float tensor of ``b``'s kind."""
    kind = (b.dtype, b.shape, b.device, b.layout)
    if not isinstance(a, torch.Tensor) or (a.dtype, a.shape, a.device, a.layout) != kind:
        return False
    return a.is_floating_point() and torch.equal(_bits(a), _bits(-b if negated else b))


def _value(t: torch.Tensor, index: tuple[int, ...]) -> str:
    x = t[index].item()
    if not isinstance(x, float):
        return repr(x)
    text = format_float(x)
    return text if any(c in text for c in ".en(") else text + ".0"


def first_difference(
    name: str, kept: torch.Tensor | RowDigests, now: torch.Tensor, how: str = " in place"
) -> str | None:
    """Where ``now`` differs, bit for bit, from ``kept``: ``name[i, j]{how}: a -> b``, or None."""
    if isinstance(kept, RowDigests):
        rows = kept.changed(now.detach()).nonzero()
        return None if rows.numel() == 0 else f"row {int(rows[0])} of {name}{how} (its digest)"
    if tuple(kept.shape) != tuple(now.shape) or kept.dtype != now.dtype:
        was, now_is = (f"{tuple(t.shape)} {t.dtype}" for t in (kept, now))
        return f"{name}{how} from {was} to {now_is}"
    a, b = _bits(kept), _bits(now.to(kept.device))
    if torch.equal(a, b):  # one pass, no temporaries: the common case
        return None
    index = tuple((a != b).nonzero()[0].tolist())
    place = "[" + ", ".join(map(str, index)) + "]"
    return f"{name}{place}{how}: {_value(kept, index)} -> {_value(now.detach().cpu(), index)}"


@dataclasses.dataclass
class Before:
    """The read-only arguments of a call as they were, to tell what a candidate changed.

    Attributes:
        kept: ``(name, tensor, what was kept of it)``: a copy, or a large table's row digests.
        reference: the torch function the call is judged against (for messages).
    """

    kept: list[tuple[str, torch.Tensor, torch.Tensor | RowDigests]]
    reference: str

    @classmethod
    def of(cls, call: Call, named: Sequence[tuple[str, torch.Tensor]] | None = None) -> Before:
        """Keep what is needed to tell whether ``named`` change.

        Args:
            call: the call.
            named: the tensors to watch, by name (default: every tensor argument of
                ``call``; the table only when no ``max_norm`` renorms it: the oracle judges
                that table).
        """
        if named is None:
            renorms = call.kwargs.get("max_norm") is not None
            named = [(n, t) for n, t in _named(call) if not (renorms and t is call.weight)]
        return cls([(n, t, _keep(t)) for n, t in named], reference_of(call))

    def changed(self, who: str, *, last: bool = False) -> str | None:
        """The message of the first argument that changed since, or ``None``.

        An argument past ``STAGE_MAX_BYTES`` (a large table) is compared once, when ``last``:
        each comparison reads it whole, so it is not compared after each stage.

        Args:
            who: what ran, for the message (``"the call"``, ``"backward"``).
            last: the last comparison of the call: the large arguments too.
        """
        for name, tensor, kept in self.kept:
            if (tensor.numel() * tensor.element_size() > STAGE_MAX_BYTES) != last:
                continue
            where = first_difference(name, kept, tensor)
            if where is not None:
                noun = _NOUNS.get(name, "its table" if tensor.dim() == 2 else f"its {name}")
                return f"{who} changed {where}; {self.reference} leaves {noun} unchanged"
        return None


#: Arguments past this many bytes are compared once, after the backward pass and the second
#: call, not after each stage.
STAGE_MAX_BYTES = 1 << 20
#: What changed an argument found in the last comparison.
LATER = "the call, its backward pass or a second call"

#: Arguments of up to this many bytes are copied to tell what a call changed; a larger table
#: (the large-table path, past 2**31 elements) is remembered by a digest of each row, at
#: ``24 V`` bytes.
COPY_MAX_BYTES = 1 << 28


def _keep(t: torch.Tensor) -> torch.Tensor | RowDigests:
    """A copy of ``t``, or the row digests of a ``(V, D)`` table past ``COPY_MAX_BYTES``."""
    if t.dim() == 2 and t.numel() * t.element_size() > COPY_MAX_BYTES:
        return RowDigests.of(t)
    return t.detach().clone()


def shared_input(out: object, call: Call) -> str | None:
    """The message when the output shares memory with an argument of ``call``, else ``None``."""
    if not isinstance(out, torch.Tensor) or out.layout != torch.strided or out.numel() == 0:
        return None
    with contextlib.suppress(RuntimeError):  # a tensor without storage (a DTensor, a fake)
        mine = out.untyped_storage().data_ptr()
        for name, t in _named(call):
            if t.layout == torch.strided and t.numel() and t.untyped_storage().data_ptr() == mine:
                hint = (
                    " (indexing with a 0-d tensor, weight[input], gives a view of the table; "
                    "weight[input.reshape(-1)].reshape(*input.shape, -1) a new tensor)"
                    if call.input.dim() == 0 and t is call.weight
                    else ""
                )
                return (
                    f"the output shares memory with {name}; {reference_of(call)} returns a new "
                    f"tensor, which the caller may change without changing {name}{hint}"
                )
    return None


def set_deterministic(mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms(mode, warn_only=warn_only)``, inductor left alone.

    The public call imports ``torch._inductor.config`` to set the flag there too: some 900
    modules (sympy, dynamo, triton), 2 s of a first verification in a fresh process that never
    compiles. Where inductor is not loaded no graph of it can read the flag, so torch's own
    flag is all there is to set.
    """
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)


@contextlib.contextmanager
def poisoned_memory() -> Iterator[None]:
    """Run under torch's deterministic algorithms, which fill new memory with NaN.

    Integers are filled with their largest value. The previous settings are restored, and
    the warnings of ops without a deterministic implementation silenced.
    """
    import torch.utils.deterministic as deterministic

    on = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = deterministic.fill_uninitialized_memory  # pyright: ignore[reportAttributeAccessIssue]
    try:
        set_deterministic(True, warn_only=True)
        deterministic.fill_uninitialized_memory = True  # pyright: ignore[reportAttributeAccessIssue]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        deterministic.fill_uninitialized_memory = fill  # pyright: ignore[reportAttributeAccessIssue]
        set_deterministic(on, warn_only=warn_only)


@dataclasses.dataclass
class Again:
    """What a second call on the negated table gave.

    Attributes:
        output: the second output (a detached copy of a tensor), or ``None`` when it raised.
        error: what the second call raised, or ``None``.
        overwrote: what the second call changed of the first call's output, or ``None``.
    """

    output: Any = None
    error: BaseException | None = None
    overwrote: str | None = None


def negated_values(call: Call) -> torch.Tensor | None:
    """The tensor whose negation negates the exact output: the table, or a quantized table's scales.

    ``None`` where no second call is made (``max_norm`` would renorm the table again).
    """
    if call.kwargs.get("max_norm") is not None:
        return None
    values = call.weight if call.output_dtype_of == "weight" else call.extra.get("scale")
    return values if isinstance(values, torch.Tensor) and values.is_floating_point() else None


def negate_referenced(call: Call, values: torch.Tensor) -> Callable[[], object]:
    """Negates, in place, the rows of ``values`` that the call's ids reference (and back).

    The output reads those rows only, so it negates with them; a large table costs what its
    referenced rows cost.
    """
    rows = call.input.reshape(-1).unique().long()
    rows = rows[(rows >= 0) & (rows < values.shape[0])]  # a bad call's ids: none out of range

    return torch.no_grad()(lambda: values.index_copy_(0, rows, values[rows].neg()))


def call_again(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    negate: Callable[[], object],
    first: torch.Tensor,
    plain: Callable[[Any], Any] = lambda t: t,
) -> Again:
    """Negate the table's values in place, call ``fn(*args, **kwargs)`` again, negate them back.

    Args:
        fn: the candidate.
        args: the call's positional arguments (the same tensors as the first call's).
        kwargs: its keyword arguments.
        negate: negates the values that the call reads, in place (see
            [`negate_referenced`][]; on a rank, the whole shard).
        first: the first call's output (on a rank: its local tensor).
        plain: makes the second output a plain tensor (a DTensor's full tensor).

    Returns:
        The [`Again`][]; ``output`` is a copy taken before the table is negated back.

    A ``torch.compile``d candidate is called again in the first call's global state, not with
    new memory poisoned: dynamo guards on torch's deterministic flag, so a poisoned call would
    run another graph (compiled for that state) and miss what the first graph keeps, such as
    the static output buffers of ``mode="reduce-overhead"``; it would also compile every graph
    twice. To poison a compiled candidate's new memory, verify it under
    ``torch.use_deterministic_algorithms(True)``: both calls then run that graph.
    """
    kept = first.detach().clone()
    negate()
    try:
        with contextlib.nullcontext() if is_compiled(fn) else poisoned_memory():
            out = plain(fn(*args, **kwargs))
        again = Again(out.detach().clone() if isinstance(out, torch.Tensor) else out)
    except Exception as exc:
        again = Again(error=exc)
    finally:
        negate()
    changed = first_difference("out", kept, first)
    if changed is not None:
        again.overwrote = (
            f"a second call on new values changed the first call's {changed}; F.embedding "
            f"returns a new tensor on every call (is one output buffer handed out twice?)"
        )
    return again
