"""Benchmark: the lookup and the one-hot matmul, time and peak memory, beside a roofline model.

It is part of the repository, not of the installed package: run it from the repository's root
as ``python benchmarks/efficiency.py`` (``--help`` lists the options; ``--quick`` takes well
under a minute), with the package installed and, for the plots, matplotlib (the ``bench``
extra). The page "Efficiency" draws its tables and figures from the ``bench.json`` it writes.

**The sweep** (the default). Three one-at-a-time sweeps around a base point ``(N, V, D)``:
``V`` over ``--vocab`` (default 1,024 to 50,257, and 262,144 where the one-hot fits) at the base
``N`` and ``D``; ``D`` over ``--dims`` and ``N`` over ``--ns`` at ``V = --base-vocab``. At every
point it times five forms, forward and forward+backward:

- ``lookup_embedding`` (dense gradient) and ``lookup_embedding(sparse=True)`` (sparse gradient,
  forward+backward only: its forward is the same call);
- ``matmul_embedding`` (dense one-hot ``@ W``) and ``linear_embedding``
  (``F.linear(one_hot, W.T)``), both with a dense gradient;
- ``sparse_matmul_embedding`` (sparse COO one-hot ``@ W``, dense gradient).

Timing: ``torch.utils.benchmark.Timer.blocked_autorange`` with the intra-op threads fixed by
``--threads`` (default 1) and recorded; the median of the blocks is reported. With one thread on
the CPU the default clock is the process's CPU time (``time.process_time``), which does not count
the time spent waiting for a core on a shared machine; ``--clock wall`` gives elapsed time (always
used on CUDA, synchronised). A dense form whose one-hot cannot fit
([`check_dense_fits`][embedding_equivalence.forms.memory.check_dense_fits]) is skipped with
a note.

**Calibration and the model.** Before the sweep, glibc's allocator is put in its steady state
([`settle_allocator`][bench.calibration.settle_allocator]: one block just
under its 32 MiB mmap ceiling, allocated and freed, so that a buffer's cost no longer depends on
the cases that ran before it), and the machine is measured on the shapes of the sweep: the cost
per row of the four row primitives of
[`ROW_PRIMITIVES`][bench.calibration.ROW_PRIMITIVES] (rows of ``D``
elements at random positions of each ``(V, D)`` table, timed at ``N/4``, ``N`` and ``4N`` rows
of the base ``N``: the slope up to ``N``, and the slope beyond it for the rows of a larger
``N``), the zero-fill bandwidth ``Z(x)`` (``torch.zeros`` of ``x``
bytes: allocation, first touch and memset, as every call pays for a fresh buffer) and
``Z2(x)`` (two such buffers, the first alive while the second is zeroed), the GEMM
throughput ``F`` at each ``(N, D)`` of the sweep (``(N, K) @ (K, D)`` and, for the backward,
``(N, K).T @ (N, D)``, ``K = min(4096, V)``), the copy bandwidth ``B(x)`` (the stand-in for a
row primitive a device cannot run), and each form's fixed cost per call ``c`` (its time on one
id of a ``2 x 1`` table). With ``s`` the itemsize, ``r = D·s`` and ``T = V·D·s``, the model
times ([`model_time`][]) are ``c`` plus:

=========================  =============================================================
lookup, fwd                ``N·gather(r, T)``: ``N`` rows gathered at random positions
lookup, fwd+bwd dense      fwd ``+ T / Z(T)`` (zeroed gradient) ``+ N·scatter_add(r, T)``
                           (torch's embedding backward adding the rows into it)
lookup, fwd+bwd sparse     fwd only: the sparse gradient's values and indices are views of
                           ``G`` and the ids, so no ``N x D`` bytes move
sparse matmul, fwd         ``N·sparse_rows(r, T)`` (``torch.sparse.mm`` per stored one)
sparse matmul, fwd+bwd     fwd ``+ 2·T / Z2(T)`` (two ``V x D`` buffers it zeroes)
                           ``+ N·sparse_rows_t(r, T)``
one-hot matmul, fwd        ``N·V·s / Z(N·V·s)`` (build the one-hot) ``+ 2·N·V·D / F_fwd``
one-hot matmul, fwd+bwd    fwd ``+ 2·N·V·D / F_bwd`` (``one_hot.T @ G``)
linear                     as the one-hot matmul
=========================  =============================================================

A cost per row is interpolated log-log in the table's bytes between the tables measured (so
the model follows the cache level a table of that size lives in), a bandwidth in the bytes
of its term.

**Peak memory.** On CUDA: ``torch.cuda.max_memory_allocated`` after
``reset_peak_memory_stats``, minus the memory allocated before the call. On the CPU: every case
runs once in a fresh process (forked from a server process that has imported torch and run
nothing else); it warms up on a tiny input (so that one-time lazy initialisation is not counted),
builds the inputs, reads its resident set size, resets the kernel's peak
(``/proc/self/clear_refs``), runs the case, and reports peak RSS (``VmHWM``) minus the RSS before.
Where that reset is not available, the growth of ``ru_maxrss`` is reported instead. The analytic
memory beside it ([`analytic_memory_bytes`][]) counts the output ``N·D·s``, the one-hot
``N·V·s``, a dense gradient ``V·D·s`` and a sparse one-hot ``N·(2·8 + s)``.

**Outputs** (``--out DIR``, default ``bench-results/``): ``bench.json`` (keys ``schema``,
``machine``, ``config``, ``calibration``, ``model``, ``headline``, ``results``, ``notes``),
``bench.csv`` (one row per case, the columns of [`CSV_COLUMNS`][]), and, with matplotlib
(``pip install 'embedding-equivalence[bench]'``), ``time_vs_vocab.svg``,
``memory_vs_vocab.svg`` and ``ratio_vs_model.svg`` (the one-hot/lookup time ratio, measured and
modelled). The machine record holds the CPU model, cores, affinity, threads, torch and Python
versions, the device and its name, the dtype, the clock, the date and the load average.

**The form-vs-raw comparison** (``--compare``): for every ``V`` each form beside the raw torch
call(s) it wraps, with ratios from interleaved rounds, and three targets:
(a) ``lookup_embedding`` forward+backward within 10% of ``F.embedding``;
(b) ``matmul_embedding`` no slower than the naive scatter one-hot (ratio <= 1.05, for noise);
(c) ``sparse_matmul_embedding`` forward at most 2x slower at the largest ``V`` than at the
smallest. The raw calls build their one-hot inside the timed statement, as the forms do, so the
ratio is the cost of the form's wrapping (validation, range check, memory check, reshapes).

The ids and the weight come from a ``torch.Generator`` seeded by ``--seed``; the global RNG is
never used.

**The modules.** ``timing`` (modes, clocks, inputs, interleaved ``Timer`` measurement),
``sweep_forms`` (the swept forms, read from [`FORMS`][embedding_equivalence.forms.FORMS]),
``calibration`` (the machine's bandwidths and throughputs), ``model`` (the roofline model),
``memory`` (peak memory in a fresh process), ``sweep`` (running the sweep), ``results`` (its
records and ``bench.json``), ``report`` (the printed tables, the files), ``plots`` (the SVGs),
``machine`` (what the run ran on), ``compare`` (``--compare``) and ``cli`` ([`main`][]).
"""

from __future__ import annotations

from .calibration import Calibration, gemm_k
from .cli import main
from .model import MODEL_FORMULAS, analytic_memory_bytes, model_time
from .report import write_outputs
from .results import CSV_COLUMNS, HEADLINE_COLUMNS, SweepReport
from .sweep import SweepSizes, run_sweep
from .sweep_forms import SWEEP_FORMS

__all__ = [
    "CSV_COLUMNS",
    "HEADLINE_COLUMNS",
    "MODEL_FORMULAS",
    "SWEEP_FORMS",
    "Calibration",
    "SweepReport",
    "SweepSizes",
    "analytic_memory_bytes",
    "gemm_k",
    "main",
    "model_time",
    "run_sweep",
    "write_outputs",
]
