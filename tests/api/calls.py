"""HTTP calls the documents tests share: ingest, search, list, stats for one tenant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from httpx import AsyncClient, Response

from app.settings import Settings
from tests.conftest import TenantClient, token_for

DOCUMENTS = "/api/rag/documents"
PROBLEM_JSON = "application/problem+json"

Json = dict[str, Any]


async def ingest(tenant: TenantClient, **body: object) -> Response:
    """POST one JSON document."""
    return await post_document(tenant.http, tenant, body)


async def post_document(
    http: AsyncClient, tenant: TenantClient, body: Mapping[str, object]
) -> Response:
    """POST one JSON document through `http`: another app over the same database."""
    return await http.post(DOCUMENTS, json=dict(body), headers=tenant.headers)


async def ingested(tenant: TenantClient, **body: object) -> Json:
    """Ingest a document that must be new (201); its reply."""
    response = await ingest(tenant, **body)
    assert response.status_code == 201, response.text
    reply: Json = response.json()
    return reply


async def search(tenant: TenantClient, query: str, **body: object) -> list[Json]:
    """The chunks a search returns (vector mode unless `mode` says otherwise)."""
    response = await tenant.http.post(
        "/api/rag/search", json={"query": query, **body}, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    chunks: list[Json] = response.json()["chunks"]
    return chunks


async def keyword_hits(tenant: TenantClient, word: str) -> list[str]:
    """Contents of the chunks holding `word` (full-text search: exact presence)."""
    chunks = await search(tenant, word, mode="keyword", max_results=20)
    return [chunk["content"] for chunk in chunks]


async def document(tenant: TenantClient, document_id: str) -> Json:
    response = await tenant.http.get(f"{DOCUMENTS}/{document_id}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    found: Json = response.json()
    return found


async def listing(tenant: TenantClient, **params: str | int) -> Json:
    response = await tenant.http.get(DOCUMENTS, params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    page: Json = response.json()
    return page


async def total(tenant: TenantClient) -> int:
    count: int = (await listing(tenant))["total"]
    return count


async def stats(tenant: TenantClient, settings: Settings) -> Json:
    """The tenant's admin statistics, asked with a rag:admin token."""
    admin = {"Authorization": f"Bearer {token_for(settings, tenant.tenant_id, 'rag:admin')}"}
    response = await tenant.http.get(f"/api/admin/tenants/{tenant.tenant_id}/stats", headers=admin)
    assert response.status_code == 200, response.text
    found: Json = response.json()
    return found


def assert_problem(response: Response, status: int) -> Json:
    """An RFC 9457 problem with this status; its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    body: Json = response.json()
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    return body
