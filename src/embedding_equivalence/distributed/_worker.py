"""One rank of a worker group: ``python -m embedding_equivalence.distributed._worker``.

The parent ([`WorkerGroup`][embedding_equivalence.distributed._group.WorkerGroup]) starts one such
process per rank. The worker never imports the parent's main script: it imports only this
package, torch, and the candidate's module (by name), so a script without an
``if __name__ == "__main__":`` guard can start a group.

It connects back to the parent over a local socket (an authenticated
`multiprocessing.connection`), joins the process group through the parent's TCP store under
the start-up timeout, narrows the group's timeout to a call's, then serves requests until told
to stop or until the parent goes away: a candidate's preparation (its import and the mesh,
before its first call), and calls.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
from datetime import timedelta
from multiprocessing.connection import Client

import torch
import torch.distributed as dist

from ._group import PREPARE, narrow_timeout, receive, send
from ._rank import prepare_on_rank, run_on_rank, shutdown_group


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def main() -> None:
    """Join the group described by the environment and serve the parent's requests."""
    _die_with_parent()
    env = os.environ
    rank, world = int(env["EE_RANK"]), int(env["EE_WORLD_SIZE"])
    # Joining waits for the slowest rank to start: it gets the start-up timeout, the
    # collectives afterwards a call's.
    startup = timedelta(seconds=float(env["EE_STARTUP_TIMEOUT"]))
    # A hung rank's stacks, on request of the parent (SIGUSR1), into this rank's stderr file.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    torch.set_num_threads(1)  # the examples are small; ranks share the machine's cores
    conn = Client((env["EE_HOST"], int(env["EE_CONN_PORT"])), authkey=bytes.fromhex(env["EE_KEY"]))
    send(conn, ("hello", rank, os.getpid()))
    store = dist.TCPStore(
        env["EE_HOST"], int(env["EE_STORE_PORT"]), world, is_master=False, timeout=startup
    )
    backend = env["EE_BACKEND"]
    device = env["EE_DEVICE"]
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=startup)
    narrow_timeout(None, float(env["EE_TIMEOUT"]))
    send(conn, ("ready", rank, None))
    try:
        while True:
            try:
                request = receive(conn)
            except (EOFError, OSError):
                return  # the parent is gone
            if request is None:
                return
            if request[0] == PREPARE:
                send(conn, prepare_on_rank(request[1], device=device))
            else:
                send(conn, run_on_rank(*request, device=device))
    finally:
        shutdown_group()


if __name__ == "__main__":
    main()
