"""What Keras 3 does on each of its backends, measured while the site builds.

Keras reads ``KERAS_BACKEND`` once per process, so each backend is measured in a process of
its own: ``python keras_backends.py`` with ``KERAS_BACKEND`` set prints one JSON object of
measurements (run by ``side_by_side``, never imported by the child). The TensorFlow / Keras
page calls ``side_by_side()``, which runs one child per column and returns a Markdown table.

Every cell is derived from what the child observed: the row an id returned (compared with the
table's rows), the exception it raised, the dtype a float64 layer stored and returned, and
whether its output is the float64 value or that value rounded to float32.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import Any

#: The table's size: ``V`` rows of ``D`` values.
V, D = 3, 2
#: The ids measured: past the end, the last row counted from the end, and before the start.
IDS = {"V": V, "-1": -1, "-V-1": -V - 1}
#: A float64 value that float32 cannot hold, so that rounding shows.
TENTH = 0.1


@dataclass(frozen=True)
class Column:
    """One backend configuration: a column of the table."""

    title: str
    backend: str
    env: dict[str, str]
    module: str  # what must be importable for the backend to run
    then_triton: bool = False  # after measuring, import Triton in the same process


#: Printed by a child just before it imports Triton after its backend (``then_triton``).
TRITON_MARK = "importing triton"


COLUMNS = [
    Column("torch", "torch", {}, "torch"),
    Column("TensorFlow", "tensorflow", {"TF_CPP_MIN_LOG_LEVEL": "3"}, "tensorflow", True),
    Column("JAX", "jax", {}, "jax"),
    Column("JAX with x64", "jax", {"JAX_ENABLE_X64": "1"}, "jax"),
]


# --------------------------------------------------------------------------------------------
# The child: one backend, one process


def _numpy(keras: Any, x: Any) -> Any:
    import numpy as np

    # Not keras.ops.convert_to_numpy on torch or TensorFlow: it calls np.array on a tensor whose
    # __array__ lacks numpy 2's copy= keyword, which numpy warns about.
    tensor = keras.ops.convert_to_tensor(x)
    if keras.backend.backend() == "torch":
        return tensor.detach().cpu().numpy()
    if keras.backend.backend() == "tensorflow":
        return np.array(tensor.numpy())
    return np.array(keras.ops.convert_to_numpy(tensor))


def _lookup(keras: Any, call: Any, table: Any) -> str:
    """What ``call()`` returned, in words: a row of ``table``, zeros, NaN, or the exception."""
    import numpy as np

    try:
        out = _numpy(keras, call()).reshape(-1)
    except Exception as exc:  # what each backend raises is the measurement
        return f"raises `{type(exc).__name__}`"
    if np.isnan(out).all():
        return "a row of NaN"
    for k, row in enumerate(table):
        if np.array_equal(out, row):
            return f"row {k}"
    if not out.any():
        return "a zero row"
    return f"`{out.tolist()}`"


def _float64(keras: Any, make: Any) -> dict[str, str]:
    """The dtype a float64 layer stores and returns, and whether its output is exact."""
    import numpy as np

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        variable, call = make()
        stored = str(_numpy(keras, variable).dtype)
        out = _numpy(keras, call()).reshape(-1)[0]
    if float(out) == TENTH:
        value = "exact"
    elif float(out) == float(np.float32(TENTH)):
        value = "rounded"
    else:
        value = repr(float(out))
    warned = sorted({w.category.__name__ for w in caught if "float64" in str(w.message)})
    return {"stored": stored, "out": f"{out.dtype} ({value})", "warned": ", ".join(warned)}


def measure() -> dict[str, Any]:
    """Out-of-range ids and float64 layers on the backend ``KERAS_BACKEND`` names."""
    import numpy as np

    keras: Any = importlib.import_module("keras")  # untyped here: its stubs span backends

    table = (np.arange(V * D, dtype=np.float32).reshape(V, D) + 1) / 4  # distinct, non-zero
    embedding = keras.layers.Embedding(V, D, embeddings_initializer="zeros")
    embedding.build()
    embedding.embeddings.assign(table)

    def ids(i: int) -> Any:
        return keras.ops.convert_to_tensor(np.array([i], dtype=np.int32))

    eye = np.eye(V, dtype=np.float32)
    result: dict[str, Any] = {
        "keras": keras.__version__,
        "embedding": {
            k: _lookup(keras, lambda i=i: embedding(ids(i)), table) for k, i in IDS.items()
        },
        "one_hot": {
            k: _lookup(keras, lambda i=i: keras.ops.one_hot(ids(i), V), eye) for k, i in IDS.items()
        },
    }

    def float64_embedding() -> tuple[Any, Any]:
        layer = keras.layers.Embedding(1, 1, embeddings_initializer="zeros", dtype="float64")
        layer.build()
        layer.embeddings.assign(np.full((1, 1), TENTH))
        return layer.embeddings, lambda: layer(ids(0))

    def float64_dense() -> tuple[Any, Any]:
        layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros", dtype="float64")
        layer.build((None, 1))
        layer.kernel.assign(np.full((1, 1), TENTH))
        return layer.kernel, lambda: layer(keras.ops.one_hot(ids(0), 1))

    result["float64_embedding"] = _float64(keras, float64_embedding)
    result["float64_dense"] = _float64(keras, float64_dense)
    backend = keras.backend.backend()
    result["version"] = importlib.import_module(backend).__version__
    return result


# --------------------------------------------------------------------------------------------
# The parent: a child per column, one table


def _run(column: Column) -> subprocess.Popen[str] | None:
    if importlib.util.find_spec(column.module) is None:
        return None
    env = {**os.environ, "KERAS_BACKEND": column.backend, **column.env}
    env["KERAS_THEN_TRITON"] = "1" if column.then_triton else "0"
    return subprocess.Popen(
        [sys.executable, __file__],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@functools.cache
def measure_all() -> list[dict[str, Any] | None]:
    """Each column's measurements (None where its backend is not installed), run side by side.

    A column with ``then_triton`` also says what ``import triton`` did after its backend, in
    the same process (``result["then_triton"]``: ``"imports"``, ``"ends the process with
    SIGABRT"``, ...; absent where Triton is not installed).
    """
    children = [_run(column) for column in COLUMNS]
    results: list[dict[str, Any] | None] = []
    for column, child in zip(COLUMNS, children, strict=True):
        if child is None:
            results.append(None)
            continue
        stdout, stderr = child.communicate(timeout=600)
        lines = stdout.strip().splitlines()
        measured = TRITON_MARK in lines and lines.index(TRITON_MARK) > 0
        if child.returncode != 0 and not measured:
            raise RuntimeError(f"measuring Keras on {column.title} failed:\n{stderr[-3000:]}")
        if measured:
            result = json.loads(lines[lines.index(TRITON_MARK) - 1])
            result["then_triton"] = _exit_in_words(child.returncode)
        else:
            result = json.loads(lines[-1])
        results.append(result)
    return results


def _exit_in_words(returncode: int) -> str:
    """What ended a child: ``"imports"`` for a clean exit, else the signal or the status."""
    if returncode == 0:
        return "imports"
    if returncode < 0:
        return f"ends the process with {signal.Signals(-returncode).name}"
    return f"ends the process with exit status {returncode}"


def triton_after(title: str = "TensorFlow") -> str | None:
    """What ``import triton`` did after the backend of column ``title`` (None: not measured)."""
    for column, result in zip(COLUMNS, measure_all(), strict=True):
        if column.title == title and result is not None:
            return result.get("then_triton")
    return None


def _cell(result: dict[str, Any] | None, *keys: str) -> str:
    if result is None:
        return "not installed"
    value: Any = result
    for key in keys:
        value = value[key]
    return str(value)


def _dtype_cell(result: dict[str, Any] | None, layer: str, what: str) -> str:
    cell = _cell(result, layer, what)
    if result is not None and what == "stored" and result[layer]["warned"]:
        cell += f", with a `{result[layer]['warned']}`"
    return cell


def side_by_side() -> str:
    """The Markdown table of the measurements, and a line naming the versions measured."""
    results = measure_all()
    header = "| Keras 3 | " + " | ".join(column.title for column in COLUMNS) + " |"
    rows = [header, "| --- " * (len(COLUMNS) + 1) + "|"]

    def row(label: str, cells: list[str]) -> None:
        rows.append(f"| {label} | " + " | ".join(cells) + " |")

    def id_label(key: str, i: int) -> str:
        return f"id {i}" if key == str(i) else f"id {i} (`{key}`)"

    for key, i in IDS.items():
        row(f"`Embedding`, {id_label(key, i)}", [_cell(r, "embedding", key) for r in results])
    for key, i in IDS.items():
        row(f"`one_hot`, {id_label(key, i)}", [_cell(r, "one_hot", key) for r in results])
    for layer, name in (("float64_embedding", "Embedding"), ("float64_dense", "Dense")):
        row(
            f'`{name}(dtype="float64")`: its variable',
            [_dtype_cell(r, layer, "stored") for r in results],
        )
        row(f"`{name}`: {TENTH} comes back as", [_dtype_cell(r, layer, "out") for r in results])
    versions = sorted(
        {f"{c.backend} {r['version']}" for c, r in zip(COLUMNS, results, strict=True) if r}
    )
    keras_versions = sorted({r["keras"] for r in results if r})
    note = f"Measured with Keras {', '.join(keras_versions)} on " + ", ".join(versions) + "."
    return "\n".join(rows) + "\n\n" + note


if __name__ == "__main__":
    print(json.dumps(measure()), flush=True)
    if os.environ.get("KERAS_THEN_TRITON") == "1" and importlib.util.find_spec("triton"):
        # The measurement is out; now what Triton does in a process that holds this backend
        # (TensorFlow's RTLD_GLOBAL libraries clash with Triton's LLVM).
        print(TRITON_MARK, flush=True)
        import triton  # noqa: F401
