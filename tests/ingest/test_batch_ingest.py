"""`ingest_documents` when the database refuses one document of a batch: the API validates
what it can (NUL characters, sizes), so the refusal is provoked below the API."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.db.models import Chunk, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import AppError
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.versions import IngestResult
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus


def text(content: str, external_id: str, **extra: object) -> DocumentInput:
    return DocumentInput(
        content=content,
        source_type=SourceType.TEXT,
        external_id=external_id,
        metadata=dict(extra),
    )


async def test_a_refused_document_fails_alone_and_the_rest_is_written(
    sessions: SessionMaker,
) -> None:
    tenant_id = await registered_tenant(sessions, "batch")
    chunker = small_chunker()
    embedder = WordHashEmbedder(384)
    outcomes = await ingest_documents(
        sessions,
        embedder,
        chunker=chunker,
        tenant_id=tenant_id,
        documents=[
            text("Dunlins run along the tideline.", "dunlin"),
            text("Sanderlings chase waves.", "sanderling", note="nul \u0000 here"),  # jsonb: no
            text("Turnstones flip seaweed.", "turnstone"),
        ],
    )
    dunlin, sanderling, turnstone = outcomes
    assert isinstance(dunlin, IngestResult)
    assert isinstance(turnstone, IngestResult)
    assert isinstance(sanderling, AppError)
    assert sanderling.status == 422
    assert sanderling.detail.startswith("the database refused the document:")
    assert "Unicode" in sanderling.detail
    async with tenant_transaction(sessions, tenant_id) as session:
        ids = set(await session.scalars(select(Document.external_id)))
        chunks = await session.scalar(select(func.count()).select_from(Chunk))
    assert ids == {"dunlin", "turnstone"}
    assert chunks == 2
