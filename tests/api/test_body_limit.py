"""A body over the size limit is a 413 however it is sent: with a Content-Length (refused
before it is read) or chunked, without one (refused once the bytes read pass the limit). Issue
37: a chunked body was a 400, since FastAPI turns any error raised while it reads a body into
"There was an error parsing the body"."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.api.middleware import BODY_OVERHEAD
from app.settings import Settings
from tests.api.live import LiveServer, live_server

LIMIT = 1024  # the smallest RAG_UPLOAD_MAX_BYTES; BODY_OVERHEAD is added for multipart framing
OVER = LIMIT + BODY_OVERHEAD + 64 * 1024


@pytest.fixture(scope="module")
def small(settings: Settings) -> Iterator[LiveServer]:
    limited = settings.model_copy(
        update={"upload_max_bytes": LIMIT, "job_max_request_bytes": LIMIT}
    )
    with live_server(limited) as server:
        yield server


def _json_chunks() -> Iterator[bytes]:
    """A JSON document of OVER bytes, in pieces: httpx sends it chunked, without a length."""
    yield b'{"title": "Large", "content": "'
    for _ in range(OVER // 8192):
        yield b"harbour " * 1024
    yield b'"}'


def _multipart_chunks(boundary: bytes) -> Iterator[bytes]:
    yield b"--" + boundary + b"\r\n"
    yield b'Content-Disposition: form-data; name="file"; filename="large.txt"\r\n'
    yield b"Content-Type: text/plain\r\n\r\n"
    for _ in range(OVER // 8192):
        yield b"harbour " * 1024
    yield b"\r\n--" + boundary + b"--\r\n"


PATHS = ["/api/rag/documents", "/api/rag/search", "/api/rag/jobs", "/api/rag/documents/upload"]


@pytest.mark.parametrize("path", [*PATHS, "/mcp"])
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "with-length"])
def test_a_body_over_the_limit_is_a_413(small: LiveServer, path: str, chunked: bool) -> None:
    headers = {**small.headers, "Accept": "application/json, text/event-stream"}
    if path.endswith("/upload"):
        boundary = b"harbour-boundary"
        headers["Content-Type"] = "multipart/form-data; boundary=" + boundary.decode()
        parts = list(_multipart_chunks(boundary))
    else:
        headers["Content-Type"] = "application/json"
        parts = list(_json_chunks())
    content: bytes | Iterator[bytes] = iter(parts) if chunked else b"".join(parts)
    with httpx.Client(base_url=small.url, timeout=60) as client:
        reply = client.post(path, content=content, headers=headers)
        assert reply.status_code == 413, reply.text
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.json()["status"] == 413
        assert client.get("/healthz").status_code == 200
