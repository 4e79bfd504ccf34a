"""uvicorn's httptools protocol with a bound on a request's head (request line and headers).

httptools sets no limit: a client could send a header of hundreds of megabytes, holding the
event loop while it is parsed and buffered (at 64 MB every other client stalled for seconds).
This protocol measures each head before the parser sees it: up to the blank line that ends
it, or the whole read while no blank line has come; past `max_head_bytes` it answers 431
Request Header Fields Too Large (a problem document) and closes the connection (after a short
lingering close, so the client reads the reply). A body is never counted, even when a whole
request arrives in one read; memory is bounded by the limit plus one read.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.problems import PROBLEM_TYPE_BASE
from app.observability.logs import REQUEST_ID_ATTR, new_request_id
from app.settings import Settings

TITLE = "Request header fields too large"


LINGER_SECONDS = 2.0  # after a 431: reading and dropping what the client still sends


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _reading_head = True
    _head_bytes = 0
    _tail = b""  # the last bytes of a head still being read: "\r\n\r\n" may straddle reads
    _refused = False

    def __init__(self, *args: Any, max_head_bytes: int = 64 * 1024, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = max_head_bytes

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: the client is still sending what was refused
        if self._reading_head:
            # Before the parser sees it: the head ends at the first blank line; what follows
            # (a body, even a whole request in one read) is not the head's.
            window = self._tail + data
            end = window.find(b"\r\n\r\n")
            size = self._head_bytes + (len(data) if end == -1 else end + 4 - len(self._tail))
            if size > self.max_head_bytes:
                self._refuse()
                return
            if end == -1:
                self._head_bytes, self._tail = size, window[-3:]
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # the next request on this connection (a head begun in the same read is not counted)
        self._reading_head, self._head_bytes, self._tail = True, 0, b""

    def _refuse(self) -> None:
        # The head is not parsed: a request id of its own, in the reply and the log line.
        request_id = new_request_id()
        self.logger.warning(
            "request head over %d bytes: 431",
            self.max_head_bytes,
            extra={REQUEST_ID_ATTR: request_id, "status": 431},
        )
        body = json.dumps(
            {
                "type": f"{PROBLEM_TYPE_BASE}header-too-large",
                "title": TITLE,
                "status": 431,
                "detail": f"the request line and headers exceed {self.max_head_bytes} bytes "
                "(RAG_HTTP_MAX_HEADER_BYTES)",
            }
        ).encode()
        head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
        head += [
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        ]
        head += [
            b"content-type: application/problem+json\r\n",
            b"x-request-id: " + request_id.encode() + b"\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        # A close with unread data would reset the connection, and the client could lose the
        # reply: send it and FIN, drop what still arrives for a moment, then close.
        self._refused = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def uvicorn_config(app: Any, settings: Settings, **options: Any) -> uvicorn.Config:
    """How the service is served, by `rag serve` and by the tests' live servers alike. The
    protocol is a partial of an importable class: worker processes receive it pickled.
    Requests in flight at shutdown get RAG_SHUTDOWN_GRACE_SECONDS; uvicorn's access log is
    off (the app writes its own, app/api/observe.py)."""
    http = partial(BoundedHttpToolsProtocol, max_head_bytes=settings.http_max_header_bytes)
    options.setdefault("timeout_graceful_shutdown", settings.shutdown_grace_seconds)
    options.setdefault("access_log", False)
    return uvicorn.Config(app, http=cast(type[HttpToolsProtocol], http), **options)
