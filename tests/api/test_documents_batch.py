"""POST /api/rag/documents/batch worked as a batch: one embedding call, repeated keys in
order, and each document still all-or-nothing when the embedder fails (the database refusing
one document: tests/ingest/test_batch_ingest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS, document, keyword_hits, total
from tests.conftest import TenantClient, app_client
from tests.fakes import FailingEmbedder, WordHashEmbedder

pytestmark = pytest.mark.on_citus

BATCH = f"{DOCUMENTS}/batch"


async def post_batch(
    http: AsyncClient, tenant: TenantClient, documents: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    response = await http.post(BATCH, json={"documents": documents}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


async def test_a_batch_embeds_its_new_texts_in_one_call_each_text_once(
    tenant_a: TenantClient, settings: Settings, sessions: SessionMaker
) -> None:
    counting = WordHashEmbedder()
    documents = [
        {"content": f"Godwit {n} feeds on lugworms.", "external_id": f"g{n}"} for n in range(5)
    ]
    same_text = {"content": "Godwit 0 feeds on lugworms.", "external_id": "g0-copy"}
    async with app_client(settings, sessions, counting) as http:
        results = await post_batch(http, tenant_a, [*documents, same_text])
    assert [r["status"] for r in results] == [201] * 6
    assert counting.document_calls == 1
    # g0 and its copy share the embedded text only when their titles match; they do (the
    # title falls back to the first line), so the text is embedded once for both.
    assert counting.documents_embedded == 5
    assert [r["result"]["embedded"] for r in results] == [1] * 6
    assert await total(tenant_a) == 6


async def test_the_same_external_id_twice_is_applied_in_order(tenant_a: TenantClient) -> None:
    results = await post_batch(
        tenant_a.http,
        tenant_a,
        [
            {"content": "Knots gather in the thousands.", "external_id": "knot"},
            {"content": "Knots gather, then wheel away.", "external_id": "knot"},
            {"content": "Knots gather, then wheel away.", "external_id": "knot"},
        ],
    )
    assert [r["status"] for r in results] == [201, 201, 200]
    first, second, third = (r["result"] for r in results)
    assert first["created"]
    assert not second["created"]
    assert not third["changed"]
    assert first["document_id"] == second["document_id"] == third["document_id"]
    assert await total(tenant_a) == 1
    assert await keyword_hits(tenant_a, "wheel") == ["Knots gather, then wheel away."]
    assert await keyword_hits(tenant_a, "thousands") == []


async def test_an_embedder_failure_fails_only_the_documents_that_needed_it(
    tenant_a: TenantClient, settings: Settings, sessions: SessionMaker
) -> None:
    kept = {"content": "Avocets sweep their bills.", "external_id": "avocet"}
    [first] = await post_batch(tenant_a.http, tenant_a, [kept])
    document_id = first["result"]["document_id"]
    before = await document(tenant_a, document_id)
    changed = {"content": "Avocets sweep upturned bills.", "external_id": "avocet"}
    new = {"content": "Stilts stand on pink legs.", "external_id": "stilt"}
    same = dict(kept, external_id="avocet")
    async with app_client(settings, sessions, FailingEmbedder()) as failing:
        results = await post_batch(failing, tenant_a, [new, same])
        assert [r["status"] for r in results] == [503, 200]
        results = await post_batch(failing, tenant_a, [changed])
        assert [r["status"] for r in results] == [503]
    assert await document(tenant_a, document_id) == before
    assert await total(tenant_a) == 1
    assert len(await keyword_hits(tenant_a, "avocets")) == 1
    assert await keyword_hits(tenant_a, "upturned") == []
    assert await keyword_hits(tenant_a, "stilts") == []
