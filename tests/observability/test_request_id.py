"""X-Request-ID: taken when well-formed, else made; echoed on every reply, problems included;
and in the access line of the request, with its route template, status, latency, tenant."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest
from httpx import ASGITransport, AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.live import live_server
from tests.conftest import new_tenant, running_app
from tests.fakes import WordHashEmbedder
from tests.observability.conftest import CapturedLogs

GENERATED = re.compile(r"[0-9a-f]{32}")


class BrokenEmbedder(WordHashEmbedder):
    """Queries fail with an error the service does not expect: a 500."""

    async def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("the embedder broke")

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("the embedder broke")


@pytest.fixture
async def http(settings: Settings, sessions: SessionMaker) -> AsyncIterator[AsyncClient]:
    small = settings.model_copy(
        update={"upload_max_bytes": 1024, "rate_limit_tiers": {"basic": 3, "pro": 10}}
    )
    embedder = BrokenEmbedder(settings.embedding_dimensions)
    async with (
        running_app(small, sessions, embedder) as app,
        AsyncClient(
            transport=ASGITransport(app, raise_app_exceptions=False), base_url="http://test"
        ) as client,
    ):
        yield client


@pytest.mark.parametrize("sent", ["abc-123", "0f" * 16, "trace.1:span_2", "A" * 128])
async def test_a_well_formed_request_id_is_echoed(http: AsyncClient, sent: str) -> None:
    reply = await http.get("/healthz", headers={"X-Request-ID": sent})
    assert reply.headers["x-request-id"] == sent


@pytest.mark.parametrize(
    "sent", ["A" * 129, "has space", 'quote"d', "-leading-dash", "é-accent", "a/b", "{json}"]
)
async def test_a_malformed_request_id_is_replaced(http: AsyncClient, sent: str) -> None:
    reply = await http.get("/healthz", headers={b"X-Request-ID": sent.encode()})
    assert GENERATED.fullmatch(reply.headers["x-request-id"])


async def test_a_request_without_id_gets_one(http: AsyncClient) -> None:
    first, second = await http.get("/healthz"), await http.get("/healthz")
    assert GENERATED.fullmatch(first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_problem_replies_carry_the_request_id(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(http, settings, sessions)
    rid = {"X-Request-ID": "problem-1"}
    auth = tenant.headers | rid
    replies = {
        401: await http.get("/api/rag/documents", headers=rid),
        404: await http.get("/no/such/path", headers=rid),
        413: await http.post("/api/rag/documents", content=b"x" * 200_000, headers=auth),
        422: await http.post("/api/rag/search", json={"query": ""}, headers=auth),
        500: await http.post("/api/rag/search", json={"query": "boom"}, headers=auth),
    }
    for _ in range(3):
        await http.get("/api/rag/documents", headers=auth)
    replies[429] = await http.get("/api/rag/documents", headers=auth)
    for status, reply in replies.items():
        assert reply.status_code == status, (status, reply.text)
        assert reply.headers.get_list("x-request-id") == ["problem-1"], status


async def test_one_access_line_per_request(
    http: AsyncClient, settings: Settings, sessions: SessionMaker, service_logs: CapturedLogs
) -> None:
    tenant = await new_tenant(http, settings, sessions)
    await http.get("/api/rag/documents", headers=tenant.headers | {"X-Request-ID": "line-1"})
    await http.get("/api/rag/documents/not-a-uuid", headers={"X-Request-ID": "line-2"})
    await http.post("/api/rag/search", json={"query": "x"}, headers=tenant.headers)
    lines = service_logs.access()
    assert len(lines) == 3
    listed, unknown, failed = lines
    assert listed["request_id"] == "line-1"
    assert (listed["method"], listed["route"], listed["status"]) == (
        "GET",
        "/api/rag/documents",
        200,
    )
    assert listed["tenant"] == tenant.tenant_id
    assert isinstance(listed["duration_ms"], float)
    assert listed["level"] == "INFO"
    assert listed["timestamp"]
    assert unknown["request_id"] == "line-2"
    assert unknown["route"] == "/api/rag/documents/{document_id}"  # never the raw path
    assert "tenant" not in unknown  # no token, no tenant
    assert failed["status"] == 500
    assert GENERATED.fullmatch(str(failed["request_id"]))
    # the traceback of the 500 is logged under the same request id
    errors = [line for line in service_logs.lines() if line["level"] == "ERROR"]
    assert [line["request_id"] for line in errors] == [failed["request_id"]]


def test_the_431_reply_carries_a_request_id(settings: Settings) -> None:
    with live_server(settings) as live:
        reply = httpx.get(f"{live.url}/healthz", headers={"X-Big": "x" * 70_000}, timeout=30)
    assert reply.status_code == 431
    assert GENERATED.fullmatch(reply.headers["x-request-id"])
