"""``verify_embedding``, ``verify_embedding_bag``, ``verify_quantized_embedding``: descriptions.

Each verifier checks its own arguments' meaning (the options of its kind of call, the bag's
modes, the quantized scheme), then describes its run as a
[`Verification`][embedding_equivalence._engine.driver.Verification]: the strategy of cases, the
boundary examples and the oracle, in one part or a part per mode. The one driver
([`drive`][embedding_equivalence._engine.driver.drive]) runs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._draw import strategies as ees
from .._draw.boundaries import bag_boundaries, embedding_boundaries, quantized_boundaries
from .._draw.sizes import SizeSpec
from .._draw.tensors import check_scheme_argument
from ..forms.options import option_applies
from ..oracle import BagOracle, EmbeddingOracle
from ..oracle.quantized import QuantizedOracle
from .arguments import DEFAULT_MAX_EXAMPLES, resolve_arguments
from .driver import Part, Verification, drawn_part, drive
from .report import BagRun, QuantizedRun, VerificationReport


def verify_embedding(
    candidate: Callable[..., Any],
    *,
    options: Sequence[str] = (),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    backward: bool = True,
    seed: int | None = None,
    deterministic: bool | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    transforms: Sequence[str] = (),
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` is the embedding function, forward and backward.

    ``candidate`` is any callable with ``F.embedding``'s signature, called as
    ``candidate(input, weight, **kwargs)`` with only the keyword options named in
    ``options``. Over drawn vocab sizes (1 to 262,144), dims, dtypes, devices, id shapes
    (0-d, empty, multi-dim, with duplicates) and layouts (non-contiguous tables and ids), it
    checks against the exact float64 oracle, never against another torch kernel:

    - the output's shape, dtype, device, and values (exactly);
    - with ``backward``, the weight's gradient within the derived error bound (and its sparse
      layout under ``sparse=True``);
    - with ``max_norm``, the in-place renorm of the referenced rows;
    - what a kernel must not do, on every example: change an argument in place (the ids,
      the table apart from ``max_norm``'s renorm, the upstream gradient), return memory an
      argument shares, hand out one output buffer twice, keep state between calls (a second
      call after the table is negated in place must see the change), or return memory it
      allocated and did not write; see
      [What a kernel must not do](../verify-reference.md#what-a-kernel-must-not-do);
    - bad input (an id out of range, a negative id, floating ids, ``padding_idx`` out of
      range): the candidate must raise, as the reference does.

    Hypothesis shrinks any failure to a minimal call, returned as a runnable snippet. Global
    state (grad mode, default dtype, RNG, deterministic flags, TF32) is restored afterwards.

    Args:
        candidate: the kernel under test.
        options: names from ``("padding_idx", "max_norm", "scale_grad_by_freq", "sparse")``.
        dtypes: float dtypes to draw; ``None`` means every dtype each device supports.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        backward: also check gradients.
        seed: fix the run (the report's ``seed`` replays a random run).
        deterministic: also run each example twice: outputs and gradients must agree bit for
            bit; ``None`` (the default) asks it exactly when torch's deterministic algorithms
            are on (``torch.use_deterministic_algorithms``). Off, a sum in any order within
            its bound is right.
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy; default
            1 to 262,144 within a small element budget.
        embedding_dims: ``D``, likewise; default up to 64 within that budget.
        num_ids: ``N``, the length of a 1-D input, likewise; default ids of up to three
            dims. With ints and ranges the largest example's memory is checked first.
        transforms: also check forward-mode AD and/or ``torch.func.vmap``, from
            ``("jvp", "vmap")``: the tangent of the output along a tangent table must be the
            lookup of that table, and a batch of tables must give each table's lookup.
        boundaries: first run the fixed boundary examples (sizes at ``2**k - 1``, ``2**k``
            and ``2**k + 1`` up to N = ``2**17`` ids, D = ``2**13``, V = ``2**24`` rows and
            ``2**16`` repeats of one id; edge shapes and layouts; bad input at its edges; each
            combination of the options), the same under every seed; see
            [Boundary examples](../verify-reference.md#boundary-examples).

    Returns:
        A [`VerificationReport`][embedding_equivalence.VerificationReport]; call
        ``.raise_for_failure()`` to turn a failure into
        an exception.

    Raises:
        InvalidArgument: unknown options, a non-float dtype, an absent device, a bad
            ``max_examples`` or size knob, or a largest example that would not fit in memory.

    Examples:
        >>> import torch.nn.functional as F
        >>> from embedding_equivalence import verify_embedding
        >>> verify_embedding(F.embedding, max_examples=20, seed=0).passed
        True
        >>> wraps = lambda input, weight: weight[input].clone()  # id -1: the last row
        >>> report = verify_embedding(wraps, max_examples=20, seed=0)
        >>> report.passed, report.boundary
        (False, 'fails at id -1 (int64)')
    """
    args = resolve_arguments(
        "verify_embedding", candidate, options=options, dtypes=dtypes, devices=devices,
        max_examples=max_examples, seed=seed, deterministic=deterministic,
        backward=backward, boundaries=boundaries,
        transforms=transforms, vocab_sizes=vocab_sizes, embedding_dims=embedding_dims,
        num_ids=num_ids,
    )  # fmt: skip
    cases = functools.partial(ees.embedding_cases, options=args.options)
    part = drawn_part(args, cases, embedding_boundaries(args.options, args.dtypes, args.devices))
    return drive(Verification(candidate, args, EmbeddingOracle.for_call, [lambda: part]))


