"""A TCP proxy in front of the tests' real PostgreSQL that can say the server's last words:
a FATAL ErrorResponse (57P01, "terminating connection due to administrator command") sent to
every client connection, the sockets left open. That is the moment between a shutting-down
server's goodbye and its closed socket, which a client usually passes in microseconds and CI
once caught a pooled connection in; here it lasts until the connection is used."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url

GOODBYE = b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0"


@dataclass
class GoodbyeProxy:
    """Forwards 127.0.0.1:`port` to the server's socket (`upstream`, a Unix socket path)."""

    upstream: str
    port: int = 0
    clients: list[asyncio.StreamWriter] = field(default_factory=list)
    serving: set[asyncio.Future[tuple[None, None]]] = field(default_factory=set)

    def url(self, database_url: str) -> str:
        """`database_url` (a Unix-socket URL) through this proxy instead."""
        parsed = make_url(database_url)
        query = {k: v for k, v in parsed.query.items() if k != "host"}
        return parsed.set(host="127.0.0.1", port=self.port, query=query).render_as_string(
            hide_password=False
        )

    def say_goodbye(self) -> int:
        """The FATAL to every open client connection; how many got it."""
        message = b"E" + struct.pack("!i", len(GOODBYE) + 4) + GOODBYE
        open_clients = [w for w in self.clients if not w.is_closing()]
        for writer in open_clients:
            writer.write(message)
        return len(open_clients)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        self.clients.append(writer)
        both = asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self.serving.add(both)
        try:
            await both
        except asyncio.CancelledError:
            pass  # the proxy closing: asyncio's stream callback would log a cancelled handler
        finally:
            for w in (writer, up_writer):
                w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


@asynccontextmanager
async def goodbye_proxy(database_url: str) -> AsyncIterator[GoodbyeProxy]:
    """A proxy to the server `database_url` reaches over its Unix socket."""
    parsed = make_url(database_url)
    socket_dir = parsed.query["host"]
    assert isinstance(socket_dir, str), "a Unix-socket URL (?host=DIR)"
    proxy = GoodbyeProxy(f"{socket_dir}/.s.PGSQL.{parsed.port or 5432}")
    server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        for task in proxy.serving:
            task.cancel()
        await asyncio.gather(*proxy.serving, return_exceptions=True)
