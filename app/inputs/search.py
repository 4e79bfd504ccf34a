"""A search and a context as any door asks for them: the fields of POST /api/rag/search and
/context, which the MCP tools and `rag search`/`rag context` fill with their own arguments.

Validation lives here, so every door refuses the same input with the same message; what the
service makes of a valid input (limits, per-model defaults) is app/operations/search.py.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    StringConstraints,
    model_validator,
)

from app.ingest.parsing.model import SourceType
from app.inputs.vocabulary import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_RESULTS,
    DEFAULT_MAX_TOKENS,
    MAX_RESULTS,
    CitationStyle,
    FusionMethod,
    SearchMode,
)
from app.storable import Storable

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128), Storable]
# A collection to search in (a filter): its name as given.
CollectionName = Annotated[str, StringConstraints(min_length=1, max_length=128), Storable]
QueryText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), Storable]
Scalar = (
    Annotated[str, StringConstraints(max_length=4096), Storable] | int | FiniteFloat | bool | None
)


class Strict(BaseModel):
    """A body, or a part of one, that refuses fields it does not know (every door's inputs)."""

    model_config = ConfigDict(extra="forbid")


class Range(Strict):
    """A condition on one metadata key: `eq`, `in`, and/or numeric bounds."""

    eq: Scalar = None
    in_: Annotated[list[Scalar] | None, Field(alias="in", min_length=1, max_length=100)] = None
    gt: FiniteFloat | None = None
    gte: FiniteFloat | None = None
    lt: FiniteFloat | None = None
    lte: FiniteFloat | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        # `eq: null` asks for a null value; a null `in` or bound asks for nothing
        given = [f for f in self.model_fields_set if f == "eq" or getattr(self, f) is not None]
        if not given:
            raise ValueError("give at least one of eq, in, gt, gte, lt, lte")
        return self


class Filters(Strict):
    source_types: Annotated[list[SourceType] | None, Field(max_length=len(SourceType))] = None
    document_ids: Annotated[list[uuid.UUID] | None, Field(max_length=1000)] = None
    metadata: Annotated[
        dict[MetadataKey, Range | Scalar | Annotated[list[Scalar], Field(min_length=1)]],
        Field(max_length=32),
    ] = {}


class SearchInput(Strict):
    """A search; left out, a field takes the service's default (the same through every door)."""

    query: QueryText
    max_results: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = DEFAULT_MAX_RESULTS
    threshold: Annotated[float | None, Field(ge=0.1, le=1.0)] = None
    mode: SearchMode = SearchMode.VECTOR
    collections: Annotated[list[CollectionName] | None, Field(max_length=100)] = None
    filters: Filters = Filters()
    ef_search: Annotated[int | None, Field(ge=1, le=1000)] = None
    fusion: Annotated[
        FusionMethod | None,
        Field(description="Hybrid mode: `weighted` (default) or `rrf` (reciprocal rank fusion)."),
    ] = None
    vector_weight: Annotated[
        float | None,
        Field(
            ge=0.0,
            le=1.0,
            description="Weighted fusion: the vector side's share w (default 0.6); score = "
            "w * cosine + (1 - w) * BM25 / the query's highest possible BM25 score.",
        ),
    ] = None
    diversity: Annotated[
        float | None,
        Field(
            ge=0.0,
            le=1.0,
            description="Maximal marginal relevance: 0 or absent keeps the ranking; towards 1 "
            "prefers chunks unlike those already picked.",
        ),
    ] = None
    rerank: Annotated[
        bool | None,
        Field(
            description="Order the first stage's candidates with the configured reranker "
            "(RAG_RERANK_PROVIDER); default: true when one is configured."
        ),
    ] = None


class ContextInput(SearchInput):
    """A search, then its chunks as a cited context block within a token budget."""

    style: CitationStyle = CitationStyle.NUMBERED
    max_tokens: Annotated[int, Field(ge=1, le=200_000)] = DEFAULT_MAX_TOKENS
    max_chars_per_chunk: Annotated[int, Field(ge=20, le=20_000)] = DEFAULT_MAX_CHARS
    neighbors: Annotated[
        int,
        Field(
            ge=0,
            le=3,
            description="Widen each hit with this many chunks before and after it in its "
            "document (0-3), merged with the hits they touch, in document order, within "
            "max_tokens; a hit is never left out for its neighbours.",
        ),
    ] = 0
