"""Every tenant statement goes to one shard. The database of these tests refuses, for the
runtime role, any statement Citus would send to more than one shard
(`citus.multi_task_query_log_level = error`, tests/conftest.py: `citus_database`): each door
below answering without a 500 is each of its statements routed. EXPLAIN shows it for the
search statement itself, and a statement without the tenant shows the guard is on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from httpx import ASGITransport, AsyncClient
from pgvector.asyncpg import register_vector
from pydantic import SecretStr

from app.db.engine import create_engine, create_sessionmaker
from app.db.settings_sql import scope_message
from app.db.tenancy import transaction_settings
from app.permissions import EVERY_DOCUMENT
from app.retrieval.nearest import direct_statement
from app.retrieval.planning import search_settings
from app.retrieval.requests import SearchRequest
from app.settings import Settings
from tests.conftest import DatabaseUrls, TenantClient, new_tenant, running_app
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow

TEXTS = {
    "cobalt": "Cobalt mining in the north feeds the battery plants of the south.",
    "nickel": "Nickel refining needs sulphuric acid and a great deal of power.",
    "copper": "Copper wire carries the current from the turbines to the grid.",
}


@pytest.fixture
async def tenant(
    citus_db: DatabaseUrls, settings: Settings, embedder: WordHashEmbedder
) -> AsyncIterator[TenantClient]:
    """A tenant of the cluster's database, behind the real app (committed writes)."""
    on_cluster = settings.model_copy(update={"database_url": SecretStr(citus_db.app_url)})
    engine = create_engine(citus_db.app_url, pool_size=2)
    sessions = create_sessionmaker(engine)
    try:
        async with (
            running_app(on_cluster, sessions, embedder) as app,
            AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
        ):
            yield await new_tenant(
                http,
                on_cluster,
                sessions,
                tier="enterprise",
                scopes="rag:search rag:ingest rag:admin",
            )
    finally:
        await engine.dispose()


async def test_every_door_of_a_tenant_is_served_by_its_shard(tenant: TenantClient) -> None:
    http, headers = tenant.http, tenant.headers

    async def ok(method: str, url: str, **kwargs: object) -> dict[str, object]:
        reply = await http.request(method, url, headers=headers, **kwargs)  # type: ignore[arg-type]
        assert reply.status_code < 300, f"{method} {url}: {reply.status_code} {reply.text}"
        return reply.json() if reply.content else {}

    ids = {}
    for name, content in TEXTS.items():
        body = {"title": name, "content": content, "external_id": name, "metadata": {"k": name}}
        ids[name] = (await ok("POST", "/api/rag/documents", json=body))["document_id"]
    await ok("POST", "/api/rag/documents", json={**body, "content": content + " Again."})
    batch = [
        {"title": f"b{i}", "content": f"zinc note {i}", "external_id": f"b{i}"} for i in range(3)
    ]
    await ok("POST", "/api/rag/documents/batch", json={"documents": batch})
    files = {"file": ("tin.md", b"# Tin\n\nTin plates the cans.", "text/markdown")}
    await ok("POST", "/api/rag/documents/upload", files=files, data={"collection": "metals"})
    restricted = {
        "title": "secret",
        "content": "Cobalt prices, board only.",
        "access": ["group:board"],
    }
    await ok("POST", "/api/rag/documents", json={**restricted, "external_id": "secret"})
    filters = {"source_types": ["text"], "metadata": {"k": "cobalt"}}
    narrowed = {"query": "cobalt", "collections": ["default"], "filters": filters}
    for mode in ("vector", "keyword", "hybrid"):
        await ok("POST", "/api/rag/search", json={"query": "cobalt mining", "mode": mode})
        await ok("POST", "/api/rag/search", json={**narrowed, "mode": mode})
        await ok(
            "POST",
            "/api/rag/search",
            json={"query": "cobalt", "mode": mode, "diversity": 0.5, "threshold": 0.1},
        )
    await ok("POST", "/api/rag/context", json={"query": "cobalt", "style": "numbered"})
    found = await ok("POST", "/api/rag/search", json={"query": "nickel acid"})
    chunk_id = found["chunks"][0]["chunk_id"]  # type: ignore[index]
    await ok("GET", f"/api/rag/chunks/{chunk_id}/similar?min_similarity=0.1")
    await ok("GET", f"/api/rag/documents/{ids['nickel']}/similar?min_similarity=0.1")
    await ok("GET", "/api/rag/documents?limit=5")
    await ok("GET", "/api/rag/documents?collection=metals")
    await ok("GET", f"/api/rag/documents/{ids['copper']}")
    await ok("GET", f"/api/rag/documents/{ids['copper']}/chunks")
    await ok("GET", "/api/rag/collections")
    await ok("PATCH", f"/api/rag/documents/{ids['copper']}", json={"metadata": {"k": "wire"}})
    await ok("PATCH", f"/api/rag/documents/{ids['copper']}", json={"access": ["group:grid"]})
    await ok("POST", "/api/rag/dedupe", json={"similarity_threshold": 0.5, "dry_run": True})
    await ok(
        "POST",
        "/api/rag/dedupe",
        json={"similarity_threshold": 0.99, "dry_run": False, "merge_strategy": "keep_newest"},
    )
    await ok("DELETE", f"/api/rag/documents/{ids['nickel']}")
    sync = "/api/rag/collections/metals/sync"
    entries = [
        {"external_id": "tin.md", "version": "v0"},
        {"external_id": "lead.md", "content": "Lead shields the x-ray room."},
    ]
    await ok("POST", sync, json={"documents": entries, "dry_run": True})
    synced = await ok("POST", sync, json={"documents": entries})
    await ok("GET", f"/api/rag/receipts/{synced['receipt']['receipt_id']}")  # type: ignore[index]
    queued = await ok("POST", sync, json={"documents": entries, "background": True})
    await ok("DELETE", f"/api/rag/jobs/{queued['job_id']}")
    job = await ok("POST", "/api/rag/jobs", json={"documents": batch})
    await ok("GET", f"/api/rag/jobs/{job['job_id']}")
    await ok("GET", "/api/rag/jobs")
    await ok("DELETE", f"/api/rag/jobs/{job['job_id']}")
    await ok("GET", f"/api/admin/tenants/{tenant.tenant_id}/stats")


async def _explain(url: str, tenant_id: str, sql: str, *arguments: object) -> str:
    conn = await asyncpg.connect(url)
    await register_vector(conn)
    try:
        async with conn.transaction():
            request = SearchRequest(query="q")
            local = transaction_settings(
                {"tenant_id": tenant_id, "readers": EVERY_DOCUMENT, "settings": {}}
            ) | search_settings(request, tenant_id)
            await conn.execute(scope_message(None, local))
            rows = await conn.fetch(f"EXPLAIN {sql}", *arguments)
    finally:
        await conn.close()
    return "\n".join(row[0] for row in rows)


async def test_the_search_statement_is_one_task_and_an_unnamed_tenant_is_refused(
    citus_db: DatabaseUrls,
) -> None:
    tenant_id = f"t-{uuid.uuid4().hex[:8]}"
    vector = [1.0] + [0.0] * 383
    for kept in (True, False):
        statement, arguments = direct_statement(
            vector, tenant_id, "test:model", SearchRequest(query="q"), kept=kept
        )
        plan = await _explain(citus_db.app_url, tenant_id, statement.sql, *arguments)
        assert "Task Count: 1" in plan, plan
    with pytest.raises(asyncpg.PostgresError, match="multi-task query"):
        await _explain(citus_db.app_url, tenant_id, "SELECT count(*) FROM chunks")
