"""Reading and deleting a tenant's documents, and its statistics."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, TextClause, bindparam, delete, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import bm25_upkeep
from app.db.models import Chunk, Collection, Document
from app.db.tenancy import tenant_of
from app.errors import Conflict, NotFound, Unprocessable
from app.ingest.chunking import OCR_FLAG
from app.permissions import Readers

# A document's collection, on the whole key (Citus keeps such a join on the tenant's shard).
DOCUMENT_COLLECTION = (Collection.tenant_id == Document.tenant_id) & (
    Collection.id == Document.collection_id
)


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
    session: AsyncSession,
    *,
    collection: str | None,
    limit: int,
    offset: int,
    source_type: str | None = None,
) -> tuple[list[DocumentSummary], int]:
    stmt = select(Document, Collection.name).join(Collection, DOCUMENT_COLLECTION)
    count = select(func.count()).select_from(Document)
    if collection is not None:
        stmt = stmt.where(Collection.name == collection)
        count = count.join(Collection, DOCUMENT_COLLECTION).where(Collection.name == collection)
    if source_type is not None:
        stmt = stmt.where(Document.source_type == source_type)
        count = count.where(Document.source_type == source_type)
    # newest first; documents created together (one batch, one transaction) by external id
    newest = (Document.created_at.desc(), Document.external_id, Document.id)
    stmt = stmt.order_by(*newest).limit(limit).offset(offset)
    rows = (await session.execute(stmt)).all()
    total = await session.scalar(count) or 0
    return [DocumentSummary(doc, name) for doc, name in rows], total


async def get_document(session: AsyncSession, document_id: uuid.UUID) -> DocumentSummary:
    stmt = (
        select(Document, Collection.name)
        .join(Collection, DOCUMENT_COLLECTION)
        .where(Document.id == document_id)
    )
    row = (await session.execute(stmt)).one_or_none()
    if row is None:
        raise NotFound(f"document {document_id} does not exist")
    return DocumentSummary(*row)


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as stored, in the shape a citation needs (`CitableChunk`); it is compared with
    no query, so its similarity and score are 1."""

    chunk_id: uuid.UUID
    document_id: uuid.UUID
    title: str
    content: str
    source_type: str
    source_url: str | None
    page_number: int | None
    section: tuple[str, ...]
    chunk_index: int
    token_count: int
    similarity: float = 1.0
    score: float = 1.0


async def document_chunks(
    session: AsyncSession, document_id: uuid.UUID, *, limit: int, offset: int
) -> tuple[DocumentSummary, list[StoredChunk]]:
    """A document and a page of its chunks in reading order; NotFound as `get_document`."""
    summary = await get_document(session, document_id)
    doc = summary.document
    stmt = (
        select(Chunk)
        .where(Chunk.tenant_id == doc.tenant_id, Chunk.document_id == document_id)
        .order_by(Chunk.chunk_index)
        .limit(limit)
        .offset(offset)
    )
    chunks = [
        StoredChunk(
            chunk_id=chunk.id,
            document_id=doc.id,
            title=doc.title,
            content=chunk.content,
            source_type=doc.source_type,
            source_url=doc.source_url,
            page_number=chunk.page_number,
            section=tuple(chunk.section_path),
            chunk_index=chunk.chunk_index,
            token_count=chunk.token_count,
        )
        for chunk in await session.scalars(stmt)
    ]
    return summary, chunks


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """What PATCH may change; None leaves it as it is."""

    metadata: dict[str, Any] | None = None
    access: tuple[str, ...] | None = None  # normalized (app/permissions.py)


async def update_document(
    session: AsyncSession, document_id: uuid.UUID, change: DocumentChange, *, readers: Readers
) -> DocumentSummary:
    """Change a document's metadata and/or access list, never its text or vectors. Its chunks
    follow in the same statement (a chunk's access list must equal its document's: the
    foreign key between them is checked when the statement ends). A document the session
    cannot see is not found."""
    current = await get_document(session, document_id)
    doc = current.document
    values: dict[str, Any] = {}
    if change.access is not None and list(change.access) != doc.access:
        if not readers.may_see(change.access):
            raise Unprocessable(
                "access: the list must name you (user:<your subject>) or one of your groups: "
                "you could not see the document any more",
                extra={"errors": [{"field": "access", "message": "excludes the caller"}]},
            )
        await _refuse_twin(session, doc, change.access)
        values["access"] = list(change.access)
    if change.metadata is not None:
        values["metadata"] = change.metadata
    await session.execute(
        _document_and_chunks_update(values),
        {"tenant": tenant_of(session), "id": document_id, **values},
    )
    await session.refresh(doc)
    return current


# A chunk read by OCR keeps saying so under its document's new metadata.
_CHUNK_SET = {
    "metadata": f"metadata = d.metadata || CASE WHEN c.metadata @> '{{\"{OCR_FLAG}\": true}}' "
    f"THEN '{{\"{OCR_FLAG}\": true}}'::jsonb ELSE '{{}}'::jsonb END"
}


def _document_and_chunks_update(values: dict[str, Any]) -> TextClause:
    """One statement: the document's new values (and updated_at), then the same values on its
    chunks, from the document row the first part returned."""
    document_set = "".join(f", {column} = :{column}" for column in values)
    chunk_set = ", ".join(_CHUNK_SET.get(column, f"{column} = d.{column}") for column in values)
    chunks = (
        f" UPDATE chunks c SET {chunk_set} FROM d"
        " WHERE c.tenant_id = :tenant AND c.tenant_id = d.tenant_id AND c.document_id = d.id"
        if values
        else " SELECT 1"
    )
    return text(
        f"WITH d AS (UPDATE documents SET updated_at = now(){document_set}"
        " WHERE tenant_id = :tenant AND id = :id"
        f" RETURNING tenant_id, id, {', '.join(['access', 'metadata'])}){chunks}"
    ).bindparams(
        *(
            bindparam(column, type_=JSONB if column == "metadata" else ARRAY(Text))
            for column in values
        )
    )


async def _refuse_twin(session: AsyncSession, doc: Document, access: tuple[str, ...]) -> None:
    """409 when another document has the same collection, external id and the new access
    list (one the caller sees, since it may see that list)."""
    twin = await session.scalar(
        select(Document.id).where(
            Document.collection_id == doc.collection_id,
            Document.external_id == doc.external_id,
            Document.access == list(access),
            Document.id != doc.id,
        )
    )
    if twin is not None:
        raise Conflict(
            f"document {twin} already has external_id {doc.external_id!r} with that access "
            "list: delete one of the two first"
        )


async def delete_document(session: AsyncSession, document_id: uuid.UUID) -> None:
    """Delete the document; its chunks go with it (ON DELETE CASCADE), out of the keyword
    index first."""
    tenant_id = tenant_of(session)
    await bm25_upkeep.remove_documents(session, tenant_id, [document_id])
    result = await session.execute(
        delete(Document).where(Document.tenant_id == tenant_id, Document.id == document_id)
    )
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
    """The session tenant's collections by name, with their document and chunk counts: those
    holding a document the session may see. A collection's name can say what it holds, and
    one whose documents are all invisible must look like one that does not exist."""
    stmt = (
        select(
            Collection.name,
            func.count(Document.id),
            func.coalesce(func.sum(Document.chunk_count), 0),
        )
        .join(Document, DOCUMENT_COLLECTION)
        .group_by(Collection.id, Collection.name)
        .order_by(Collection.name)
    )
    return [
        CollectionCount(name, docs, int(chunks))
        for name, docs, chunks in await session.execute(stmt)
    ]
