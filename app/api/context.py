"""POST /api/rag/context: search, then a cited context block within a token budget."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api import examples
from app.api.context_models import ContextIn, ContextOut
from app.api.deps import Consistency, ResourcesDep, SearchCaller
from app.api.openapi import GATED, WITH_BODY
from app.operations import search as operations

router = APIRouter(prefix="/api/rag", tags=["context"], responses=GATED)


@router.post("/context", summary="Build a cited context block for a prompt", responses=WITH_BODY)
async def build_context(
    body: Annotated[ContextIn, Body(openapi_examples=examples.CONTEXT)],
    caller: SearchCaller,
    resources: ResourcesDep,
    consistency: Consistency,
) -> ContextOut:
    """The most relevant chunks as a numbered context block with citations."""
    outcome = await operations.context(
        caller.resources(resources), caller.tenant_id, body, consistency=consistency
    )
    return ContextOut.of(outcome)
