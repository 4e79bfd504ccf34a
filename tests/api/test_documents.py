"""POST /api/rag/documents: the reply contract, idempotency, incremental re-embedding,
sections and metadata in search, collections, atomic updates and pre-computed vectors."""

from __future__ import annotations

import hashlib
import json

import pytest

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.api.calls import (
    DOCUMENTS,
    assert_problem,
    document,
    ingest,
    ingested,
    keyword_hits,
    listing,
    post_document,
    search,
    total,
)
from tests.conftest import DIMENSIONS, TenantClient, app_client
from tests.fakes import FailingEmbedder, WordHashEmbedder

pytestmark = pytest.mark.on_citus

JSON = "application/json"
GUIDE = """# Field guide

The guide opens with a note about wetland walks at dawn.

## Herons

Herons wade through shallow water and spear fish with a quillbeak strike.

## Otters

Otters juggle pebbles and sleep holding paws in the kelpwhisker beds.

## Badgers

Badgers dig setts and guard them fiercely against the burrowfang fox.
"""
SECTIONS = 4  # the intro under the title, then Herons, Otters and Badgers


def _without_badgers(text: str) -> str:
    return text.split("## Badgers")[0].rstrip() + "\n"


async def test_new_document_is_created_with_the_reply_contract(tenant_a: TenantClient) -> None:
    response = await ingest(
        tenant_a, title="Tides", content="The tide turns twice a day.", external_id="tides"
    )
    assert response.status_code == 201
    reply = response.json()
    assert reply["external_id"] == "tides"
    assert reply["collection"] == "default"
    assert reply["title"] == "Tides"
    assert reply["chunks"] == 1
    assert reply["embedded"] == 1
    assert reply["unchanged"] == 0
    assert reply["created"] is True
    assert reply["changed"] is True
    stored = await document(tenant_a, reply["document_id"])
    assert stored["chunks"] == 1
    assert stored["source_type"] == "text"


