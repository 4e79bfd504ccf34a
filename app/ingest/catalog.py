"""Reading and deleting a tenant's documents, and its statistics."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk, Collection, Document
from app.errors import NotFound


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    document: Document
    collection: str


@dataclass(frozen=True, slots=True)
class TenantStats:
    documents: int
    chunks: int
    collections: int
    chunks_by_model: dict[str, int]


async def list_documents(
    session: AsyncSession, *, collection: str | None, limit: int, offset: int
) -> tuple[list[DocumentSummary], int]:
    stmt = select(Document, Collection.name).join(
        Collection, Collection.id == Document.collection_id
    )
    count = select(func.count()).select_from(Document)
    if collection is not None:
        stmt = stmt.where(Collection.name == collection)
        count = count.join(Collection, Collection.id == Document.collection_id).where(
            Collection.name == collection
        )
    stmt = stmt.order_by(Document.created_at.desc(), Document.id).limit(limit).offset(offset)
    rows = (await session.execute(stmt)).all()
    total = await session.scalar(count) or 0
    return [DocumentSummary(doc, name) for doc, name in rows], total


async def get_document(session: AsyncSession, document_id: uuid.UUID) -> DocumentSummary:
    stmt = (
        select(Document, Collection.name)
        .join(Collection, Collection.id == Document.collection_id)
        .where(Document.id == document_id)
    )
    row = (await session.execute(stmt)).one_or_none()
    if row is None:
        raise NotFound(f"document {document_id} does not exist")
    return DocumentSummary(*row)


async def delete_document(session: AsyncSession, document_id: uuid.UUID) -> None:
    """Delete the document; its chunks go with it (ON DELETE CASCADE)."""
    result = await session.execute(delete(Document).where(Document.id == document_id))
    if not result.rowcount:  # type: ignore[attr-defined]
        raise NotFound(f"document {document_id} does not exist")


async def tenant_stats(session: AsyncSession) -> TenantStats:
    """Counts for the session's tenant (RLS scopes every table)."""
    documents = await session.scalar(select(func.count()).select_from(Document)) or 0
    collections = await session.scalar(select(func.count()).select_from(Collection)) or 0
    by_model = select(Chunk.embedding_model, func.count()).group_by(Chunk.embedding_model)
    models = {model: count for model, count in await session.execute(by_model)}
    return TenantStats(documents, sum(models.values()), collections, models)


@dataclass(frozen=True, slots=True)
class CollectionCount:
    name: str
    documents: int
    chunks: int


async def collection_counts(session: AsyncSession) -> list[CollectionCount]:
    """The session tenant's collections by name, with their document and chunk counts."""
    stmt = (
        select(
            Collection.name,
            func.count(Document.id),
            func.coalesce(func.sum(Document.chunk_count), 0),
        )
        .outerjoin(Document, Document.collection_id == Collection.id)
        .group_by(Collection.id, Collection.name)
        .order_by(Collection.name)
    )
    return [
        CollectionCount(name, docs, int(chunks))
        for name, docs, chunks in await session.execute(stmt)
    ]
