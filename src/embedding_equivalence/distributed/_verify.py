"""``verify_sharded_embedding``: the embedding verifier, run on the ranks of a process group.

A thin adapter over the engine, like ``verify_embedding``: the same strategy (with small
tables, so that shards are uneven or empty), the same boundary phase first (with ``V`` and
``D`` around the world size and its multiples: ``sharded_boundaries``), the same oracle and
bound, the same judge and report. What changes is the runner, the engine's first seam: each
call runs on every rank of a
[`WorkerGroup`][embedding_equivalence.distributed._group.WorkerGroup] (or of the group this process
is in, under ``torchrun``), and every rank's outcome is judged, so outputs and gradients must agree
on every rank.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from .._draw import strategies as ees
from .._draw.boundary_data import Boundary
from .._draw.cases import EmbeddingCase
from .._draw.sizes import SizeSpec
from .._draw.tensors import available_devices
from .._engine.arguments import DEFAULT_MAX_EXAMPLES, Arguments, resolve_arguments
from .._engine.check import AbortRun, Outcome
from .._engine.driver import Part, Verification, drive
from .._engine.names import import_reference, why_not_importable
from .._engine.report import ShardedRun, VerificationReport
from ..oracle import EmbeddingOracle
from ..oracle.call import Call
from ._boundaries import sharded_boundaries, sharded_boundaries_at_size
from ._group import DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, GroupFailure, WorkerGroup, gpus_short
from ._large import LargeShardedCase, ShardedCall, shard_local
from ._large_judge import judge_large
from ._rank import SHARDINGS
from ._repro import sharded_snippet
from ._torchrun import TorchrunGroup

#: Group restarts allowed while shrinking a failure that makes ranks wait on each other.
MAX_RESTARTS = 4


def _reference(candidate: Callable[..., Any] | str) -> tuple[str, Callable[..., Any]]:
    """``("module:qualname", the object)``; refuses what the workers cannot import."""
    if isinstance(candidate, str):
        try:
            return candidate, import_reference(candidate)
        except ValueError as exc:
            raise InvalidArgument(f"candidate={candidate!r} cannot be imported: {exc}") from None
    if not callable(candidate):
        raise InvalidArgument(f"candidate={candidate!r} must be callable or 'module:function'")
    reason = why_not_importable(candidate)
    if reason is not None:
        raise InvalidArgument(
            f"the workers import the candidate by name and cannot import this one: {reason}. "
            f"Define it at the top level of a module (not in the script being run, which the "
            f"workers never import), then pass the function or 'module:function'"
        )
    return f"{candidate.__module__}:{candidate.__qualname__}", candidate


def sharded_embedding_cases(
    *,
    world_size: int,
    sharding: str = "vocab",
    options: Sequence[str] = (),
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] | None = None,
    invalid: bool = False,
    sizes: dict[str, Any] | None = None,
) -> st.SearchStrategy[EmbeddingCase]:
    """``embedding_cases`` with tables small next to the world size (on the CPU).

    ``V`` is drawn from ``1`` to ``4 * world_size + 4`` and ``D`` from ``1`` to
    ``2 * world_size + 4``, so that shrinking reaches tables smaller than the world (trailing
    ranks with no rows under ``Shard(0)``: torch gives ``ceil(V / world)`` rows a rank, so
    ``V = 4`` over 3 ranks is 2, 2, 0; and ``D`` smaller than the world under ``Shard(1)``).

    Args:
        world_size: the number of ranks.
        sharding: ``"vocab"`` or ``"dim"``.
        options: as for [`embedding_cases`][embedding_equivalence.strategies.embedding_cases],
            without ``"sparse"`` (a DTensor has no sparse gradient).
        dtype: a float dtype, or a strategy of them.
        invalid: draw calls that the reference refuses.
        sizes: the verifier's size knobs, resolved by its size check (``vocab_size``,
            ``embedding_dim``, ``num_ids``, ``max_elements``); each one given replaces the
            small default above.

    Returns:
        A strategy of [`EmbeddingCase`][embedding_equivalence.strategies.EmbeddingCase].
    """
    if sharding not in SHARDINGS:
        raise InvalidArgument(f"sharding={sharding!r} must be one of {sorted(SHARDINGS)}")
    if "sparse" in options:
        raise InvalidArgument(
            "options contains 'sparse', which sharded embeddings do not take (a DTensor table "
            "has a dense gradient); leave it out"
        )
    knobs: dict[str, Any] = {
        "vocab_size": st.integers(1, 4 * world_size + 4),
        "embedding_dim": st.integers(1, 2 * world_size + 4),
    }
    knobs.update({k: v for k, v in (sizes or {}).items() if v is not None})
    return ees.embedding_cases(options=options, dtype=dtype, device="cpu", invalid=invalid, **knobs)


def _requested(spec: SizeSpec) -> tuple[int, int] | None:
    """A size knob's ``(min, max)`` when it is an int or a range (checked by ``case_sizes``)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec, spec
    if isinstance(spec, tuple):
        return spec[0], spec[1]
    return None


