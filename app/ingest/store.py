"""Database side of ingestion: what a document holds now, and writing a new version."""

from __future__ import annotations

import uuid
from collections.abc import Collection as Collection_
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete, distinct, func, insert, literal_column, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import bm25_upkeep
from app.db.models import Chunk, Collection, Document
from app.ingest.vectors import document_vector

DEFAULT_COLLECTION = "default"
INSERT_BATCH = 500
CHUNKS: Table = Chunk.__table__  # type: ignore[assignment]  # Core insert: no ORM bookkeeping
CHUNK_INSERT = insert(CHUNKS).returning(CHUNKS.c.id)


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """The stored version of a document: its fingerprint and the models of its vectors."""

    document_id: uuid.UUID
    content_hash: str
    chunk_count: int
    models: frozenset[str]


@dataclass(frozen=True, slots=True)
class DocumentRow:
    collection: str
    external_id: str
    title: str
    source_type: str
    source_url: str | None
    metadata: dict[str, Any]
    content_hash: str
    access: tuple[str, ...] = ()
    version: str | None = None


# (collection name, external id, access list): a document's identity. Two documents may share
# an external id under different access lists (docs/PERMISSIONS.md).
DocumentKey = tuple[str, str, tuple[str, ...]]


async def stored_versions(
    session: AsyncSession, keys: Collection_[DocumentKey]
) -> dict[DocumentKey, StoredVersion]:
    """The stored version of each of these documents that the session may see, in one query;
    also those with the same collection and external id under another access list."""
    if not keys:
        return {}
    models = (
        select(func.array_agg(distinct(Chunk.embedding_model)))
        .where(Chunk.tenant_id == Document.tenant_id, Chunk.document_id == Document.id)
        .scalar_subquery()
    )
    stmt = (
        select(
            Collection.name,
            Document.external_id,
            Document.id,
            Document.content_hash,
            Document.chunk_count,
            Document.access,
            models,
        )
        .join(
            Collection,
            (Collection.tenant_id == Document.tenant_id)
            & (Collection.id == Document.collection_id),
        )
        .where(tuple_(Collection.name, Document.external_id).in_([k[:2] for k in keys]))
    )
    return {
        (name, external_id, tuple(access)): StoredVersion(
            document_id, content_hash, count, frozenset(found or ())
        )
        for name, external_id, document_id, content_hash, count, access, found in (
            await session.execute(stmt)
        )
    }


async def reusable_vectors(
    session: AsyncSession,
    document_ids: Collection_[uuid.UUID],
    *,
    model_id: str,
    hashes: Collection_[str],
) -> dict[str, list[float]]:
    """Stored vectors of these documents for these embedded-text hashes, made by `model_id`:
    the same embedded text under the same model needs no new vector."""
    if not document_ids or not hashes:
        return {}
    stmt = select(Chunk.embedded_text_hash, Chunk.embedding).where(
        Chunk.document_id.in_(list(document_ids)),
        Chunk.embedding_model == model_id,
        Chunk.embedded_text_hash.in_(list(hashes)),
    )
    return {text_hash: vector for text_hash, vector in await session.execute(stmt)}


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


@dataclass(frozen=True, slots=True)
class NewVersion:
    document: DocumentRow
    chunks: Sequence[dict[str, Any]]  # column values; ids of tenant, document, collection added


@dataclass(frozen=True, slots=True)
class Written:
    document_id: uuid.UUID
    created: bool


