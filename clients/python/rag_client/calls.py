"""Every operation as a `Call`: what to send and how to read the reply. The sync and async
clients only differ in how they send one, so the two cannot disagree on the wire format."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Generic, TypedDict, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, JsonValue

from rag_client.admin_models import (
    AuditPage,
    NewTenant,
    Tenant,
    TenantChange,
    TenantPage,
    TenantStats,
    TierList,
)
from rag_client.catalog_models import CollectionList, DocumentChunks, FormatList, Identity
from rag_client.job_models import Job, JobAccepted, JobPage, JobStatus, SyncJobAccepted
from rag_client.models import (
    BatchResult,
    CitationStyle,
    ContextQuery,
    ContextResult,
    Document,
    DocumentChange,
    DocumentPage,
    DocumentReference,
    Filters,
    FusionMethod,
    IngestResult,
    NewDocument,
    PrecomputedChunk,
    SearchMode,
    SearchQuery,
    SearchResult,
    SourceType,
    SyncResult,
)
from rag_client.similar_models import (
    DedupeRequest,
    DedupeResult,
    MergeStrategy,
    SearchScope,
    SimilarResult,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Params = Mapping[str, str | int | float | bool]
FileField = tuple[str, bytes, str]

RAG = "/api/rag"
ADMIN = "/api/admin"


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: JsonValue = None
    params: Params | None = None
    files: Mapping[str, FileField] | Sequence[tuple[str, FileField]] | None = None
    data: Mapping[str, str] = field(default_factory=dict)


def _reads(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate_json(response.content)


def _nothing(_response: httpx.Response) -> None:
    return None


def _body(model: BaseModel) -> JsonValue:
    dumped: JsonValue = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _params(**values: str | int | float | bool | None) -> dict[str, str | int | float | bool]:
    return {name: value for name, value in values.items() if value is not None}


# --- search and context ---------------------------------------------------------------------


class SearchOptions(TypedDict, total=False):
    max_results: int
    threshold: float | None
    mode: SearchMode | str
    collections: Sequence[str] | None
    filters: Filters | None
    ef_search: int | None
    fusion: FusionMethod | str | None  # hybrid mode: weighted (default) or rrf
    vector_weight: float | None  # weighted fusion: the vector side's share (default 0.6)
    diversity: float | None  # maximal marginal relevance: 0 keeps the ranking, towards 1 varies
    rerank: bool | None


class ContextOptions(SearchOptions, total=False):
    style: CitationStyle | str
    max_tokens: int | None
    max_chars_per_chunk: int | None
    neighbors: int | None


def search(query: str, options: SearchOptions) -> Call[SearchResult]:
    body = SearchQuery.model_validate({"query": query, **options})
    return Call("POST", f"{RAG}/search", _reads(SearchResult), json=_body(body))


def context(query: str, options: ContextOptions) -> Call[ContextResult]:
    body = ContextQuery.model_validate({"query": query, **options})
    return Call("POST", f"{RAG}/context", _reads(ContextResult), json=_body(body))


# --- documents ------------------------------------------------------------------------------


class DocumentOptions(TypedDict, total=False):
    title: str | None
    external_id: str | None
    collection: str | None
    source_type: SourceType | str | None
    source_url: str | None
    metadata: Mapping[str, JsonValue] | None
    chunks: Sequence[PrecomputedChunk] | None
    embedding_model: str | None
    access: Sequence[str] | None


class UploadOptions(TypedDict, total=False):
    filename: str | None
    content_type: str | None
    title: str | None
    external_id: str | None
    collection: str | None
    source_url: str | None
    metadata: Mapping[str, JsonValue] | None
    access: Sequence[str] | None
    version: str | None  # the source's revision (an etag, a time, a commit)


def ingest(content: str, options: DocumentOptions) -> Call[IngestResult]:
    body = NewDocument.model_validate({"content": content, **options})
    return Call("POST", f"{RAG}/documents", _reads(IngestResult), json=_body(body))


def ingest_batch(documents: Sequence[NewDocument]) -> Call[BatchResult]:
    body: JsonValue = {"documents": [_body(document) for document in documents]}
    return Call("POST", f"{RAG}/documents/batch", _reads(BatchResult), json=body)


def upload(file: str | PathLike[str] | bytes, options: UploadOptions) -> Call[IngestResult]:
    """A file from a path, or bytes (then give `filename`); its type is sniffed by the service.
    The external id is the file's name (`filename`, else the path's last part), as the console
    and `rag ingest` name files: the same file uploaded again, edited, updates its document.
    `external_id` names it otherwise; bytes without a `filename` are named by their content."""
    named = options.get("filename")
    if isinstance(file, bytes):
        data, name = file, named or "upload"
    else:
        path = Path(file)
        data, name = path.read_bytes(), named or path.name
        named = name
    kind = options.get("content_type") or "application/octet-stream"
    fields = {
        "title": options.get("title"),
        "external_id": options.get("external_id") or named,
        "collection": options.get("collection"),
        "source_url": options.get("source_url"),
        "version": options.get("version"),
    }
    form = {key: value for key, value in fields.items() if value is not None}
    if (metadata := options.get("metadata")) is not None:
        form["metadata"] = json.dumps(dict(metadata))
    if (access := options.get("access")) is not None:
        form["access"] = json.dumps(list(access))
    return Call(
        "POST",
        f"{RAG}/documents/upload",
        _reads(IngestResult),
        files={"file": (name, data, kind)},
        data=form,
    )


def list_documents(
    *,
    collection: str | None,
    limit: int | None,
    offset: int | None,
    source_type: SourceType | str | None = None,
) -> Call[DocumentPage]:
    kind = None if source_type is None else SourceType(source_type).value
    params = _params(collection=collection, source_type=kind, limit=limit, offset=offset)
    return Call("GET", f"{RAG}/documents", _reads(DocumentPage), params=params)


def whoami() -> Call[Identity]:
    return Call("GET", f"{RAG}/me", _reads(Identity))


def formats() -> Call[FormatList]:
    return Call("GET", f"{RAG}/formats", _reads(FormatList))


def collections() -> Call[CollectionList]:
    return Call("GET", f"{RAG}/collections", _reads(CollectionList))


def document_chunks(
    document_id: uuid.UUID | str,
    *,
    style: CitationStyle | str | None,
    limit: int | None,
    offset: int | None,
) -> Call[DocumentChunks]:
    chosen = None if style is None else CitationStyle(style).value
    params = _params(style=chosen, limit=limit, offset=offset)
    path = f"{RAG}/documents/{_id(document_id)}/chunks"
    return Call("GET", path, _reads(DocumentChunks), params=params)


def get_document(document_id: uuid.UUID | str) -> Call[Document]:
    return Call("GET", f"{RAG}/documents/{_id(document_id)}", _reads(Document))


def sync(
    collection: str,
    documents: Sequence[NewDocument | DocumentReference],
    *,
    dry_run: bool = False,
    allow_empty: bool = False,
    max_deletions: int | float | None = None,
) -> Call[SyncResult]:
    """The collection's complete content; what is not named is deleted (docs/SYNC.md)."""
    path, body = _sync(collection, documents, allow_empty, max_deletions, dry_run=dry_run)
    return Call("POST", path, _reads(SyncResult), json=body)


