"""Figures and generated tables of the documentation, drawn from the package's real tensors.

Every figure function returns a self-contained SVG document as a string, ready to be printed
into an HTML page (the docs do so from ``markdown-exec`` blocks at build time, so no figure is
ever drawn by hand or committed). The tensors in a figure are computed by the package itself:
a lookup figure calls [`lookup_embedding`][embedding_equivalence.lookup_embedding], a gradient
figure runs autograd, an error figure measures real rounding errors against the float64 oracle.
Called without arguments, each figure draws the worked example of the seed notebook
(``torch.manual_seed(123)``, ``nn.Embedding(4, 5)``, ids ``[2, 3, 1]``), which
[`worked_example`][] rebuilds.

Every figure is legible on a desktop and on a phone (no text under 11 and 10 CSS pixels). A
figure too wide for a phone is drawn twice, side by side for a desktop and stacked for a
phone, and both layouts go into its one ``<svg>``: the site's stylesheet shows the one that
fits the screen (see ``_style.responsive_svg``).

One module per family of figures: ``lookup`` (lookup, one-hot, matmul), ``layouts``
(``Embedding`` vs ``Linear`` vs Keras, strides), ``gradients``, ``bags``, ``efficiency``
(costs and the benchmark's results), ``error_bounds``, ``sharded`` (the row and column
splits of a sharded table), and ``architecture`` (the contributors' map of the modules).
``_style`` holds the shared colours (one meaning each), text sizes and SVG output,
``_canvas`` the cell-by-cell canvas they draw on.

This package belongs to the docs, not to ``embedding_equivalence``: the pages import it after
``sys.path.insert(0, "docs/_scripts")``, and nothing in the installed package imports it.
Matplotlib is needed (``pip install "embedding-equivalence[docs]"``).

Examples:
    ```python
    import sys

    sys.path.insert(0, "docs/_scripts")
    import figures

    weight, ids = figures.worked_example()
    svg = figures.lookup_figure(weight, ids)  # '<svg ...>...</svg>'
    ```
"""

from __future__ import annotations

from collections.abc import Callable

from ._canvas import MAX_SIDE, worked_example
from .architecture import DATA_PATH, architecture_table, data_path_figure
from .backprop import backprop_figure
from .bags import bag_figure
from .efficiency import Cost, bench_section, forward_cost, work_figure
from .error_bounds import error_bound_figure
from .gradients import gradient_figure, renorm_figure
from .layouts import keras_layout_figure, layout_figure, storage_figure
from .lookup import lookup_figure, matmul_figure, one_hot_figure
from .sharded import dim_parallel_figure, vocab_parallel_figure

__all__ = [
    "DATA_PATH",
    "FIGURES",
    "MAX_SIDE",
    "Cost",
    "architecture_table",
    "backprop_figure",
    "bag_figure",
    "bench_section",
    "data_path_figure",
    "dim_parallel_figure",
    "error_bound_figure",
    "forward_cost",
    "gradient_figure",
    "keras_layout_figure",
    "layout_figure",
    "lookup_figure",
    "matmul_figure",
    "one_hot_figure",
    "renorm_figure",
    "storage_figure",
    "vocab_parallel_figure",
    "work_figure",
    "worked_example",
]

#: Every figure function, by name; each can be called without arguments.
FIGURES: dict[str, Callable[[], str]] = {
    "lookup_figure": lookup_figure,
    "one_hot_figure": one_hot_figure,
    "matmul_figure": matmul_figure,
    "layout_figure": layout_figure,
    "storage_figure": storage_figure,
    "gradient_figure": gradient_figure,
    "renorm_figure": renorm_figure,
    "backprop_figure": backprop_figure,
    "work_figure": work_figure,
    "error_bound_figure": error_bound_figure,
    "bag_figure": bag_figure,
    "keras_layout_figure": keras_layout_figure,
    "data_path_figure": data_path_figure,
    "vocab_parallel_figure": vocab_parallel_figure,
    "dim_parallel_figure": dim_parallel_figure,
}
