"""Torch's ``max_norm`` on CUDA against the CPU: the cases the verifier's CUDA run failed.

``F.embedding(ids, weight, max_norm=1.0, norm_type=p)`` on a 6 x 4 table of values -2 to 3.75
in steps of 0.25, on the CPU and on CUDA, for 0-d, 1-D and 2-D ids, p in (2, inf, 1), a strided
table (every other column of a 6 x 8 table), float16 and float64; ``torch.embedding_renorm_``
called directly; and ``F.embedding_bag`` of no ids under ``max_norm``. Each line says whether
the renormalised table and the output agree between the two devices. ``docs/cuda-results.json``
holds one run's output (the "renorm" check); the page "When equivalence breaks" shows it.

Usage (on a machine with a GPU)::

    python benchmarks/cuda_renorm_probe.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _describe(result: object) -> str:
    return result if isinstance(result, str) else "ok"


def probe(
    name: str,
    ids: torch.Tensor,
    V: int = 6,
    D: int = 4,
    norm_type: float = 2.0,
    strided: bool = False,
    dtype: torch.dtype = torch.float32,
) -> None:
    """Print whether ``F.embedding`` with ``max_norm`` agrees between the CPU and CUDA."""
    res: dict[str, tuple[torch.Tensor, torch.Tensor] | str] = {}
    for dev in ("cpu", "cuda"):
        base = (torch.arange(V * D * 2, dtype=torch.float64).reshape(V, 2 * D) / 4 - 2).to(dtype)
        w = base[:, ::2].to(dev) if strided else base[:, :D].contiguous().to(dev)
        if strided and dev == "cuda":
            w = base.to(dev)[:, ::2]  # strided on the device too
        try:
            out = F.embedding(ids.to(dev), w, max_norm=1.0, norm_type=norm_type)
            torch.cuda.synchronize()
            res[dev] = (w.double().cpu(), out.double().cpu())
        except Exception as e:  # a failing call is a finding; print it
            res[dev] = repr(e)[:120]
    cpu, cuda = res["cpu"], res["cuda"]
    if isinstance(cpu, str) or isinstance(cuda, str):
        print(f"{name}: cpu={_describe(cpu)} cuda={_describe(cuda)}")
        return
    wsame = torch.equal(cpu[0], cuda[0])
    osame = torch.allclose(cpu[1], cuda[1], rtol=1e-5, atol=1e-6)
    wdiff = (cpu[0] - cuda[0]).abs().max().item()
    print(
        f"{name}: weight equal={wsame} (max diff {wdiff:.3g}) output close={osame}; "
        f"cpu out[0]={cpu[1].flatten()[:2].tolist()} cuda out[0]={cuda[1].flatten()[:2].tolist()}"
    )


def main() -> None:
    """Run every probe and print one line each."""
    torch.manual_seed(0)
    two_d = [[0, 5], [5, 2], [4, 0]]
    for nt in (2.0, float("inf"), 1.0):
        probe(f"0-d id, p={nt}", torch.tensor(0), norm_type=nt)
        probe(f"1-D ids [0], p={nt}", torch.tensor([0]), norm_type=nt)
        probe(f"1-D ids [0,5,2,4], p={nt}", torch.tensor([0, 5, 2, 4]), norm_type=nt)
        probe(f"2-D ids [[0,5],[5,2],[4,0]], p={nt}", torch.tensor(two_d), norm_type=nt)
    probe("2-D ids strided table p=2", torch.tensor(two_d), strided=True)
    probe("1-D ids strided table p=2", torch.tensor([0, 5, 2, 4]), strided=True)
    probe("1-D ids float16 p=2", torch.tensor([0, 5, 2, 4]), dtype=torch.float16)
    probe("1-D ids float64 p=2", torch.tensor([0, 5, 2, 4]), dtype=torch.float64)
    for shape in [(), (4,), (2, 2)]:
        n = max(1, int(torch.tensor(shape).prod()))
        ids = torch.tensor([0, 5, 2, 4])[:n].reshape(shape)
        w = torch.arange(24, dtype=torch.float32).reshape(6, 4) / 4 - 2
        wc = w.cuda()
        with torch.no_grad():
            torch.embedding_renorm_(w, ids, 1.0, 2.0)
            torch.embedding_renorm_(wc, ids.cuda(), 1.0, 2.0)
        same = torch.allclose(w, wc.cpu(), atol=1e-6)
        print(f"embedding_renorm_ ids shape {shape}: equal={same}")
    for dev in ("cpu", "cuda"):
        w = torch.ones(3, 2, device=dev)
        empty = torch.tensor([], dtype=torch.long, device=dev)
        try:
            out = F.embedding_bag(empty, w, torch.tensor([0], device=dev), max_norm=1.0)
            torch.cuda.synchronize()
            print("bag empty+max_norm", dev, out.tolist())
        except Exception as e:  # a failing call is a finding; print it
            print("bag empty+max_norm", dev, repr(e)[:150])
    print(torch.__version__)


if __name__ == "__main__":
    main()
