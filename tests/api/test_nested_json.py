"""JSON nested deeper than the parser can follow, in a body the service parses itself (jobs),
in an upload's `metadata` or `access` form field, or in a token's header: a 4xx problem, and
the keep-alive connection it came on serves the next request: no 500 whose exception reaches
the server after the reply and resets the connection."""

from __future__ import annotations

import base64
import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.live import LiveServer

DEEP = 3000
JOB_METADATA = '{"documents": [{"content": "Harbour notes.", "metadata": '


def _object(depth: int) -> str:
    """`{"a": {"a": … 1 …}}`, written out: json.dumps itself cannot nest this deep."""
    return '{"a":' * depth + "1" + "}" * depth


def _array(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def _json(live: LiveServer, path: str, body: str) -> httpx.Request:
    headers = {**live.headers, "Content-Type": "application/json"}
    return httpx.Request("POST", f"{live.url}{path}", content=body.encode(), headers=headers)


def _form(live: LiveServer, path: str, field: str, value: str) -> httpx.Request:
    name = "file" if path.endswith("/upload") else "files"
    files = {name: ("notes.txt", b"Harbour notes.", "text/plain")}
    return httpx.Request(
        "POST", f"{live.url}{path}", files=files, data={field: value}, headers=live.headers
    )


def _bearer(live: LiveServer, header: str) -> httpx.Request:
    segment = base64.urlsafe_b64encode(header.encode()).rstrip(b"=").decode()
    token = f"{segment}.e30.c2ln"
    return httpx.Request(
        "POST",
        f"{live.url}/api/rag/search",
        json={"query": "harbour"},
        headers={"Authorization": f"Bearer {token}"},
    )


CASES = {
    "job metadata": lambda live: _json(live, "/api/rag/jobs", JOB_METADATA + _object(DEEP) + "}]}"),
    "job documents": lambda live: _json(
        live, "/api/rag/jobs", '{"documents": ' + _array(DEEP) + "}"
    ),
    "document metadata": lambda live: _json(
        live, "/api/rag/documents", '{"content": "x", "metadata": ' + _object(DEEP) + "}"
    ),
    "upload metadata": lambda live: _form(
        live, "/api/rag/documents/upload", "metadata", _object(DEEP)
    ),
    "upload access": lambda live: _form(live, "/api/rag/documents/upload", "access", _array(DEEP)),
    "job form metadata": lambda live: _form(live, "/api/rag/jobs", "metadata", _object(DEEP)),
    "job form access": lambda live: _form(live, "/api/rag/jobs", "access", _array(DEEP)),
    "token header": lambda live: _bearer(live, _array(DEEP)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_deeply_nested_json_is_a_4xx_and_the_connection_serves_on(
    live: LiveServer, case: str
) -> None:
    request = CASES[case](live)
    body = request.read()
    address = urlsplit(live.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
    try:
        connection.request("POST", request.url.raw_path.decode(), body, dict(request.headers))
        reply = connection.getresponse()
        problem = json.loads(reply.read())
        assert 400 <= reply.status < 500, problem
        assert reply.getheader("content-type", "").startswith("application/problem+json")
        assert problem["status"] == reply.status
        assert connection.sock is not None, "the server closed the connection"
        first = connection.sock.getsockname()
        connection.request("GET", "/healthz")  # the same keep-alive connection
        after = connection.getresponse()
        assert after.status == 200
        assert after.read() == b'{"status":"ok"}'
        assert connection.sock is not None
        assert connection.sock.getsockname() == first
    finally:
        connection.close()
