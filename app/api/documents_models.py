"""Request and response models of the documents endpoints."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    JsonValue,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)

from app.errors import Unprocessable
from app.ingest.catalog import DocumentChange, DocumentSummary
from app.ingest.inputs import DocumentInput, PrecomputedChunk
from app.ingest.parsing import SourceType
from app.ingest.store import DEFAULT_COLLECTION
from app.ingest.versions import IngestResult
from app.json_input import parse_json
from app.permissions import MAX_ACCESS_PRINCIPALS, normalized_access
from app.storable import PG_INT_MAX, storable, unstorable_reason

METADATA_MAX_BYTES = 64 * 1024


def _unstorable(value: JsonValue) -> str | None:
    """Why a string somewhere in `value` cannot be stored (app/storable.py), or None."""
    if isinstance(value, str):
        return unstorable_reason(value)
    if isinstance(value, dict):
        items: list[JsonValue] = [*value.keys(), *value.values()]
        return next((r for r in map(_unstorable, items) if r is not None), None)
    if isinstance(value, list):
        return next((r for r in map(_unstorable, value) if r is not None), None)
    return None


def _bounded_metadata(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    try:
        size = len(json.dumps(value, allow_nan=False))
    except ValueError:
        raise ValueError("metadata numbers must be finite (no NaN or Infinity)") from None
    if size > METADATA_MAX_BYTES:
        raise ValueError(f"metadata is larger than {METADATA_MAX_BYTES} bytes")
    if (reason := _unstorable(value)) is not None:
        raise ValueError(f"metadata {reason}")
    return value


def _not_zero(vector: list[float]) -> list[float]:
    if not any(vector):
        raise ValueError("a zero vector has no direction: cosine similarity is undefined")
    return vector


NoNul = AfterValidator(storable)
Title = Annotated[str, StringConstraints(max_length=1000, strip_whitespace=True), NoNul]
ExternalId = Annotated[str, StringConstraints(min_length=1, max_length=512), NoNul]
# The collection a document is stored in, as a body or form field gives it (stripped).
DocumentCollection = Annotated[
    str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True), NoNul
]
Url = Annotated[
    str, StringConstraints(max_length=4096, pattern=r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$"), NoNul
]
Metadata = Annotated[dict[str, JsonValue], AfterValidator(_bounded_metadata)]
Version = Annotated[
    str,
    StringConstraints(min_length=1, max_length=256),
    NoNul,
    Field(
        description="The source's own revision of the document (an etag, a modification "
        "time, a commit): stored as given and compared by a collection sync."
    ),
]
METADATA = TypeAdapter(Metadata)
AccessList = Annotated[
    list[str],
    Field(
        max_length=MAX_ACCESS_PRINCIPALS,
        description="Who may see the document: principals `user:<subject>` and "
        "`group:<name>`. Empty: every member of the tenant (docs/PERMISSIONS.md).",
        examples=[["group:hr", "user:alice@example.com"]],
    ),
    AfterValidator(lambda values: list(normalized_access(values))),
]
ACCESS = TypeAdapter(AccessList)


def access_form(raw: str | None) -> tuple[str, ...]:
    """The upload form's `access` field: a JSON array, or principals separated by commas."""
    if raw is None or not raw.strip():
        return ()
    try:
        values = parse_json(raw) if raw.lstrip().startswith("[") else raw.split(",")
    except json.JSONDecodeError as error:
        raise Unprocessable(f"access is not valid JSON: {error.msg}") from None
    if isinstance(values, list) and all(isinstance(v, str) for v in values):
        values = [v.strip() for v in values]
    try:
        return tuple(ACCESS.validate_python(values))
    except ValidationError as error:
        message = error.errors()[0]["msg"]
        raise Unprocessable(
            f"access: {message}", extra={"errors": [{"field": "access", "message": message}]}
        ) from None


def metadata_form(raw: str | None) -> dict[str, JsonValue]:
    """The upload form's `metadata` field: a JSON object."""
    if not raw:
        return {}
    try:
        value = parse_json(raw)
    except json.JSONDecodeError as error:
        raise Unprocessable(f"metadata is not valid JSON: {error.msg}") from None
    if not isinstance(value, dict):
        raise Unprocessable("metadata must be a JSON object")
    try:
        return METADATA.validate_python(value)
    except ValidationError as error:
        raise Unprocessable(f"metadata: {error.errors()[0]['msg']}") from None


class StrictBody(BaseModel):
    """An HTTP body that refuses fields it does not know (the search inputs' rule, app/inputs)."""

    model_config = ConfigDict(extra="forbid")


class ChunkIn(StrictBody):
    """A chunk embedded by the caller (declare the model in `embedding_model`)."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=100_000), NoNul]
    embedding: Annotated[
        list[FiniteFloat], Field(min_length=1, max_length=16_000), AfterValidator(_not_zero)
    ]
    page_number: Annotated[int | None, Field(ge=1, le=PG_INT_MAX)] = None
    section: list[Annotated[str, NoNul]] = []


class DocumentIn(StrictBody):
    title: Title | None = None
    content: Annotated[str, StringConstraints(min_length=1, max_length=5_000_000)]
    external_id: ExternalId | None = None
    collection: DocumentCollection = DEFAULT_COLLECTION
    source_type: SourceType = Field(
        SourceType.TEXT,
        description="How `content` is parsed: text, markdown or html. The file formats (pdf, "
        "docx, pptx, xlsx, epub, odt) are uploaded as files (POST /api/rag/documents/upload) "
        "and are 415 here, unless precomputed `chunks` are given (nothing is parsed then).",
    )
    source_url: Url | None = None
    metadata: Metadata = {}
    chunks: Annotated[list[ChunkIn] | None, Field(min_length=1, max_length=10_000)] = None
    embedding_model: Annotated[str | None, StringConstraints(max_length=200), NoNul] = None
    access: AccessList = []
    version: Version | None = None


class DocumentPatch(StrictBody):
    """What PATCH changes; a field left out stays as it is. Never re-embeds."""

    metadata: Metadata | None = None
    access: AccessList | None = None


def to_change(body: DocumentPatch) -> DocumentChange:
    access = None if body.access is None else tuple(body.access)
    metadata = None if body.metadata is None else dict(body.metadata)
    return DocumentChange(metadata=metadata, access=access)


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
        access=tuple(body.access),
        version=body.version,
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
    access: list[str] = Field(
        default_factory=list, description="Who may see it; empty: every member of the tenant."
    )

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
            access=list(result.access),
        )


class BatchIn(StrictBody):
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
    version: str | None = Field(description="The source's revision, as given at ingest.")
    metadata: dict[str, JsonValue]
    access: list[str] = Field(description="Who may see it; empty: every member of the tenant.")
    chunks: int
    access_count: int = Field(
        description="How often search, context and similar returned it (flushed every few "
        "seconds, see docs/SIMILAR.md)."
    )
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
            version=doc.version,
            metadata=doc.metadata_,
            access=list(doc.access),
            chunks=doc.chunk_count,
            access_count=doc.returned_count,
            created_at=doc.created_at,
            updated_at=doc.updated_at,
        )


class DocumentList(BaseModel):
    items: list[DocumentOut]
    total: int
    limit: int
    offset: int
