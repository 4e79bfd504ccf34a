"""Ports for the servers that benches and tests start on this machine.

Each pytest-xdist worker (and the controller, a run without xdist, or a bench) takes from a
block of its own, below Linux's ephemeral range (32768-60999) where no outgoing connection
lands, starting at an offset of its own (its process id) so that two processes of one block
seldom try the same port first. A port asked of the kernel (bind to 0) could be handed to
another process's server between our check and our server's bind, and our readiness poll then
got its 200 from that server (seen in CI: `rag serve` was sent Ctrl-C while it was still
importing)."""

from __future__ import annotations

import itertools
import os
import socket

FIRST_PORT, BLOCK = 20_000, 1_000
_taken = itertools.count(os.getpid() % BLOCK)


def free_port() -> int:
    """A port free now that no other process of this allocation hands out."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1"... or none
    block = int(worker[2:]) + 1 if worker[2:].isdigit() else 0
    start = FIRST_PORT + (block % 12) * BLOCK
    for _ in range(BLOCK):
        port = start + next(_taken) % BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or still in TIME_WAIT from an earlier server
            return port
    raise RuntimeError(f"no free port in {start}-{start + BLOCK - 1}")
