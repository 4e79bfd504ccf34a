"""POST /api/rag/context: search, then a cited context block within a token budget."""

from __future__ import annotations

from typing import Any

import pytest

from app.settings import Settings
from tests.conftest import TenantClient, token_for

pytestmark = pytest.mark.on_citus

DOCS = [
    {
        "title": "Garden Guide",
        "external_id": "garden",
        "source_type": "markdown",
        "content": "# Garden Guide\n\n## Tomatoes\n\nTomatoes need sun and water every day.\n\n"
        "## Roses\n\nRoses need sun and pruning in spring.",
    },
    {
        "title": "Kitchen Notes",
        "external_id": "kitchen",
        "source_url": "https://example.com/kitchen",
        "content": "Tomatoes taste best with salt, oil and sun-dried herbs.",
    },
]


async def context(tenant: TenantClient, **body: Any) -> dict[str, Any]:
    response = await tenant.http.post("/api/rag/context", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


@pytest.fixture
async def garden(tenant_a: TenantClient) -> TenantClient:
    for doc in DOCS:
        response = await tenant_a.http.post(
            "/api/rag/documents", json=doc, headers=tenant_a.headers
        )
        assert response.status_code == 201
    return tenant_a


async def test_context_numbers_blocks_and_cites_each_document_once(garden: TenantClient) -> None:
    reply = await context(garden, query="tomatoes sun", max_results=5, threshold=0.1)
    citations = reply["citations"]
    assert [c["number"] for c in citations] == list(range(1, len(citations) + 1))
    assert len({c["document_id"] for c in citations}) == len(citations)
    for citation in citations:
        assert f"[{citation['number']}] " in reply["context"]
        assert citation["text"].startswith(f"[{citation['number']}] **")
    kitchen = next(c for c in citations if c["title"] == "Kitchen Notes")
    assert "[Source](https://example.com/kitchen)" in kitchen["text"]
    assert "Source: " in reply["context"]
    assert {c["chunk_id"] for c in reply["chunks"]} <= {
        chunk_id for c in citations for chunk_id in c["chunk_ids"]
    }


async def test_context_metrics_describe_the_context(garden: TenantClient) -> None:
    reply = await context(garden, query="tomatoes sun", threshold=0.1)
    metrics = reply["metrics"]
    assert set(metrics) >= {
        "avg_similarity",
        "source_diversity",
        "total_chars",
        "total_tokens",
        "quality_score",
    }
    assert metrics["total_chars"] == len(reply["context"])
    assert 0 < metrics["quality_score"] <= 1
    used = reply["chunks"]
    assert metrics["source_diversity"] == pytest.approx(
        len({c["document_id"] for c in used}) / len(used), abs=1e-5
    )


async def test_context_respects_the_token_budget(garden: TenantClient) -> None:
    full = await context(garden, query="tomatoes sun roses", threshold=0.1, max_results=10)
    small = await context(
        garden, query="tomatoes sun roses", threshold=0.1, max_results=10, max_tokens=40
    )
    assert small["metrics"]["total_tokens"] <= 40
    assert len(small["chunks"]) < len(full["chunks"])
    assert small["dropped"] >= 1
    best = full["chunks"][0]["chunk_id"]
    assert [c["chunk_id"] for c in small["chunks"]][:1] == [best]  # lowest ranked dropped first


@pytest.mark.parametrize(
    ("style", "prefix"), [("compact", "[Garden Guide"), ("inline", "Garden Guide")]
)
async def test_context_styles(garden: TenantClient, style: str, prefix: str) -> None:
    reply = await context(garden, query="roses pruning", style=style, threshold=0.1)
    garden_citation = next(c for c in reply["citations"] if c["title"] == "Garden Guide")
    assert garden_citation["text"].startswith(prefix)


async def test_context_is_deterministic(garden: TenantClient) -> None:
    first = await context(garden, query="tomatoes", threshold=0.1)
    second = await context(garden, query="tomatoes", threshold=0.1)
    assert first["context"] == second["context"]
    assert first["citations"] == second["citations"]


async def test_context_of_another_tenant_is_empty(
    garden: TenantClient, tenant_b: TenantClient
) -> None:
    reply = await context(tenant_b, query="tomatoes sun", threshold=0.1)
    assert reply["context"] == ""
    assert reply["citations"] == []
    assert reply["metrics"]["quality_score"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "style": "fancy"}, "style"),
        ({"query": "x", "max_tokens": 0}, "max_tokens"),
        ({"query": "x", "max_chars_per_chunk": 5}, "max_chars_per_chunk"),
        ({"query": "x", "neighbors": 4}, "neighbors"),
        ({"query": "x", "neighbors": -1}, "neighbors"),
        ({"style": "compact"}, "query"),
    ],
)
async def test_bad_context_requests_are_422(
    tenant_a: TenantClient, body: dict[str, Any], field: str
) -> None:
    response = await tenant_a.http.post("/api/rag/context", json=body, headers=tenant_a.headers)
    assert response.status_code == 422
    assert any(field in e["field"] for e in response.json()["errors"])