def sync_in_background(
    collection: str,
    documents: Sequence[NewDocument | DocumentReference],
    *,
    allow_empty: bool = False,
    max_deletions: int | float | None = None,
    callback_url: str | None = None,
) -> Call[SyncJobAccepted]:
    """The same sync as a background job (202): follow it with `job()`."""
    path, body = _sync(collection, documents, allow_empty, max_deletions, background=True)
    if callback_url is not None:
        body["callback_url"] = callback_url
    return Call("POST", path, _reads(SyncJobAccepted), json=body)


def _sync(
    collection: str,
    documents: Sequence[NewDocument | DocumentReference],
    allow_empty: bool,
    max_deletions: int | float | None,
    **flags: bool,
) -> tuple[str, dict[str, JsonValue]]:
    """A sync's path and body, in a request or in the background."""
    body: dict[str, JsonValue] = {
        "documents": [_body(document) for document in documents],
        **flags,
        "allow_empty": allow_empty,
    }
    if max_deletions is not None:
        body["max_deletions"] = max_deletions
    return f"{RAG}/collections/{quote(collection, safe='')}/sync", body


def receipt(receipt_id: uuid.UUID | str) -> Call[dict[str, JsonValue]]:
    """A receipt's body as signed (verify the raw reply with the webhook secret)."""
    return Call("GET", f"{RAG}/receipts/{_id(receipt_id)}", _json_object)


