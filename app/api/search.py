"""POST /api/rag/search."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ResourcesDep, SearchCaller
from app.api.search_models import SearchIn, SearchOut, to_filters
from app.errors import Unprocessable
from app.resources import Resources
from app.retrieval import SearchMode, SearchOutcome, SearchRequest, search

router = APIRouter(prefix="/api/rag", tags=["search"])

# Default thresholds by model family (README, "Search"): unrelated passages score about
# 0.0-0.2 with MiniLM (as in tests/api/test_search.py) and somewhat higher with OpenAI's
# text-embedding-3; a request's `threshold` or RAG_SEARCH_THRESHOLD_DEFAULT overrides them.
MODEL_THRESHOLDS = {"local:": 0.2, "openai:": 0.25}


def default_threshold(resources: Resources) -> float | None:
    if resources.settings.search_threshold_default is not None:
        return resources.settings.search_threshold_default
    model = resources.embedder.model_id
    return next((t for prefix, t in MODEL_THRESHOLDS.items() if model.startswith(prefix)), None)


async def run_search(
    resources: Resources, tenant_id: str, body: SearchIn
) -> tuple[SearchOutcome, float | None]:
    settings = resources.settings
    if len(body.query) > settings.query_max_chars:
        raise Unprocessable(
            f"query is longer than {settings.query_max_chars} characters",
            extra={"errors": [{"field": "query", "message": "too long"}]},
        )
    threshold = body.threshold if body.threshold is not None else default_threshold(resources)
    request = SearchRequest(
        query=body.query,
        mode=body.mode,
        top_k=body.max_results,
        threshold=threshold if body.mode is not SearchMode.KEYWORD else None,
        filters=to_filters(body),
        ef_search=body.ef_search or settings.search_ef_search_default,
        rrf_k=settings.search_rrf_k,
        candidates=settings.search_candidates,
    )
    outcome = await search(
        resources.sessions, resources.embedder, tenant_id=tenant_id, request=request
    )
    return outcome, request.threshold


@router.post("/search")
async def search_chunks(body: SearchIn, caller: SearchCaller, resources: ResourcesDep) -> SearchOut:
    """The tenant's most relevant chunks, each with its source."""
    outcome, threshold = await run_search(resources, caller.tenant_id, body)
    return SearchOut.of(outcome, body=body, threshold=threshold)
