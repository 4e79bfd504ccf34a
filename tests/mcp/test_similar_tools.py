"""find_similar and find_duplicates: the same answers as GET …/similar and POST /api/rag/dedupe
(dry run), and find_duplicates never deletes."""

from __future__ import annotations

import uuid

import pytest
from httpx import AsyncClient

from tests.conftest import TenantClient
from tests.mcp.conftest import Json, ingest, structured, tool_error

pytestmark = pytest.mark.on_citus

BASE = "Bearer tokens authenticate every REST request and signing keys rotate every year."
TEXTS = {
    "Tokens": BASE,
    "Tokens copy": BASE + " Internal.",
    "Tokens again": "Bearer tokens authenticate every REST request; signing keys rotate yearly.",
    "Limits": "Each tenant may send one hundred requests per minute before a 429 reply.",
    "Vectors": "Chunks are embedded and stored in PostgreSQL with pgvector for search.",
}


async def seed(tenant: TenantClient) -> dict[str, str]:
    return {
        title: (await ingest(tenant, title, text))["document_id"] for title, text in TEXTS.items()
    }


async def rest_similar(tenant: TenantClient, kind: str, item: str, **params: str | float) -> Json:
    response = await tenant.http.get(
        f"/api/rag/{kind}/{item}/similar", params=params, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


async def chunk_of(tenant: TenantClient, document_id: str) -> str:
    response = await tenant.http.post(
        "/api/rag/search",
        json={"query": "tokens", "threshold": 0.1, "filters": {"document_ids": [document_id]}},
        headers=tenant.headers,
    )
    assert response.status_code == 200, response.text
    chunk_id: str = response.json()["chunks"][0]["chunk_id"]
    return chunk_id


def api_view(chunk: Json) -> tuple[object, ...]:
    return (chunk["chunk_id"], chunk["document_id"], chunk["title"], chunk["similarity"])


def tool_view(item: Json) -> tuple[object, ...]:
    return (item["chunk_id"], item["document_id"], item["title"], item["similarity"])


async def test_find_similar_matches_the_similar_routes(
    http: AsyncClient, tenant: TenantClient
) -> None:
    ids = await seed(tenant)
    chunk = await chunk_of(tenant, ids["Tokens"])
    for kind, item in (("documents", ids["Tokens"]), ("chunks", chunk)):
        for top_k, min_similarity in ((10, 0.0), (2, 0.0), (10, 0.5)):
            api = await rest_similar(tenant, kind, item, top_k=top_k, min_similarity=min_similarity)
            tool = await structured(
                http, tenant, "find_similar", id=item, top_k=top_k, min_similarity=min_similarity
            )
            assert tool["kind"] == kind.removesuffix("s")
            assert tool["item_id"] == item
            assert tool["count"] == api["similar_count"]
            assert [tool_view(i) for i in tool["similar"]] == [api_view(c) for c in api["similar"]]
        assert api["similar"], "the copies are similar to the original"


async def test_find_duplicates_matches_the_dry_run_and_deletes_nothing(
    http: AsyncClient, tenant: TenantClient
) -> None:
    ids = await seed(tenant)
    for threshold in (0.5, 0.8, 0.95):
        response = await tenant.http.post(
            "/api/rag/dedupe", json={"similarity_threshold": threshold}, headers=tenant.headers
        )
        assert response.status_code == 200, response.text
        api = response.json()
        tool = await structured(http, tenant, "find_duplicates", similarity_threshold=threshold)
        assert tool["action"] == "preview"
        assert tool["total_duplicates"] == api["total_duplicates"]
        assert tool["documents_examined"] == api["documents_examined"] == len(ids)
        keys = ("primary_id", "duplicate_ids", "avg_similarity", "primary_title")
        assert [[g[k] for k in keys] for g in tool["duplicate_groups"]] == [
            [g[k] for k in keys] for g in api["duplicate_groups"]
        ]
    assert (await structured(http, tenant, "find_duplicates", similarity_threshold=0.5))[
        "duplicate_groups"
    ], "the copies group at 0.5"
    listed = await tenant.http.get("/api/rag/documents", headers=tenant.headers)
    assert {d["document_id"] for d in listed.json()["items"]} == set(ids.values())


async def test_bad_arguments_are_tool_errors_naming_them(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    message = await tool_error(http, tenant, "find_similar", id=str(uuid.uuid4()), top_k=0)
    assert "top_k" in message
    message = await tool_error(http, tenant, "find_duplicates", similarity_threshold=2.0)
    assert "similarity_threshold" in message
    message = await tool_error(http, tenant, "find_similar", id=str(uuid.uuid4()))
    assert "no chunk or document" in message
