"""POST /api/rag/search."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ResourcesDep, SearchCaller
from app.api.search_models import SearchIn, SearchOut, to_filters
from app.resources import Resources
from app.retrieval import SearchRequest, search, search_request

router = APIRouter(prefix="/api/rag", tags=["search"])


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


@router.post("/search")
async def search_chunks(body: SearchIn, caller: SearchCaller, resources: ResourcesDep) -> SearchOut:
    """The tenant's most relevant chunks, each with its source."""
    request = request_of(resources, body)
    outcome = await search(
        resources.sessions,
        resources.embedder,
        tenant_id=caller.tenant_id,
        request=request,
        access=resources.access,
    )
    return SearchOut.of(outcome, body=body, threshold=request.threshold)
