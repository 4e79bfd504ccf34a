"""Concurrent ingests into a new tenant and collection (real commits, several connections)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_sessionmaker
from app.db.models import Collection, Document
from app.db.tenancy import tenant_transaction
from app.ingest.documents import ingest_document, ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus


async def test_first_ingests_racing_to_create_a_collection_all_succeed(
    app_engine: AsyncEngine,
) -> None:
    sessions = create_sessionmaker(app_engine)
    tenant_id = await registered_tenant(sessions, "race")
    chunker = small_chunker()
    embedder = WordHashEmbedder(384)

    async def ingest(i: int) -> None:
        document = DocumentInput(
            content=f"Racing document {i}.", source_type=SourceType.TEXT, collection="fresh"
        )
        await ingest_document(
            sessions, embedder, chunker=chunker, tenant_id=tenant_id, document=document
        )

    await asyncio.gather(*(ingest(i) for i in range(4)))
    async with tenant_transaction(sessions, tenant_id) as session:
        assert await session.scalar(select(func.count()).select_from(Collection)) == 1
        assert await session.scalar(select(func.count()).select_from(Document)) == 4


async def test_batches_sharing_documents_in_opposite_orders_do_not_deadlock(
    app_engine: AsyncEngine,
) -> None:
    sessions = create_sessionmaker(app_engine)
    tenant_id = await registered_tenant(sessions, "overlap")
    chunker = small_chunker()
    embedder = WordHashEmbedder(384)
    keys = [f"k{i:03d}" for i in range(300)]
    first = DocumentInput(content="Shared.", source_type=SourceType.TEXT, external_id=keys[0])
    await ingest_document(  # the collection exists before the race
        sessions, embedder, chunker=chunker, tenant_id=tenant_id, document=first
    )
    for attempt in range(3):
        versions = [
            DocumentInput(
                content=f"Shared document {key}, version {attempt}.",
                source_type=SourceType.TEXT,
                external_id=key,
            )
            for key in keys
        ]
        forward, backward = versions, list(reversed(versions))
        outcomes = await asyncio.gather(
            *(
                ingest_documents(
                    sessions, embedder, chunker=chunker, tenant_id=tenant_id, documents=batch
                )
                for batch in (forward, backward)
            ),
            return_exceptions=True,  # a deadlock would surface here as DBAPIError
        )
        for outcome in outcomes:
            assert isinstance(outcome, list), repr(outcome)
            assert not any(isinstance(item, Exception) for item in outcome)
    async with tenant_transaction(sessions, tenant_id) as session:
        assert await session.scalar(select(func.count()).select_from(Document)) == 300
