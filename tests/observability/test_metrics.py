"""GET /metrics after traffic through the real app: every family present and moving by the
amount the traffic explains; requests labelled by route template, never by raw path."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from httpx import ASGITransport, AsyncClient

from app.db.tenancy import SessionMaker
from app.embeddings import CachedEmbedder
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant, running_app
from tests.fakes import WordHashEmbedder
from tests.observability.scrape import Scrape

DOCUMENTS = [
    {"title": "Harbour", "content": "Ships unload grain in the harbour.", "external_id": "a"},
    {"title": "Harbour", "content": "Ships unload grain in the harbour.", "external_id": "b"},
    {"title": "Volcano", "content": "Magma rises and erupts as lava.", "external_id": "c"},
]


@pytest.fixture
async def http(settings: Settings, sessions: SessionMaker) -> AsyncIterator[AsyncClient]:
    """The app with its embedder behind the query cache, as the service builds it."""
    embedder = CachedEmbedder(WordHashEmbedder(settings.embedding_dimensions), 100)
    async with (
        running_app(settings, sessions, embedder) as app,
        AsyncClient(transport=ASGITransport(app), base_url="http://test") as client,
    ):
        yield client


async def scrape(http: AsyncClient) -> Scrape:
    reply = await http.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    return Scrape.parse(reply.text)


async def test_metrics_move_with_traffic(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(http, settings, sessions)
    before = await scrape(http)
    ids = await _ingest(http, tenant)
    for mode in ("vector", "keyword", "hybrid"):
        for _ in range(2):  # the second time the query's vector comes from the cache
            body = {"query": f"harbour grain {mode}", "mode": mode}
            reply = await http.post("/api/rag/search", json=body, headers=tenant.headers)
            assert reply.status_code == 200, reply.text
    for document_id in ids:
        read = await http.get(f"/api/rag/documents/{document_id}", headers=tenant.headers)
        assert read.status_code == 200
    preview = {"similarity_threshold": 0.95, "dry_run": True}
    assert (await http.post("/api/rag/dedupe", json=preview, headers=tenant.headers)).is_success
    merge = {"similarity_threshold": 0.95, "dry_run": False, "merge_strategy": "keep_newest"}
    merged = await http.post("/api/rag/dedupe", json=merge, headers=tenant.headers)
    assert merged.json()["total_duplicates"] == 1
    assert (await http.get("/api/rag/documents", headers={})).status_code == 401
    after = await scrape(http)

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    # requests: by route template and status; one sample per template, not per document
    route = "/api/rag/documents/{document_id}"
    assert moved("rag_http_requests_total", route=route, status="200", method="GET") == 3
    assert moved("rag_http_requests_total", route="/api/rag/search", status="200") == 6
    assert moved("rag_http_requests_total", route="/api/rag/documents", status="401") == 1
    assert moved("rag_http_request_duration_seconds_count", route="/api/rag/search") == 6
    assert moved("rag_http_request_duration_seconds_sum", route="/api/rag/search") > 0
    routes = after.labels_of("rag_http_requests_total", "route")
    assert not any(str(document_id) in r for r in routes for document_id in ids)
    assert after.labels_of("rag_http_requests_total", "tenant") == {""}  # off by default
    # search stages by mode
    for mode in ("vector", "keyword", "hybrid"):
        for stage in ("embed", "database"):
            labels = {"mode": mode, "stage": stage}
            assert moved("rag_search_stage_seconds_count", **labels) == 2, labels
        assert moved("rag_search_stage_seconds_sum", mode=mode, stage="database") > 0
    # the query cache: each query missed once, then hit
    assert moved("rag_query_embedding_cache_total", result="miss") == 3
    assert moved("rag_query_embedding_cache_total", result="hit") == 3
    # embedding calls: a query call per miss, one document call for the batch
    assert moved("rag_embedding_calls_total", kind="query", outcome="ok") == 3
    assert moved("rag_embedding_calls_total", kind="documents", outcome="ok") == 1
    assert moved("rag_embedded_texts_total", kind="documents") == 2  # the copy reuses a vector
    assert moved("rag_embedding_call_seconds_count", kind="documents") == 1
    # rate limit: every gated request spent one, all allowed
    assert moved("rag_ratelimit_decisions_total", decision="allowed") == 1 + 6 + 3 + 2
    # ingestion and dedupe
    assert moved("rag_ingest_documents_total", outcome="written") == 3
    assert moved("rag_ingest_chunks_total") == 3
    assert moved("rag_dedupe_runs_total", dry_run="true") == 1
    assert moved("rag_dedupe_runs_total", dry_run="false") == 1
    assert moved("rag_dedupe_removed_documents_total") == 1
    # the pool gauges exist (the pool itself is tested in test_pool_metrics.py)
    assert {"rag_db_pool_connections_in_use", "rag_db_pool_connections_open"} <= after.names()


async def _ingest(http: AsyncClient, tenant: TenantClient) -> list[str]:
    reply = await http.post(
        "/api/rag/documents/batch", json={"documents": DOCUMENTS}, headers=tenant.headers
    )
    assert reply.status_code in (200, 201, 207), reply.text
    return [item["result"]["document_id"] for item in reply.json()["results"]]


async def test_rate_limited_requests_are_counted(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(http, settings, sessions)
    limit = settings.rate_limit_tiers["basic"]
    before = await scrape(http)
    statuses = [
        (await http.get("/api/rag/documents", headers=tenant.headers)).status_code
        for _ in range(limit + 3)
    ]
    assert statuses.count(429) == 3
    after = await scrape(http)
    moved = after.value("rag_ratelimit_decisions_total", decision="limited") - before.value(
        "rag_ratelimit_decisions_total", decision="limited"
    )
    assert moved == 3
    limited = after.value(
        "rag_http_requests_total", route="/api/rag/documents", status="429"
    ) - before.value("rag_http_requests_total", route="/api/rag/documents", status="429")
    assert limited == 3


async def test_tenant_label_only_when_enabled(settings: Settings, sessions: SessionMaker) -> None:
    labelled = settings.model_copy(update={"metrics_tenant_label": True})
    async with (
        running_app(labelled, sessions, WordHashEmbedder(settings.embedding_dimensions)) as app,
        AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
    ):
        tenant = await new_tenant(http, labelled, sessions)
        assert (await http.get("/api/rag/documents", headers=tenant.headers)).status_code == 200
        after = await scrape(http)
    assert after.value("rag_http_requests_total", tenant=tenant.tenant_id) == 1
    assert after.value("rag_ratelimit_decisions_total", tenant=tenant.tenant_id) == 1
