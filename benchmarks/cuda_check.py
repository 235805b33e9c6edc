"""The CUDA and nccl checks: the verifier run against torch's own kernels on a GPU.

Each check runs in its own subprocess with its own timeout, all of them at once (a GPU machine
has the cores for it), and the results are written as JSON: per check the command, the exit
status, the seconds and the lines of the verdict. ``docs/cuda-results.json`` holds one such
run, and the page "When equivalence breaks" shows it. The checks:

- ``forms``: ``embedding-equivalence verify --devices cuda`` (every form, every dtype);
- ``bags``: the same with ``--bag``;
- ``int8``: ``--scheme int8`` on CUDA;
- ``large``: ``verify_embedding(F.embedding)`` on ``large_table_sizes(torch.float16)``
  (4 GiB, ids past 2**31 elements) on CUDA, 5 examples with backward;
- ``compiled``: ``torch.compile(F.embedding)`` on CUDA (inductor writes Triton kernels);
- ``nccl-1``: ``--sharding vocab --world-size 1`` over nccl;
- ``nccl-2``: world size 2 on one GPU (nccl refuses two ranks on one device: what the
  verifier says then);
- ``renorm``: ``benchmarks/cuda_renorm_probe.py``, torch's ``max_norm`` on CUDA against the CPU;
- ``tests``: the test suite's CUDA cases (``-k cuda`` with ``EMBEDDING_TEST_DEVICES=cpu,cuda``).

Usage (on a machine with a GPU; the package from ``src/`` when it is not installed)::

    PYTHONPATH=src python benchmarks/cuda_check.py --out cuda-results.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CLI = [sys.executable, "-m", "embedding_equivalence", "verify", "--devices", "cuda", "--seed", "1"]

LARGE = """
import time, torch, torch.nn.functional as F
import embedding_equivalence as ee
start = time.perf_counter()
vocab, dim = ee.large_table_sizes(torch.float16)
report = ee.verify_embedding(F.embedding, devices=["cuda"], dtypes=[torch.float16],
    max_examples=5, seed=1, boundaries=False, vocab_sizes=vocab, embedding_dims=dim)
print(report)
print(f"seconds: {time.perf_counter() - start:.1f}")
"""

COMPILED = """
import torch, torch.nn.functional as F
import embedding_equivalence as ee
report = ee.verify_embedding(torch.compile(F.embedding), devices=["cuda"],
    options=["padding_idx"], max_examples=25, seed=1)
print(report)
"""

CHECKS: dict[str, tuple[list[str], float]] = {
    "forms": ([*CLI, "--max-examples", "10"], 360),
    "bags": ([*CLI, "--bag", "--max-examples", "10"], 360),
    "int8": ([*CLI, "--scheme", "int8", "--max-examples", "10"], 300),
    "large": ([sys.executable, "-c", LARGE], 360),
    "compiled": ([sys.executable, "-c", COMPILED], 360),
    "nccl-1": ([*CLI, "--sharding", "vocab", "--world-size", "1", "--max-examples", "10"], 300),
    "nccl-2": ([*CLI, "--sharding", "vocab", "--world-size", "2", "--max-examples", "5"], 120),
    "renorm": ([sys.executable, "benchmarks/cuda_renorm_probe.py"], 120),
    "tests": (
        [
            "env",
            "EMBEDDING_TEST_DEVICES=cpu,cuda",
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "embedding_equivalence.pytest_plugin",
            "-k",
            "cuda",
            "tests",
        ],
        360,
    ),
}


def _run(name: str, command: list[str], timeout: float) -> dict[str, object]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=os.environ.copy()
        )
        rc, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        rc = None
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += f"\n(timed out after {timeout:.0f} s)"
    lines = [line for line in out.splitlines() if line.strip()]
    shown = " ".join(
        f"'{c.strip()}'" if "\n" in c else c.replace(sys.executable, "python") for c in command
    ).removeprefix("env ")
    return {
        "check": name,
        "command": shown,
        "rc": rc,
        "seconds": round(time.perf_counter() - start, 1),
        "tail": lines[-40:],
        "output": out,
    }


def _environment() -> dict[str, object]:
    import torch

    return {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> None:
    """Run the checks at once and write their results as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="cuda-results.json")
    parser.add_argument("--only", default=",".join(CHECKS), help="comma-separated checks")
    parser.add_argument("--merge", help="an earlier results file: keep its other checks")
    args = parser.parse_args(argv)
    names = args.only.split(",")
    env = _environment()
    print(env, flush=True)
    with ThreadPoolExecutor(len(names)) as pool:
        futures = [pool.submit(_run, n, *CHECKS[n]) for n in names]
        results = []
        for future in futures:
            result = future.result()
            print(f"== {result['check']}: rc {result['rc']}, {result['seconds']} s", flush=True)
            print("\n".join(result["tail"][-12:]), flush=True)  # type: ignore[arg-type]
            results.append(result)
    if args.merge:
        with open(args.merge, encoding="utf-8") as f:
            earlier = json.load(f)["checks"]
        rerun = {r["check"]: r for r in results}
        results = [rerun.pop(r["check"], r) for r in earlier] + list(rerun.values())
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"environment": env, "checks": results}, f, indent=1)


if __name__ == "__main__":
    main()
