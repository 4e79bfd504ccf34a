"""The thin-door rule: each tool gives what the HTTP API gives for the same inputs."""

from __future__ import annotations

import pytest
from httpx import AsyncClient

from tests.conftest import TenantClient
from tests.mcp.conftest import Json, ingest, structured

pytestmark = pytest.mark.on_citus

TEXTS = {
    "Tokens": "Bearer tokens authenticate every REST request; rotate signing keys yearly.",
    "Limits": "Each tenant may send one hundred requests per minute before a 429 reply.",
    "Vectors": "Chunks are embedded and stored in PostgreSQL with pgvector for search.",
    "Citations": "Every chunk cites its document: title, page and section path.",
    "Tenants": "Row-level security keeps every tenant's documents and chunks apart.",
}
QUERIES = ("how are REST requests authenticated", "tenant requests per minute", "pgvector search")


async def seed(tenant: TenantClient) -> None:
    for title, text in TEXTS.items():
        await ingest(tenant, title, text, source_url=f"https://docs.example.com/{title.lower()}")


async def rest(tenant: TenantClient, path: str, **body: object) -> Json:
    response = await tenant.http.post(f"/api/rag/{path}", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    reply: Json = response.json()
    return reply


def similar_view(chunk: Json) -> tuple[object, ...]:
    return (
        chunk["chunk_id"],
        chunk["content"],
        chunk["similarity"],
        chunk["source_type"],
        chunk["chunk_index"],
        chunk["page_number"],
        chunk["total_chunks"],
        chunk["metadata"],
    )


def tool_view(document: Json) -> tuple[object, ...]:
    keys = ("id", "content", "similarity", "source_type", "chunk_index", "page_number")
    return (*(document[k] for k in keys), document["total_chunks"], document["metadata"])


async def test_search_similar_and_semantic_search_match_post_search(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    for query in QUERIES:
        for limit in (1, 3, 5):
            api = await rest(tenant, "search", query=query, max_results=limit)
            tool = await structured(http, tenant, "search_similar", query=query, limit=limit)
            assert [tool_view(d) for d in tool["documents"]] == [
                similar_view(c) for c in api["chunks"]
            ]
            assert tool["count"] == len(api["chunks"])
        api = await rest(tenant, "search", query=query, max_results=5, threshold=0.3)
        tool = await structured(
            http, tenant, "semantic_search", query=query, limit=5, threshold=0.3
        )
        assert [tool_view(d) for d in tool["documents"]] == [similar_view(c) for c in api["chunks"]]
        assert all(d["similarity"] >= 0.3 for d in tool["documents"])


async def test_search_matches_post_search_in_every_mode(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    for query in QUERIES:
        for mode in ("hybrid", "vector", "keyword"):
            api = await rest(tenant, "search", query=query, mode=mode, max_results=4)
            tool = await structured(http, tenant, "search", query=query, mode=mode, max_results=4)
            assert [(r["id"], r["title"], r["url"]) for r in tool["results"]] == [
                (c["chunk_id"], c["title"], c["source_url"]) for c in api["chunks"]
            ]
    filtered = {"metadata": {"missing": "value"}}
    api = await rest(tenant, "search", query="tenant", mode="hybrid", filters=filtered)
    tool = await structured(http, tenant, "search", query="tenant", filters=filtered)
    assert api["chunks"] == tool["results"] == []


async def test_get_context_matches_post_context(http: AsyncClient, tenant: TenantClient) -> None:
    await seed(tenant)
    for query in QUERIES:
        for style, budget in (("numbered", 2000), ("inline", 60), ("compact", 120)):
            args = {"query": query, "style": style, "max_tokens": budget, "max_results": 4}
            api = await rest(tenant, "context", **args)
            tool = await structured(http, tenant, "get_context", **args)
            assert tool["context"] == api["context"]
            assert [
                (c["number"], c["document_id"], c["title"], c["text"]) for c in tool["citations"]
            ] == [(c["number"], c["document_id"], c["title"], c["text"]) for c in api["citations"]]
            assert tool["metrics"] == api["metrics"]
            assert (tool["total_found"], tool["dropped"]) == (api["total_found"], api["dropped"])


async def test_fetch_gives_the_full_text_of_what_search_found(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    api = await rest(tenant, "search", query="row-level security", max_results=1)
    [chunk] = api["chunks"]
    fetched = await structured(http, tenant, "fetch", id=chunk["chunk_id"])
    assert (fetched["text"], fetched["title"], fetched["url"]) == (
        chunk["content"],
        chunk["title"],
        chunk["source_url"],
    )
    document = await structured(http, tenant, "fetch", id=chunk["document_id"])
    assert document["metadata"]["kind"] == "document"
    assert document["text"] == chunk["content"]
    assert document["metadata"]["citation"] == (
        "**Tenants** [Source](https://docs.example.com/tenants)"
    )
