"""A client that cuts its upload mid-body: no 500, no document, and the
service serves the next request."""

from __future__ import annotations

import logging
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.live import LiveServer

BOUNDARY = "cutcutcut"


def _total(live: LiveServer) -> int:
    reply = httpx.get(f"{live.url}/api/rag/documents", headers=live.headers, timeout=30)
    assert reply.status_code == 200, reply.text
    count: int = reply.json()["total"]
    return count


def test_an_upload_cut_mid_body_stores_nothing(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    before = _total(live)
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="cut.md"\r\n'
        "Content-Type: text/markdown\r\n\r\n# Cut\n\n"
    ).encode() + b"The harbour log goes on. " * 8_000  # 200 KB, of a declared 400 KB
    address = urlsplit(live.url)
    head = (
        "POST /api/rag/documents/upload HTTP/1.1\r\n"
        f"Host: {address.netloc}\r\nAuthorization: Bearer {live.token}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {2 * len(part)}\r\n\r\n"
    ).encode()
    with caplog.at_level(logging.WARNING):
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            sock.sendall(head + part)
            time.sleep(0.5)  # the service is reading the body when the client goes
        time.sleep(1.0)
        assert _total(live) == before
        assert httpx.get(f"{live.url}/healthz", timeout=10).status_code == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