def _shard_local(case: Any) -> Any:
    """A drawn case whose table is built shard by shard if it is large, else the case itself."""
    if isinstance(case, EmbeddingCase) and shard_local(case.num_embeddings, case.embedding_dim):
        return LargeShardedCase.of(case)
    return case


def _local_boundary(boundary: Boundary) -> Boundary:
    """``boundary`` with its cases built shard by shard where they are large."""
    make = boundary.make
    return dataclasses.replace(
        boundary,
        case=_shard_local(boundary.case),
        make=None if make is None else (lambda size: _shard_local(make(size))),
    )


def verify_sharded_embedding(
    candidate: Callable[..., Any] | str,
    *,
    options: Sequence[str] = (),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    backward: bool = True,
    seed: int | None = None,
    deterministic: bool | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    sharding: str = "vocab",
    world_size: int = 2,
    backend: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    boundaries: bool = True,
) -> VerificationReport:
    """Verify a sharded embedding kernel on the ranks of a process group, forward and backward.

    On every rank the call is ``candidate(input, weight, **options)``: ``input`` a plain
    tensor, the same on every rank, and ``weight`` a DTensor over a 1-D mesh of all ranks,
    ``Shard(0)`` for ``sharding="vocab"`` and ``Shard(1)`` for ``"dim"`` (torch's chunking:
    trailing ranks may hold fewer rows or columns, or none). The candidate returns the full
    ``(*input.shape, D)`` output (a plain tensor or a DTensor); the backward pass runs on every
    rank with the same upstream gradient, and ``weight.grad.full_tensor()`` is judged against
    the exact float64 oracle and derived bound of
    [`verify_embedding`][embedding_equivalence.verify_embedding]. Every rank's output and gradient
    is judged: they must agree on every rank. Each rank also checks what a kernel must not do
    (see [What a kernel must not do](../verify-reference.md#what-a-kernel-must-not-do)):
    its arguments and its shard of the table are left unchanged, the output shares no
    argument's memory,
    and a second call after the shard is negated in place leaves the first output unchanged
    and gives the new values. A table past ``2**22`` elements gets none of the second call.

    The verifier starts its own ranks (spawned processes that join a gloo group on the CPU,
    nccl on CUDA) and ends them by pid when it returns. Called on every rank of a group that
    already exists (``torchrun --nproc-per-node 2 script.py`` after ``init_process_group``),
    it uses that group instead: rank 0 draws and shrinks, each call is broadcast, every rank's
    outcome is gathered on rank 0, and every rank returns the report.

    A rank that raises while the others wait in a collective is a failure of the candidate
    (the group is restarted for the next example); a rank that hangs past ``timeout`` or dies
    ends the run at once with a failing report that names it, with the end of its log (a hung
    rank's Python stacks included).

    A table of at least ``2**22`` elements (through ``vocab_sizes`` and ``embedding_dims``) is
    never built whole: each rank draws its own shard from the example's recipe and wraps it
    with ``DTensor.from_local``, and sends back only the output and the rows of the gradient
    (and of the table after ``max_norm``) that an id references, with the first row that no
    id references yet got a gradient or was changed; the oracle and the bound are computed on
    the referenced rows (see
    [Tables that do not fit one rank](../sharded.md#tables-that-do-not-fit-one-rank)).
    Drawing a shard of 1 GiB takes seconds: raise ``timeout`` for such tables.

    Args:
        candidate: the kernel, importable by the workers: a function defined at the top level
            of a module, or ``"module:function"``.
        options: names from ``("padding_idx", "max_norm", "scale_grad_by_freq")``.
        dtypes: float dtypes to draw; ``None`` means every dtype each device supports.
        devices: ``"cpu"`` and/or ``"cuda"``, one group after the other; ``None`` means every
            device present that can hold ``world_size`` ranks (nccl takes one GPU a rank).
            Under an existing group, the group's device only.
        max_examples: number of examples Hypothesis generates, shared between the devices.
        backward: also check gradients.
        seed: fix the run (the report's ``seed`` replays a random run).
        deterministic: also run each example twice: outputs and gradients must agree bit for
            bit; ``None`` (the default) asks it exactly when torch's deterministic algorithms
            are on (``torch.use_deterministic_algorithms``). Off, a sum in any order within
            its bound is right.
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy (as for
            [`verify_embedding`][embedding_equivalence.verify_embedding]); default 1 to
            ``4 * world_size + 4``.
        embedding_dims: ``D``, likewise; default 1 to ``2 * world_size + 4``.
        num_ids: ``N``, the length of a 1-D input, likewise; default ids of up to three dims.
        sharding: ``"vocab"`` (rows split over ranks) or ``"dim"`` (columns split).
        world_size: the number of ranks to start (ignored under an existing group).
        backend: the torch.distributed backend; ``None``: gloo on the CPU, nccl on CUDA.
        timeout: seconds one example may take on every rank before the group is declared
            hung (default 20, or ``$EMBEDDING_EQUIVALENCE_DISTRIBUTED_TIMEOUT``).
        startup_timeout: seconds the ranks may take to start and join the group, apart from
            a call's ``timeout`` (a loaded machine starts processes slowly; default 120, or
            ``$EMBEDDING_EQUIVALENCE_DISTRIBUTED_STARTUP_TIMEOUT``).
        boundaries: first run the fixed boundary examples of sharded tables (``V`` and ``D``
            from 1 to the world size and around its multiples, so that trailing shards are
            short or empty, up to 4,096 rows and 1,024 columns; ids at every shard edge; 0-d
            and empty ids; each combination of the options with ``padding_idx`` on a
            trailing rank's row; bad input at its edges on the CPU), the same under every
            seed; see
            [Boundary examples](../verify-reference.md#boundary-examples).
            When the size knobs ask for a table built shard by shard, the examples at that
            size follow: the sharded axis at its largest value and at the world's multiple
            next to it, with ids at every shard edge.

    Returns:
        A [`VerificationReport`][embedding_equivalence.VerificationReport]; its ``sharded``
        record ([`ShardedRun`][embedding_equivalence.ShardedRun]: the sharding, the world size,
        how often the group started and how long each start took) describes the group.

    Raises:
        InvalidArgument: a candidate the workers cannot import, an unknown sharding or option,
            a device that is not present, or a bad ``world_size``/``timeout``/
            ``startup_timeout``/``max_examples``
            (over nccl, ``world_size`` at most the number of GPUs: one rank per GPU).
    """
    reference, fn = _reference(candidate)
    if sharding not in SHARDINGS:
        raise InvalidArgument(f"sharding={sharding!r} must be one of {sorted(SHARDINGS)}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InvalidArgument(f"world_size={world_size!r} must be a positive int")
    for name, seconds in (("timeout", timeout), ("startup_timeout", startup_timeout)):
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
            raise InvalidArgument(f"{name}={seconds!r} must be a positive number of seconds")
    existing = dist.is_available() and dist.is_initialized()
    if existing:
        own = "cuda" if dist.get_backend() == "nccl" else "cpu"
        if devices is not None and [torch.device(d).type for d in devices] != [own]:
            raise InvalidArgument(
                f"devices={list(devices)!r}: under an existing {dist.get_backend()} group the "
                f"ranks run on its device; pass devices=[{own!r}] or leave devices out"
            )
        devices = [own]
    elif devices is None:
        devices = [d for d in available_devices() if gpus_short(world_size, d, backend, "") is None]
    args = resolve_arguments(
        "verify_sharded_embedding", fn, options=options, dtypes=dtypes, devices=devices,
        max_examples=max_examples, seed=seed, deterministic=deterministic,
        backward=backward, boundaries=boundaries,
        vocab_sizes=vocab_sizes, embedding_dims=embedding_dims, num_ids=num_ids,
    )  # fmt: skip
    for device in args.devices:
        short = None if existing else gpus_short(world_size, device, backend, "world_size=")
        if short is not None:
            raise InvalidArgument(short)
    times = {"timeout": timeout, "startup_timeout": startup_timeout}
    if existing and dist.get_rank() != 0:  # rank 0 drives; the others run what it sends
        return TorchrunGroup(args.devices[0], **times).serve()
    new_group: Callable[..., WorkerGroup | TorchrunGroup] = (
        functools.partial(TorchrunGroup, **times)
        if existing
        else functools.partial(WorkerGroup, world_size, backend=backend, **times)
    )
    world = dist.get_world_size() if existing else world_size
    vocab, dim = _requested(vocab_sizes), _requested(embedding_dims)
    at_size = (vocab, dim) if vocab is not None and dim is not None else None
    part = functools.partial(_part, args, reference, new_group, sharding, world, at_size)
    parts = [functools.partial(part, device) for device in args.devices]
    return drive(Verification(fn, args, EmbeddingOracle.for_call, parts))


def _part(
    args: Arguments,
    reference: str,
    new_group: Callable[..., WorkerGroup | TorchrunGroup],
    sharding: str,
    world: int,
    at_size: tuple[tuple[int, int], tuple[int, int]] | None,
    device: str,
) -> Part:
    """One device's part of [`verify_sharded_embedding`][]: its cases, its group, its record.

    The group (``new_group(device=device)``) starts its ranks on the part's first call. Its
    boundary phase is the sharded one, then the examples at the requested size if it is large.
    """
    dts = args.dtypes_on(device)
    group = new_group(device=device)
    phases = [sharded_boundaries(sharding, world, args.options, dts, (device,))]
    if at_size is not None and shard_local(at_size[0][1], at_size[1][1]):
        phases.append(sharded_boundaries_at_size(sharding, world, args.options, dts, *at_size))

    def cases(invalid: bool = False) -> st.SearchStrategy[Any]:
        return sharded_embedding_cases(
            world_size=world, sharding=sharding, options=args.options,
            dtype=st.sampled_from(dts), invalid=invalid, sizes=args.sizes,
        ).map(_shard_local)  # fmt: skip

    def run(candidate: Callable[..., Any], call: Call) -> list[Outcome]:
        """The engine's runner seam for a process group: every rank runs the call."""
        # The ranks import the candidate by reference; here it only names the call.
        if group.starts > MAX_RESTARTS + 1:
            raise AbortRun(
                f"stopped shrinking after {MAX_RESTARTS} restarts of the process group (each "
                f"failure that leaves ranks waiting in a collective needs one); the smallest "
                f"failure found so far is shown",
                use_last_failure=True,
            )
        try:
            outcomes = group.run(reference, call, sharding)
        except GroupFailure as exc:
            raise AbortRun(str(exc)) from exc
        if isinstance(call, ShardedCall):  # pieces of the referenced rows: judged here
            return judge_large(candidate, call, outcomes, sharding)
        return outcomes

    def finish(report: VerificationReport) -> VerificationReport:
        seconds = tuple(round(s, 3) for s in group.startup_seconds)
        record = ShardedRun(sharding, world, group.starts, seconds)
        report = dataclasses.replace(report, sharded=record)
        if isinstance(group, TorchrunGroup):
            group.finish(report)  # every other rank returns this report
        return report

    return Part(
        cases(),
        invalid=cases(invalid=True),
        boundaries=map(_local_boundary, itertools.chain.from_iterable(phases)),
        runner=run,
        snippet=sharded_snippet(sharding, world, device),
        devices=(device,),
        dtypes=dts,
        finish=finish,
        close=group.close if isinstance(group, WorkerGroup) else None,
    )
