"""Search and context: the inputs of app/inputs/search.py through the domain's search."""

from __future__ import annotations

from typing import NamedTuple

from app.db.replicas import ReadConsistency
from app.inputs.search import ContextInput as ContextInput
from app.inputs.search import Filters, Range, Scalar, SearchInput
from app.resources import Resources
from app.retrieval import (
    ContextOutcome,
    MetadataCondition,
    SearchFilters,
    SearchOutcome,
    SearchRequest,
    retrieve_context,
    search_request,
)
from app.retrieval import search as search_chunks
from app.settings import Settings

REPLICA = ReadConsistency.REPLICA


class Searched(NamedTuple):
    request: SearchRequest  # what was asked, defaults applied (its threshold is the one used)
    outcome: SearchOutcome


def request_of(settings: Settings, model_id: str, asked: SearchInput) -> SearchRequest:
    """The domain's request for `asked`: defaults and limits in retrieval/requests.py."""
    return search_request(
        settings,
        model_id,
        query=asked.query,
        mode=asked.mode,
        top_k=asked.max_results,
        threshold=asked.threshold,
        filters=to_filters(asked),
        ef_search=asked.ef_search,
        fusion=asked.fusion,
        vector_weight=asked.vector_weight,
        diversity=asked.diversity,
        rerank=asked.rerank,
    )


async def search(
    resources: Resources,
    tenant_id: str,
    asked: SearchInput,
    *,
    consistency: ReadConsistency = REPLICA,
) -> Searched:
    """The tenant's best chunks for `asked`; counted as one search, and each document
    returned as returned once."""
    request = request_of(resources.settings, resources.embedder.model_id, asked)
    resources.usage.record(tenant_id, "searches")
    outcome = await resources.read(
        lambda sessions: search_chunks(
            sessions,
            resources.embedder,
            tenant_id=tenant_id,
            request=request,
            returns=resources.returns,
            reranker=resources.reranker,
        ),
        consistency=consistency,
    )
    return Searched(request, outcome)


async def context(
    resources: Resources,
    tenant_id: str,
    asked: ContextInput,
    *,
    consistency: ReadConsistency = REPLICA,
) -> ContextOutcome:
    """The search of `asked`, its chunks as a cited context block within `max_tokens`;
    counted as one search."""
    request = request_of(resources.settings, resources.embedder.model_id, asked)
    resources.usage.record(tenant_id, "searches")
    return await resources.read(
        lambda sessions: retrieve_context(
            sessions,
            resources.embedder,
            resources.token_counter,
            tenant_id=tenant_id,
            request=request,
            style=asked.style,
            max_tokens=asked.max_tokens,
            max_chars=asked.max_chars_per_chunk,
            returns=resources.returns,
            neighbors=asked.neighbors,
            reranker=resources.reranker,
        ),
        consistency=consistency,
    )


def to_filters(asked: SearchInput) -> SearchFilters:
    filters: Filters = asked.filters
    return SearchFilters(
        collections=asked.collections,
        source_types=[t.value for t in filters.source_types] if filters.source_types else None,
        document_ids=filters.document_ids,
        metadata={key: _condition(value) for key, value in filters.metadata.items()},
    )


def _condition(value: Range | Scalar | list[Scalar]) -> MetadataCondition:
    if isinstance(value, list):
        return MetadataCondition(any_of=value)
    if not isinstance(value, Range):
        return MetadataCondition(any_of=[value])
    any_of = value.in_ if value.in_ is not None else None
    if "eq" in value.model_fields_set:  # both: the values in `in` equal to `eq` (maybe none)
        any_of = [value.eq] if any_of is None else [v for v in any_of if _same(v, value.eq)]
    bounds = {
        op: getattr(value, op)
        for op in ("gt", "gte", "lt", "lte")
        if getattr(value, op) is not None
    }
    return MetadataCondition(any_of=any_of, bounds=bounds)


def _same(a: Scalar, b: Scalar) -> bool:
    """Equal as JSON values: true is not 1, nor false 0 (Python's == says they are)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)
