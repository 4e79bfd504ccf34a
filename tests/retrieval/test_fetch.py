"""Fetch by id: a chunk's text, or a whole document rebuilt from its overlapping chunks."""

from __future__ import annotations

import itertools
import uuid

import pytest
from sqlalchemy import select

from app.db.models import Chunk
from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import NotFound
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.versions import IngestResult
from app.retrieval import fetch_item
from app.retrieval.fetch import join_chunks
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

# A run of words with no sentence ends: the splitter cuts between words, with overlap.
RUN = " ".join(f"term{i} alpha beta gamma" for i in range(500))
SENTENCES = " ".join(
    f"Sentence {i} tells about topic {i % 7} with some detail, and a clause that runs on."
    for i in range(120)
)


def test_join_chunks_writes_an_overlap_once() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi"
    first, second, third = text[:40], text[22:62], text[44:]  # overlaps of 18 characters
    assert join_chunks([first, second, third]) == text
    assert join_chunks(["one paragraph here.", "another one there."]) == (
        "one paragraph here.\n\nanother one there."
    )
    assert join_chunks([]) == ""


async def ingested(
    sessions: SessionMaker, embedder: WordHashEmbedder, content: str, *, title: str
) -> tuple[str, IngestResult]:
    tenant_id = await registered_tenant(sessions)
    document = DocumentInput(content=content, source_type=SourceType.MARKDOWN, title=title)
    [result] = await ingest_documents(
        sessions, embedder, chunker=small_chunker(), tenant_id=tenant_id, documents=[document]
    )
    assert isinstance(result, IngestResult)
    return tenant_id, result


async def test_a_document_comes_back_whole_from_its_overlapping_chunks(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    content = f"# Guide\n\n{RUN}\n\n## Examples\n\n{SENTENCES}"
    tenant_id, result = await ingested(sessions, embedder, content, title="Guide")
    async with tenant_transaction(sessions, tenant_id) as session:
        contents = (await session.scalars(select(Chunk.content).order_by(Chunk.chunk_index))).all()
    assert len(contents) >= 6
    assert any(b[:16] in a for a, b in itertools.pairwise(contents))  # some chunks overlap
    document = await fetch_item(sessions, tenant_id=tenant_id, item_id=result.document_id)
    assert document.kind == "document"
    assert document.text.split() == f"{RUN} {SENTENCES}".split()  # all of it, once, in order
    assert document.total_chunks == len(contents) == result.chunks
    assert document.citation == "**Guide** (Markdown) _Guide_"
    assert not document.truncated


async def test_a_chunk_comes_with_its_own_citation_and_only_to_its_tenant(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    content = "# Setup\n\n## Install\n\nRun the installer and follow the prompts."
    tenant_id, result = await ingested(sessions, embedder, content, title="Manual")
    async with tenant_transaction(sessions, tenant_id) as session:
        [chunk_id] = (await session.scalars(select(Chunk.id))).all()
    chunk = await fetch_item(sessions, tenant_id=tenant_id, item_id=chunk_id)
    assert (chunk.kind, chunk.document_id, chunk.chunk_index) == ("chunk", result.document_id, 0)
    assert chunk.text == "Run the installer and follow the prompts."
    assert chunk.citation == "**Manual** (Markdown) _Setup → Install_"
    other_tenant = await registered_tenant(sessions)
    for item_id in (chunk_id, result.document_id, uuid.uuid4()):
        with pytest.raises(NotFound, match=f"no chunk or document with id {item_id}"):
            await fetch_item(sessions, tenant_id=other_tenant, item_id=item_id)
