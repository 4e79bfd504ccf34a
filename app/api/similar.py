"""GET /api/rag/chunks/{id}/similar, GET /api/rag/documents/{id}/similar, POST /api/rag/dedupe."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api import examples
from app.api.deps import Consistency, ResourcesDep, SearchCaller
from app.api.openapi import GATED, WITH_BODY, errors
from app.api.similar_models import DedupeIn, DedupeOut, SimilarOut
from app.auth import SCOPE_INGEST
from app.errors import Forbidden, Unprocessable
from app.inputs.similar import SimilarInput
from app.inputs.vocabulary import (
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_SIMILAR_TOP_K,
    MAX_SIMILAR_TOP_K,
    SearchScope,
)
from app.operations import similar as operations
from app.storable import unstorable_reason

router = APIRouter(prefix="/api/rag", tags=["similar"], responses=GATED)

TopK = Annotated[int, Query(ge=1, le=MAX_SIMILAR_TOP_K)]
MinSimilarity = Annotated[float, Query(ge=0.0, le=1.0)]
CollectionsParam = Annotated[
    str | None,
    Query(
        max_length=100 * 129,
        description="Comma-separated collection names (at most 100); overrides search_scope.",
    ),
]


async def similar_input(
    top_k: TopK = DEFAULT_SIMILAR_TOP_K,
    min_similarity: MinSimilarity = DEFAULT_MIN_SIMILARITY,
    exclude_same_document: bool = True,
    search_scope: SearchScope = SearchScope.CURRENT,
    collections: CollectionsParam = None,
) -> SimilarInput:
    """The query parameters both similar routes take, checked by the input every door
    builds (app/inputs/similar.py): a refusal is the usual 422 naming the parameter."""
    try:
        return SimilarInput(
            top_k=top_k,
            min_similarity=min_similarity,
            exclude_same_document=exclude_same_document,
            scope=search_scope,
            collections=_collections(collections),
        )
    except ValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": ("query", *e["loc"])} for e in error.errors()]
        ) from None


AskedSimilar = Annotated[SimilarInput, Depends(similar_input)]


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
    asked: AskedSimilar,
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> SimilarOut:
    """Chunks like this one, best first, with their sources."""
    outcome = await operations.similar(
        caller.resources(resources),
        caller.tenant_id,
        chunk_id,
        asked,
        kind="chunk",
        consistency=consistency,
    )
    return SimilarOut.of(outcome)


@router.get(
    "/documents/{document_id}/similar",
    summary="Documents similar to a document",
    responses=errors(404),
)
async def similar_documents(
    document_id: uuid.UUID,
    asked: AskedSimilar,
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> SimilarOut:
    """Documents like this one: one entry each (its best chunk), by document similarity.
    `exclude_same_document` is accepted for symmetry (a document is never its own neighbour)."""
    outcome = await operations.similar(
        caller.resources(resources),
        caller.tenant_id,
        document_id,
        asked,
        kind="document",
        consistency=consistency,
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
    outcome = await operations.dedupe(
        caller.resources(resources), caller.tenant_id, body, consistency=consistency
    )
    return DedupeOut.of(outcome)
