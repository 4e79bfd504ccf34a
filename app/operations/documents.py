"""Reading stored documents and chunks by id, listing them and their collections: always on
the primary (a caller reads what it just wrote), with no bookkeeping; no model needed, so the
command line runs these without loading one."""

from __future__ import annotations

import uuid

from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.catalog import (
    CollectionCount,
    DocumentSummary,
    StoredChunk,
    collection_counts,
    document_chunks,
    get_document,
    list_documents,
)
from app.retrieval.fetch import Fetched, fetch_item


async def fetch(sessions: SessionMaker, tenant_id: str, item_id: uuid.UUID) -> Fetched:
    """A chunk's full text, or a whole document's rebuilt from its chunks; 404 when neither."""
    return await fetch_item(sessions, tenant_id=tenant_id, item_id=item_id)


async def read_document(
    sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID
) -> DocumentSummary:
    async with tenant_transaction(sessions, tenant_id) as session:
        return await get_document(session, document_id)


async def chunks(
    sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID, *, limit: int, offset: int
) -> tuple[DocumentSummary, list[StoredChunk]]:
    """A document and a page of its chunks in order; 404 when the caller cannot see it."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await document_chunks(session, document_id, limit=limit, offset=offset)


async def documents(
    sessions: SessionMaker,
    tenant_id: str,
    *,
    collection: str | None = None,
    source_type: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[DocumentSummary], int]:
    """A page of the tenant's documents, newest first, and how many there are in all."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await list_documents(
            session, collection=collection, source_type=source_type, limit=limit, offset=offset
        )


async def collections(sessions: SessionMaker, tenant_id: str) -> list[CollectionCount]:
    """The tenant's collections with their document and chunk counts."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await collection_counts(session)
