"""Typed requests and replies of search, context and documents.

Reply models accept fields they do not know yet (the service may grow); tests/client compares
every model here with the service's OpenAPI document, so the two cannot drift apart.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, JsonValue

Scalar = str | int | float | bool | None


class Reply(BaseModel):
    """A reply body: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class Body(BaseModel):
    """A request body: sent without the fields left unset."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SearchMode(StrEnum):
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class FusionMethod(StrEnum):
    """How hybrid mode fuses its two rankings."""

    WEIGHTED = "weighted"
    RRF = "rrf"  # reciprocal rank fusion


class Shortfall(StrEnum):
    """Why a search returned fewer chunks than asked."""

    EMPTY = "empty"
    FILTERS = "filters"
    SCOPE = "scope"
    THRESHOLD = "threshold"
    NO_MATCH = "no_match"
    INDEX = "index"


class CitationStyle(StrEnum):
    NUMBERED = "numbered"
    INLINE = "inline"
    COMPACT = "compact"


class SourceType(StrEnum):
    """What a document was ingested from; the last six come only as uploaded files."""

    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    PPTX = "pptx"
    XLSX = "xlsx"
    EPUB = "epub"
    ODT = "odt"


# --- search ---------------------------------------------------------------------------------


class Range(Body):
    """A condition on one metadata key: `eq`, `in_` (sent as `in`), numeric bounds."""

    eq: Scalar = None
    in_: list[Scalar] | None = Field(default=None, alias="in")
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


class Filters(Body):
    source_types: list[SourceType] | None = None
    document_ids: list[uuid.UUID] | None = None
    metadata: dict[str, Range | Scalar | list[Scalar]] = {}


class SearchQuery(Body):
    query: str
    max_results: int = 5
    threshold: float | None = None
    mode: SearchMode = SearchMode.VECTOR
    collections: list[str] | None = None
    filters: Filters | None = None
    ef_search: int | None = None
    fusion: FusionMethod | None = None
    vector_weight: float | None = None
    diversity: float | None = None
    rerank: bool | None = None


class ContextQuery(SearchQuery):
    style: CitationStyle = CitationStyle.NUMBERED
    max_tokens: int | None = None
    max_chars_per_chunk: int | None = None
    neighbors: int | None = None


class Chunk(Reply):
    chunk_id: uuid.UUID
    document_id: uuid.UUID
    external_id: str
    collection: str
    content: str
    similarity: float
    score: float
    title: str
    source_type: str
    source_url: str | None
    page_number: int | None
    section: list[str]
    chunk_index: int
    total_chunks: int
    metadata: dict[str, JsonValue]
    rerank_score: float | None = None


class SearchTimings(Reply):
    embed_ms: float
    database_ms: float
    rerank_ms: float | None = None
    total_ms: float


class SearchResult(Reply):
    chunks: list[Chunk]
    total_found: int
    avg_similarity: float
    search_time_ms: float
    timings: SearchTimings
    mode: SearchMode
    model: str
    threshold: float | None
    fewer_than_requested: bool
    shortfall: Shortfall | None = None
    note: str | None = None
    reranked: bool = False
    rerank_note: str | None = None


class Citation(Reply):
    number: int
    document_id: uuid.UUID
    title: str
    text: str
    pages: list[int]
    source_url: str | None
    section: list[str]
    source_type: str
    chunk_ids: list[uuid.UUID]


class ContextMetrics(Reply):
    avg_similarity: float
    source_diversity: float
    total_chars: int
    total_tokens: int
    quality_score: float
    chunks_used: int
    unique_documents: int


class ContextResult(Reply):
    context: str
    citations: list[Citation]
    metrics: ContextMetrics
    chunks: list[Chunk]
    neighbors: list[Chunk] = Field(default_factory=list)
    dropped: int
    total_found: int
    timings: SearchTimings
    context_ms: float


# --- documents ------------------------------------------------------------------------------


class PrecomputedChunk(Body):
    """A chunk the caller embedded itself (name the model in `embedding_model`)."""

    content: str
    embedding: list[float]
    page_number: int | None = None
    section: list[str] = []


class NewDocument(Body):
    """One document to ingest as JSON; the same `external_id` again updates it."""

    content: str
    title: str | None = None
    external_id: str | None = None
    collection: str | None = None
    source_type: SourceType | None = None
    source_url: str | None = None
    metadata: dict[str, JsonValue] | None = None
    chunks: list[PrecomputedChunk] | None = None
    embedding_model: str | None = None
    access: list[str] | None = None  # user:<sub>, group:<name>; empty or None: the tenant
    version: str | None = None  # the source's revision (an etag, a time, a commit)


class DocumentReference(Body):
    """In a sync: a document the service should hold at this `version` already."""

    external_id: str
    version: str


class SyncFailure(Reply):
    external_id: str
    status: int
    detail: str


class ReceiptRef(Reply):
    receipt_id: uuid.UUID
    url: str


class SyncResult(Reply):
    """What a collection sync did (or, dry, would do): external ids under each outcome."""

    collection: str
    dry_run: bool
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    deleted: list[str]
    missing: list[str]  # references to send in full
    failed: list[SyncFailure]
    counts: dict[str, int]
    receipt: ReceiptRef | None  # None for a dry run


class DocumentChange(Body):
    """What `update_document` changes (PATCH): metadata and/or the access list."""

    metadata: dict[str, JsonValue] | None = None
    access: list[str] | None = None


class IngestResult(Reply):
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    chunks: int
    embedded: int
    unchanged: int
    created: bool
    changed: bool
    access: list[str] = []


class BatchItem(Reply):
    index: int
    status: int
    result: IngestResult | None = None
    error: str | None = None


class BatchResult(Reply):
    results: list[BatchItem]
    succeeded: int
    failed: int


class Document(Reply):
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    source_type: str
    source_url: str | None
    metadata: dict[str, JsonValue]
    access: list[str] = []  # who may see it; empty: every member of the tenant
    version: str | None = None  # the source's revision, as given at ingest
    chunks: int
    access_count: int | None = None  # how often searches returned it (None: an older service)
    created_at: datetime
    updated_at: datetime


class DocumentPage(Reply):
    items: list[Document]
    total: int
    limit: int
    offset: int
