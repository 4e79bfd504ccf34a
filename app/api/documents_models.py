"""Request and response models of the documents endpoints."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, field_validator

from app.ingest.catalog import DocumentSummary
from app.ingest.documents import DocumentInput, IngestResult, PrecomputedChunk
from app.ingest.parsing import SourceType
from app.ingest.store import DEFAULT_COLLECTION

METADATA_MAX_BYTES = 64 * 1024
CollectionName = Annotated[
    str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True)
]
Url = Annotated[str, StringConstraints(max_length=4096, pattern=r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChunkIn(Strict):
    """A chunk embedded by the caller (declare the model in `embedding_model`)."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]
    embedding: Annotated[list[float], Field(min_length=1, max_length=16_000)]
    page_number: Annotated[int | None, Field(ge=1)] = None
    section: list[str] = []


class DocumentIn(Strict):
    title: Annotated[str | None, StringConstraints(max_length=1000, strip_whitespace=True)] = None
    content: Annotated[str, StringConstraints(min_length=1, max_length=5_000_000)]
    external_id: Annotated[str | None, StringConstraints(min_length=1, max_length=512)] = None
    collection: CollectionName = DEFAULT_COLLECTION
    source_type: SourceType = SourceType.TEXT
    source_url: Url | None = None
    metadata: dict[str, JsonValue] = {}
    chunks: Annotated[list[ChunkIn] | None, Field(max_length=10_000)] = None
    embedding_model: Annotated[str | None, StringConstraints(max_length=200)] = None

    @field_validator("metadata")
    @classmethod
    def _bounded(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        if len(json.dumps(value)) > METADATA_MAX_BYTES:
            raise ValueError(f"metadata is larger than {METADATA_MAX_BYTES} bytes")
        return value


def to_input(body: DocumentIn) -> DocumentInput:
    chunks = None
    if body.chunks is not None:
        chunks = [
            PrecomputedChunk(c.content, c.embedding, c.page_number, tuple(c.section))
            for c in body.chunks
        ]
    return DocumentInput(
        content=body.content,
        source_type=body.source_type,
        title=body.title or None,
        external_id=body.external_id,
        collection=body.collection,
        source_url=body.source_url,
        metadata=dict(body.metadata),
        chunks=chunks,
        embedding_model=body.embedding_model,
    )


class IngestOut(BaseModel):
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    chunks: int = Field(description="Chunks the document has now.")
    embedded: int = Field(description="Chunks embedded by this call.")
    unchanged: int = Field(description="Chunks whose stored vector was reused.")
    created: bool
    changed: bool

    @classmethod
    def from_result(cls, result: IngestResult) -> Self:
        return cls(
            document_id=result.document_id,
            external_id=result.external_id,
            collection=result.collection,
            title=result.title,
            chunks=result.chunks,
            embedded=result.embedded,
            unchanged=result.unchanged,
            created=result.created,
            changed=result.changed,
        )


class BatchIn(Strict):
    documents: Annotated[list[DocumentIn], Field(min_length=1)]


class BatchItem(BaseModel):
    index: int
    status: int
    result: IngestOut | None = None
    error: str | None = None


class BatchOut(BaseModel):
    results: list[BatchItem]
    succeeded: int
    failed: int

    @classmethod
    def of(cls, items: list[BatchItem]) -> Self:
        failed = sum(1 for item in items if item.error is not None)
        return cls(results=items, succeeded=len(items) - failed, failed=failed)


class DocumentOut(BaseModel):
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    source_type: str
    source_url: str | None
    metadata: dict[str, JsonValue]
    chunks: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, summary: DocumentSummary) -> Self:
        doc = summary.document
        return cls(
            document_id=doc.id,
            external_id=doc.external_id,
            collection=summary.collection,
            title=doc.title,
            source_type=doc.source_type,
            source_url=doc.source_url,
            metadata=doc.metadata_,
            chunks=doc.chunk_count,
            created_at=doc.created_at,
            updated_at=doc.updated_at,
        )


class DocumentList(BaseModel):
    items: list[DocumentOut]
    total: int
    limit: int
    offset: int