async def write_versions(
    session: AsyncSession, tenant_id: str, versions: Sequence[NewVersion]
) -> list[Written]:
    """Upsert the documents (each with its vector, the mean of its new chunks' vectors) and
    replace their chunks, in a few statements whatever their number: one upsert of all
    documents, one delete of the chunks they had, multi-row inserts of the new chunks, the
    BM25 upkeep. (collection, external_id) must be unique among `versions`."""
    if not versions:
        return []
    collections = {
        name: await collection_id(session, tenant_id=tenant_id, name=name)
        for name in sorted({v.document.collection for v in versions})
    }
    # In key order: two batches that share documents then lock them in the same order and
    # wait for each other instead of deadlocking.
    in_key_order = sorted(
        versions, key=lambda v: (v.document.collection, v.document.external_id, v.document.access)
    )
    upsert = await session.execute(
        DOCUMENT_UPSERT, [_document_values(tenant_id, v, collections) for v in in_key_order]
    )
    written = {
        (coll_id, external_id, tuple(access)): Written(document_id, bool(created))
        for document_id, coll_id, external_id, access, created in upsert
    }
    by_version = [
        written[(collections[v.document.collection], v.document.external_id, v.document.access)]
        for v in versions
    ]
    replaced = [w.document_id for w in by_version if not w.created]
    if replaced:
        await bm25_upkeep.remove_documents(session, tenant_id, replaced)
        await session.execute(
            delete(Chunk).where(Chunk.tenant_id == tenant_id, Chunk.document_id.in_(replaced))
        )
    rows = [
        {
            **chunk,
            "tenant_id": tenant_id,
            "document_id": w.document_id,
            "collection_id": collections[v.document.collection],
            "access": list(v.document.access),  # equal to the document's (the foreign key)
        }
        for v, w in zip(versions, by_version, strict=True)
        for chunk in v.chunks
    ]
    # Core on the connection (not the ORM bulk path, which rebuilds the statement for every
    # call): one compiled INSERT. RETURNING makes SQLAlchemy send it as multi-row statements
    # (insertmanyvalues); without it asyncpg's executemany runs one statement per row.
    conn = await session.connection()
    for start in range(0, len(rows), INSERT_BATCH):
        await conn.execute(CHUNK_INSERT, rows[start : start + INSERT_BATCH])
    await bm25_upkeep.add_documents(session, tenant_id, [w.document_id for w in by_version])
    return by_version


async def refresh_document_vectors(
    session: AsyncSession, tenant_id: str, document_ids: Sequence[uuid.UUID] | None = None
) -> None:
    """Set each document's vector to the normalised mean of its chunk vectors, when they all
    carry one model (a document half-way through a reindex has none until it is done). One
    statement for any number of documents; None: every document of the tenant."""
    chunk_filter = "" if document_ids is None else "AND document_id = ANY(:ids)"
    doc_filter = "" if document_ids is None else "AND d.id = ANY(:ids)"
    params: dict[str, Any] = {"tenant": tenant_id}
    if document_ids is not None:
        params["ids"] = list(document_ids)
    await session.execute(
        text(
            "UPDATE documents d SET embedding = v.mean, embedding_model = v.model FROM ("
            " SELECT tenant_id, document_id, l2_normalize(avg(embedding)) AS mean,"
            " min(embedding_model) AS model FROM chunks"
            f" WHERE tenant_id = :tenant AND embedding IS NOT NULL {chunk_filter}"
            " GROUP BY tenant_id, document_id HAVING count(DISTINCT embedding_model) = 1"
            f") v WHERE d.tenant_id = :tenant AND d.tenant_id = v.tenant_id"
            f" AND v.document_id = d.id {doc_filter}"
        ),
        params,
    )


def _document_values(
    tenant_id: str, version: NewVersion, collections: dict[str, uuid.UUID]
) -> dict[str, Any]:
    document = version.document
    vector = document_vector(version.chunks)
    return {
        "id": uuid.uuid4(),
        "tenant_id": tenant_id,
        "collection_id": collections[document.collection],
        "external_id": document.external_id,
        "title": document.title,
        "source_type": document.source_type,
        "source_url": document.source_url,
        "metadata": document.metadata,
        "content_hash": document.content_hash,
        "version": document.version,
        "access": list(document.access),
        "chunk_count": len(version.chunks),
        "embedding": vector,
        "embedding_model": None if vector is None else version.chunks[0]["embedding_model"],
    }


def _document_upsert() -> Any:
    """One compiled statement for any number of documents (executemany, sent as multi-row
    batches); RETURNING rows are matched to documents by (collection, external_id)."""
    table: Table = Document.__table__  # type: ignore[assignment]
    stmt = pg_insert(table)
    changed = (
        "title",
        "source_type",
        "source_url",
        "metadata",
        "content_hash",
        "version",
        "chunk_count",
        "embedding",
        "embedding_model",
    )
    return stmt.on_conflict_do_update(
        index_elements=[
            table.c.tenant_id,
            table.c.collection_id,
            table.c.external_id,
            func.rag_access_key(table.c.access),
        ],
        set_={table.c[name]: stmt.excluded[name] for name in (*changed, "updated_at")},
    ).returning(
        table.c.id,
        table.c.collection_id,
        table.c.external_id,
        table.c.access,
        literal_column("xmax = 0"),  # xmax 0: a fresh insert
    )


DOCUMENT_UPSERT = _document_upsert()
