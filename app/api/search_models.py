"""Request and response models of search (shared by /search and /context)."""

from __future__ import annotations

import uuid
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    JsonValue,
    StringConstraints,
    model_validator,
)

from app.ingest.parsing import SourceType
from app.retrieval import (
    FusionMethod,
    Hit,
    MetadataCondition,
    SearchFilters,
    SearchMode,
    SearchOutcome,
    ShortfallReason,
)
from app.storable import Storable

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128), Storable]
CollectionName = Annotated[str, StringConstraints(min_length=1, max_length=128), Storable]
QueryText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), Storable]
Scalar = (
    Annotated[str, StringConstraints(max_length=4096), Storable] | int | FiniteFloat | bool | None
)


class Strict(BaseModel):
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


class SearchIn(Strict):
    query: QueryText
    max_results: Annotated[int, Field(ge=1, le=20)] = 5
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


def to_filters(body: SearchIn) -> SearchFilters:
    return SearchFilters(
        collections=body.collections,
        source_types=[t.value for t in body.filters.source_types]
        if body.filters.source_types
        else None,
        document_ids=body.filters.document_ids,
        metadata={key: _condition(value) for key, value in body.filters.metadata.items()},
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


class ChunkOut(BaseModel):
    chunk_id: uuid.UUID
    document_id: uuid.UUID
    external_id: str
    collection: str
    content: str
    similarity: float = Field(description="1 - cosine distance to the query.")
    score: float = Field(description="The ranking score of the mode (RRF score in hybrid).")
    title: str
    source_type: str = Field(
        description="text, markdown, html, pdf, docx, pptx, xlsx, epub or odt."
    )
    source_url: str | None
    page_number: int | None = Field(
        description="The PDF page or PowerPoint slide (from 1); null for other formats."
    )
    section: list[str] = Field(
        description="Where the chunk sits: its heading path (markdown, HTML, Word, ODT; an "
        "EPUB chapter, then its headings), a slide's title, or a sheet's name and the rows "
        'the chunk holds (["Sales", "rows 2\u201341"]).'
    )
    chunk_index: int
    total_chunks: int
    metadata: dict[str, JsonValue]

    @classmethod
    def of(cls, hit: Hit) -> Self:
        return cls(
            chunk_id=hit.chunk_id,
            document_id=hit.document_id,
            external_id=hit.external_id,
            collection=hit.collection,
            content=hit.content,
            similarity=hit.similarity,
            score=hit.score,
            title=hit.title,
            source_type=hit.source_type,
            source_url=hit.source_url,
            page_number=hit.page_number,
            section=list(hit.section),
            chunk_index=hit.chunk_index,
            total_chunks=hit.total_chunks,
            metadata=hit.metadata,
        )


class Timings(BaseModel):
    embed_ms: float
    database_ms: float
    total_ms: float

    @classmethod
    def of(cls, outcome: SearchOutcome) -> Self:
        found = outcome.timings_ms
        return cls(embed_ms=found["embed"], database_ms=found["database"], total_ms=found["total"])


class SearchOut(BaseModel):
    chunks: list[ChunkOut]
    total_found: int = Field(description="Candidates that passed filters and threshold.")
    avg_similarity: float
    search_time_ms: float
    timings: Timings
    mode: SearchMode
    model: str
    threshold: float | None
    fewer_than_requested: bool = Field(description="Fewer chunks passed than max_results.")
    shortfall: ShortfallReason | None = Field(
        default=None,
        description="Why there are fewer than max_results: `empty` (the tenant holds no"
        " chunks for this model), `filters` (the filters match no more), `scope` (the tenant"
        " holds no more), `threshold` (the threshold kept no more), `no_match` (keyword: no"
        " more chunks hold the query's terms), `index` (the index scan stopped early).",
    )
    note: str | None = Field(default=None, description="The shortfall in words.")

    @classmethod
    def of(cls, outcome: SearchOutcome, *, body: SearchIn, threshold: float | None) -> Self:
        shortfall = outcome.shortfall
        return cls(
            chunks=[ChunkOut.of(hit) for hit in outcome.hits],
            total_found=outcome.total_found,
            avg_similarity=round(outcome.avg_similarity, 6),
            search_time_ms=outcome.timings_ms["total"],
            timings=Timings.of(outcome),
            mode=body.mode,
            model=outcome.model,
            threshold=threshold,
            fewer_than_requested=shortfall is not None,
            shortfall=shortfall.reason if shortfall else None,
            note=shortfall.note if shortfall else None,
        )
