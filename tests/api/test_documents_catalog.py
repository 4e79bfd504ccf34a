"""GET/DELETE /api/rag/documents: listing, pagination, reading, deleting, tenant isolation,
and the admin statistics that count what ingestion stored."""

from __future__ import annotations

import uuid

from app.settings import Settings
from tests.api.calls import (
    DOCUMENTS,
    assert_problem,
    document,
    ingested,
    keyword_hits,
    listing,
    search,
    stats,
    total,
)
from tests.conftest import TenantClient
from tests.fakes import WordHashEmbedder


async def _three_and_one(tenant: TenantClient) -> dict[str, str]:
    """Three documents in "default" and one in "other"; external id -> document id."""
    ids: dict[str, str] = {}
    for name, collection in (("a", "default"), ("b", "default"), ("c", "default"), ("d", "other")):
        reply = await ingested(
            tenant, content=f"Note {name}: ferns", external_id=name, collection=collection
        )
        ids[name] = reply["document_id"]
    return ids


async def test_list_pages_through_every_document_once(tenant_a: TenantClient) -> None:
    ids = await _three_and_one(tenant_a)
    seen: list[str] = []
    for offset in (0, 2, 4):
        page = await listing(tenant_a, limit=2, offset=offset)
        assert (page["total"], page["limit"], page["offset"]) == (4, 2, offset)
        assert len(page["items"]) == (2 if offset < 4 else 0)
        seen += [item["document_id"] for item in page["items"]]
    assert sorted(seen) == sorted(ids.values())


async def test_list_filters_by_collection(tenant_a: TenantClient) -> None:
    ids = await _three_and_one(tenant_a)
    other = await listing(tenant_a, collection="other")
    assert other["total"] == 1
    [item] = other["items"]
    assert (item["document_id"], item["collection"], item["external_id"]) == (
        ids["d"],
        "other",
        "d",
    )
    default = await listing(tenant_a, collection="default")
    assert default["total"] == 3
    assert {i["external_id"] for i in default["items"]} == {"a", "b", "c"}
    assert (await listing(tenant_a, collection="nowhere"))["total"] == 0


async def test_list_rejects_bad_paging(tenant_a: TenantClient) -> None:
    for params in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "many"}):
        response = await tenant_a.http.get(DOCUMENTS, params=params, headers=tenant_a.headers)
        assert_problem(response, 422)


async def test_read_shows_the_chunk_count(tenant_a: TenantClient) -> None:
    content = "\n\n".join(f"Paragraph {n}. " + "Moss and lichen. " * 60 for n in range(4))
    reply = await ingested(tenant_a, title="Long", content=content, external_id="long")
    assert reply["chunks"] > 1
    found = await document(tenant_a, reply["document_id"])
    assert found["chunks"] == reply["chunks"]
    assert (found["title"], found["external_id"], found["collection"]) == (
        "Long",
        "long",
        "default",
    )


async def test_unknown_or_malformed_document_id(tenant_a: TenantClient) -> None:
    missing = await tenant_a.http.get(f"{DOCUMENTS}/{uuid.uuid4()}", headers=tenant_a.headers)
    assert_problem(missing, 404)
    gone = await tenant_a.http.delete(f"{DOCUMENTS}/{uuid.uuid4()}", headers=tenant_a.headers)
    assert_problem(gone, 404)
    bad = await tenant_a.http.get(f"{DOCUMENTS}/not-a-uuid", headers=tenant_a.headers)
    assert_problem(bad, 422)


async def test_other_tenant_cannot_see_or_delete_a_document(
    tenant_a: TenantClient, tenant_b: TenantClient
) -> None:
    mine = await ingested(tenant_a, content="Private orchid ledger.", external_id="ledger")
    url = f"{DOCUMENTS}/{mine['document_id']}"
    assert_problem(await tenant_b.http.get(url, headers=tenant_b.headers), 404)
    assert_problem(await tenant_b.http.delete(url, headers=tenant_b.headers), 404)
    assert await total(tenant_b) == 0
    filters = {"document_ids": [mine["document_id"]]}
    assert await search(tenant_b, "private orchid ledger", filters=filters) == []
    assert await search(tenant_b, "private orchid ledger") == []
    assert await keyword_hits(tenant_b, "orchid") == []
    assert (await document(tenant_a, mine["document_id"]))["chunks"] == 1
    assert len(await search(tenant_a, "orchid", filters=filters)) == 1
    theirs = await ingested(tenant_b, content="Birch bark.", external_id="ledger")
    assert (theirs["created"], theirs["document_id"] != mine["document_id"]) == (True, True)
    assert await keyword_hits(tenant_a, "birch") == []


async def test_delete_removes_the_document_and_its_chunks(
    tenant_a: TenantClient, settings: Settings
) -> None:
    doomed = await ingested(tenant_a, content="Doomed quagga notes.", external_id="doomed")
    kept = await ingested(tenant_a, content="Kept zebra notes.", external_id="kept")
    url = f"{DOCUMENTS}/{doomed['document_id']}"
    response = await tenant_a.http.delete(url, headers=tenant_a.headers)
    assert response.status_code == 204
    assert response.content == b""
    assert_problem(await tenant_a.http.get(url, headers=tenant_a.headers), 404)
    assert_problem(await tenant_a.http.delete(url, headers=tenant_a.headers), 404)
    assert await keyword_hits(tenant_a, "quagga") == []
    counted = await stats(tenant_a, settings)
    assert (counted["documents"], counted["chunks"]) == (1, kept["chunks"])
    deleted = await tenant_a.http.delete(
        f"{DOCUMENTS}/{kept['document_id']}", headers=tenant_a.headers
    )
    assert deleted.status_code == 204
    counted = await stats(tenant_a, settings)
    assert (counted["documents"], counted["chunks"], counted["chunks_by_model"]) == (0, 0, {})


async def test_deleted_document_can_be_ingested_again(tenant_a: TenantClient) -> None:
    first = await ingested(tenant_a, content="Phoenix notes.", external_id="phoenix")
    await tenant_a.http.delete(f"{DOCUMENTS}/{first['document_id']}", headers=tenant_a.headers)
    again = await ingested(tenant_a, content="Phoenix notes.", external_id="phoenix")
    assert again["created"] is True
    assert again["embedded"] == again["chunks"]


async def test_stats_count_chunks_by_embedding_model(
    tenant_a: TenantClient, tenant_b: TenantClient, settings: Settings, embedder: WordHashEmbedder
) -> None:
    one = await ingested(tenant_a, content="Kelp forests sway.", collection="sea")
    long = "\n\n".join(f"Part {n}. " + "Tundra and taiga. " * 60 for n in range(3))
    two = await ingested(tenant_a, content=long, collection="land")
    await ingested(tenant_b, content="Someone else's chunk.")
    chunks = one["chunks"] + two["chunks"]
    counted = await stats(tenant_a, settings)
    assert counted["tenant_id"] == tenant_a.tenant_id
    assert (counted["documents"], counted["collections"], counted["chunks"]) == (2, 2, chunks)
    assert counted["chunks_by_model"] == {embedder.model_id: chunks}
    assert embedder.model_id == "test:word-hash"
    not_admin = await tenant_a.http.get(
        f"/api/admin/tenants/{tenant_a.tenant_id}/stats", headers=tenant_a.headers
    )
    assert_problem(not_admin, 403)
