r"""The exact float64 reference of ``F.embedding_bag`` and its derived error bounds.

**Bags** (``F.embedding_bag``). Bag ``b`` holds the positions ``i`` of its ``k = k_b`` ids
other than ``padding_idx``; its row is a reduction of the terms ``t_i = c_i x_i`` with
``x_i = W[ids_i, d]`` and ``c_i = 1``, or ``c_i = p_i`` (``per_sample_weights``). All bounds
below come from one lemma (Higham, Lemma 3.1 with eq. 4.4): if each term reaches the computed
result through at most ``m`` roundings (factors ``1 + delta``, ``|delta| <= u``; a rounding
in a wider accumulator has ``|delta| <= u`` too), then

.. math:: |\hat S - S| \le \gamma_m \sum_i |t_i| .

- ``sum``: ``k - 1`` additions and one rounding to the dtype, ``m = k`` (as above).
- ``per_sample_weights``: one more rounding for the product ``p_i x_i``: ``m = k + 1``. (A
  bag-count matrix that first adds the weights of a repeated id, then multiplies, spends
  ``c - 1`` additions there and saves as many in the sum over rows: still ``m <= k + 1``.)
- ``mean``: the sum divided by ``k``: one rounding for the quotient, or two for the
  reciprocal and the product, ``m = k + 2``; the bound scales with ``sum |x_i| / k``.
- ``max``: a selection, no arithmetic: exact (bound zero).

The oracle rounds too: ``fsum`` once, the division of ``mean`` once, and (float64 tables only)
each product ``p_i x_i`` once; products of two float32/float16/bfloat16 values are exact in
float64 (at most 48 significant bits). That is at most ``s + 1`` float64 roundings, where
``s = m - k`` counts the extra roundings above, hence ``gamma_{s+1}(u_64)``. With subnormal
results each of the ``k + s`` roundings may lose ``eta``. Every forward entry is held to

.. math:: |\hat y_{b,d} - y_{b,d}| \le \big(\gamma_{k+s}(u) + \gamma_{s+1}(u_{64})\big)
          A_{b,d} + R_{b,d} + (k + s)\,\eta,
          \qquad A_{b,d} = \sum_i |c_i| \, (|x_i| + r_i) \; (/ k \text{ for mean}),

with ``s = 0`` (sum), ``1`` (weighted sum), ``2`` (mean). ``r_i`` is zero, or with ``max_norm``
the [`renorm_error_bound`][] of the entry: the candidate's renormalized entry differs from
the oracle's by at most ``r_i``, which moves the exact sum by ``R = sum_i |c_i| r_i`` (``/ k``
for mean) and the maximum by at most ``R = max_i r_i`` (a maximum is 1-Lipschitz in each
argument). An empty bag (or one of padding only) must be exactly zero, and a non-finite exact
value must be matched exactly (NaN by NaN). The signs of zeros are not compared: a product
adds ``+0.0`` terms, so ``-0.0`` may come back as ``+0.0`` in any mode.

**Bag gradients.** Row ``v`` of the weight's gradient collects, over the ``k_v`` occurrences
``i`` of ``v`` in the bags, the terms ``c_i G[b_i, d]`` with ``c_i = 1`` (sum), ``p_i``
(weighted sum, ``s = 1``) or ``1 / k_{b_i}`` (mean, ``s = 2``): the same lemma gives the same
bound with ``k = k_v`` and ``A = sum_i |c_i G[b_i, d]|``. ``scale_grad_by_freq`` divides by
``k_v`` (two more roundings: ``s + 2``, one more in the oracle). The padding row, rows that
occur in no bag and rows that occur only after the last offset must be exactly zero.

In ``max`` mode the upstream gradient ``G[b, d]`` goes to one maximizing entry of bag ``b``
in column ``d``, so row ``v`` collects a sum of ``k`` = (number of bags assigned to ``v``)
terms: ``gamma_k(u) + gamma_1(u_64)`` times ``sum |G|``. Where several rows tie for the
maximum, every choice is a valid (sub)gradient, and kernels differ (``F.embedding_bag``
keeps the first maximum, a scatter-based kernel the last). The check therefore accepts a
gradient if *some* assignment of each tied bag to one of its maximizing rows explains it
within the bound: per column, tied bags that share rows form components, and each component
is searched depth-first, pruned by the interval that the unassigned bags can still add to each
row. A row is a maximizer of its bag when its value equals the maximum (NaN, if the column
holds one, is the maximum, as in ``torch.amax``); with ``max_norm``, when it lies within the
renorm bounds of the maximum (``x_i + r_i >= max_j (x_j - r_j)``). Should a component need
more than [`MAX_TIE_SEARCH`][] search steps, its rows are not checked (never a false alarm;
no drawn case comes close).

The gradient of ``per_sample_weights`` is ``<W[ids_i], G[b_i]>``, a dot product of ``D``
terms: ``D`` products, ``D - 1`` additions and one rounding to the dtype, ``gamma_{D+1}(u)``
(Higham eq. 3.5), plus ``gamma_2(u_64)`` for the oracle (a product in float64 and ``fsum``),
the renorm perturbation ``sum_d r_d |G_d|`` and ``(D + 1) eta``. Entries of padding ids and
of ids after the last offset must be exactly zero.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple, TypedDict

import torch

from ..forms.bag import bag_starts, check_bag_call
from ..forms.validation import check_ids_in_range
from .bounds import (
    U64,
    gamma,
    gammas,
    grouped_sums,
    row_sums,
    segment_sums,
    subnormal_loss,
    unit_roundoff,
    zero_where_not_finite,
)
from .call import Call
from .embedding import referenced_rows, renorm_expected, renormed_table
from .expected import ExpectedRows, Oracle
from .max_ties import MaxBags

if TYPE_CHECKING:
    from typing_extensions import Unpack


class BagOptions(TypedDict, total=False):
    """The keyword arguments of ``F.embedding_bag``, under its own names: their one home.

    [`BagOracle`][] and the four reference functions take ``input``, ``weight`` and
    ``offsets`` as ``F.embedding_bag`` does and these by keyword, so that a call's keyword
    arguments pass through unchanged. What each means, and its default, is documented once,
    in [`reference_embedding_bag`][].
    """

    max_norm: float | None
    norm_type: float
    scale_grad_by_freq: bool
    mode: str
    sparse: bool
    per_sample_weights: torch.Tensor | None
    include_last_offset: bool
    padding_idx: int | None


class BagGradients(NamedTuple):
    """Gradients (or their bounds) of one bag call, float64 on the CPU."""

    weight: torch.Tensor
    """``(V, D)``: of the table."""
    per_sample_weights: torch.Tensor | None
    """Of the input's shape: of ``per_sample_weights`` (``None`` without them)."""


