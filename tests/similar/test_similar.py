"""GET /api/rag/chunks/{id}/similar and /documents/{id}/similar with the real local model."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import TenantClient
from tests.similar.corpus import (
    ASTRONOMY,
    OTHERS,
    PLANTED,
    RECIPE,
    chunk_ids,
    ingest_all,
    similar,
)

pytestmark = pytest.mark.on_citus


async def test_similar_documents_are_the_planted_copies_best_first(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    names = {v: k for k, v in ids.items()}
    reply = await similar(tenant, "documents", ids["manual"], min_similarity=0.8)
    found = [names[s["document_id"]] for s in reply["similar"]]
    assert set(found) == {"one-word", "footer", "rechunked"}
    assert found[0] == "one-word"  # one word changed: the closest
    sims = [s["similarity"] for s in reply["similar"]]
    assert sims == sorted(sims, reverse=True)
    assert reply["item_id"] == ids["manual"]
    assert reply["kind"] == "document"
    assert reply["similar_count"] == 3
    first = reply["similar"][0]  # the best chunk of the document, with search's attribution
    assert first["title"] == "Doc one-word"
    assert first["collection"] == "default"
    assert first["content"]
    assert first["total_chunks"] >= 1


async def test_min_similarity_and_top_k_bound_the_reply(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    everything = await similar(tenant, "documents", ids["manual"], min_similarity=0.0, top_k=100)
    assert len(everything["similar"]) >= 5
    cut = everything["similar"][1]["similarity"]
    above = await similar(tenant, "documents", ids["manual"], min_similarity=cut)
    assert [s["document_id"] for s in above["similar"]] == [
        s["document_id"] for s in everything["similar"][:2]
    ]
    one = await similar(tenant, "documents", ids["manual"], min_similarity=0.0, top_k=1)
    assert [s["document_id"] for s in one["similar"]] == [everything["similar"][0]["document_id"]]
    # The default (0.85) keeps the copies and nothing unrelated.
    default = await similar(tenant, "documents", ids["recipe"])
    assert default["similar"] == []


async def test_similar_chunks_exclude_their_own_document_by_default(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, PLANTED)
    chunks = await chunk_ids(tenant, ids["manual"])
    reply = await similar(tenant, "chunks", chunks[0], min_similarity=0.5)
    assert reply["kind"] == "chunk"
    assert reply["item_id"] == chunks[0]
    assert reply["similar"], "the copies' chunks are like the manual's"
    assert ids["manual"] not in {s["document_id"] for s in reply["similar"]}
    assert chunks[0] not in {s["chunk_id"] for s in reply["similar"]}
    sims = [s["similarity"] for s in reply["similar"]]
    assert sims == sorted(sims, reverse=True)
    assert all(s >= 0.5 for s in sims)
    with_own = await similar(
        tenant, "chunks", chunks[0], min_similarity=0.0, exclude_same_document=False, top_k=100
    )
    found = {s["chunk_id"] for s in with_own["similar"]}
    assert chunks[0] not in found  # never the chunk itself
    assert set(chunks[1:]) <= found  # but its document's other chunks


async def test_search_scope_current_shared_all_and_explicit(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {"manual": PLANTED["manual"]}, collection="team-a")
    ids |= await ingest_all(tenant, {"copy-b": PLANTED["one-word"]}, collection="team-b")
    ids |= await ingest_all(tenant, {"copy-shared": PLANTED["footer"]}, collection="shared")

    async def found(**params: str) -> set[str]:
        reply = await similar(tenant, "documents", ids["manual"], min_similarity=0.8, **params)
        return {s["document_id"] for s in reply["similar"]}

    assert await found() == set()  # current: team-a only
    assert await found(search_scope="shared") == {ids["copy-shared"]}
    assert await found(search_scope="all") == {ids["copy-b"], ids["copy-shared"]}
    assert await found(collections="team-b") == {ids["copy-b"]}
    assert await found(collections="team-b,shared", search_scope="current") == {
        ids["copy-b"],
        ids["copy-shared"],
    }


async def test_a_document_alone_has_no_neighbours(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {"recipe": RECIPE, "astronomy": ASTRONOMY})
    reply = await similar(tenant, "documents", ids["recipe"])
    assert reply == {
        "item_id": ids["recipe"],
        "kind": "document",
        "similar_count": 0,
        "similar": [],
    }


async def test_unknown_and_foreign_ids_are_404_and_nothing_leaks(
    tenant: TenantClient, other: TenantClient
) -> None:
    mine = await ingest_all(tenant, PLANTED)
    theirs = await ingest_all(other, PLANTED)  # the same texts in another tenant
    their_chunk = (await chunk_ids(other, theirs["manual"]))[0]
    for kind, item in (
        ("documents", theirs["manual"]),
        ("chunks", their_chunk),
        ("documents", str(uuid.uuid4())),
        ("chunks", str(uuid.uuid4())),
    ):
        response = await tenant.http.get(f"/api/rag/{kind}/{item}/similar", headers=tenant.headers)
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert item not in response.text or "does not exist" in response.text
    reply = await similar(
        tenant, "documents", mine["manual"], min_similarity=0.0, search_scope="all"
    )
    returned = {s["document_id"] for s in reply["similar"]}
    assert returned
    assert returned <= set(mine.values())
    chunk = (await chunk_ids(tenant, mine["manual"]))[0]
    reply = await similar(tenant, "chunks", chunk, min_similarity=0.0, top_k=100)
    assert {s["document_id"] for s in reply["similar"]} <= set(mine.values())


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": 101}, "top_k"),
        ({"min_similarity": 1.5}, "min_similarity"),
        ({"min_similarity": -0.1}, "min_similarity"),
        ({"search_scope": "everything"}, "search_scope"),
        ({"exclude_same_document": "maybe"}, "exclude_same_document"),
        ({"collections": "a,,b"}, "collections"),
    ],
)
async def test_bad_parameters_are_422_naming_the_field(
    tenant: TenantClient, params: dict[str, str | int | float], field: str
) -> None:
    ids = await ingest_all(tenant, {"recipe": RECIPE})
    for kind, item in (("documents", ids["recipe"]), ("chunks", str(uuid.uuid4()))):
        response = await tenant.http.get(
            f"/api/rag/{kind}/{item}/similar", params=params, headers=tenant.headers
        )
        assert response.status_code == 422, response.text
        problem = response.json()
        assert field in {error["field"] for error in problem["errors"]}


async def test_similar_needs_a_token(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {"recipe": RECIPE})
    response = await tenant.http.get(f"/api/rag/documents/{ids['recipe']}/similar")
    assert response.status_code == 401
