"""Items like a given one: "more like this" for a chunk or a document.

A chunk's neighbours are the vector search of its own vector (the same HNSW statement,
settings and recall as POST /api/rag/search), minus the chunk itself and, by default, the
other chunks of its document.

A document's similarity is the cosine similarity of document vectors: each document stores the
normalised mean of its chunk vectors (`documents.embedding`, written with the chunks, see
app/ingest/store.py) under its own HNSW index. Why: one index probe per document, so similar
documents cost what a search costs and dedupe over N documents is N probes, not N x chunks
probes; the mean of near-identical chunk sets is near-identical, which is what near-duplicates
are. Its limit: a short document contained in a long one is not similar by this measure (that
is "overlap", not "duplicate"). Each similar document is shown with its best chunk: the chunk
nearest to the given document's vector, found among that document's own chunks only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import ColumnElement, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk, Collection, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import NotFound
from app.inputs.vocabulary import SearchScope as SearchScope
from app.retrieval.filters import SearchFilters, conditions
from app.retrieval.hits import SOURCE_COLUMNS, Hit, hit_of, with_sources
from app.retrieval.nearest import nearest_hits
from app.retrieval.planning import index_settings
from app.retrieval.requests import SearchRequest
from app.retrieval.returns import ReturnCounter
from app.retrieval.visibility import access_lists_matter, visible_scope

SHARED_COLLECTION = "shared"


@dataclass(frozen=True, slots=True)
class SimilarRequest:
    top_k: int = 10
    min_similarity: float = 0.85
    exclude_same_document: bool = True
    scope: SearchScope = SearchScope.CURRENT
    collections: Sequence[str] | None = None  # explicit: overrides `scope`
    ef_search: int | None = None  # None: by the size of the tenant's index (index_settings)
    candidates: int = 40


@dataclass(frozen=True, slots=True)
class SimilarOutcome:
    item_id: uuid.UUID
    kind: str  # "chunk" or "document"
    similar: list[Hit]


def scope_collections(request: SimilarRequest, own: str) -> list[str] | None:
    """The collections searched; None: all of the tenant's."""
    if request.collections is not None:
        return list(request.collections)
    if request.scope is SearchScope.CURRENT:
        return [own]
    if request.scope is SearchScope.SHARED:
        return sorted({own, SHARED_COLLECTION})
    return None


async def similar_to_chunk(
    sessions: SessionMaker,
    *,
    tenant_id: str,
    chunk_id: uuid.UUID,
    request: SimilarRequest,
    returns: ReturnCounter | None = None,
) -> SimilarOutcome:
    """Chunks like this one, best first; 404 when the tenant has no such chunk."""
    listed = await access_lists_matter(sessions, tenant_id)
    async with tenant_transaction(
        sessions, tenant_id, settings=index_settings(request.ef_search, tenant_id)
    ) as session:
        row = (
            await session.execute(
                select(Chunk.embedding, Chunk.embedding_model, Chunk.document_id, Collection.name)
                .join(
                    Collection,
                    (Collection.tenant_id == Chunk.tenant_id)
                    & (Collection.id == Chunk.collection_id),
                )
                .where(Chunk.id == chunk_id, Chunk.tenant_id == tenant_id)
            )
        ).one_or_none()
        if row is None or row.embedding is None:
            raise NotFound(f"chunk {chunk_id} does not exist")
        filters = SearchFilters(collections=scope_collections(request, row.name))
        # as search does: the access condition for the planner, exact for a small visible set
        scope = await visible_scope(
            session, tenant_id=tenant_id, model=row.embedding_model, nearest=True, listed=listed
        )
        where: list[ColumnElement[bool]] = [
            Chunk.tenant_id == tenant_id,
            Chunk.embedding_model == row.embedding_model,
            Chunk.id != chunk_id,
            *scope.conditions,
            *conditions(filters),
        ]
        if request.exclude_same_document:
            where.append(Chunk.document_id != row.document_id)
        search = SearchRequest(
            query="",
            top_k=request.top_k,
            threshold=request.min_similarity,
            ef_search=request.ef_search,
            candidates=request.candidates,
        )
        hits, _passed, _measured = await nearest_hits(
            session, row.embedding, where, search, scope.exact
        )
    return _counted(
        SimilarOutcome(item_id=chunk_id, kind="chunk", similar=hits), tenant_id, returns
    )


async def similar_to_item(
    sessions: SessionMaker,
    *,
    tenant_id: str,
    item_id: uuid.UUID,
    request: SimilarRequest,
    returns: ReturnCounter | None = None,
) -> SimilarOutcome:
    """Like a chunk when `item_id` is one of the tenant's chunks, else like a document (ids
    are random UUIDs, so the two never collide); 404 when it is neither."""
    try:
        return await similar_to_chunk(
            sessions, tenant_id=tenant_id, chunk_id=item_id, request=request, returns=returns
        )
    except NotFound:
        pass
    try:
        return await similar_to_document(
            sessions, tenant_id=tenant_id, document_id=item_id, request=request, returns=returns
        )
    except NotFound:
        raise NotFound(f"no chunk or document {item_id}") from None


