"""The benchmark of the page "Efficiency": every form's time and peak memory beside a model.

Run from the repository's root, with the package installed (matplotlib too, for the plots)::

    python benchmarks/efficiency.py --out docs/bench --no-plots   # the page's bench.json
    python benchmarks/efficiency.py --quick                       # well under a minute
    python benchmarks/efficiency.py --compare                     # each form beside raw torch
    python benchmarks/efficiency.py --help

The harness is the package ``bench`` beside this script (``benchmarks/bench/``: timing,
calibration, the roofline model, peak memory, the results and their plots); its docstring
describes the sweep, the model and the outputs.
"""

from bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
