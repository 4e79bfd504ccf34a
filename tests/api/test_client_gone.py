"""A synchronous ingest whose client has gone stops: no more parsing, embedding or writing,
and nothing of the document is stored. Issue 47: a synchronous ingest of 1 MB went on for
minutes after its client had left.

Through a real server and a real socket: the request is sent whole, the socket closed once
embedding has begun; the embedder (paced as a model is) must stop within a few seconds."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from app.settings import Settings
from tests.api.live import LiveServer, live_server
from tests.fakes import PacedEmbedder

ROUTES = ["documents", "batch", "upload"]
PARAGRAPHS = 1_500  # about 3,000 chunks of 32 tokens: a minute of embedding at this pace
STOPPED_WITHIN = 4.0  # seconds after the client left


@pytest.fixture(scope="module")
def paced(settings: Settings) -> Iterator[tuple[LiveServer, PacedEmbedder]]:
    embedder = PacedEmbedder(settings.embedding_dimensions, batch=8, pause=0.05)
    small_chunks = {
        "chunk_tokens": 32,
        "chunk_overlap_tokens": 0,
        "sync_ingest_max_chunks": 100_000,
    }
    with live_server(settings.model_copy(update=small_chunks), embedder=embedder) as server:
        yield server, embedder


def _content() -> str:
    return "\n\n".join(
        f"Paragraph {n}: the harbour master logs vessel {n} at berth {n % 40} before the tide "
        f"turns, and the pilot {n * 7} signs the manifest for cargo lot {n * 13}."
        for n in range(PARAGRAPHS)
    )


def _request(server: LiveServer, route: str, collection: str) -> httpx.Request:
    document = {"title": "Long", "content": _content(), "collection": collection}
    url = f"{server.url}/api/rag/documents"
    if route == "documents":
        return httpx.Request("POST", url, json=document, headers=server.headers)
    if route == "batch":
        return httpx.Request(
            "POST", f"{url}/batch", json={"documents": [document]}, headers=server.headers
        )
    return httpx.Request(
        "POST",
        f"{url}/upload",
        files={"file": ("long.txt", _content().encode(), "text/plain")},
        data={"collection": collection},
        headers=server.headers,
    )


def _send_and_leave(request: httpx.Request, *, once: Callable[[], bool]) -> None:
    """Send the whole request on a socket of its own; close it once `once()` holds."""
    body = request.read()
    lines = [f"{request.method} {request.url.raw_path.decode()} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    assert request.url.host is not None
    assert request.url.port is not None
    with socket.create_connection((request.url.host, request.url.port)) as sock:
        sock.sendall(head + body)
        deadline = time.monotonic() + 60
        while not once():
            assert time.monotonic() < deadline, "the ingest did not begin"
            time.sleep(0.05)


def _stored(server: LiveServer, collection: str) -> int:
    reply = httpx.get(
        f"{server.url}/api/rag/documents",
        params={"collection": collection},
        headers=server.headers,
        timeout=30,
    )
    reply.raise_for_status()
    total: int = reply.json()["total"]
    return total


@pytest.mark.parametrize("route", ROUTES)
def test_an_ingest_whose_client_left_stops_and_stores_nothing(
    paced: tuple[LiveServer, PacedEmbedder], route: str
) -> None:
    server, embedder = paced
    collection = f"gone-{uuid.uuid4().hex[:8]}"
    before = embedder.documents_embedded
    # the client leaves once embedding has begun (parsing and chunking take a few seconds)
    _send_and_leave(
        _request(server, route, collection),
        once=lambda: embedder.documents_embedded > before + 40,
    )

    time.sleep(STOPPED_WITHIN)
    settled = embedder.documents_embedded
    time.sleep(3)
    assert embedder.documents_embedded == settled, "embedding went on after the client left"
    assert settled - before < 1_000, "most of the document was embedded: it was not stopped"
    assert _stored(server, collection) == 0

    # the server is whole afterwards: the same document, small, is ingested
    reply = httpx.post(
        f"{server.url}/api/rag/documents",
        json={"title": "Short", "content": "A short note on the tide.", "collection": collection},
        headers=server.headers,
        timeout=30,
    )
    assert reply.status_code == 201, reply.text
    assert _stored(server, collection) == 1
