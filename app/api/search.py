"""POST /api/rag/search."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api import examples
from app.api.deps import Consistency, ResourcesDep, SearchCaller
from app.api.openapi import GATED, WITH_BODY
from app.api.search_models import SearchIn, SearchOut, to_filters
from app.resources import Resources
from app.retrieval import SearchRequest, search, search_request

router = APIRouter(prefix="/api/rag", tags=["search"], responses=GATED)


def request_of(resources: Resources, body: SearchIn) -> SearchRequest:
    """The domain's search request for a body (defaults and limits: retrieval/requests.py)."""
    return search_request(
        resources.settings,
        resources.embedder.model_id,
        query=body.query,
        mode=body.mode,
        top_k=body.max_results,
        threshold=body.threshold,
        filters=to_filters(body),
        ef_search=body.ef_search,
        fusion=body.fusion,
        vector_weight=body.vector_weight,
        diversity=body.diversity,
    )


@router.post("/search", summary="Search the tenant's chunks", responses=WITH_BODY)
async def search_chunks(
    body: Annotated[SearchIn, Body(openapi_examples=examples.SEARCH)],
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> SearchOut:
    """The tenant's most relevant chunks, each with its source."""
    request = request_of(resources, body)
    resources.usage.record(caller.tenant_id, "searches")
    outcome = await caller.resources(resources).read(
        lambda sessions: search(
            sessions,
            resources.embedder,
            tenant_id=caller.tenant_id,
            request=request,
            access=resources.access,
        ),
        consistency=consistency,
    )
    return SearchOut.of(outcome, body=body, threshold=request.threshold)
