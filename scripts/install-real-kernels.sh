#!/usr/bin/env bash
# Install the libraries that docs/real-kernels.md verifies (fbgemm-gpu-cpu, torchrec,
# megatron-core, torchao, liger-kernel, eai-sparsify, flag-gems) into a virtual environment
# that already has torch and this package (with its triton extra):
#
#   python3 -m venv .venv-kernels
#   .venv-kernels/bin/pip install torch==2.13.0        # the CPU wheel on these machines
#   .venv-kernels/bin/pip install -e ".[dev]"
#   scripts/install-real-kernels.sh .venv-kernels/bin/python
#
# The argument is the venv's python (or its pip); without one, the active venv's
# ($VIRTUAL_ENV) is used. They are not dependencies of the package: pip cannot express how
# they must be installed (torchrec without its CUDA dependency, torchao without its
# dependencies), so this script does it, in this order:
#
#   1. fbgemm-gpu-cpu, pinned to the release that loads with the installed torch;
#   2. torchrec with --no-deps, then its dependencies except fbgemm-gpu (the CUDA wheel, which
#      would also replace fbgemm-gpu-cpu's module fbgemm_gpu);
#   3. megatron-core (its default dependencies only: torch, numpy, packaging);
#   4. torchao with --no-deps;
#   5. liger-kernel and eai-sparsify (Triton kernels, run under Triton's interpreter);
#   6. flag-gems with --no-deps (its wheel pins numpy 1.x) and sqlalchemy, which it imports;
#   7. a check that each one imports (flag_gems only reports why it does not: no GPU).
#
# Every step runs under scripts/real-kernels-constraints.txt plus torch==<installed>, so no
# dependency can replace torch. Each step prints how long it took.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
target="${1:-}"
if [ -z "$target" ]; then
    if [ -z "${VIRTUAL_ENV:-}" ]; then
        echo "usage: $0 PATH/TO/venv/bin/python (or activate the venv first)" >&2
        exit 2
    fi
    target="$VIRTUAL_ENV/bin/python"
fi
case "$(basename "$target")" in
    pip*) python="$(dirname "$target")/python" ;;
    *) python="$target" ;;
esac
if ! "$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    echo "$python is not a virtual environment's python: refusing to install into it" >&2
    exit 2
fi
torch_version="$("$python" -c 'import torch; print(torch.__version__.split("+")[0])')"

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
{
    echo "torch==$torch_version"
    cat "$here/real-kernels-constraints.txt"
} >"$constraints"

pip() { "$python" -m pip --disable-pip-version-check "$@"; }
step() {
    local name="$1"
    shift
    local start=$SECONDS
    printf '==> %s\n' "$name"
    "$@"
    printf '    %s: %d s\n' "$name" $((SECONDS - start))
}

step "fbgemm-gpu-cpu" pip install --quiet -c "$constraints" fbgemm-gpu-cpu
step "torchrec (no deps)" pip install --quiet -c "$constraints" --no-deps torchrec
# --no-warn-conflicts: pip would report torchrec's missing "fbgemm-gpu", which is left out on
# purpose (fbgemm-gpu-cpu provides the same module).
step "torchrec's dependencies but fbgemm-gpu" \
    pip install --quiet --no-warn-conflicts -c "$constraints" \
    tensordict torchmetrics tqdm pyre-extensions
step "megatron-core" pip install --quiet -c "$constraints" megatron-core
step "torchao (no deps)" pip install --quiet -c "$constraints" --no-deps torchao
step "liger-kernel, eai-sparsify" pip install --quiet -c "$constraints" liger-kernel eai-sparsify
step "flag-gems (no deps), sqlalchemy" pip install --quiet -c "$constraints" --no-deps flag-gems sqlalchemy
step "imports" env TRITON_INTERPRET=1 "$python" - <<'PY'
import importlib
import importlib.metadata
import logging
import warnings

logging.disable(logging.WARNING)  # torchao logs the CUDA extensions it cannot load
warnings.simplefilter("ignore")  # the libraries warn at import (Apex, Transformer Engine, ...)
for module, dist in [
    ("fbgemm_gpu", "fbgemm-gpu-cpu"),
    ("torchrec", "torchrec"),
    ("megatron.core", "megatron-core"),
    ("torchao", "torchao"),
    ("liger_kernel.ops.experimental.embedding", "liger-kernel"),
    ("sparsify.xformers", "eai-sparsify"),
]:
    importlib.import_module(module)
    print(f"    {module} imports ({dist} {importlib.metadata.version(dist)})")
try:  # it needs a GPU vendor's tools: the Real kernels page records why it does not start
    importlib.import_module("flag_gems")
except Exception as exc:
    print(f"    flag_gems does not import here ({type(exc).__name__}: {exc})".strip())
else:
    print(f"    flag_gems imports (flag-gems {importlib.metadata.version('flag-gems')})")
PY
