"""POST /api/rag/search."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api import examples
from app.api.deps import Consistency, ResourcesDep, SearchCaller
from app.api.openapi import GATED, WITH_BODY
from app.api.search_models import SearchIn, SearchOut
from app.operations import search as operations

router = APIRouter(prefix="/api/rag", tags=["search"], responses=GATED)


@router.post("/search", summary="Search the tenant's chunks", responses=WITH_BODY)
async def search_chunks(
    body: Annotated[SearchIn, Body(openapi_examples=examples.SEARCH)],
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> SearchOut:
    """The tenant's most relevant chunks, each with its source."""
    request, outcome = await operations.search(
        caller.resources(resources), caller.tenant_id, body, consistency=consistency
    )
    return SearchOut.of(outcome, mode=request.mode, threshold=request.threshold)
