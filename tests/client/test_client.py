"""Every method of the sync client, round-tripped against the live service."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rag_client import (
    CitationStyle,
    Filters,
    FusionMethod,
    Invalid,
    NewDocument,
    NotFound,
    RagClient,
    SearchMode,
    SourceType,
)

from tests.client.conftest import ADMIN_SCOPES, LiveService
from tests.ingest.office import docx_bytes, pptx_bytes

VOLCANO = "# Volcanoes\n\nMagma rises and erupts as lava from the volcano crater.\n"
BREAD = "Knead the dough, let it rise, and bake the bread in a hot oven."


@pytest.fixture
def rag(live: LiveService) -> Iterator[RagClient]:
    tenant = live.tenant()
    with RagClient(live.url, live.token(tenant)) as client:
        yield client


def test_ingest_then_read_list_and_delete(rag: RagClient) -> None:
    created = rag.ingest(
        VOLCANO,
        title="Volcanoes",
        external_id="geo/volcanoes.md",
        source_type=SourceType.MARKDOWN,
        collection="geo",
        metadata={"lang": "en"},
    )
    assert (created.created, created.changed, created.external_id) == (
        True,
        True,
        "geo/volcanoes.md",
    )
    assert created.chunks >= 1
    assert created.embedded == created.chunks
    again = rag.ingest(
        VOLCANO,
        title="Volcanoes",
        external_id="geo/volcanoes.md",
        source_type="markdown",
        collection="geo",
        metadata={"lang": "en"},
    )
    assert (again.created, again.changed, again.document_id) == (False, False, created.document_id)

    document = rag.get_document(created.document_id)
    assert (document.title, document.collection, document.metadata) == (
        "Volcanoes",
        "geo",
        {"lang": "en"},
    )
    page = rag.list_documents(collection="geo")
    assert [d.document_id for d in page.items] == [created.document_id]
    assert page.total == 1

    rag.delete_document(created.document_id)
    with pytest.raises(NotFound):
        rag.get_document(created.document_id)
    assert rag.list_documents().total == 0


def test_iter_documents_walks_every_page(rag: RagClient) -> None:
    ids = {
        rag.ingest(f"note number {n} about rivers", external_id=f"n{n}").document_id
        for n in range(5)
    }
    walked = [document.document_id for document in rag.iter_documents(page_size=2)]
    assert sorted(walked) == sorted(ids)
    assert len(walked) == 5


def test_search_and_context(rag: RagClient) -> None:
    volcano = rag.ingest(VOLCANO, title="Volcanoes", source_type="markdown")
    rag.ingest(BREAD, title="Bread")
    found = rag.search("lava erupts from the volcano", max_results=2, mode=SearchMode.HYBRID)
    assert found.mode is SearchMode.HYBRID
    assert found.chunks[0].document_id == volcano.document_id
    assert found.chunks[0].section == ["Volcanoes"]
    only_bread = rag.search(
        "lava", mode="keyword", filters=Filters(document_ids=[volcano.document_id])
    )
    assert {c.document_id for c in only_bread.chunks} == {volcano.document_id}

    built = rag.context("volcano lava", max_results=1, style=CitationStyle.COMPACT, max_tokens=200)
    assert built.citations[0].document_id == volcano.document_id
    assert "[1]" in built.context or "Volcanoes" in built.context
    assert built.metrics.chunks_used == 1


def test_search_sends_its_ranking_options(rag: RagClient) -> None:
    """ef_search, fusion, vector_weight and diversity reach the service: each changes the
    reply, or is refused by the service when out of range."""
    rag.ingest(VOLCANO, title="Volcanoes", source_type="markdown")
    rag.ingest(BREAD, title="Bread")
    query = "lava from the volcano"

    def score(**options: object) -> float | None:
        found = rag.search(query, mode="hybrid", max_results=1, **options)  # type: ignore[arg-type]
        return found.chunks[0].score

    weighted = score()
    assert score(fusion=FusionMethod.RRF) != weighted
    assert score(fusion="weighted", vector_weight=0.1) != weighted
    assert score(diversity=0.5, ef_search=50) is not None
    for wrong in ({"ef_search": 0}, {"vector_weight": 1.5}, {"diversity": 2.0}):
        with pytest.raises(Invalid) as refused:
            rag.search(query, **wrong)
        assert [e.field for e in refused.value.errors] == list(wrong), refused.value.errors


def test_batch_and_upload(rag: RagClient, tmp_path: Path) -> None:
    batch = rag.ingest_batch(
        [
            NewDocument(content=BREAD, title="Bread", external_id="bread"),
            NewDocument(content="%PDF-1.4 not really", source_type=SourceType.PDF),
        ]
    )
    assert (batch.succeeded, batch.failed) == (1, 1)
    assert batch.results[0].result is not None
    assert batch.results[0].result.external_id == "bread"
    assert batch.results[1].status == 415

    note = tmp_path / "notes.md"
    note.write_text(VOLCANO)
    uploaded = rag.upload(note, external_id="notes.md", metadata={"team": "geo"})
    assert uploaded.title == "Volcanoes"
    assert rag.get_document(uploaded.document_id).metadata == {"team": "geo"}
    from_bytes = rag.upload(b"plain words about rivers", filename="rivers.txt")
    assert from_bytes.created


def test_an_edited_file_uploaded_again_updates_its_document(rag: RagClient, tmp_path: Path) -> None:
    """The file name is the external id, as in the console and `rag ingest`: the same file
    again, edited, replaces its document instead of adding a second one."""
    note = tmp_path / "volcanoes.md"
    note.write_text(VOLCANO)
    first = rag.upload(note)
    assert (first.external_id, first.created) == ("volcanoes.md", True)
    note.write_text(VOLCANO + "\nPumice floats on water.\n")
    second = rag.upload(note)
    assert second.document_id == first.document_id
    assert (second.external_id, second.created) == ("volcanoes.md", False)
    assert "Pumice" in rag.document_chunks(second.document_id).chunks[-1].content
    named = rag.upload(b"plain words about rivers", filename="rivers.txt")
    assert named.external_id == "rivers.txt"
    renamed = rag.upload(note, external_id="geo/volcanoes.md")  # an explicit id still wins
    assert renamed.document_id != first.document_id
    page = rag.list_documents()
    assert sorted(d.external_id for d in page.items) == [
        "geo/volcanoes.md",
        "rivers.txt",
        "volcanoes.md",
    ]


def test_the_formats_are_the_services_source_types(rag: RagClient) -> None:
    found = {f.source_type: f for f in rag.formats().items}
    assert set(found) == set(SourceType)
    assert (found[SourceType.DOCX].label, found[SourceType.DOCX].suffixes) == (
        "Word document",
        [".docx"],
    )
    assert not found[SourceType.MARKDOWN].file_only


def test_office_files_upload_and_filter_by_their_types(rag: RagClient, tmp_path: Path) -> None:
    deck = tmp_path / "review.pptx"
    deck.write_bytes(pptx_bytes())
    uploaded = rag.upload(deck)
    assert rag.get_document(uploaded.document_id).source_type == SourceType.PPTX
    rag.upload(docx_bytes(), filename="handbook.docx")
    only_slides = Filters(source_types=[SourceType.PPTX])
    hits = rag.search("chameleons", mode=SearchMode.KEYWORD, filters=only_slides).chunks
    assert [(hit.source_type, hit.page_number, hit.section) for hit in hits] == [
        (SourceType.PPTX, 2, ["Regional Figures"])
    ]


def test_admin_tenants_and_stats(live: LiveService) -> None:
    admin_tenant = live.tenant(prefix="admin")
    with RagClient(live.url, live.token(admin_tenant, ADMIN_SCOPES)) as admin:
        new_id = f"c-{uuid.uuid4().hex[:10]}"
        made = admin.create_tenant(new_id, name="Acme", tier="pro")
        assert (made.id, made.name, made.tier, made.status) == (new_id, "Acme", "pro", "active")
        assert admin.create_tenant(new_id).tier == "pro"  # idempotent
        assert admin.update_tenant(new_id, tier="basic").tier == "basic"
        assert admin.suspend_tenant(new_id).status == "suspended"
        assert admin.activate_tenant(new_id).status == "active"
        listed = {tenant.id for tenant in admin.iter_tenants(page_size=2)}
        assert {new_id, admin_tenant} <= listed
        assert admin.list_tenants(limit=1).limit == 1

    with RagClient(live.url, live.token(new_id)) as member:
        member.ingest(BREAD, title="Bread")
    with RagClient(live.url, live.token(admin_tenant, ADMIN_SCOPES)) as admin:
        stats = admin.tenant_stats(new_id)
    assert (stats.tenant_id, stats.documents, stats.collections) == (new_id, 1, 1)
    assert sum(stats.chunks_by_model.values()) == stats.chunks >= 1


def test_an_admin_acts_for_another_tenant_with_tenant(live: LiveService) -> None:
    admin_tenant, other = live.tenant(prefix="admin"), live.tenant()
    with RagClient(live.url, live.token(other)) as member:
        member.ingest(BREAD, external_id="bread")
    token = live.token(admin_tenant, ADMIN_SCOPES)
    with RagClient(live.url, token, tenant=other) as acting:
        assert [d.external_id for d in acting.list_documents().items] == ["bread"]


def test_a_client_you_bring_stays_open(live: LiveService) -> None:
    with httpx.Client(timeout=10) as own:
        with RagClient(live.url, live.token(live.tenant()), http=own) as rag:
            assert rag.list_documents().total == 0
        assert not own.is_closed
