"""Similar items and near-duplicates through the client: every method round-trips against the
live service, and its models are checked against the OpenAPI document (skipped on a service
without these endpoints, tests/client/pending.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from rag_client import NotFound, RagClient
from rag_client.similar_models import DedupeRequest, DedupeResult, SimilarResult

from app.settings import Settings
from tests.cli.imports import run_rag
from tests.client.conftest import LiveService
from tests.client.pending import requires
from tests.client.schema_drift import drift, openapi

SIMILAR_DOC = "/api/rag/documents/{document_id}/similar"
SIMILAR_CHUNK = "/api/rag/chunks/{chunk_id}/similar"
DEDUPE = "/api/rag/dedupe"
TEXT = "Glaciers slowly carve deep valleys into the mountain rock over many thousands of years."


@pytest.fixture(autouse=True)
def _merged(settings: Settings) -> None:
    for method, path in (("GET", SIMILAR_DOC), ("GET", SIMILAR_CHUNK), ("POST", DEDUPE)):
        requires(settings, method, path)


@pytest.fixture
def rag(live: LiveService) -> Iterator[RagClient]:
    with RagClient(live.url, live.token(live.tenant())) as client:
        yield client


def test_models_match_the_openapi_document(settings: Settings) -> None:
    document = openapi(settings)
    assert drift(document, "GET", SIMILAR_DOC, SimilarResult, reply=True) == []
    assert drift(document, "GET", SIMILAR_CHUNK, SimilarResult, reply=True) == []
    assert drift(document, "POST", DEDUPE, DedupeResult, reply=True) == []
    assert drift(document, "POST", DEDUPE, DedupeRequest, reply=False) == []


def test_similar_documents_and_chunks(rag: RagClient) -> None:
    first = rag.ingest(TEXT, title="Glaciers", external_id="a")
    twin = rag.ingest(TEXT + " Really.", title="Glaciers again", external_id="b")
    rag.ingest("Bake the bread in a hot oven.", title="Bread", external_id="c")

    alike = rag.similar_to_document(first.document_id, min_similarity=0.5, top_k=5)
    assert (alike.item_id, alike.kind, alike.similar_count) == (first.document_id, "document", 1)
    assert twin.document_id in {item.document_id for item in alike.similar}
    assert "Bread" not in {item.title for item in alike.similar}

    chunk_id = rag.search("glaciers carve valleys", max_results=1).chunks[0].chunk_id
    by_chunk = rag.similar_to_chunk(chunk_id, min_similarity=0.5, exclude_same_document=True)
    assert by_chunk.similar
    assert all(item.chunk_id != chunk_id for item in by_chunk.similar)
    with pytest.raises(NotFound):
        rag.similar_to_document("00000000-0000-0000-0000-000000000000")


def test_dedupe_previews_then_merges(rag: RagClient) -> None:
    first = rag.ingest(TEXT, external_id="a")
    twin = rag.ingest(TEXT + " Really.", external_id="b")
    preview = rag.dedupe(similarity_threshold=0.9, dry_run=True)
    assert (preview.dry_run, preview.action, preview.documents_examined) == (True, "preview", 2)
    assert preview.total_duplicates == 1
    [group] = preview.duplicate_groups
    assert {group.primary_id, *group.duplicate_ids} == {first.document_id, twin.document_id}
    [difference] = group.differences  # what differs between the copies, typed
    [passage] = difference.passages
    assert {passage.primary_changed, passage.duplicate_changed} == {"", "Really."}
    assert preview.strategies["keep_oldest"].startswith("first ingested")
    assert rag.list_documents().total == 2  # a preview changes nothing
    merged = rag.dedupe(similarity_threshold=0.9, dry_run=False, merge_strategy="keep_oldest")
    assert merged.dry_run is False
    assert merged.removed_ids == [twin.document_id]  # the oldest is kept
    assert rag.list_documents().total == 1


def test_cli_similar_and_dedupe_over_http(live: LiveService, tmp_path: Path) -> None:
    token = live.token(live.tenant())
    with RagClient(live.url, token) as rag:
        first = rag.ingest(TEXT, title="Glaciers", external_id="a")
        rag.ingest(TEXT + " Really.", title="Glaciers again", external_id="b")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env = {**clean, "RAG_URL": live.url, "RAG_TOKEN": token, "COLUMNS": "200"}
    env["RAG_DATA_DIR"] = str(tmp_path)
    alike = run_rag("similar", str(first.document_id), "--min-similarity", "0.5", env=env)
    assert alike.returncode == 0, alike.stderr
    assert "Glaciers again" in alike.stdout
    assert alike.heavy() == []
    preview = run_rag("dedupe", "--threshold", "0.9", env=env)
    assert preview.returncode == 0, preview.stderr
    assert "1 group: would delete 1 duplicate" in preview.stdout
    assert "Really." in preview.stdout  # what differs between the copies
    refused = run_rag("dedupe", "--threshold", "0.9", "--apply", env=env)
    assert refused.returncode == 2, refused.stdout
    assert "the copies differ" in refused.stderr
    merged = run_rag(
        "dedupe", "--threshold", "0.9", "--apply", "--merge-strategy", "keep_oldest", env=env
    )
    assert "1 group: deleted 1 duplicate, keeping the first ingested copy" in merged.stdout
    with RagClient(live.url, token) as rag:
        assert rag.list_documents().total == 1
