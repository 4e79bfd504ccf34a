"""The MCP tools: doors onto the same operations as the HTTP routes (app/operations).

Each tool takes its arguments (validated by the SDK against its input schema), passes the gate
(`admitted()`: tenant active, one request from the tenant's budget), turns them into the input
every door builds (app/inputs), makes one call and shapes the outcome (models.py). Tool
descriptions live in server.py, where the tools are listed.

Defaults are the HTTP API's, except two that are part of the tools' documented contract
(docs/MCP.md): `semantic_search` keeps results at or above 0.7 unless told otherwise, and
`search` (the chat-assistant connectors' tool) ranks in hybrid mode unless told otherwise.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import Field

from app.db.replicas import ReadConsistency
from app.inputs.search import CollectionName, ContextInput, Filters, QueryText, SearchInput
from app.inputs.similar import DedupeInput, SimilarInput
from app.inputs.vocabulary import (
    DEFAULT_DEDUPE_LIMIT,
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_MAX_RESULTS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_SIMILAR_TOP_K,
    MAX_DEDUPE_LIMIT,
    MAX_RESULTS,
    MAX_SIMILAR_TOP_K,
    CitationStyle,
    SearchMode,
    SearchScope,
)
from app.mcp.access import ToolAccess, admitted, tool_errors
from app.mcp.models import (
    ContextReply,
    Duplicates,
    FetchedItem,
    SearchResults,
    SimilarItems,
    SimilarResults,
)
from app.operations import documents, similar
from app.operations import search as searching
from app.retrieval import SearchOutcome

SEMANTIC_SEARCH_THRESHOLD = 0.7  # what agent setups of the tool this service replaces expect
CONNECTOR_SEARCH_MODE = SearchMode.HYBRID  # the `search` tool: meaning and exact words

Query = Annotated[
    QueryText, Field(description="What to look for, in natural language (or keywords).")
]
Limit = Annotated[
    int, Field(ge=1, le=MAX_RESULTS, description=f"How many chunks to return (1-{MAX_RESULTS}).")
]
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
ItemId = Annotated[uuid.UUID, Field(description="A chunk id (from search) or a document id.")]


def _consistency(access: ToolAccess, asked: ReadConsistency | None) -> ReadConsistency:
    """The tool's argument, else what the request asked (/mcp's X-Read-Consistency)."""
    return asked or access.consistency


async def _search(asked: SearchInput, consistency: ReadConsistency | None) -> SearchOutcome:
    access = await admitted()
    found = await searching.search(
        access.resources,
        access.caller.tenant_id,
        asked,
        consistency=_consistency(access, consistency),
    )
    return found.outcome


@tool_errors
async def search_similar(
    query: Query, limit: Limit = DEFAULT_MAX_RESULTS, read_consistency: Consistency = None
) -> SimilarResults:
    asked = SearchInput(query=query, max_results=limit)
    return SimilarResults.of(await _search(asked, read_consistency))


@tool_errors
async def semantic_search(
    query: Query,
    limit: Limit = DEFAULT_MAX_RESULTS,
    threshold: Annotated[
        float, Field(ge=0.0, le=1.0, description="Minimum similarity (see the description).")
    ] = SEMANTIC_SEARCH_THRESHOLD,
    read_consistency: Consistency = None,
) -> SimilarResults:
    # the tool's own bounds (0-1, checked by its signature) are wider than the API's (0.1-1)
    asked = SearchInput(query=query, max_results=limit).model_copy(update={"threshold": threshold})
    return SimilarResults.of(await _search(asked, read_consistency))


@tool_errors
async def search(
    query: Query,
    mode: Annotated[
        SearchMode, Field(description="hybrid (meaning + exact words), vector or keyword.")
    ] = CONNECTOR_SEARCH_MODE,
    max_results: Limit = DEFAULT_MAX_RESULTS,
    collections: Collections = None,
    filters: Annotated[
        Filters | None,
        Field(description="Metadata conditions, source types and document ids to keep."),
    ] = None,
    read_consistency: Consistency = None,
) -> SearchResults:
    asked = SearchInput(
        query=query,
        mode=mode,
        max_results=max_results,
        collections=collections,
        filters=filters or Filters(),
    )
    return SearchResults.of(await _search(asked, read_consistency))


@tool_errors
async def fetch(id: ItemId) -> FetchedItem:
    access = await admitted()
    item = await documents.fetch(access.resources.sessions, access.caller.tenant_id, id)
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
    max_results: Limit = DEFAULT_MAX_RESULTS,
    collections: Collections = None,
    neighbors: Annotated[
        int,
        Field(ge=0, le=3, description="Chunks before and after each hit to add (0-3)."),
    ] = 0,
    read_consistency: Consistency = None,
) -> ContextReply:
    access = await admitted()
    asked = ContextInput(
        query=query,
        style=style,
        max_tokens=max_tokens,
        max_results=max_results,
        collections=collections,
        neighbors=neighbors,
    )
    outcome = await searching.context(
        access.resources,
        access.caller.tenant_id,
        asked,
        consistency=_consistency(access, read_consistency),
    )
    return ContextReply.of(outcome)


@tool_errors
async def find_similar(
    id: ItemId,
    top_k: Annotated[
        int, Field(ge=1, le=MAX_SIMILAR_TOP_K, description="How many items (1-100).")
    ] = DEFAULT_SIMILAR_TOP_K,
    min_similarity: Annotated[
        float, Field(ge=0.0, le=1.0, description="Minimum similarity (default 0.85).")
    ] = DEFAULT_MIN_SIMILARITY,
    search_scope: Annotated[
        SearchScope,
        Field(description="current (the item's collection), shared (plus 'shared') or all."),
    ] = SearchScope.CURRENT,
    read_consistency: Consistency = None,
) -> SimilarItems:
    access = await admitted()
    asked = SimilarInput(top_k=top_k, min_similarity=min_similarity, scope=search_scope)
    outcome = await similar.similar(
        access.resources,
        access.caller.tenant_id,
        id,
        asked,
        consistency=_consistency(access, read_consistency),
    )
    return SimilarItems.of(outcome)


@tool_errors
async def find_duplicates(
    similarity_threshold: Annotated[
        float, Field(ge=0.0, le=1.0, description="Pairs at or above it are duplicates.")
    ] = DEFAULT_DUPLICATE_THRESHOLD,
    limit: Annotated[
        int, Field(ge=1, le=MAX_DEDUPE_LIMIT, description="How many documents to examine.")
    ] = DEFAULT_DEDUPE_LIMIT,
    collections: Collections = None,
    read_consistency: Consistency = None,
) -> Duplicates:
    access = await admitted()
    asked = DedupeInput(
        similarity_threshold=similarity_threshold, limit=limit, collections=collections
    )  # dry_run: a preview, always
    outcome = await similar.dedupe(
        access.resources,
        access.caller.tenant_id,
        asked,
        consistency=_consistency(access, read_consistency),
    )
    return Duplicates.of(outcome)