async def similar_to_document(
    sessions: SessionMaker,
    *,
    tenant_id: str,
    document_id: uuid.UUID,
    request: SimilarRequest,
    returns: ReturnCounter | None = None,
) -> SimilarOutcome:
    """Documents like this one (one entry each: its best chunk, the documents' similarity),
    best first; 404 when the tenant has no such document. A document without a vector (no
    chunks, or half-way through a reindex) has no neighbours."""
    listed = await access_lists_matter(sessions, tenant_id)
    async with tenant_transaction(
        sessions, tenant_id, settings=index_settings(request.ef_search, tenant_id)
    ) as session:
        row = (
            await session.execute(
                select(Document.embedding, Document.embedding_model, Collection.name)
                .join(
                    Collection,
                    (Collection.tenant_id == Document.tenant_id)
                    & (Collection.id == Document.collection_id),
                )
                .where(Document.id == document_id, Document.tenant_id == tenant_id)
            )
        ).one_or_none()
        if row is None:
            raise NotFound(f"document {document_id} does not exist")
        if row.embedding is None:
            return SimilarOutcome(item_id=document_id, kind="document", similar=[])
        where: list[ColumnElement[bool]] = [
            Document.tenant_id == tenant_id,
            Document.embedding_model == row.embedding_model,
            Document.id != document_id,
        ]
        names = scope_collections(request, row.name)
        if names is not None:
            wanted = select(Collection.id).where(Collection.name.in_(names))
            where.append(Document.collection_id.in_(wanted.scalar_subquery()))
        fetch = max(request.candidates, request.top_k)
        # a caller who sees few chunks sees few documents: exact too (visibility.py)
        scope = await visible_scope(
            session, tenant_id=tenant_id, model=row.embedding_model, nearest=True, listed=listed
        )
        found = await nearest_documents(
            session,
            row.embedding,
            where,
            fetch=fetch,
            threshold=request.min_similarity,
            exact=scope.exact,
        )
        hits = await _best_chunks(session, row.embedding, found[: request.top_k])
    return _counted(
        SimilarOutcome(item_id=document_id, kind="document", similar=hits), tenant_id, returns
    )


def _counted(
    outcome: SimilarOutcome, tenant_id: str, returns: ReturnCounter | None
) -> SimilarOutcome:
    if returns is not None:
        returns.record(tenant_id, [hit.document_id for hit in outcome.similar])
    return outcome


async def nearest_documents(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    *,
    fetch: int,
    threshold: float,
    exact: bool = False,
) -> list[tuple[uuid.UUID, float]]:
    """(document id, similarity) of the nearest document vectors passing `where`, at or above
    `threshold`, best first: the HNSW index in a MATERIALIZED CTE, then the threshold (in the
    index scan's WHERE it would make the planner give the index up), as chunk search does;
    `exact`: every row passing `where` measured, as chunk search's exact plan does."""
    distance = Document.embedding.cosine_distance(vector)
    nearest = (
        select(Document.id.label("id"), distance.label("distance"))
        .where(*where)
        .order_by(distance + 0 if exact else distance)
        .limit(fetch)
        .cte("nearest")
        .prefix_with("MATERIALIZED")
    )
    similarity = (literal(1.0) - nearest.c.distance).label("similarity")
    stmt = (
        select(nearest.c.id, similarity)
        .where(similarity >= threshold)
        .order_by(nearest.c.distance, nearest.c.id)
    )
    return [(row.id, float(row.similarity)) for row in await session.execute(stmt)]


async def _best_chunks(
    session: AsyncSession, vector: list[float], documents: Sequence[tuple[uuid.UUID, float]]
) -> list[Hit]:
    """Each document's chunk nearest to `vector`, among its own chunks (a few rows each)."""
    if not documents:
        return []
    distance = Chunk.embedding.cosine_distance(vector)
    ranked = (
        select(
            Chunk.id.label("id"),
            func.row_number()
            .over(partition_by=Chunk.document_id, order_by=(distance, Chunk.chunk_index))
            .label("rank"),
        )
        .where(Chunk.document_id.in_([document_id for document_id, _ in documents]))
        .subquery()
    )
    best = select(ranked.c.id).where(ranked.c.rank == 1).cte("best").prefix_with("MATERIALIZED")
    similarity = (literal(1.0) - distance).label("similarity")
    stmt = with_sources(
        select(similarity, *SOURCE_COLUMNS).join_from(best, Chunk, Chunk.id == best.c.id)
    )
    rows: dict[uuid.UUID, Any] = {
        row.document_id: row._mapping for row in await session.execute(stmt)
    }
    hits = []
    for document_id, document_similarity in documents:
        if (row := rows.get(document_id)) is not None:
            # `similarity` is the documents'; `score` the best chunk's to the given document.
            chunk = hit_of(row, score=float(row["similarity"]))
            hits.append(replace(chunk, similarity=round(document_similarity, 6)))
    return hits
