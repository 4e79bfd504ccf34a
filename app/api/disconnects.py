"""Work a client waits for stops when the client goes.

A synchronous ingest may take minutes (parsing, embedding thousands of chunks); a client that
gave up (a timeout, a closed tab, a proxy's own deadline) would otherwise keep the server
busy to the end for a reply nobody reads. `while_connected` runs the work and listens on the
request's ASGI `receive` at the same time: once the whole body has been read, the next
message is `http.disconnect`, which comes when the connection closes. The work is then
cancelled (the ingest pipeline finishes a database write it has begun, app/ingest/pipeline.py,
so a document is stored whole or not at all) and `ClientDisconnect` answers, for nobody.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.requests import ClientDisconnect, Request

T = TypeVar("T")
_log = logging.getLogger("app.api")


async def while_connected(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """`await work()`, cancelled if the client disconnects first (then ClientDisconnect).
    Call it once the request's body has been read: the listener takes what `receive` gives."""
    started = time.monotonic()
    gone = anyio.Event()
    outcome: list[T] = []
    try:
        async with anyio.create_task_group() as group:

            async def listen() -> None:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                gone.set()
                group.cancel_scope.cancel()

            group.start_soon(listen)
            try:
                outcome.append(await work())
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as errors:  # what `work` raised, as it was
        raise errors.exceptions[0] from None
    if not outcome:
        assert gone.is_set()
        _log.info(
            "the client left after %.1f s: %s %s stopped",
            time.monotonic() - started,
            request.method,
            request.url.path,
        )
        raise ClientDisconnect()
    return outcome[0]
