"""Browsing: collections with counts, the documents list filtered by source type, and one
document's chunks in reading order with their citations."""

from __future__ import annotations

import uuid

from tests.api.calls import DOCUMENTS, assert_problem, ingested, listing
from tests.conftest import TenantClient

GUIDE = (
    "# Operations guide\n\n## Backups\n\nBackups run nightly at 02:00 UTC.\n\n"
    "## Restores\n\nRestores are tested every month on a scratch cluster."
)


async def test_collections_are_listed_with_their_counts(
    tenant_a: TenantClient, tenant_b: TenantClient
) -> None:
    await ingested(tenant_a, title="A", content="First.", collection="handbook")
    await ingested(tenant_a, title="B", content="Second.", collection="handbook")
    await ingested(tenant_a, title="C", content="Third.", collection="notes")
    await ingested(tenant_b, title="D", content="Elsewhere.", collection="secret")
    reply = await tenant_a.http.get("/api/rag/collections", headers=tenant_a.headers)
    assert reply.status_code == 200, reply.text
    items = reply.json()["items"]
    assert [(c["name"], c["documents"]) for c in items] == [("handbook", 2), ("notes", 1)]
    assert all(c["chunks"] >= c["documents"] for c in items)


async def test_the_documents_list_filters_by_source_type(tenant_a: TenantClient) -> None:
    await ingested(tenant_a, title="Guide", content=GUIDE, source_type="markdown")
    await ingested(tenant_a, title="Plain", content="Just text.")
    page = await listing(tenant_a, source_type="markdown")
    assert (page["total"], [d["title"] for d in page["items"]]) == (1, ["Guide"])
    assert (await listing(tenant_a, source_type="pdf"))["total"] == 0
    refused = await tenant_a.http.get(
        DOCUMENTS, params={"source_type": "exe"}, headers=tenant_a.headers
    )
    assert_problem(refused, 422)


async def test_a_documents_chunks_come_in_order_with_their_citations(
    tenant_a: TenantClient, tenant_b: TenantClient
) -> None:
    created = await ingested(
        tenant_a,
        title="Ops",
        content=GUIDE,
        source_type="markdown",
        source_url="https://example.com/ops",
    )
    url = f"{DOCUMENTS}/{created['document_id']}/chunks"
    reply = await tenant_a.http.get(url, headers=tenant_a.headers)
    assert reply.status_code == 200, reply.text
    found = reply.json()
    assert found["document"]["title"] == "Ops"
    assert found["total"] == created["chunks"] == len(found["chunks"])
    assert [c["chunk_index"] for c in found["chunks"]] == list(range(found["total"]))
    assert found["citation"].startswith("[1] **Ops** ")
    sections = [c["section"] for c in found["chunks"]]
    assert ["Operations guide", "Backups"] in sections
    backups = found["chunks"][sections.index(["Operations guide", "Backups"])]
    assert "nightly" in backups["content"]
    assert backups["citation"] == (
        "**Ops** [Source](https://example.com/ops) _Operations guide → Backups_"
    )

    compact = await tenant_a.http.get(
        url, params={"style": "compact", "limit": 1, "offset": 1}, headers=tenant_a.headers
    )
    page = compact.json()
    assert (page["style"], page["limit"], page["offset"]) == ("compact", 1, 1)
    assert [c["chunk_index"] for c in page["chunks"]] == [1]
    assert page["chunks"][0]["citation"] == "[Ops]"

    assert_problem(await tenant_b.http.get(url, headers=tenant_b.headers), 404)
    unknown = f"{DOCUMENTS}/{uuid.uuid4()}/chunks"
    assert_problem(await tenant_a.http.get(unknown, headers=tenant_a.headers), 404)
