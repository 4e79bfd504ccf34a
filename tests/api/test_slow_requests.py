"""The deadlines of a request's head and body (app/api/http_protocol.py), one connection at
a time on a live server with short ones: what is cut (408, naming the setting) and what is
not (a body that keeps coming at the minimum rate; the next request on a kept-alive
connection, whose head has a clock of its own). tests/reliability/test_slow_clients.py sends
a few hundred such connections to a real `rag serve`."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from app.settings import Settings
from tests.api.live import LiveServer, live_server

HEAD, BODY, KEEPALIVE, RATE = 1.0, 1.0, 4.0, 16 * 1024


@pytest.fixture(scope="module")
def quick(settings: Settings) -> Iterator[LiveServer]:
    deadlines = {
        "http_head_timeout_seconds": HEAD,
        "http_body_timeout_seconds": BODY,
        "http_body_min_bytes_per_second": RATE,
        "http_keepalive_seconds": KEEPALIVE,
    }
    with live_server(settings.model_copy(update=deadlines)) as server:
        yield server


def _connect(live: LiveServer) -> socket.socket:
    address = urlsplit(live.url)
    return socket.create_connection((address.hostname, address.port), timeout=30)


def _until_closed(sock: socket.socket) -> bytes:
    reply = b""
    try:
        while chunk := sock.recv(65536):
            reply += chunk
    except ConnectionResetError:
        pass
    return reply


def _reply(sock: socket.socket) -> bytes:
    """One whole reply with a Content-Length: its head and body may come in separate reads
    (seen on a loaded machine), and what is left would be read as the next one."""
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += _more(sock, reply)
    head, body = reply.split(b"\r\n\r\n", 1)
    lines = head.lower().split(b"\r\n")
    length = int(next(line for line in lines if line.startswith(b"content-length:"))[15:])
    while len(body) < length:
        body += _more(sock, reply)
    return head + b"\r\n\r\n" + body


def _more(sock: socket.socket, so_far: bytes) -> bytes:
    chunk = sock.recv(65536)
    assert chunk, f"closed in the middle of a reply: {so_far[:300]!r}"
    return chunk


def _post_head(live: LiveServer, length: int, path: bytes = b"/api/rag/documents") -> bytes:
    return (
        b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
        % (path, live.token.encode(), length)
    )


def _document(size: int) -> bytes:
    return json.dumps({"title": "Steady", "content": "harbour " * (size // 8)}).encode()


def test_a_head_not_whole_in_time_is_408(quick: LiveServer) -> None:
    with _connect(quick) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")  # and never the blank line
        started = time.monotonic()
        reply = _until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"RAG_HTTP_HEAD_TIMEOUT_SECONDS" in reply
    assert time.monotonic() - started >= HEAD - 0.2


@pytest.mark.parametrize("path", [b"/api/rag/documents", b"/api/rag/jobs"])
def test_a_body_below_the_minimum_rate_is_408(
    quick: LiveServer, path: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """The route was waiting for the body: it reads a disconnect, which is no error of the
    service (a route reading its body itself logged one, with a traceback)."""
    body = _document(64 * 1024)
    with caplog.at_level(logging.INFO), _connect(quick) as sock:
        sock.sendall(_post_head(quick, len(body), path))
        try:
            for start in range(0, len(body), 512):  # 1 KiB/s
                sock.sendall(body[start : start + 512])
                time.sleep(0.5)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending
        reply = _until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"RAG_HTTP_BODY_TIMEOUT_SECONDS" in reply
    time.sleep(0.5)  # the route's own end, on the server's thread
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_a_body_that_keeps_coming_at_the_minimum_rate_is_served(quick: LiveServer) -> None:
    """Four times the body timeout, at twice the minimum rate: it is still arriving."""
    body = _document(int(2 * RATE * 4 * BODY))
    piece = int(2 * RATE / 10)
    with _connect(quick) as sock:
        sock.sendall(_post_head(quick, len(body)))
        for start in range(0, len(body), piece):
            sock.sendall(body[start : start + piece])
            time.sleep(0.1)
        reply = sock.recv(65536)
    assert reply.startswith((b"HTTP/1.1 201 ", b"HTTP/1.1 200 ")), reply[:300]


def test_the_next_request_on_a_kept_alive_connection_has_a_head_clock_of_its_own(
    quick: LiveServer,
) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
    with _connect(quick) as sock:
        sock.sendall(request)
        assert _reply(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(HEAD + 1.0)  # idle past the head timeout, within the keep-alive time
        sock.sendall(request)
        assert _reply(sock).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert _until_closed(sock) == b""  # then idle: closed after the keep-alive time
    assert time.monotonic() - started >= KEEPALIVE - 0.5
