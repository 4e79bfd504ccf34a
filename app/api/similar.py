"""GET /api/rag/chunks/{id}/similar, GET /api/rag/documents/{id}/similar, POST /api/rag/dedupe."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Query

from app.api import examples
from app.api.deps import Consistency, ResourcesDep, SearchCaller
from app.api.openapi import GATED, WITH_BODY, errors
from app.api.similar_models import DedupeIn, DedupeOut, SimilarOut
from app.auth import SCOPE_INGEST
from app.db.tenancy import SessionMaker
from app.errors import Forbidden, Unprocessable
from app.resources import Resources
from app.retrieval.dedupe import DedupeOutcome, DedupeRequest, dedupe
from app.retrieval.similar import (
    SearchScope,
    SimilarRequest,
    similar_to_chunk,
    similar_to_document,
)
from app.storable import unstorable_reason

router = APIRouter(prefix="/api/rag", tags=["similar"], responses=GATED)

TopK = Annotated[int, Query(ge=1, le=100)]
MinSimilarity = Annotated[float, Query(ge=0.0, le=1.0)]
CollectionsParam = Annotated[
    str | None,
    Query(
        max_length=100 * 129,
        description="Comma-separated collection names (at most 100); overrides search_scope.",
    ),
]


def similar_request(
    resources: Resources,
    *,
    top_k: int,
    min_similarity: float,
    exclude_same_document: bool,
    search_scope: SearchScope,
    collections: str | None,
) -> SimilarRequest:
    settings = resources.settings
    return SimilarRequest(
        top_k=top_k,
        min_similarity=min_similarity,
        exclude_same_document=exclude_same_document,
        scope=search_scope,
        collections=_collections(collections),
        ef_search=settings.search_ef_search_default,
        candidates=settings.search_candidates,
    )


def _collections(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = value.split(",")
    message = None
    if len(names) > 100 or not all(1 <= len(name) <= 128 for name in names):
        message = "at most 100 comma-separated names of 1-128 characters"
    else:
        message = next(filter(None, map(unstorable_reason, names)), None)
    if message is not None:
        raise Unprocessable(
            f"collections: {message}",
            extra={"errors": [{"field": "collections", "message": message}]},
        )
    return names


@router.get(
    "/chunks/{chunk_id}/similar", summary="Chunks similar to a chunk", responses=errors(404)
)
async def similar_chunks(
    chunk_id: uuid.UUID,
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
    top_k: TopK = 10,
    min_similarity: MinSimilarity = 0.85,
    exclude_same_document: bool = True,
    search_scope: SearchScope = SearchScope.CURRENT,
    collections: CollectionsParam = None,
) -> SimilarOut:
    """Chunks like this one, best first, with their sources."""
    request = similar_request(
        resources,
        top_k=top_k,
        min_similarity=min_similarity,
        exclude_same_document=exclude_same_document,
        search_scope=search_scope,
        collections=collections,
    )
    outcome = await caller.resources(resources).read(
        lambda sessions: similar_to_chunk(
            sessions,
            tenant_id=caller.tenant_id,
            chunk_id=chunk_id,
            request=request,
            access=resources.access,
        ),
        consistency=consistency,
        recheck_missing=True,
    )
    return SimilarOut.of(outcome)


@router.get(
    "/documents/{document_id}/similar",
    summary="Documents similar to a document",
    responses=errors(404),
)
async def similar_documents(
    document_id: uuid.UUID,
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
    top_k: TopK = 10,
    min_similarity: MinSimilarity = 0.85,
    exclude_same_document: bool = True,
    search_scope: SearchScope = SearchScope.CURRENT,
    collections: CollectionsParam = None,
) -> SimilarOut:
    """Documents like this one: one entry each (its best chunk), by document similarity.
    `exclude_same_document` is accepted for symmetry (a document is never its own neighbour)."""
    request = similar_request(
        resources,
        top_k=top_k,
        min_similarity=min_similarity,
        exclude_same_document=exclude_same_document,
        search_scope=search_scope,
        collections=collections,
    )
    outcome = await caller.resources(resources).read(
        lambda sessions: similar_to_document(
            sessions,
            tenant_id=caller.tenant_id,
            document_id=document_id,
            request=request,
            access=resources.access,
        ),
        consistency=consistency,
        recheck_missing=True,
    )
    return SimilarOut.of(outcome)


@router.post(
    "/dedupe", summary="Find (and optionally merge) near-duplicate documents", responses=WITH_BODY
)
async def dedupe_documents(
    body: Annotated[DedupeIn, Body(openapi_examples=examples.DEDUPE)],
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> DedupeOut:
    """Near-duplicate groups; a dry run (default) changes nothing, a merge (`dry_run: false`,
    needs rag:ingest) deletes each group's duplicates and keeps its primary."""
    if not body.dry_run and not caller.principal.has_scope(SCOPE_INGEST):
        raise Forbidden(f"a merge (dry_run false) needs the {SCOPE_INGEST} scope")
    request = DedupeRequest(
        similarity_threshold=body.similarity_threshold,
        dry_run=body.dry_run,
        merge_strategy=body.merge_strategy,
        limit=body.limit,
        collections=body.collections,
        use_index=body.use_index,
        ef_search=body.ef_search or resources.settings.search_ef_search_default,
        across_access=body.across_access,
    )

    async def run(sessions: SessionMaker) -> DedupeOutcome:
        return await dedupe(
            sessions,
            tenant_id=caller.tenant_id,
            model_id=resources.embedder.model_id,
            request=request,
        )

    # A preview may read a replica; a merge reads and deletes on the primary.
    if body.dry_run:
        return DedupeOut.of(await caller.resources(resources).read(run, consistency=consistency))
    return DedupeOut.of(await run(caller.sessions(resources)))