def verify_embedding_bag(
    candidate: Callable[..., Any],
    *,
    options: Sequence[str] = (),
    modes: Sequence[str] = ("sum", "mean", "max"),
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    backward: bool = True,
    seed: int | None = None,
    deterministic: bool | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    transforms: Sequence[str] = (),
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` is ``F.embedding_bag``, forward and backward.

    ``candidate`` is any callable with ``F.embedding_bag``'s signature, called as
    ``candidate(input, weight, offsets, mode=..., **kwargs)`` for a 1-D input (or
    ``candidate(input, weight, mode=..., **kwargs)`` for a 2-D one) with only the keyword
    options named in ``options``. Over drawn vocab sizes, dims, dtypes, devices, bags (empty
    ones, duplicate ids inside a bag, 1-D inputs with offsets and 2-D inputs) and layouts, it
    checks against the exact float64 oracle, never against another torch kernel:

    - the output's shape ``(B, D)``, dtype, device, and values, within the derived rounding
      bound of the sum or mean, exactly for max (empty bags exactly zero);
    - with ``backward``, the gradient of the weight within the derived bound (any of the
      tied rows may take a ``max`` bag's gradient), its sparse layout under ``sparse=True``,
      and the gradient of ``per_sample_weights``;
    - with ``max_norm``, the in-place renorm of every row the input references;
    - what a kernel must not do, on every example: change an argument in place (the ids,
      the table apart from ``max_norm``'s renorm, the upstream gradient), return memory an
      argument shares, hand out one output buffer twice, keep state between calls (a second
      call after the table is negated in place must see the change), or return memory it
      allocated and did not write; see
      [What a kernel must not do](../verify-reference.md#what-a-kernel-must-not-do);
    - bad input of the kinds in
      [`BAG_INVALID_KINDS`][embedding_equivalence.strategies.BAG_INVALID_KINDS] (on the CPU, one
      example in five): the candidate must raise, as the reference does. The kinds in
      [`CRASHING_BAG_INVALID_KINDS`][embedding_equivalence.strategies.CRASHING_BAG_INVALID_KINDS] (a
      negative offset, no offsets but ids, an offset past the end before the last) are left out,
      because ``F.embedding_bag`` itself reads out of bounds on them and can crash the process; so
      are zero bags followed by ids under ``include_last_offset``, for the same reason. Check those
      with ``embedding_bag_cases(invalid=[...])`` if your kernel is safe.

    The examples are shared equally between the modes, one Hypothesis run per mode in the
    order given (most bugs live in one mode); the run stops at the first failure. Hypothesis
    shrinks it to a minimal call, returned as a runnable snippet. Global state (grad mode,
    default dtype, RNG, deterministic flags, TF32) is restored afterwards.

    Args:
        candidate: the kernel under test.
        options: names from ``("padding_idx", "max_norm", "scale_grad_by_freq", "sparse",
            "per_sample_weights", "include_last_offset")``.
        modes: the reductions to exercise, from ``("sum", "mean", "max")``.
        dtypes: float dtypes to draw; ``None`` means every dtype each device supports.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        backward: also check gradients.
        seed: fix the run (the report's ``seed`` replays a random run).
        deterministic: also run each example twice: outputs and gradients must agree bit for
            bit; ``None`` (the default) asks it exactly when torch's deterministic algorithms
            are on (``torch.use_deterministic_algorithms``). Off, a sum in any order within
            its bound is right.
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy (as for
            [`verify_embedding`][]).
        embedding_dims: ``D``, likewise.
        num_ids: ``N``, the length of a 1-D input cut into bags at drawn offsets (empty
            bags included), likewise; default inputs of up to 64 ids, 1-D or 2-D.
        transforms: also check ``("jvp", "vmap")`` as [`verify_embedding`][] does (``jvp``
            not for ``mode="max"``, whose tangent follows the primal's arg-max).
        boundaries: first run the fixed boundary examples of bags (empty bags first and
            last, no bags, 2-D inputs, bad offsets, the length of one bag up to ``2**16`` ids,
            up to ``2**17`` bags, ``D`` and ``V`` at powers of two and their neighbours, each
            combination of the options with each mode), the same under every seed.

    Returns:
        A [`VerificationReport`][embedding_equivalence.VerificationReport] (its ``bag``
        record names the modes); call
        ``.raise_for_failure()`` to turn a failure into an exception.

    Raises:
        InvalidArgument: unknown options or modes, an option that ``modes`` never allows, a
            non-float dtype, an absent device, or a bad ``max_examples``.

    Examples:
        >>> from embedding_equivalence import lookup_embedding_bag, verify_embedding_bag
        >>> report = verify_embedding_bag(lookup_embedding_bag, modes=("sum",), max_examples=20)
        >>> report.passed
        True

        ``F.embedding_bag`` itself fails a 2-D input with no ids in a bag (``(B, 0)``): the
        report names that defect as torch's (``report.torch_defect``).
    """
    args = resolve_arguments(
        "verify_embedding_bag", candidate, options=options, dtypes=dtypes, devices=devices,
        max_examples=max_examples, seed=seed, deterministic=deterministic,
        backward=backward, boundaries=boundaries,
        transforms=transforms, vocab_sizes=vocab_sizes, embedding_dims=embedding_dims,
        num_ids=num_ids,
    )  # fmt: skip
    opts, mds = args.options, tuple(modes)
    ees.embedding_bag_cases(modes=modes, options=opts)  # refuses bad modes and options early
    any_mode = functools.partial(ees.embedding_bag_cases, modes=mds, options=opts)

    # One part per mode, each with its share of the examples: most bugs live in one mode, and
    # a single run over all modes can leave a mode with a handful of examples. The boundary
    # examples (of every mode) run once, in the first part.
    def part(i: int, mode: str) -> Callable[[], Part]:
        applies = tuple(o for o in opts if option_applies(o, mode))
        valid = functools.partial(ees.embedding_bag_cases, modes=(mode,), options=applies)
        phase = bag_boundaries(opts, mds, args.dtypes, args.devices) if i == 0 else ()
        return functools.partial(drawn_part, args, valid, phase, invalid=any_mode)

    parts = [part(i, mode) for i, mode in enumerate(mds)]
    return drive(Verification(candidate, args, BagOracle.for_call, parts, {"bag": BagRun(mds)}))


def verify_quantized_embedding(
    candidate: Callable[..., Any],
    *,
    scheme: str,
    symmetric: bool = False,
    dtypes: Sequence[torch.dtype] | None = None,
    devices: Sequence[str | torch.device] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    seed: int | None = None,
    deterministic: bool | None = None,
    vocab_sizes: SizeSpec = None,
    embedding_dims: SizeSpec = None,
    num_ids: SizeSpec = None,
    boundaries: bool = True,
) -> VerificationReport:
    """Verify that ``candidate`` looks rows of a quantized table up, dequantized.

    ``candidate(input, qweight, scale, zero_point)`` must return ``(*input.shape, D)`` in
    ``scale.dtype``: row ``input[i]`` of the table that the scheme stores (see
    [`quantize_rowwise`][embedding_equivalence.quantize_rowwise] for the schemes). Over drawn
    tables with wide magnitudes (scales from the subnormals to products that overflow the
    output dtype, constant rows, rows that dequantize to zero), ids of every shape and layout,
    and scale dtypes, it checks against the exact float64 dequantization:

    - the output's shape, dtype (the scale's) and device;
    - its values, within ``(u_c + u_o + u_c u_o) |x| + (1 + u_o) eta_c + eta_o``: the product
      rounded in a float32 compute dtype and the result rounded once to the output dtype,
      nothing looser (a kernel that computes in float16 fails); where the exact value rounds
      to an infinity in the output dtype, that infinity;
    - what a kernel must not do, on every example: change an argument in place (the ids,
      the table apart from ``max_norm``'s renorm, the upstream gradient), return memory an
      argument shares, hand out one output buffer twice, keep state between calls (a second
      call after the table is negated in place must see the change), or return memory it
      allocated and did not write; see
      [What a kernel must not do](../verify-reference.md#what-a-kernel-must-not-do);
    - bad input (an id out of range, a negative id, floating ids): the candidate must raise.

    Args:
        candidate: the kernel under test.
        scheme: ``"int8"``, ``"uint4"``, ``"float8_e4m3fn"`` or ``"float8_e5m2"``.
        symmetric: ``"int8"`` only: tables without a zero point (``zero_point=None``).
        dtypes: scale dtypes to draw; ``None`` means float32, float16 and bfloat16.
        devices: devices to draw; ``None`` means every device present.
        max_examples: number of examples Hypothesis generates.
        seed: fix the run (the report's ``seed`` replays a random run).
        deterministic: also run each example twice: outputs and gradients must agree bit for
            bit; ``None`` (the default) asks it exactly when torch's deterministic algorithms
            are on (``torch.use_deterministic_algorithms``). Off, a sum in any order within
            its bound is right.
        vocab_sizes: ``V``: an int, an inclusive ``(min, max)`` range or a strategy.
        embedding_dims: ``D``, likewise (odd values are made even for ``"uint4"``).
        num_ids: ``N``, the length of a 1-D input, likewise.
        boundaries: first run the fixed boundary examples (edge shapes and layouts, bad ids
            at their edges, ``N``, ``D`` and ``V`` at powers of two and their neighbours),
            the same under every seed.

    Returns:
        A [`VerificationReport`][embedding_equivalence.VerificationReport]; its ``quantized``
        record names the scheme.

    Raises:
        InvalidArgument: an unknown scheme, ``symmetric`` with a scheme other than
            ``"int8"``, a non-float dtype, an absent device, a bad ``max_examples`` or size
            knob.

    Examples:
        >>> from embedding_equivalence import lookup_quantized_embedding
        >>> from embedding_equivalence import verify_quantized_embedding
        >>> def kernel(input, qweight, scale, zero_point):
        ...     return lookup_quantized_embedding(input, qweight, scale, zero_point, scheme="int8")
        >>> verify_quantized_embedding(kernel, scheme="int8", max_examples=20, seed=0).passed
        True
    """
    check_scheme_argument(scheme, "verify_quantized_embedding")
    args = resolve_arguments(
        "verify_quantized_embedding", candidate, dtypes=dtypes, devices=devices,
        max_examples=max_examples, seed=seed, deterministic=deterministic,
        backward=False, boundaries=boundaries,
        vocab_sizes=vocab_sizes, embedding_dims=embedding_dims, num_ids=num_ids,
        default_dtypes=ees.QUANTIZED_SCALE_DTYPES, scheme=scheme,
    )  # fmt: skip
    cases = functools.partial(ees.quantized_embedding_cases, scheme, symmetric=symmetric)
    phase = quantized_boundaries(scheme, symmetric, args.dtypes, args.devices)
    part = drawn_part(args, cases, phase)
    record = QuantizedRun(scheme, symmetric)
    oracle = QuantizedOracle.factory(scheme)
    return drive(Verification(candidate, args, oracle, [lambda: part], {"quantized": record}))
