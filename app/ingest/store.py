"""Database side of ingestion: what a document holds now, and writing a new version."""

from __future__ import annotations

import uuid
from collections.abc import Collection as Collection_
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete, distinct, func, insert, literal_column, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk, Collection, Document

DEFAULT_COLLECTION = "default"
INSERT_BATCH = 500
CHUNKS: Table = Chunk.__table__  # type: ignore[assignment]  # Core insert: no ORM bookkeeping


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """The stored version of a document: its fingerprint and the models of its vectors."""

    document_id: uuid.UUID
    content_hash: str
    chunk_count: int
    models: frozenset[str]


@dataclass(frozen=True, slots=True)
class DocumentRow:
    tenant_id: str
    collection: str
    external_id: str
    title: str
    source_type: str
    source_url: str | None
    metadata: dict[str, Any]
    content_hash: str


async def stored_version(
    session: AsyncSession, *, collection: str, external_id: str
) -> StoredVersion | None:
    models = (
        select(func.array_agg(distinct(Chunk.embedding_model)))
        .where(Chunk.document_id == Document.id)
        .scalar_subquery()
    )
    stmt = (
        select(Document.id, Document.content_hash, Document.chunk_count, models)
        .join(Collection, Collection.id == Document.collection_id)
        .where(Collection.name == collection, Document.external_id == external_id)
    )
    row = (await session.execute(stmt)).one_or_none()
    if row is None:
        return None
    document_id, content_hash, chunk_count, found = row
    return StoredVersion(document_id, content_hash, chunk_count, frozenset(found or ()))


async def reusable_vectors(
    session: AsyncSession, document_id: uuid.UUID, *, model_id: str, hashes: Collection_[str]
) -> dict[str, list[float]]:
    """Stored vectors of the document for these embedded-text hashes, made by `model_id`."""
    stmt = select(Chunk.embedded_text_hash, Chunk.embedding).where(
        Chunk.document_id == document_id,
        Chunk.embedding_model == model_id,
        Chunk.embedded_text_hash.in_(list(hashes)),
    )
    return {text_hash: list(vector) for text_hash, vector in await session.execute(stmt)}


async def collection_id(session: AsyncSession, *, tenant_id: str, name: str) -> uuid.UUID:
    """The collection's id, created on first use. The final SELECT is its own statement, so it
    sees a collection that a concurrent first ingest committed while this INSERT waited."""
    existing = select(Collection.id).where(
        Collection.tenant_id == tenant_id, Collection.name == name
    )
    found: uuid.UUID | None = await session.scalar(existing)
    if found is None:
        found = await session.scalar(
            pg_insert(Collection)
            .values(id=uuid.uuid4(), tenant_id=tenant_id, name=name)
            .on_conflict_do_nothing(index_elements=[Collection.tenant_id, Collection.name])
            .returning(Collection.id)
        )
    if found is None:
        found = await session.scalar(existing)
    assert found is not None
    return found


async def write_version(
    session: AsyncSession, row: DocumentRow, chunks: Sequence[dict[str, Any]]
) -> tuple[uuid.UUID, bool]:
    """Upsert the document, replace its chunks; returns (document id, created)."""
    coll_id = await collection_id(session, tenant_id=row.tenant_id, name=row.collection)
    values = {
        "title": row.title,
        "source_type": row.source_type,
        "source_url": row.source_url,
        "metadata_": row.metadata,
        "content_hash": row.content_hash,
        "chunk_count": len(chunks),
    }
    stmt = pg_insert(Document).values(
        id=uuid.uuid4(),
        tenant_id=row.tenant_id,
        collection_id=coll_id,
        external_id=row.external_id,
        **values,
    )
    table = Document.__table__
    changed = ("title", "source_type", "source_url", "metadata", "content_hash", "chunk_count")
    upsert: Any = stmt.on_conflict_do_update(
        index_elements=[Document.tenant_id, Document.collection_id, Document.external_id],
        set_={table.c[name]: stmt.excluded[name] for name in (*changed, "updated_at")},
    ).returning(Document.id, literal_column("xmax = 0"))  # xmax 0: a fresh insert
    document_id, created = (await session.execute(upsert)).one()
    if not created:
        await session.execute(delete(Chunk).where(Chunk.document_id == document_id))
    rows = [
        {**chunk, "tenant_id": row.tenant_id, "document_id": document_id, "collection_id": coll_id}
        for chunk in chunks
    ]
    for start in range(0, len(rows), INSERT_BATCH):
        await session.execute(insert(CHUNKS), rows[start : start + INSERT_BATCH])
    return document_id, bool(created)
