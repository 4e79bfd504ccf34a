"""The body and the reply of search (the reply's chunks are shared by /context and /similar).

The body's fields, their defaults and their validation are every door's (app/inputs/search.py).
"""

from __future__ import annotations

import uuid
from typing import Self

from pydantic import BaseModel, Field, JsonValue

from app.inputs.search import SearchInput
from app.inputs.vocabulary import SearchMode
from app.retrieval import Hit, SearchOutcome, ShortfallReason


class SearchIn(SearchInput):
    """The body of POST /api/rag/search: a search as every door asks for it."""


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
    rerank_score: float | None = Field(
        default=None, description="The reranker's relevance score, when it ordered the chunks."
    )

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
            rerank_score=hit.rerank_score,
        )


class SearchTimings(BaseModel):
    embed_ms: float
    database_ms: float
    rerank_ms: float | None = Field(default=None, description="The second stage, when asked.")
    total_ms: float

    @classmethod
    def of(cls, outcome: SearchOutcome) -> Self:
        found = outcome.timings_ms
        return cls(
            embed_ms=found["embed"],
            database_ms=found["database"],
            rerank_ms=found.get("rerank"),
            total_ms=found["total"],
        )


class SearchOut(BaseModel):
    chunks: list[ChunkOut]
    total_found: int = Field(description="Candidates that passed filters and threshold.")
    avg_similarity: float
    search_time_ms: float
    timings: SearchTimings
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
    reranked: bool = Field(default=False, description="The reranker ordered the chunks.")
    rerank_note: str | None = Field(
        default=None,
        description="Why reranking was skipped (the reranker failed, timed out or refused): "
        "the chunks are in the first stage's order.",
    )

    @classmethod
    def of(cls, outcome: SearchOutcome, *, mode: SearchMode, threshold: float | None) -> Self:
        shortfall = outcome.shortfall
        return cls(
            chunks=[ChunkOut.of(hit) for hit in outcome.hits],
            total_found=outcome.total_found,
            avg_similarity=round(outcome.avg_similarity, 6),
            search_time_ms=outcome.timings_ms["total"],
            timings=SearchTimings.of(outcome),
            mode=mode,
            model=outcome.model,
            threshold=threshold,
            fewer_than_requested=shortfall is not None,
            shortfall=shortfall.reason if shortfall else None,
            note=shortfall.note if shortfall else None,
            reranked=outcome.reranked,
            rerank_note=outcome.rerank_note,
        )