async def test_context_needs_the_search_scope(tenant_a: TenantClient, settings: Settings) -> None:
    headers = {"Authorization": f"Bearer {token_for(settings, tenant_a.tenant_id, 'rag:ingest')}"}
    response = await tenant_a.http.post("/api/rag/context", json={"query": "x"}, headers=headers)
    assert response.status_code == 403


async def test_diversity_spreads_a_context_over_documents(tenant_a: TenantClient) -> None:
    """One document repeats itself in many chunks; maximal marginal relevance on the stored
    vectors leaves room for the other documents, and the context metrics show it."""
    repeated = "\n\n".join(
        f"## Part {i}\n\nSolar panels convert sunlight into electricity on the roof, part {i}."
        for i in range(12)
    )
    docs = [
        {
            "title": "Panels",
            "external_id": "panels",
            "source_type": "markdown",
            "content": repeated,
        },
        {"title": "Wind", "external_id": "wind", "content": "Wind turbines make electricity."},
        {"title": "Hydro", "external_id": "hydro", "content": "Dams make electricity from water."},
    ]
    for doc in docs:
        response = await tenant_a.http.post(
            "/api/rag/documents", json=doc, headers=tenant_a.headers
        )
        assert response.status_code == 201, response.text
    common = {"query": "solar panels electricity", "max_results": 4, "mode": "hybrid"}
    plain = await context(tenant_a, **common)
    diverse = await context(tenant_a, **common, diversity=0.8)
    assert {c["external_id"] for c in plain["chunks"]} == {"panels"}
    assert {c["external_id"] for c in diverse["chunks"]} >= {"panels", "wind", "hydro"}
    assert diverse["metrics"]["source_diversity"] > plain["metrics"]["source_diversity"]
    assert diverse["chunks"][0]["chunk_id"] == plain["chunks"][0]["chunk_id"]  # best stays first
    bad = await tenant_a.http.post(
        "/api/rag/context", json={**common, "diversity": 1.5}, headers=tenant_a.headers
    )
    assert bad.status_code == 422


async def test_neighbors_widen_a_hit_with_the_chunks_around_it(tenant_a: TenantClient) -> None:
    """`neighbors` 1: the hit and the chunks on either side, one block in document order,
    one citation; the reply lists the neighbours apart from the hits."""
    sections = [
        f"## Part {n}\n\n" + " ".join(f"marker{n} paragraph{n} sentence{i}." for i in range(60))
        for n in range(8)
    ]
    reply = await tenant_a.http.post(
        "/api/rag/documents",
        json={"title": "Long", "source_type": "markdown", "content": "\n\n".join(sections)},
        headers=tenant_a.headers,
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["chunks"] >= 5
    plain = await context(tenant_a, query="marker4", mode="keyword", max_results=1)
    [hit] = plain["chunks"]
    assert plain["neighbors"] == []
    wide = await context(
        tenant_a, query="marker4", mode="keyword", max_results=1, neighbors=1, max_tokens=6000
    )
    assert [c["chunk_id"] for c in wide["chunks"]] == [hit["chunk_id"]]
    indexes = [n["chunk_index"] for n in wide["neighbors"]]
    assert indexes == [hit["chunk_index"] - 1, hit["chunk_index"] + 1]
    assert {n["document_id"] for n in wide["neighbors"]} == {hit["document_id"]}
    assert wide["context"].count("[1]") == 1
    assert "[2]" not in wide["context"]
    positions = [
        wide["context"].index(chunk["content"][:40])
        for chunk in (wide["neighbors"][0], hit, wide["neighbors"][1])
    ]
    assert positions == sorted(positions)  # document order
    assert len(wide["citations"]) == 1
    assert len(wide["context"]) > len(plain["context"])
    tight = await context(
        tenant_a, query="marker4", mode="keyword", max_results=1, neighbors=3,
        max_tokens=plain["metrics"]["total_tokens"],
    )  # fmt: skip
    assert tight["context"] == plain["context"]  # no room: the hit alone, never dropped
