"""uvicorn's httptools protocol with bounds on what one connection may hold: the size of a
request's head, and the time its head and its body take to arrive.

Size: httptools sets no limit, so a client could send a header of hundreds of megabytes,
holding the event loop while it is parsed and buffered (at 64 MB every other client stalled
for seconds). Each head is measured before the parser sees it: up to the blank line that ends
it, or the whole read while no blank line has come; past `max_head_bytes` the reply is 431
Request Header Fields Too Large. A body is never counted, even when a whole request arrives
in one read; memory is bounded by the limit plus one read.

Time (`Deadlines`): uvicorn closes a kept-alive connection that stays idle
(`timeout_keep_alive`), and nothing else: a connection that never sent a byte, a head sent a
byte a second or a body at 10 bytes/s were all held for as long as the client liked. A head
must now be whole within `head_seconds` of the connection opening (or of its first byte, for
the next request on a kept-alive connection); a body within `body_seconds` of its head, plus
one second for every `body_min_rate` bytes received. Past either the reply is 408 Request
Timeout; a connection that sent nothing is closed without one. While the service itself is
not reading (its buffer is full, or it has not yet answered `Expect: 100-continue`) the body's
clock starts again.

Each refusal is a problem document; the connection is then closed after a short lingering
close, so the client reads the reply.
"""

from __future__ import annotations

import json
from asyncio import TimerHandle
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.problems import PROBLEM_TYPE_BASE
from app.observability.logs import REQUEST_ID_ATTR, new_request_id
from app.settings import Settings

TITLE = "Request header fields too large"
LINGER_SECONDS = 2.0  # after a refusal: reading and dropping what the client still sends


