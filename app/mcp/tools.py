"""The MCP tools: doors onto the same domain functions as the HTTP routes.

Each tool takes its arguments (validated by the SDK against its input schema), passes the gate
(`admitted()`: tenant active, one request from the tenant's budget), builds the same
`SearchRequest` the HTTP API builds for the same inputs (retrieval/requests.py), and shapes the
domain's result (models.py). Tool descriptions live in server.py, where the tools are listed.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import Field

from app.api.search_models import CollectionName, Filters, QueryText, SearchIn, to_filters
from app.citations import DEFAULT_MAX_TOKENS, CitationStyle
from app.db.replicas import ReadConsistency
from app.mcp.access import ToolAccess, admitted, tool_errors
from app.mcp.models import (
    ContextReply,
    Duplicates,
    FetchedItem,
    SearchResults,
    SimilarItems,
    SimilarResults,
)
from app.retrieval import (
    SearchFilters,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    fetch_item,
    retrieve_context,
    search,
    search_request,
)
from app.retrieval.dedupe import MAX_LIMIT, DedupeRequest
from app.retrieval.dedupe import find_duplicates as find_groups
from app.retrieval.similar import SearchScope, SimilarRequest, similar_to_item

Query = Annotated[
    QueryText, Field(description="What to look for, in natural language (or keywords).")
]
Limit = Annotated[int, Field(ge=1, le=20, description="How many chunks to return (1-20).")]
Collections = Annotated[
    list[CollectionName] | None,
    Field(max_length=100, description="Only these collections (default: all)."),
]
Consistency = Annotated[
    ReadConsistency | None,
    Field(
        description="'primary' to see documents ingested a moment ago; by default a read "
        "replica may answer, a few seconds behind."
    ),
]


def _consistency(access: ToolAccess, asked: ReadConsistency | None) -> ReadConsistency:
    """The tool's argument, else what the request asked (/mcp's X-Read-Consistency)."""
    return asked or access.consistency


async def _search(
    access: ToolAccess, request: SearchRequest, consistency: ReadConsistency | None
) -> SearchOutcome:
    resources, tenant_id = access.resources, access.caller.tenant_id
    resources.usage.record(tenant_id, "searches")
    return await resources.read(
        lambda sessions: search(
            sessions,
            resources.embedder,
            tenant_id=tenant_id,
            request=request,
            access=resources.access,
        ),
        consistency=_consistency(access, consistency),
    )


@tool_errors
async def search_similar(
    query: Query, limit: Limit = 5, read_consistency: Consistency = None
) -> SimilarResults:
    access = await admitted()
    res = access.resources
    request = search_request(res.settings, res.embedder.model_id, query=query, top_k=limit)
    return SimilarResults.of(await _search(access, request, read_consistency))


@tool_errors
async def semantic_search(
    query: Query,
    limit: Limit = 5,
    threshold: Annotated[
        float, Field(ge=0.0, le=1.0, description="Minimum similarity (see the description).")
    ] = 0.7,
    read_consistency: Consistency = None,
) -> SimilarResults:
    access = await admitted()
    res = access.resources
    request = search_request(
        res.settings, res.embedder.model_id, query=query, top_k=limit, threshold=threshold
    )
    return SimilarResults.of(await _search(access, request, read_consistency))


@tool_errors
async def search_chunks(
    query: Query,
    mode: Annotated[
        SearchMode, Field(description="hybrid (meaning + exact words), vector or keyword.")
    ] = SearchMode.HYBRID,
    max_results: Limit = 5,
    collections: Collections = None,
    filters: Annotated[
        Filters | None,
        Field(description="Metadata conditions, source types and document ids to keep."),
    ] = None,
    read_consistency: Consistency = None,
) -> SearchResults:
    access = await admitted()
    res = access.resources
    body = SearchIn(
        query=query,
        mode=mode,
        max_results=max_results,
        collections=collections,
        filters=filters or Filters(),
    )
    request = search_request(
        res.settings,
        res.embedder.model_id,
        query=body.query,
        mode=body.mode,
        top_k=body.max_results,
        filters=to_filters(body),
    )
    return SearchResults.of(await _search(access, request, read_consistency))


@tool_errors
async def fetch(
    id: Annotated[uuid.UUID, Field(description="A chunk id (from search) or a document id.")],
) -> FetchedItem:
    access = await admitted()
    res = access.resources
    item = await fetch_item(res.sessions, tenant_id=access.caller.tenant_id, item_id=id)
    return FetchedItem.of(item)


@tool_errors
async def get_context(
    query: Query,
    style: Annotated[
        CitationStyle, Field(description="numbered, inline or compact citations.")
    ] = CitationStyle.NUMBERED,
    max_tokens: Annotated[
        int, Field(ge=1, le=200_000, description="Budget for the whole context, in tokens.")
    ] = DEFAULT_MAX_TOKENS,
    max_results: Limit = 5,
    collections: Collections = None,
    read_consistency: Consistency = None,
) -> ContextReply:
    access = await admitted()
    res = access.resources
    request = search_request(
        res.settings,
        res.embedder.model_id,
        query=query,
        top_k=max_results,
        filters=SearchFilters(collections=collections),
    )
    res.usage.record(access.caller.tenant_id, "searches")
    outcome = await res.read(
        lambda sessions: retrieve_context(
            sessions,
            res.embedder,
            res.token_counter,
            tenant_id=access.caller.tenant_id,
            request=request,
            style=style,
            max_tokens=max_tokens,
            access=res.access,
        ),
        consistency=_consistency(access, read_consistency),
    )
    return ContextReply.of(outcome)


@tool_errors
async def find_similar(
    id: Annotated[uuid.UUID, Field(description="A chunk id (from search) or a document id.")],
    top_k: Annotated[int, Field(ge=1, le=100, description="How many items (1-100).")] = 10,
    min_similarity: Annotated[
        float, Field(ge=0.0, le=1.0, description="Minimum similarity (default 0.85).")
    ] = 0.85,
    search_scope: Annotated[
        SearchScope,
        Field(description="current (the item's collection), shared (plus 'shared') or all."),
    ] = SearchScope.CURRENT,
    read_consistency: Consistency = None,
) -> SimilarItems:
    access = await admitted()
    res = access.resources
    request = SimilarRequest(
        top_k=top_k,
        min_similarity=min_similarity,
        scope=search_scope,
        ef_search=res.settings.search_ef_search_default,
        candidates=res.settings.search_candidates,
    )
    outcome = await res.read(
        lambda sessions: similar_to_item(
            sessions,
            tenant_id=access.caller.tenant_id,
            item_id=id,
            request=request,
            access=res.access,
        ),
        consistency=_consistency(access, read_consistency),
        recheck_missing=True,
    )
    return SimilarItems.of(outcome)


@tool_errors
async def find_duplicates(
    similarity_threshold: Annotated[
        float, Field(ge=0.0, le=1.0, description="Pairs at or above it are duplicates.")
    ] = 0.95,
    limit: Annotated[
        int, Field(ge=1, le=MAX_LIMIT, description="How many documents to examine.")
    ] = 1_000,
    collections: Collections = None,
    read_consistency: Consistency = None,
) -> Duplicates:
    access = await admitted()
    res = access.resources
    request = DedupeRequest(
        similarity_threshold=similarity_threshold,
        limit=limit,
        collections=collections,
        ef_search=res.settings.search_ef_search_default,
    )
    outcome = await res.read(
        lambda sessions: find_groups(
            sessions,
            tenant_id=access.caller.tenant_id,
            model_id=res.embedder.model_id,
            request=request,
        ),
        consistency=_consistency(access, read_consistency),
    )
    return Duplicates.of(outcome)
