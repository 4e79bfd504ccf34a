"""Re-embed every chunk for a newly configured model, resumably.

Progress is the data itself: a chunk whose `embedding_model` is not the configured model
still needs work, so an interrupted run simply continues. Search filters on the model, so
it never mixes vectors of two models: chunks not yet re-embedded are invisible until done.

The vector column's dimension is deployment configuration (RAG_EMBEDDING_DIMENSIONS): the
first migration creates it, and a reindex to a model of another dimension changes it here,
as the owner role: drop the HNSW index, clear the old vectors, re-embed, rebuild the index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.engine import async_url, vector_column_dimensions
from app.db.indexes import (
    DOCUMENT_INDEX,
    DOCUMENT_INDEX_DDL,
    SHARED_INDEX,
    SHARED_INDEX_DDL,
)
from app.db.models import Chunk, Document, Tenant
from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.embeddings import Embedder
from app.ingest.chunking import embedded_text
from app.ingest.inputs import sha256
from app.ingest.store import refresh_document_vectors

Progress = Callable[[int], None]


async def prepare_column(owner_url: str, *, dimensions: int) -> bool:
    """Make the column hold `dimensions`-d vectors; True when it had to change (old vectors
    of another size are dropped, their chunks wait for re-embedding)."""
    engine = create_async_engine(async_url(owner_url))
    try:
        async with engine.begin() as conn:
            if await vector_column_dimensions(conn) == dimensions:
                return False
            await conn.execute(text(f"DROP INDEX IF EXISTS {SHARED_INDEX}"))
            await conn.execute(text(f"DROP INDEX IF EXISTS {DOCUMENT_INDEX}"))
            await conn.execute(text("ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL"))
            column_type = f"vector({int(dimensions)})"
            await conn.execute(
                text(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE {column_type} USING NULL")
            )
            await conn.execute(
                text(f"ALTER TABLE documents ALTER COLUMN embedding TYPE {column_type} USING NULL")
            )
            return True
    finally:
        await engine.dispose()


async def finish_column(owner_url: str) -> None:
    """Once every chunk has a vector again: NOT NULL and the HNSW index."""
    engine = create_async_engine(async_url(owner_url))
    try:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE chunks ALTER COLUMN embedding SET NOT NULL"))
            await conn.execute(text(SHARED_INDEX_DDL))
            await conn.execute(text(DOCUMENT_INDEX_DDL))
    finally:
        await engine.dispose()


async def pending(
    sessions: SessionMaker, model_id: str, *, tenants: Sequence[str] | None = None
) -> dict[str, int]:
    """Chunks per tenant (all, or `tenants`) that still need the model."""
    counts: dict[str, int] = {}
    for tenant_id in tenants or await _tenant_ids(sessions):
        async with tenant_transaction(sessions, tenant_id) as session:
            stmt = select(func.count()).select_from(Chunk).where(_stale(model_id))
            counts[tenant_id] = await session.scalar(stmt) or 0
    return counts


async def reembed(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    batch_size: int,
    progress: Progress,
    tenants: Sequence[str] | None = None,
) -> int:
    """Re-embed every stale chunk of every tenant (or of `tenants`), a committed batch at a
    time."""
    done = 0
    for tenant_id in tenants or await _tenant_ids(sessions):
        while batch := await _reembed_batch(sessions, embedder, tenant_id, batch_size):
            done += batch
            progress(batch)
    return done


async def _reembed_batch(
    sessions: SessionMaker, embedder: Embedder, tenant_id: str, batch_size: int
) -> int:
    async with tenant_transaction(sessions, tenant_id) as session:
        stmt = (
            select(Chunk.id, Chunk.content, Chunk.section_path, Document.title, Chunk.document_id)
            .join(
                Document,
                (Document.tenant_id == Chunk.tenant_id) & (Document.id == Chunk.document_id),
            )
            .where(_stale(embedder.model_id))
            .order_by(Chunk.id)
            .limit(batch_size)
        )
        rows = (await session.execute(stmt)).all()
    if not rows:
        return 0
    texts = [
        embedded_text(title=title, section_path=tuple(path), content=content)
        for _id, content, path, title, _document_id in rows
    ]
    vectors = await embedder.embed_documents(texts)
    async with tenant_transaction(sessions, tenant_id) as session:
        for (chunk_id, *_rest), body, vector in zip(rows, texts, vectors, strict=True):
            await session.execute(
                update(Chunk)
                .where(Chunk.id == chunk_id)
                .values(
                    embedding=vector,
                    embedding_model=embedder.model_id,
                    embedded_text_hash=sha256(body),
                )
            )
        await refresh_document_vectors(
            session, tenant_id, sorted({row.document_id for row in rows})
        )
    return len(rows)


def _stale(model_id: str) -> ColumnElement[bool]:
    return (Chunk.embedding_model != model_id) | Chunk.embedding.is_(None)


async def _tenant_ids(sessions: SessionMaker) -> list[str]:
    async with registry_transaction(sessions) as session:
        return list((await session.scalars(select(Tenant.id).order_by(Tenant.id))).all())