@dataclass(frozen=True, slots=True)
class Deadlines:
    """How long a request's head and body may take to arrive (RAG_HTTP_*_TIMEOUT_SECONDS)."""

    head_seconds: float = 10.0
    body_seconds: float = 30.0
    body_min_rate: int = 16 * 1024  # bytes a second that buy the body one more second

    @classmethod
    def of(cls, settings: Settings) -> Deadlines:
        return cls(
            head_seconds=settings.http_head_timeout_seconds,
            body_seconds=settings.http_body_timeout_seconds,
            body_min_rate=settings.http_body_min_bytes_per_second,
        )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _reading_head = True
    _head_bytes = 0
    _tail = b""  # the last bytes of a head still being read: "\r\n\r\n" may straddle reads
    _head_seen = False  # a byte of the current head has arrived
    _refused = False
    _head_timer: TimerHandle | None = None
    _body_timer: TimerHandle | None = None
    _body_started = 0.0
    _body_bytes = 0

    def __init__(
        self,
        *args: Any,
        max_head_bytes: int = 64 * 1024,
        deadlines: Deadlines = Deadlines(),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = max_head_bytes
        self.deadlines = deadlines

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.deadlines.head_seconds, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: the client is still sending what was refused
        if self._reading_head:
            self._head_seen = True
            if self._head_timer is None:  # the first byte of the next request on this connection
                self._head_timer = self.loop.call_later(
                    self.deadlines.head_seconds, self._head_late
                )
            # Before the parser sees it: the head ends at the first blank line; what follows
            # (a body, even a whole request in one read) is not the head's.
            window = self._tail + data
            end = window.find(b"\r\n\r\n")
            size = self._head_bytes + (len(data) if end == -1 else end + 4 - len(self._tail))
            if size > self.max_head_bytes:
                self._refuse(
                    431,
                    b"Request Header Fields Too Large",
                    slug="header-too-large",
                    title=TITLE,
                    detail=f"the request line and headers exceed {self.max_head_bytes} bytes "
                    "(RAG_HTTP_MAX_HEADER_BYTES)",
                )
                return
            if end == -1:
                self._head_bytes, self._tail = size, window[-3:]
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._cancel(self._head_timer)
        self._head_timer = None
        self._start_body_clock()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel(self._body_timer)
        self._body_timer = None
        super().on_message_complete()
        # the next request on this connection (a head begun in the same read is not counted;
        # its clock starts with its next read, and uvicorn's keep-alive timeout bounds the wait)
        self._reading_head, self._head_bytes, self._tail = True, 0, b""
        self._head_seen = False

    def _start_body_clock(self) -> None:
        self._cancel(self._body_timer)
        self._body_started, self._body_bytes = self.loop.time(), 0
        self._body_timer = self.loop.call_later(self.deadlines.body_seconds, self._body_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._refused:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # a reply is still being made for the previous request: this head's clock waits
            self._head_timer = self.loop.call_later(self.deadlines.head_seconds, self._head_late)
            return
        if not self._head_seen:  # nothing sent at all: no request to answer
            self.transport.close()
            return
        self._late("head", self.deadlines.head_seconds, "RAG_HTTP_HEAD_TIMEOUT_SECONDS")

    def _body_late(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self._refused:
            return
        cycle = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self._start_body_clock()  # the service is not reading: not the client's time
            return
        rate = self.deadlines.body_min_rate
        earned = self._body_bytes / rate if rate else 0.0
        due = self._body_started + self.deadlines.body_seconds + earned
        if (left := due - self.loop.time()) > 0:
            self._body_timer = self.loop.call_later(left, self._body_late)
            return
        if cycle is not None and cycle.response_started:
            self.transport.close()  # a reply is under way: it cannot become a 408
            return
        if cycle is not None:  # the app reads a disconnect, and what it sends is dropped
            cycle.disconnected = True
            cycle.message_event.set()
        self._late("body", self.deadlines.body_seconds, "RAG_HTTP_BODY_TIMEOUT_SECONDS")

    def _late(self, part: str, seconds: float, setting: str) -> None:
        rate = ""
        if part == "body" and self.deadlines.body_min_rate:
            rate = f" and one more for every {self.deadlines.body_min_rate} bytes"
        self._refuse(
            408,
            b"Request Timeout",
            slug="request-timeout",
            title="Request timeout",
            detail=f"the request {part} did not arrive in time: {seconds:g} s{rate} ({setting})",
        )

    def _refuse(self, status: int, reason: bytes, *, slug: str, title: str, detail: str) -> None:
        # Before a request exists: a request id of its own, in the reply and the log line.
        request_id = new_request_id()
        log = self.logger.warning if status == 431 else self.logger.info
        log("%s: %d", detail, status, extra={REQUEST_ID_ATTR: request_id, "status": status})
        problem = {"type": PROBLEM_TYPE_BASE + slug, "title": title, "status": status}
        body = json.dumps({**problem, "detail": detail}).encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
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
        self._cancel_timers()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            self._cancel(timer)
        self._head_timer = self._body_timer = None

    @staticmethod
    def _cancel(timer: TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()


def uvicorn_config(app: Any, settings: Settings, **options: Any) -> uvicorn.Config:
    """How the service is served, by `rag serve` and by the tests' live servers alike. The
    protocol is a partial of an importable class: worker processes receive it pickled.
    Requests in flight at shutdown get RAG_SHUTDOWN_GRACE_SECONDS; an idle kept-alive
    connection is closed after RAG_HTTP_KEEPALIVE_SECONDS; uvicorn's access log is off (the
    app writes its own, app/api/observe.py)."""
    http = partial(
        BoundedHttpToolsProtocol,
        max_head_bytes=settings.http_max_header_bytes,
        deadlines=Deadlines.of(settings),
    )
    options.setdefault("timeout_graceful_shutdown", settings.shutdown_grace_seconds)
    options.setdefault("timeout_keep_alive", settings.http_keepalive_seconds)
    options.setdefault("access_log", False)
    return uvicorn.Config(app, http=cast(type[HttpToolsProtocol], http), **options)
