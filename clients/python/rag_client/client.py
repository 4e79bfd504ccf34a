"""`RagClient`: the service over HTTP, synchronously."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from os import PathLike
from types import TracebackType
from typing import Self, TypeVar, Unpack

import httpx
from pydantic import JsonValue

from rag_client import calls
from rag_client.admin_models import AuditPage, Tenant, TenantPage, TenantStats, TierList
from rag_client.base import (
    DEFAULT_TIMEOUT,
    ReadConsistency,
    headers,
    outcome,
    retry_policy,
    transport_error,
)
from rag_client.calls import job_submission
from rag_client.catalog_models import CollectionList, DocumentChunks, FormatList, Identity
from rag_client.errors import ProblemError
from rag_client.job_models import Job, JobAccepted, JobPage, JobStatus, SyncJobAccepted
from rag_client.models import (
    BatchResult,
    CitationStyle,
    ContextResult,
    Document,
    DocumentChange,
    DocumentPage,
    DocumentReference,
    IngestResult,
    NewDocument,
    SearchResult,
    SourceType,
    SyncResult,
)
from rag_client.retry import Retry
from rag_client.similar_models import DedupeResult, SimilarResult

T = TypeVar("T")


class RagClient:
    """A client for one service and one token (`tenant` acts for another tenant: admins only).

    `retries` retries 429 and 503 replies after their `Retry-After` (an int: that many
    retries); `read_consistency="primary"` makes searches read the primary database, so they
    see what this client has just ingested (by default a read replica may answer, a few seconds
    behind); `http` lets you bring your own configured `httpx.Client`.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        tenant: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: Retry | int | None = None,
        http: httpx.Client | None = None,
        read_consistency: ReadConsistency | None = None,
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._http.base_url = httpx.URL(base_url)
        self._http.headers.update(headers(token, tenant, read_consistency))
        self._retry = retry_policy(retries)
        self._owns_http = http is None  # a client you bring stays yours to close

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, call: calls.Call[T]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    params=call.params,
                    files=call.files,
                    data=call.data or None,
                )
            except httpx.TransportError as error:
                raise transport_error(error) from error
            result = outcome(call, response)
            if not isinstance(result, ProblemError):
                return result
            wait = self._retry.wait(attempt, result)
            if wait is None:
                raise result
            time.sleep(wait)

    # search and context

    def search(self, query: str, **options: Unpack[calls.SearchOptions]) -> SearchResult:
        return self._send(calls.search(query, options))

    def context(self, query: str, **options: Unpack[calls.ContextOptions]) -> ContextResult:
        return self._send(calls.context(query, options))

    # documents

    def ingest(self, content: str, **options: Unpack[calls.DocumentOptions]) -> IngestResult:
        return self._send(calls.ingest(content, options))

    def ingest_batch(self, documents: Sequence[NewDocument]) -> BatchResult:
        return self._send(calls.ingest_batch(documents))

    def upload(
        self, file: str | PathLike[str] | bytes, **options: Unpack[calls.UploadOptions]
    ) -> IngestResult:
        return self._send(calls.upload(file, options))

    def list_documents(
        self,
        *,
        collection: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        source_type: SourceType | str | None = None,
    ) -> DocumentPage:
        call = calls.list_documents(
            collection=collection, limit=limit, offset=offset, source_type=source_type
        )
        return self._send(call)

    def whoami(self) -> Identity:
        """Who the token is: tenant, subject, scopes, groups, expiry."""
        return self._send(calls.whoami())

    def formats(self) -> FormatList:
        """The formats ingest reads: source type, name, file name endings."""
        return self._send(calls.formats())

    def collections(self) -> CollectionList:
        return self._send(calls.collections())

    def document_chunks(
        self,
        document_id: uuid.UUID | str,
        *,
        style: CitationStyle | str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> DocumentChunks:
        """A page of a document's chunks in reading order, each with its citation."""
        call = calls.document_chunks(document_id, style=style, limit=limit, offset=offset)
        return self._send(call)

    def iter_documents(
        self, *, collection: str | None = None, page_size: int = 100
    ) -> Iterator[Document]:
        """Every document, page by page."""
        offset = 0
        while True:
            page = self.list_documents(collection=collection, limit=page_size, offset=offset)
            yield from page.items
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return

    def get_document(self, document_id: uuid.UUID | str) -> Document:
        return self._send(calls.get_document(document_id))

    def sync(
        self,
        collection: str,
        documents: Sequence[NewDocument | DocumentReference],
        *,
        dry_run: bool = False,
        allow_empty: bool = False,
        max_deletions: int | float | None = None,
    ) -> SyncResult:
        """Make `collection` hold exactly `documents` (full ones and references by
        version): what it holds and is not named is deleted; a signed receipt records it."""
        call = calls.sync(
            collection,
            documents,
            dry_run=dry_run,
            allow_empty=allow_empty,
            max_deletions=max_deletions,
        )
        return self._send(call)

    def sync_in_background(
        self,
        collection: str,
        documents: Sequence[NewDocument | DocumentReference],
        *,
        allow_empty: bool = False,
        max_deletions: int | float | None = None,
        callback_url: str | None = None,
    ) -> SyncJobAccepted:
        """The same sync as a background job, for more full documents than one request may
        embed: follow it with `job(accepted.job_id)`, whose `sync` has the outcome and the
        receipt once it has ended; `callback_url` is called (signed) when it does."""
        call = calls.sync_in_background(
            collection,
            documents,
            allow_empty=allow_empty,
            max_deletions=max_deletions,
            callback_url=callback_url,
        )
        return self._send(call)

    def receipt(self, receipt_id: uuid.UUID | str) -> dict[str, JsonValue]:
        """A sync's or a deletion's receipt, as signed (docs/SYNC.md)."""
        return self._send(calls.receipt(receipt_id))

    def delete_document(self, document_id: uuid.UUID | str) -> uuid.UUID | None:
        """Delete it; the id of its receipt (`receipt()`)."""
        return self._send(calls.delete_document(document_id))

    def update_document(
        self,
        document_id: uuid.UUID | str,
        *,
        metadata: Mapping[str, JsonValue] | None = None,
        access: Sequence[str] | None = None,
    ) -> Document:
        """Change a document's metadata and/or access list (PATCH; never re-embeds). `access`
        lists principals (`user:<sub>`, `group:<name>`); [] opens it to the whole tenant."""
        change = DocumentChange(
            metadata=None if metadata is None else dict(metadata),
            access=None if access is None else list(access),
        )
        return self._send(calls.update_document(document_id, change))

    # similar and dedupe

    def similar_to_chunk(
        self, chunk_id: uuid.UUID | str, **options: Unpack[calls.SimilarOptions]
    ) -> SimilarResult:
        return self._send(calls.similar("chunks", chunk_id, options))

    def similar_to_document(
        self, document_id: uuid.UUID | str, **options: Unpack[calls.SimilarOptions]
    ) -> SimilarResult:
        return self._send(calls.similar("documents", document_id, options))

    def dedupe(self, **options: Unpack[calls.DedupeOptions]) -> DedupeResult:
        return self._send(calls.dedupe(options))

    # ingestion jobs (docs/JOBS.md)

    def submit(
        self,
        files: Sequence[calls.JobFile] = (),
        *,
        documents: Sequence[NewDocument] = (),
        **options: Unpack[calls.JobOptions],
    ) -> JobAccepted:
        """Files (paths, or (name, bytes) pairs) or documents for background ingestion;
        `callback_url=` is POSTed the job's summary, signed, when it ends (docs/JOBS.md)."""
        return self._send(job_submission(files, documents, options))

    def job(self, job_id: uuid.UUID | str) -> Job:
        return self._send(calls.get_job(job_id))

    def list_jobs(
        self, *, status: JobStatus | str | None = None, limit: int | None = None, offset: int = 0
    ) -> JobPage:
        return self._send(calls.list_jobs(status=status, limit=limit, offset=offset))

    def cancel(self, job_id: uuid.UUID | str) -> Job:
        """A queued job never runs; a running one stops after the document in progress."""
        return self._send(calls.cancel_job(job_id))

    def wait(
        self,
        job_id: uuid.UUID | str,
        *,
        progress: Callable[[Job], object] | None = None,
        poll_seconds: float = 1.0,
        timeout_seconds: float | None = None,
    ) -> Job:
        """Poll until the job ends (its final state), calling `progress` with each reading;
        TimeoutError after `timeout_seconds` (the job goes on)."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while True:
            job = self.job(job_id)
            if progress is not None:
                progress(job)
            if job.status.final:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.status} after {timeout_seconds} s")
            time.sleep(poll_seconds)

    # admin (scope rag:admin)

    def list_tenants(
        self,
        *,
        status: str | None = None,
        tier: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> TenantPage:
        call = calls.list_tenants(status=status, tier=tier, limit=limit, offset=offset)
        return self._send(call)

    def iter_tenants(
        self, *, status: str | None = None, tier: str | None = None, page_size: int = 100
    ) -> Iterator[Tenant]:
        offset = 0
        while True:
            page = self.list_tenants(status=status, tier=tier, limit=page_size, offset=offset)
            yield from page.items
            offset += len(page.items)
            if len(page.items) < page_size or (page.total is not None and offset >= page.total):
                return

    def create_tenant(
        self, tenant_id: str, *, name: str | None = None, tier: str | None = None
    ) -> Tenant:
        return self._send(calls.create_tenant(tenant_id, name=name, tier=tier))

    def update_tenant(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        tier: str | None = None,
        status: str | None = None,
    ) -> Tenant:
        call = calls.update_tenant(tenant_id, name=name, tier=tier, status=status)
        return self._send(call)

    def suspend_tenant(self, tenant_id: str) -> Tenant:
        return self._send(calls.suspend_tenant(tenant_id))

    def activate_tenant(self, tenant_id: str) -> Tenant:
        return self._send(calls.activate_tenant(tenant_id))

    def delete_tenant(self, tenant_id: str, *, confirm: str) -> uuid.UUID | None:
        """Delete a tenant and its documents; `confirm` must repeat the tenant id. The id of
        the deletion's receipt (`tenant_receipt()`)."""
        return self._send(calls.delete_tenant(tenant_id, confirm=confirm))

    def tenant_receipt(self, tenant_id: str, receipt_id: uuid.UUID | str) -> dict[str, JsonValue]:
        """One of a tenant's receipts as signed, its deletion's included (kept after it)."""
        return self._send(calls.tenant_receipt(tenant_id, receipt_id))

    def tiers(self) -> TierList:
        return self._send(calls.tiers())

    def tenant_stats(self, tenant_id: str) -> TenantStats:
        return self._send(calls.tenant_stats(tenant_id))

    def audit(
        self,
        *,
        tenant_id: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> AuditPage:
        """Admin actions, newest first; filter by tenant, action (`tenant.suspend`) or actor."""
        call = calls.audit(
            tenant_id=tenant_id, action=action, actor=actor, limit=limit, offset=offset
        )
        return self._send(call)
