"""Where the worker processes of `rag serve --workers N` listen: each on a socket of its own,
all bound to the one port with SO_REUSEPORT, so that the kernel spreads new connections over
the workers that are up.

uvicorn's supervisor hands one listening socket to every worker. A worker woken by a waiting
connection accepts every connection waiting then (asyncio accepts up to the backlog at once),
so keep-alive clients that connect together all land on one worker: measured with 16 clients,
one worker at 99-100% of a core and the other idle (docs/BENCHMARKS.md, "Real text, a small
tenant"). With a socket per worker, the kernel picks the socket by a hash of the connection's
addresses. A worker that dies closes its socket, and new connections go to the others until
its replacement listens again; the connections waiting in the dead worker's queue are reset.

The supervisor's code is uvicorn's own: what it passes to each new worker is a `WorkerSocket`,
which pickles as the instruction to bind a new socket in the worker's process.
"""

from __future__ import annotations

import socket
from typing import Any, cast

PORT_SHARING = hasattr(socket, "SO_REUSEPORT")  # Linux, the BSDs, macOS; not Windows


def is_ipv6(host: str) -> bool:
    """An IPv6 address literal (`::1`, `::`): its socket family, and brackets in a URL."""
    return ":" in host


def _sharing_socket(family: socket.AddressFamily) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def _bind_in_worker(family: socket.AddressFamily, address: tuple[Any, ...]) -> socket.socket:
    """Runs in the worker as it unpickles its arguments: uvicorn makes it listen once the
    app has started, so no connection waits on a worker still loading its model."""
    sock = _sharing_socket(family)
    sock.bind(address)
    return sock


class WorkerSocket:
    """Stands, in the supervisor, for the socket each worker binds for itself."""

    def __init__(self, family: socket.AddressFamily, address: tuple[Any, ...]) -> None:
        self.family, self.address = family, address

    def __reduce__(self) -> tuple[Any, ...]:
        return (_bind_in_worker, (self.family, self.address))


class PortReservation:
    """The port the workers share, bound (not listening) by the supervisor for as long as it
    runs: a port in use fails here at once, port 0 becomes one port for every worker, and no
    process without SO_REUSEPORT can take the port between two workers' lives. A bound socket
    that does not listen is given no connections."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
        self._socket = _sharing_socket(family)
        try:
            self._socket.bind((host, port))
        except OSError:
            self._socket.close()
            raise
        self.family, self.address = family, self._socket.getsockname()

    def worker_sockets(self) -> list[socket.socket]:
        """What uvicorn's supervisor hands each worker in place of its shared socket."""
        return [cast(socket.socket, WorkerSocket(self.family, self.address))]

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