async def test_same_body_again_is_200_and_embeds_nothing(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    body = {"content": GUIDE, "source_type": "markdown", "external_id": "guide"}
    first = await ingested(tenant_a, **body)
    embedded_before = embedder.documents_embedded
    again = await ingest(tenant_a, **body)
    assert again.status_code == 200
    reply = again.json()
    assert reply["document_id"] == first["document_id"]
    assert reply["embedded"] == 0
    assert reply["unchanged"] == reply["chunks"] == SECTIONS
    assert reply["created"] is False
    assert reply["changed"] is False
    assert embedder.documents_embedded == embedded_before


async def test_changing_one_section_reembeds_only_its_chunk(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    first = await ingested(tenant_a, content=GUIDE, source_type="markdown", external_id="guide")
    assert first["chunks"] == SECTIONS
    changed = GUIDE.replace("kelpwhisker beds", "driftweed rafts")
    embedded_before = embedder.documents_embedded
    response = await ingest(tenant_a, content=changed, source_type="markdown", external_id="guide")
    assert response.status_code == 201
    reply = response.json()
    assert reply["document_id"] == first["document_id"]
    assert (reply["created"], reply["changed"]) == (False, True)
    assert reply["embedded"] == 1
    assert reply["unchanged"] == SECTIONS - 1
    assert embedder.documents_embedded == embedded_before + 1
    assert await keyword_hits(tenant_a, "kelpwhisker") == []
    assert len(await keyword_hits(tenant_a, "driftweed")) == 1


async def test_removed_section_leaves_no_chunk(tenant_a: TenantClient) -> None:
    first = await ingested(tenant_a, content=GUIDE, source_type="markdown", external_id="guide")
    assert len(await keyword_hits(tenant_a, "burrowfang")) == 1
    shorter = _without_badgers(GUIDE)
    response = await ingest(tenant_a, content=shorter, source_type="markdown", external_id="guide")
    assert response.status_code == 201
    assert (response.json()["chunks"], response.json()["embedded"]) == (SECTIONS - 1, 0)
    assert (await document(tenant_a, first["document_id"]))["chunks"] == SECTIONS - 1
    assert await keyword_hits(tenant_a, "burrowfang") == []
    nearest = await search(tenant_a, "badgers dig setts burrowfang fox", max_results=20)
    assert len(nearest) == SECTIONS - 1
    assert all("burrowfang" not in chunk["content"] for chunk in nearest)


async def test_without_external_id_the_content_hash_identifies_the_document(
    tenant_a: TenantClient,
) -> None:
    content = "Lichen grows a millimetre a year on northern granite."
    first = await ingested(tenant_a, content=content)
    assert first["external_id"] == hashlib.sha256(content.encode()).hexdigest()
    again = await ingest(tenant_a, content=content)
    assert again.status_code == 200
    assert again.json()["document_id"] == first["document_id"]
    assert await total(tenant_a) == 1


async def test_search_returns_the_markdown_section_path(tenant_a: TenantClient) -> None:
    reply = await ingested(tenant_a, content=GUIDE, source_type="markdown", external_id="guide")
    assert reply["title"] == "Field guide"
    [top] = await search(tenant_a, "herons wade shallow water quillbeak", max_results=1)
    assert top["section"] == ["Field guide", "Herons"]
    assert "quillbeak" in top["content"]
    assert top["document_id"] == reply["document_id"]
    assert top["total_chunks"] == SECTIONS
    assert top["source_type"] == "markdown"


async def test_metadata_and_source_url_round_trip(tenant_a: TenantClient) -> None:
    metadata = {"author": "Ada", "year": 2024, "tags": ["sea", "birds"], "draft": False}
    reply = await ingested(
        tenant_a,
        content="Gannets dive from thirty metres into cold water.",
        metadata=metadata,
        source_url="https://example.org/gannets",
    )
    stored = await document(tenant_a, reply["document_id"])
    assert stored["metadata"] == metadata
    assert stored["source_url"] == "https://example.org/gannets"
    [hit] = await search(tenant_a, "gannets dive", max_results=1)
    assert hit["metadata"] == metadata
    assert hit["source_url"] == "https://example.org/gannets"
    [filtered] = await search(tenant_a, "gannets", filters={"metadata": {"author": "Ada"}})
    assert filtered["document_id"] == reply["document_id"]
    assert await search(tenant_a, "gannets", filters={"metadata": {"author": "Bob"}}) == []


async def test_collections_keep_documents_with_the_same_external_id_apart(
    tenant_a: TenantClient,
) -> None:
    red = await ingested(tenant_a, content="Red algae thrive.", external_id="x", collection="r")
    blue = await ingested(tenant_a, content="Blue whales sing.", external_id="x", collection="b")
    assert red["document_id"] != blue["document_id"]
    assert (red["collection"], blue["collection"]) == ("r", "b")
    assert (await listing(tenant_a))["total"] == 2
    [only_red] = await search(tenant_a, "red algae whales", collections=["r"], max_results=5)
    assert only_red["document_id"] == red["document_id"]
    assert only_red["collection"] == "r"


async def test_failed_embedding_leaves_the_previous_version_intact(
    tenant_a: TenantClient, settings: Settings, sessions: SessionMaker
) -> None:
    first = await ingested(tenant_a, content=GUIDE, source_type="markdown", external_id="guide")
    before = await document(tenant_a, first["document_id"])
    changed = GUIDE.replace("kelpwhisker beds", "driftweed rafts") + "\n## Voles\n\nVoles nest.\n"
    async with app_client(settings, sessions, FailingEmbedder(DIMENSIONS)) as failing:
        body = {"content": changed, "source_type": "markdown", "external_id": "guide"}
        response = await post_document(failing, tenant_a, body)
    assert_problem(response, 503)
    assert int(response.headers["retry-after"]) >= 1
    assert await document(tenant_a, first["document_id"]) == before
    assert len(await keyword_hits(tenant_a, "kelpwhisker")) == 1
    assert await keyword_hits(tenant_a, "driftweed") == []
    assert await keyword_hits(tenant_a, "voles") == []
    assert await total(tenant_a) == 1


def _precomputed(embedder: WordHashEmbedder, *texts: str) -> list[dict[str, object]]:
    return [
        {"content": text, "embedding": embedder.vector(text), "page_number": n, "section": ["S"]}
        for n, text in enumerate(texts, start=1)
    ]


async def test_precomputed_vectors_of_the_service_model_are_stored_without_embedding(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    chunks = _precomputed(embedder, "Puffins nest in burrows.", "Terns migrate pole to pole.")
    embedded_before = embedder.documents_embedded
    reply = await ingested(
        tenant_a, content="Seabirds", chunks=chunks, embedding_model=embedder.model_id
    )
    assert (reply["chunks"], reply["embedded"], reply["unchanged"]) == (2, 0, 2)
    assert embedder.documents_embedded == embedded_before
    [hit] = await search(tenant_a, "Terns migrate pole to pole.", max_results=1)
    assert hit["content"] == "Terns migrate pole to pole."
    assert (hit["page_number"], hit["section"]) == (2, ["S"])
    assert hit["similarity"] > 0.999  # the caller's vector, not one of "Seabirds\n\nTerns …"


async def test_precomputed_vectors_of_another_model_are_refused(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    chunks = _precomputed(embedder, "Puffins nest in burrows.")
    response = await ingest(
        tenant_a, content="Seabirds", chunks=chunks, embedding_model="openai:other@384"
    )
    problem = assert_problem(response, 422)
    assert [e["field"] for e in problem["errors"]] == ["embedding_model"]
    missing = await ingest(tenant_a, content="Seabirds", chunks=chunks)
    assert_problem(missing, 422)
    assert await total(tenant_a) == 0


async def test_precomputed_vectors_of_the_wrong_dimension_are_refused(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    chunks = _precomputed(embedder, "Puffins nest in burrows.", "Terns migrate.")
    chunks[1]["embedding"] = [0.1] * (DIMENSIONS - 1)
    response = await ingest(
        tenant_a, content="Seabirds", chunks=chunks, embedding_model=embedder.model_id
    )
    problem = assert_problem(response, 422)
    assert [e["field"] for e in problem["errors"]] == ["chunks.1.embedding"]
    assert await total(tenant_a) == 0


async def test_precomputed_vectors_without_a_direction_are_refused(
    tenant_a: TenantClient, embedder: WordHashEmbedder
) -> None:
    rest = ", 0.5" * (DIMENSIONS - 1)
    cases = {  # JSON text of the embedding -> the field the problem names
        "nan": (f"[NaN{rest}]", "chunks.0.embedding.0"),
        "infinity": (f"[0.5, -Infinity{rest[5:]}]", "chunks.0.embedding.1"),
        "zero": (json.dumps([0.0] * DIMENSIONS), "chunks.0.embedding"),
    }
    for case, (embedding, field) in cases.items():
        body = (
            f'{{"content": "Seabirds", "embedding_model": "{embedder.model_id}", '
            f'"chunks": [{{"content": "Puffins", "embedding": {embedding}}}]}}'
        )
        response = await tenant_a.http.post(
            DOCUMENTS, content=body, headers={**tenant_a.headers, "Content-Type": JSON}
        )
        problem = assert_problem(response, 422)
        assert [error["field"] for error in problem["errors"]] == [field], case
    empty = await ingest(tenant_a, content="Seabirds", chunks=[], embedding_model=embedder.model_id)
    assert [error["field"] for error in assert_problem(empty, 422)["errors"]] == ["chunks"]
    assert await total(tenant_a) == 0
