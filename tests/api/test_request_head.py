"""A request head (request line and headers) over RAG_HTTP_MAX_HEADER_BYTES is a 431 and the
connection is closed; a large body is not a large head; other clients are served meanwhile
(a head of tens of megabytes must neither be accepted nor stall every client)."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from uvicorn.server import ServerState

from app.api.http_protocol import BoundedHttpToolsProtocol
from tests.api.live import LiveServer

LIMIT = 64 * 1024


def _exchange(live: LiveServer, head: bytes, *, body_chunks: int = 0) -> bytes:
    """Send `head` (and `body_chunks` more megabytes of header, as a slow client would) on a
    raw socket; what the server answered before closing."""
    address = urlsplit(live.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        try:
            sock.sendall(head)
            for _ in range(body_chunks):
                sock.sendall(b"x" * 1024 * 1024)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused and closed while we were still sending: expected
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
        return reply


def test_a_huge_header_is_431_and_closed(live: LiveServer) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (LIMIT + 1) + b"\r\n\r\n"
    reply = _exchange(live, head)
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert b"application/problem+json" in reply
    assert b"RAG_HTTP_MAX_HEADER_BYTES" in reply


def test_a_header_sent_without_end_stops_at_the_limit(live: LiveServer) -> None:
    """64 MB of one header, streamed: refused after the first read over the limit, while a
    second client is answered."""
    others: list[int] = []

    def meanwhile() -> None:
        for _ in range(5):
            others.append(httpx.get(f"{live.url}/healthz", timeout=10).status_code)

    helper = threading.Thread(target=meanwhile)
    helper.start()
    reply = _exchange(live, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", body_chunks=64)
    helper.join()
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert others == [200] * 5


def test_headers_under_the_limit_and_a_large_body_are_served(live: LiveServer) -> None:
    padding = {"X-Pad": "p" * (LIMIT // 2)}
    assert httpx.get(f"{live.url}/healthz", headers=padding).status_code == 200
    body = {"title": "Large body", "content": "Harbour log. " * 40_000}  # ~520 KB
    reply = httpx.post(
        f"{live.url}/api/rag/documents", json=body, headers=live.headers, timeout=120
    )
    assert reply.status_code in (200, 201), reply.text
    with httpx.Client(base_url=live.url) as client:  # keep-alive: the count starts again
        for _ in range(3):
            assert client.get("/healthz", headers=padding).status_code == 200


async def test_a_whole_request_in_one_read_is_not_a_large_head() -> None:
    """A small head and an 80 KB body already waiting in the socket arrive in one read: the
    protocol must not count the body as head (seen as a 431 on a busy server's batch ingest)."""
    received: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        size, more = 0, True
        while more:
            message = await receive()
            size, more = size + len(message.get("body", b"")), message.get("more_body", False)
        received.append(size)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    config.load()
    state = ServerState()
    body = b"x" * (80 * 1024)
    head = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server_side, _ = listener.accept()
        client.sendall(head + body)  # all of it waits in the socket before the first read
        loop = asyncio.get_running_loop()
        transport, _protocol = await loop.connect_accepted_socket(
            lambda: BoundedHttpToolsProtocol(
                config=config, server_state=state, app_state={}, max_head_bytes=LIMIT
            ),
            server_side,
        )
        try:
            reply = await loop.run_in_executor(None, client.recv, 4096)
        finally:
            transport.close()
            client.close()
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:120]
    assert received == [len(body)]


MCP_CALL = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
    b' "params": {"name": "search", "arguments": {"query": "setup"}}}'
)


def _request(live: LiveServer, path: str, hosts: list[bytes]) -> bytes:
    """A POST of an MCP call (a GET for other paths) with these Host lines, as sent."""
    lines = [b"%s %s HTTP/1.1" % (b"POST" if path == "/mcp" else b"GET", path.encode())]
    lines += [b"Host: " + host for host in hosts]
    lines += [b"Authorization: Bearer " + live.token.encode(), b"Connection: close"]
    body = MCP_CALL if path == "/mcp" else b""
    if body:
        lines += [b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@pytest.mark.parametrize("path", ["/mcp", "/api/rag/documents", "/healthz"])
@pytest.mark.parametrize("evil_first", [False, True], ids=["ours-first", "evil-first"])
def test_two_host_headers_are_a_400(live: LiveServer, path: str, evil_first: bool) -> None:
    """RFC 9112 section 3.2: a request with more than one Host line is a 400, whichever comes
    first (ours then evil.example must not pass the MCP transport's Host check)."""
    ours = urlsplit(live.url).netloc.encode()
    hosts = [b"evil.example", ours] if evil_first else [ours, b"evil.example"]
    reply = _exchange(live, _request(live, path, hosts))
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:300]
    assert b"application/problem+json" in reply
    assert b"Host" in reply.split(b"\r\n\r\n", 1)[1]


def test_an_http11_request_without_host_is_a_400(live: LiveServer) -> None:
    reply = _exchange(live, b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:300]
    one = urlsplit(live.url).netloc.encode()
    served = _exchange(live, _request(live, "/mcp", [one]))
    assert served.startswith(b"HTTP/1.1 200 "), served[:300]