def _json_object(response: httpx.Response) -> dict[str, JsonValue]:
    parsed: dict[str, JsonValue] = json.loads(response.content)
    return parsed


def delete_document(document_id: uuid.UUID | str) -> Call[uuid.UUID | None]:
    """The deletion's receipt id (None from a service older than receipts)."""
    return Call("DELETE", f"{RAG}/documents/{_id(document_id)}", _receipt_id)


def _receipt_id(response: httpx.Response) -> uuid.UUID | None:
    named = response.headers.get("Receipt-Id")
    return None if named is None else uuid.UUID(named)


def update_document(document_id: uuid.UUID | str, change: DocumentChange) -> Call[Document]:
    """PATCH: metadata and/or access list, never re-embedding."""
    return Call(
        "PATCH", f"{RAG}/documents/{_id(document_id)}", _reads(Document), json=_body(change)
    )


class JobOptions(TypedDict, total=False):
    collection: str | None
    source_url: str | None
    metadata: Mapping[str, JsonValue] | None
    access: Sequence[str] | None
    # POSTed (signed, Standard Webhooks) when the job ends; files or documents alike
    callback_url: str | None


JobFile = str | PathLike[str] | tuple[str, bytes]  # a path, or (name, bytes)


def submit_files(files: Sequence[JobFile], options: JobOptions) -> Call[JobAccepted]:
    """Files for a background job; a (name, bytes) pair names the document (its external id
    when none is given), so a folder's files keep their relative paths."""
    parts: list[tuple[str, FileField]] = []
    for file in files:
        if isinstance(file, tuple):
            name, data = file
        else:
            path = Path(file)
            name, data = path.name, path.read_bytes()
        parts.append(("files", (name, data, "application/octet-stream")))
    form = {
        key: value
        for key, value in (
            ("collection", options.get("collection")),
            ("source_url", options.get("source_url")),
            ("callback_url", options.get("callback_url")),
        )
        if value is not None
    }
    if (metadata := options.get("metadata")) is not None:
        form["metadata"] = json.dumps(dict(metadata))
    if (access := options.get("access")) is not None:
        form["access"] = json.dumps(list(access))
    return Call("POST", f"{RAG}/jobs", _reads(JobAccepted), files=parts, data=form)


def submit_documents(
    documents: Sequence[NewDocument], *, callback_url: str | None = None
) -> Call[JobAccepted]:
    body: dict[str, JsonValue] = {"documents": [_body(document) for document in documents]}
    if callback_url is not None:
        body["callback_url"] = callback_url
    return Call("POST", f"{RAG}/jobs", _reads(JobAccepted), json=body)


def job_submission(
    files: Sequence[JobFile], documents: Sequence[NewDocument], options: JobOptions
) -> Call[JobAccepted]:
    """A job of files or of documents (one or the other)."""
    if bool(files) == bool(documents):
        raise ValueError("submit either files or documents")
    if documents and set(options) - {"callback_url"}:
        raise ValueError("collection, source_url, metadata and access go on each document")
    if files:
        return submit_files(files, options)
    return submit_documents(documents, callback_url=options.get("callback_url"))


def get_job(job_id: uuid.UUID | str) -> Call[Job]:
    return Call("GET", f"{RAG}/jobs/{_id(job_id)}", _reads(Job))


def list_jobs(
    *, status: JobStatus | str | None, limit: int | None, offset: int | None
) -> Call[JobPage]:
    params = _params(status=None if status is None else str(status), limit=limit, offset=offset)
    return Call("GET", f"{RAG}/jobs", _reads(JobPage), params=params)


def cancel_job(job_id: uuid.UUID | str) -> Call[Job]:
    return Call("DELETE", f"{RAG}/jobs/{_id(job_id)}", _reads(Job))