# -- the call, parsed ------------------------------------------------------------------------


class BagOracle(MaxBags, Oracle):
    """The exact reference of one ``F.embedding_bag`` call (the ``Oracle`` seam).

    The call is parsed once, into tensors: the positions of each bag's ids (padding left
    out), the referenced rows (renormalized by ``max_norm``) and the constants of the
    bounds. Every answer is then computed for all bags and rows at once, with each exact sum
    taken over a slice of terms sorted by bag or by row
    ([`segment_sums`][embedding_equivalence.oracle.bounds.segment_sums]): no Python
    loop over the ids or the bags, so ``2**17`` ids cost what their sorts and ``fsum``s cost.
    This class is the entry point of the reference functions of this module.

    Args:
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without, all in ``[0, V)``.
        weight: the ``(V, D)`` table before the call (not modified), read here: its
            referenced rows, and with ``max_norm`` the renormed rows and what tells the rows
            the call changes (a copy, or a digest of each row of a large table; see
            [`table_as_it_was`][embedding_equivalence.oracle.expected.table_as_it_was]). The
            candidate may then renormalize the table in place.
        offsets: ``(B,)`` bag starts (``(B + 1,)`` with ``include_last_offset``), or ``None``
            for a 2-D input.
        dtype: dtype the candidate computes in (default: the weight's).
        **options: ``F.embedding_bag``'s keyword arguments, [`BagOptions`][]. Other keys (a
            candidate's own options, which do not change the values) are ignored.

    Raises:
        TypeError: as [`lookup_embedding_bag`][embedding_equivalence.lookup_embedding_bag]
            raises it: the reference refuses bad input through the same checks.
        ValueError: likewise (offsets, ranks, mode, ``per_sample_weights``, ...).
        IndexError: an id outside ``[0, V)``.
    """

    output_shape_text = "(B, D)"

    def __init__(
        self,
        input: torch.Tensor,
        weight: torch.Tensor,
        offsets: torch.Tensor | None = None,
        *,
        dtype: torch.dtype | None = None,
        **options: Unpack[BagOptions],
    ) -> None:
        mode = options.get("mode", "mean")
        max_norm = options.get("max_norm")
        norm_type = options.get("norm_type", 2.0)
        per_sample_weights = options.get("per_sample_weights")
        include_last_offset = options.get("include_last_offset", False)
        num_embeddings, dim = weight.shape
        padding_idx = check_bag_call(
            input, weight, offsets, max_norm, norm_type, options.get("scale_grad_by_freq", False),
            mode, per_sample_weights, include_last_offset, options.get("padding_idx"),
            "BagOracle",
        )  # fmt: skip
        check_ids_in_range(input, num_embeddings, "BagOracle")
        flat = input.detach().reshape(-1).to(device="cpu", dtype=torch.int64)
        starts, end = bag_starts(input, offsets, include_last_offset)
        self.mode, self.num_embeddings, self.dim = mode, num_embeddings, dim
        self.negates = mode != "max"  # the maxima of the negated rows are the negated minima
        self.input_shape = tuple(input.shape)
        self.scale_grad_by_freq = options.get("scale_grad_by_freq", False)
        self._flat = flat
        # Every id before `end` lies in a bag (offsets start at 0): the bag of each is the last
        # bag that starts at or before it (empty bags start where the next one does).
        bag_of = torch.searchsorted(starts.cpu(), torch.arange(end), right=True) - 1
        keep = flat[:end] != (-1 if padding_idx is None else padding_idx)  # ids lie in [0, V)
        #: ``(M,)`` positions in the flat ids of the ids that count (in a bag, not padding),
        #: in order, so grouped by bag
        self.positions = torch.nonzero(keep).reshape(-1)
        #: ``(M,)`` the bag of each position
        self.bag_of = bag_of[self.positions]
        #: ``(B,)`` how many ids count in each bag
        self.lengths = torch.bincount(self.bag_of, minlength=starts.shape[0])
        ids = flat[self.positions]
        #: ``(R,)`` the rows that some bag references, sorted
        self.row_ids, row_of = torch.unique(ids, sorted=True, return_inverse=True)
        #: ``(M,)`` the index in ``row_ids`` of each position's row
        self.row_of = row_of.reshape(-1)
        #: ``(R, D)`` the (renormalized) float64 rows of ``row_ids``
        self.values = referenced_rows(weight, self.row_ids.tolist(), max_norm, norm_type)
        psw = per_sample_weights
        self.sample_weights = None if psw is None else psw.detach().reshape(-1).cpu().double()
        self._weight, self._max_norm, self._norm_type = weight, max_norm, norm_type
        self.dtype = dt = dtype or weight.dtype
        #: ``(R, D)`` bounds of the renorm's rounding (zero where the entry is not finite;
        #: infinite where no bound exists: (D + 3) u >= 1, every value passes there), or None
        self.renorm_bounds: torch.Tensor | None = None
        #: every row referenced anywhere in the input, renormed (with bounds); the rest as it was
        self._renormed: ExpectedRows | None = None
        if max_norm is not None:  # read now: the candidate renormalizes the table in place
            every = torch.unique(flat)
            self._renormed, originals = renorm_expected(
                weight, every.tolist(), max_norm, norm_type, dt
            )
            mine = torch.searchsorted(every, self.row_ids)  # row_ids lie among them
            self.renorm_bounds = zero_where_not_finite(self._renormed.bound, originals)[mine]
        self.u, self.eta = unit_roundoff(dt), subnormal_loss(dt)
        #: extra roundings per term (besides the k of a plain sum)
        self.extra_roundings = 2 if mode == "mean" else int(self.sample_weights is not None)

    @functools.cached_property
    def table(self) -> torch.Tensor:
        """The whole ``(V, D)`` table in float64 after ``max_norm`` (computed on first use).

        Read from the weight passed in, when first asked: for the reference functions, whose
        weight nothing modifies; the judge asks [`renormed`][] instead.
        """
        return renormed_table(self._weight, self._flat.tolist(), self._max_norm, self._norm_type)

    # -- the Oracle seam ----------------------------------------------------------------------

    @classmethod
    def for_call(cls, call: Call) -> BagOracle:
        """The oracle of ``call`` (its ``weight`` must be the table as it was before the call)."""
        return cls(call.input, call.weight, call.offsets, **call.kwargs)

    def output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact ``(B, D)`` reduction and its bound (signs of zeros are not compared)."""
        return self.forward()

    def negated_output(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The output on the negated table: in ``max`` mode the maxima of the negated rows."""
        if self.negates:
            return super().negated_output()
        x, r = self._entries()
        return self._max_forward(-x, r)

    def renormed(self) -> ExpectedRows | None:
        """Every row referenced anywhere in ``input`` after the renorm; the rest untouched."""
        return self._renormed

    def weight_grad(self, grad_output: torch.Tensor) -> ExpectedRows:
        """The table's gradient on the referenced rows (``max``: first maximum of each bag)."""
        rows, grad, bound = self.weight_grad_rows(grad_output)
        return ExpectedRows(rows, grad, bound, self.num_embeddings)

    def weight_grad_explaining(
        self, grad_output: torch.Tensor, actual: torch.Tensor
    ) -> ExpectedRows | None:
        """``max`` only: the assignment of tied bags to rows that explains ``actual``."""
        if self.mode != "max":
            return None
        rows, grad, bound = self.max_grad_matching(grad_output, actual)
        return ExpectedRows(
            rows, grad, bound, self.num_embeddings,
            note=" (in max mode any maximizing row of a bag may take its gradient; no such "
            "choice explains this one)",
        )  # fmt: skip

    def per_sample_weights_grad(
        self, grad_output: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The gradient of ``per_sample_weights`` and its bound, or ``None`` without them."""
        return None if self.sample_weights is None else self.psw_grad(grad_output)

    # -- the terms -----------------------------------------------------------------------------

    def _coefficients(self) -> torch.Tensor | None:
        """``(M,)`` the ``per_sample_weights`` of the positions, or ``None`` (all ones)."""
        return None if self.sample_weights is None else self.sample_weights[self.positions]

    # -- forward -----------------------------------------------------------------------------

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(out, bound)``, both ``(B, D)`` float64."""
        x, r = self._entries()
        k = self.lengths
        if self.mode == "max":
            return self._max_forward(x, r)
        c = self._coefficients()
        s = self.extra_roundings
        # The coefficients, ones without per_sample_weights (a product by 1 is exact).
        w = torch.ones(x.shape[0], 1, dtype=torch.float64) if c is None else c[:, None]
        values = segment_sums(w * x, k)
        mag = segment_sums(w.abs() * (x.abs() + r), k)
        pert = torch.zeros_like(values)
        if self.renorm_bounds is not None:
            pert = segment_sums(w.abs() * r, k)
        if self.mode == "mean":
            kf = k.clamp(min=1).to(torch.float64)[:, None]
            values, mag, pert = values / kf, mag / kf, pert / kf
        g = gammas(k + s, self.u) + gamma(s + 1, U64)
        slack = g[:, None] * mag + pert + ((k + s).to(torch.float64) * self.eta)[:, None]
        bound = zero_where_not_finite(slack, values)
        empty = k == 0
        values[empty], bound[empty] = 0.0, 0.0
        return values, bound

    # -- backward ----------------------------------------------------------------------------

    def weight_grad_rows(
        self, grad_output: torch.Tensor
    ) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """``(rows, grad, bound)``: the referenced rows and their ``(R, D)`` gradient and bound.

        Every other row's gradient must be exactly zero. ``max``: first maximum of each bag.
        """
        if self.mode == "max":
            return self.max_grad_rows(grad_output)
        rows = self.row_ids.tolist()
        s = self.extra_roundings + (2 if self.scale_grad_by_freq else 0)
        terms = self._upstream(grad_output)[self.bag_of]
        c = self._coefficients()
        if self.mode == "mean":
            terms = terms / self.lengths[self.bag_of].to(torch.float64)[:, None]
        elif c is not None:
            terms = c[:, None] * terms
        sums, mags, k = grouped_sums(self.row_of, terms, len(rows))
        # Every id before the end lies in a bag, so a row's count in the input up to the end
        # (scale_grad_by_freq's divisor) is its number of occurrences k.
        div = k.to(torch.float64)[:, None] if self.scale_grad_by_freq else 1.0
        gam = gammas(k + s, self.u) + gamma(s + 1, U64)
        grad = sums / div
        slack = gam[:, None] * mags / div + ((k + s).to(torch.float64) * self.eta)[:, None]
        return rows, grad, zero_where_not_finite(slack, sums)

    def psw_grad(self, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(grad, bound)`` of ``per_sample_weights``, of the input's shape."""
        x, r = self._entries()
        g = self._upstream(grad_output)[self.bag_of]
        d = self.dim
        value = row_sums(x * g)
        mag = row_sums((x.abs() + r) * g.abs())
        pert = row_sums(r * g.abs())
        gam = gamma(d + 1, self.u) + gamma(2, U64)
        bound = zero_where_not_finite(gam * mag + pert + (d + 1) * self.eta, value)
        grad, slack = torch.zeros(2, self._flat.shape[0], dtype=torch.float64)
        grad[self.positions], slack[self.positions] = value, bound
        return grad.reshape(self.input_shape), slack.reshape(self.input_shape)


# -- the reference functions: one BagOracle each -------------------------------------------------

_OPTION_NAMES = frozenset(BagOptions.__annotations__)


def _oracle(
    name: str,
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None,
    options: BagOptions,
    dtype: torch.dtype | None = None,
) -> BagOracle:
    """The [`BagOracle`][] of a reference function's call; a misspelt option is an error."""
    if unknown := sorted(set(options) - _OPTION_NAMES):
        raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}")
    return BagOracle(input, weight, offsets, dtype=dtype, **options)


def _gradients(problem: BagOracle, grad_output: torch.Tensor, which: int) -> BagGradients:
    """The gradients' exact values (``which=0``) or their bounds (``which=1``), whole."""
    psw = problem.per_sample_weights_grad(grad_output)
    weight = problem.weight_grad(grad_output).full()[which]
    return BagGradients(weight, None if psw is None else psw[which])


def reference_embedding_bag(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    **options: Unpack[BagOptions],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact bag reduction in float64 on the CPU, and the table after ``max_norm``.

    Takes ``F.embedding_bag``'s arguments (``scale_grad_by_freq`` and ``sparse`` do not change
    the forward and are accepted so that a call's arguments pass through unchanged). Each
    ``sum`` is correctly rounded (``math.fsum``), ``mean`` divides it by the bag's number of
    non-padding ids, ``max`` takes the element-wise maximum (NaN if the column holds one).
    Empty bags, and bags of padding only, give zeros. With ``max_norm`` every row referenced
    anywhere in ``input`` is renormalized first, as ``F.embedding_bag`` does.

    The arguments are the same for the four reference functions (and ``BagOracle``) and
    are described here once.

    Args:
        input: ids, ``(N,)`` with ``offsets`` or ``(B, L)`` without, all in ``[0, V)``.
        weight: ``(V, D)`` floating table (not modified).
        offsets: ``(B,)`` bag starts (``(B + 1,)`` with ``include_last_offset``), or ``None``
            for a 2-D input.
        **options: ``F.embedding_bag``'s keyword arguments (``BagOptions``), each optional
            (its default in parentheses). ``max_norm``: renormalize every row referenced
            anywhere in ``input`` whose ``norm_type``-norm exceeds it, first, as
            ``F.embedding_bag`` does (``None``: no renorm). ``norm_type``: the ``p`` of the
            p-norm (``2.0``). ``scale_grad_by_freq``: divide row ``v``'s gradient by how
            often ``v`` occurs in the bags (``False``); the forward does not depend on it.
            ``mode``: ``"sum"``, ``"mean"`` or ``"max"`` (``"mean"``). ``sparse``: ignored,
            a sparse gradient has the same values (``False``). ``per_sample_weights``:
            weights of the input's shape, ``mode="sum"`` only (``None``).
            ``include_last_offset``: ``offsets`` ends with the end of the last bag
            (``False``). ``padding_idx``: row left out of every bag; negative counts from
            the end (``None``).

    Returns:
        ``(out, table)``: ``out`` of shape ``(B, D)`` and the (renormalized) ``(V, D)``
        table, both float64 on the CPU.

    Raises:
        TypeError: a keyword argument that ``F.embedding_bag`` does not take, or bad input
            that [`BagOracle`][] refuses.
        ValueError: bad input that [`BagOracle`][] refuses.
        IndexError: an id outside ``[0, V)``.
    """
    problem = _oracle("reference_embedding_bag", input, weight, offsets, options)
    return problem.forward()[0], problem.table


def embedding_bag_error_bound(
    input: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor | None = None,
    *,
    dtype: torch.dtype | None = None,
    **options: Unpack[BagOptions],
) -> torch.Tensor:
    """Per-element bound on ``|out - exact|`` for a bag reduction computed in ``dtype``.

    ``(gamma_{k+s}(u) + gamma_{s+1}(u_64)) A + R + (k + s) eta`` for a bag of ``k``
    non-padding ids, with ``s = 0`` (sum), ``1`` (with ``per_sample_weights``) or ``2``
    (mean); zero for ``max`` without ``max_norm``, for empty bags and where the exact value is
    not finite. ``max_norm`` adds the renorm perturbation ``R``. See the module documentation
    for the derivation.

    Args:
        input: ids, as for [`reference_embedding_bag`][].
        weight: ``(V, D)`` table before any renorm.
        offsets: bag starts, as for [`reference_embedding_bag`][].
        dtype: dtype the candidate computes in (default: the weight's).
        **options: as for [`reference_embedding_bag`][].

    Returns:
        ``(B, D)`` float64 bounds on the CPU.
    """
    return _oracle("embedding_bag_error_bound", input, weight, offsets, options, dtype).forward()[1]


def reference_embedding_bag_grad(
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    offsets: torch.Tensor | None = None,
    **options: Unpack[BagOptions],
) -> BagGradients:
    """The gradients of a bag call in float64, with exactly rounded sums.

    Row ``v`` of the table's gradient sums ``c_i * grad_output[b_i]`` over the occurrences
    ``i`` of ``v`` in the bags, with ``c_i = 1`` (sum), ``per_sample_weights[i]`` or
    ``1 / (ids in bag b_i)`` (mean), divided by the number of occurrences under
    ``scale_grad_by_freq``. In ``max`` mode each bag's gradient goes, per column, to the first
    id that attains the maximum (``F.embedding_bag``'s choice; the checks of
    [`embedding_equivalence.testing`][] accept any maximizing id). The padding row, and rows
    that occur in no bag, get exact zeros; so do the ``per_sample_weights`` of padding ids and
    of ids after the last offset.

    Args:
        input: ids, as for [`reference_embedding_bag`][].
        weight: ``(V, D)`` table before any renorm (``max`` and ``per_sample_weights`` need
            its values).
        grad_output: ``(B, D)`` upstream gradient.
        offsets: bag starts, as for [`reference_embedding_bag`][].
        **options: as for [`reference_embedding_bag`][].

    Returns:
        [`BagGradients`][] of the table ``(V, D)`` and of ``per_sample_weights`` (or
        ``None``), float64 on the CPU.
    """
    problem = _oracle("reference_embedding_bag_grad", input, weight, offsets, options)
    return _gradients(problem, grad_output, 0)


def embedding_bag_gradient_error_bound(
    input: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    offsets: torch.Tensor | None = None,
    *,
    dtype: torch.dtype | None = None,
    **options: Unpack[BagOptions],
) -> BagGradients:
    """Per-element bounds on the gradients of [`reference_embedding_bag_grad`][].

    Table: ``(gamma_{k+s}(u) + gamma_{s+1}(u_64)) A / c + (k + s) eta`` for a row with ``k``
    occurrences, ``s = 0, 1, 2`` (sum, weighted sum, mean) plus 2 under
    ``scale_grad_by_freq`` (then ``c = k``, else ``c = 1``); in ``max`` mode ``k`` counts the
    bags whose maximum the row holds (under the first-maximum assignment). Zero for rows that
    must get an exact zero. ``per_sample_weights``:
    ``(gamma_{D+1}(u) + gamma_2(u_64)) sum_d (|W| + r) |G| + sum_d r |G| + (D + 1) eta``.
    See the module documentation for the derivation.

    Args:
        input: ids, as for [`reference_embedding_bag`][].
        weight: ``(V, D)`` table before any renorm.
        grad_output: ``(B, D)`` upstream gradient.
        offsets: bag starts, as for [`reference_embedding_bag`][].
        dtype: dtype the candidate computes in (default: the weight's).
        **options: as for [`reference_embedding_bag`][].

    Returns:
        [`BagGradients`][] of float64 bounds on the CPU.
    """
    name = "embedding_bag_gradient_error_bound"
    return _gradients(_oracle(name, input, weight, offsets, options, dtype), grad_output, 1)
