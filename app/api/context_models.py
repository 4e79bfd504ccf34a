"""Request and response models of POST /api/rag/context (the command line shapes its replies
with them too, without the route's FastAPI machinery)."""

from __future__ import annotations

import uuid
from typing import Self

from pydantic import BaseModel, Field

from app.api.search_models import ChunkOut, SearchTimings
from app.citations import Citation
from app.inputs.replies import MetricsOut
from app.inputs.search import ContextInput
from app.retrieval import ContextOutcome
from app.retrieval.hits import Hit


class ContextIn(ContextInput):
    """The body of POST /api/rag/context: the search's fields, the style and the budget."""


class CitationOut(BaseModel):
    number: int
    document_id: uuid.UUID
    title: str
    text: str = Field(description="The citation formatted in the requested style.")
    pages: list[int]
    source_url: str | None
    section: list[str]
    source_type: str
    chunk_ids: list[uuid.UUID]

    @classmethod
    def of(cls, citation: Citation) -> Self:
        return cls(
            number=citation.number,
            document_id=citation.document_id,
            title=citation.title,
            text=citation.text,
            pages=list(citation.pages),
            source_url=citation.source_url,
            section=list(citation.section),
            source_type=citation.source_type,
            chunk_ids=list(citation.chunk_ids),
        )


class ContextOut(BaseModel):
    context: str
    citations: list[CitationOut]
    metrics: MetricsOut
    chunks: list[ChunkOut] = Field(description="The chunks used, best first.")
    neighbors: list[ChunkOut] = Field(
        default_factory=list,
        description="The neighbouring chunks that widen them (`neighbors`), in document order.",
    )
    dropped: int = Field(description="Chunks found but left out to respect max_tokens.")
    total_found: int
    timings: SearchTimings
    context_ms: float

    @classmethod
    def of(cls, outcome: ContextOutcome) -> Self:
        built = outcome.built
        return cls(
            context=built.context,
            citations=[CitationOut.of(c) for c in built.citations],
            metrics=MetricsOut.of(built.metrics),
            chunks=[ChunkOut.of(hit) for hit in built.used],
            neighbors=[ChunkOut.of(hit) for hit in sorted(built.neighbours, key=_reading_order)],
            dropped=built.dropped,
            total_found=outcome.found.total_found,
            timings=SearchTimings.of(outcome.found),
            context_ms=outcome.context_ms,
        )


def _reading_order(hit: Hit) -> tuple[str, int]:
    return str(hit.document_id), hit.chunk_index