def _id(value: uuid.UUID | str) -> str:
    """A path segment: ids are UUIDs, and anything else must not change the path."""
    return quote(str(value), safe="")


# --- similar and dedupe ---------------------------------------------------------------------


class SimilarOptions(TypedDict, total=False):
    top_k: int | None
    min_similarity: float | None
    search_scope: SearchScope | str | None
    exclude_same_document: bool | None
    collections: Sequence[str] | None


def similar(kind: str, item_id: uuid.UUID | str, options: SimilarOptions) -> Call[SimilarResult]:
    scope = options.get("search_scope")
    params = _params(
        top_k=options.get("top_k"),
        min_similarity=options.get("min_similarity"),
        search_scope=str(scope) if scope is not None else None,
        exclude_same_document=options.get("exclude_same_document"),
        collections=",".join(names) if (names := options.get("collections")) else None,
    )
    path = f"{RAG}/{kind}/{_id(item_id)}/similar"
    return Call("GET", path, _reads(SimilarResult), params=params)


class DedupeOptions(TypedDict, total=False):
    similarity_threshold: float | None
    dry_run: bool
    merge_strategy: MergeStrategy | str | None
    limit: int | None
    collections: Sequence[str] | None
    use_index: bool | None
    ef_search: int | None
    across_access: bool | None


def dedupe(options: DedupeOptions) -> Call[DedupeResult]:
    body = DedupeRequest.model_validate(dict(options))
    return Call("POST", f"{RAG}/dedupe", _reads(DedupeResult), json=_body(body))


# --- admin ----------------------------------------------------------------------------------


def list_tenants(
    *, status: str | None, tier: str | None, limit: int | None, offset: int | None
) -> Call[TenantPage]:
    params = _params(status=status, tier=tier, limit=limit, offset=offset)
    return Call("GET", f"{ADMIN}/tenants", _reads(TenantPage), params=params)


def create_tenant(tenant_id: str, *, name: str | None, tier: str | None) -> Call[Tenant]:
    body = NewTenant(id=tenant_id, name=name, tier=tier)
    return Call("POST", f"{ADMIN}/tenants", _reads(Tenant), json=_body(body))


def update_tenant(
    tenant_id: str, *, name: str | None, tier: str | None, status: str | None
) -> Call[Tenant]:
    body = TenantChange.model_validate({"name": name, "tier": tier, "status": status})
    return Call("PATCH", f"{ADMIN}/tenants/{_id(tenant_id)}", _reads(Tenant), json=_body(body))


def suspend_tenant(tenant_id: str) -> Call[Tenant]:
    return Call("POST", f"{ADMIN}/tenants/{_id(tenant_id)}/suspend", _reads(Tenant))


def activate_tenant(tenant_id: str) -> Call[Tenant]:
    return Call("POST", f"{ADMIN}/tenants/{_id(tenant_id)}/activate", _reads(Tenant))


def delete_tenant(tenant_id: str, *, confirm: str) -> Call[uuid.UUID | None]:
    """The deletion's receipt id (None from a service older than receipts)."""
    params = _params(confirm=confirm)
    return Call("DELETE", f"{ADMIN}/tenants/{_id(tenant_id)}", _receipt_id, params=params)


def tenant_receipt(tenant_id: str, receipt_id: uuid.UUID | str) -> Call[dict[str, JsonValue]]:
    """One of a tenant's receipts as signed, its deletion's included (rag:admin)."""
    path = f"{ADMIN}/tenants/{_id(tenant_id)}/receipts/{_id(receipt_id)}"
    return Call("GET", path, _json_object)


def tiers() -> Call[TierList]:
    return Call("GET", f"{ADMIN}/tiers", _reads(TierList))


def tenant_stats(tenant_id: str) -> Call[TenantStats]:
    return Call("GET", f"{ADMIN}/tenants/{_id(tenant_id)}/stats", _reads(TenantStats))


def audit(
    *,
    tenant_id: str | None,
    action: str | None,
    actor: str | None,
    limit: int | None,
    offset: int | None,
) -> Call[AuditPage]:
    params = _params(tenant_id=tenant_id, action=action, actor=actor, limit=limit, offset=offset)
    return Call("GET", f"{ADMIN}/audit", _reads(AuditPage), params=params)
