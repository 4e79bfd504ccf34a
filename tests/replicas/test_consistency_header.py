"""X-Read-Consistency without replicas: accepted, checked, and the answers are the same."""

from __future__ import annotations

import pytest

from tests.conftest import TenantClient

ROUTES = [
    ("POST", "/api/rag/search", {"query": "anything"}),
    ("POST", "/api/rag/context", {"query": "anything"}),
    ("POST", "/api/rag/dedupe", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_a_read_consistency_that_is_not_known_is_a_422(
    tenant_a: TenantClient, method: str, path: str, body: dict[str, object]
) -> None:
    reply = await tenant_a.http.request(
        method,
        path,
        json=body,
        headers={**tenant_a.headers, "X-Read-Consistency": "eventual"},
    )
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert problem["errors"][0]["field"] == "X-Read-Consistency"
    assert "primary" in problem["errors"][0]["message"]


async def test_without_replicas_both_consistencies_answer_from_the_primary_alike(
    tenant_a: TenantClient,
) -> None:
    created = await tenant_a.http.post(
        "/api/rag/documents",
        json={"title": "Bees", "content": "bees dance to show where the flowers are"},
        headers=tenant_a.headers,
    )
    assert created.status_code == 201, created.text
    replies = []
    for consistency in ("replica", "primary"):
        reply = await tenant_a.http.post(
            "/api/rag/search",
            json={"query": "bees dance", "mode": "keyword"},
            headers={**tenant_a.headers, "X-Read-Consistency": consistency},
        )
        assert reply.status_code == 200, reply.text
        replies.append([c["chunk_id"] for c in reply.json()["chunks"]])
    assert replies[0] == replies[1] != []
