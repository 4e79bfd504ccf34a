"""`AsyncRagClient`: the service over HTTP, for asyncio (the same methods as `RagClient`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from os import PathLike
from types import TracebackType
from typing import Self, TypeVar, Unpack

import anyio
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


class AsyncRagClient:
    """A client for one service and one token (`tenant` acts for another tenant: admins only).

    `retries` retries 429 and 503 replies after their `Retry-After` (an int: that many
    retries); `read_consistency="primary"` makes searches read the primary database, so they
    see what this client has just ingested (by default a read replica may answer, a few seconds
    behind); `http` lets you bring your own configured `httpx.AsyncClient`.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        tenant: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: Retry | int | None = None,
        http: httpx.AsyncClient | None = None,
        read_consistency: ReadConsistency | None = None,
    ) -> None:
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._http.base_url = httpx.URL(base_url)
        self._http.headers.update(headers(token, tenant, read_consistency))
        self._retry = retry_policy(retries)
        self._owns_http = http is None  # a client you bring stays yours to close

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _send(self, call: calls.Call[T]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
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
            await anyio.sleep(wait)

    # search and context

    async def search(self, query: str, **options: Unpack[calls.SearchOptions]) -> SearchResult:
        return await self._send(calls.search(query, options))

    async def context(self, query: str, **options: Unpack[calls.ContextOptions]) -> ContextResult:
        return await self._send(calls.context(query, options))

    # documents

    async def ingest(self, content: str, **options: Unpack[calls.DocumentOptions]) -> IngestResult:
        return await self._send(calls.ingest(content, options))

    async def ingest_batch(self, documents: Sequence[NewDocument]) -> BatchResult:
        return await self._send(calls.ingest_batch(documents))

    async def upload(
        self, file: str | PathLike[str] | bytes, **options: Unpack[calls.UploadOptions]
    ) -> IngestResult:
        return await self._send(calls.upload(file, options))

    async def list_documents(
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
        return await self._send(call)

    async def whoami(self) -> Identity:
        """Who the token is: tenant, subject, scopes, groups, expiry."""
        return await self._send(calls.whoami())

    async def formats(self) -> FormatList:
        """The formats ingest reads: source type, name, file name endings."""
        return await self._send(calls.formats())

    async def collections(self) -> CollectionList:
        return await self._send(calls.collections())

    async def document_chunks(
        self,
        document_id: uuid.UUID | str,
        *,
        style: CitationStyle | str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> DocumentChunks:
        """A page of a document's chunks in reading order, each with its citation."""
        call = calls.document_chunks(document_id, style=style, limit=limit, offset=offset)
        return await self._send(call)

    async def iter_documents(
        self, *, collection: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Document]:
        """Every document, page by page."""
        offset = 0
        while True:
            page = await self.list_documents(collection=collection, limit=page_size, offset=offset)
            for item in page.items:
                yield item
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return

    async def get_document(self, document_id: uuid.UUID | str) -> Document:
        return await self._send(calls.get_document(document_id))

    async def sync(
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
        return await self._send(call)

    async def sync_in_background(
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
        return await self._send(call)

    async def receipt(self, receipt_id: uuid.UUID | str) -> dict[str, JsonValue]:
        """A sync's or a deletion's receipt, as signed (docs/SYNC.md)."""
        return await self._send(calls.receipt(receipt_id))

    async def delete_document(self, document_id: uuid.UUID | str) -> uuid.UUID | None:
        """Delete it; the id of its receipt (`receipt()`)."""
        return await self._send(calls.delete_document(document_id))

    async def update_document(
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
        return await self._send(calls.update_document(document_id, change))

    # similar and dedupe

    async def similar_to_chunk(
        self, chunk_id: uuid.UUID | str, **options: Unpack[calls.SimilarOptions]
    ) -> SimilarResult:
        return await self._send(calls.similar("chunks", chunk_id, options))

    async def similar_to_document(
        self, document_id: uuid.UUID | str, **options: Unpack[calls.SimilarOptions]
    ) -> SimilarResult:
        return await self._send(calls.similar("documents", document_id, options))

    async def dedupe(self, **options: Unpack[calls.DedupeOptions]) -> DedupeResult:
        return await self._send(calls.dedupe(options))

    # ingestion jobs (docs/JOBS.md)

    async def submit(
        self,
        files: Sequence[calls.JobFile] = (),
        *,
        documents: Sequence[NewDocument] = (),
        **options: Unpack[calls.JobOptions],
    ) -> JobAccepted:
        """Files (paths, or (name, bytes) pairs) or documents for background ingestion;
        `callback_url=` is POSTed the job's summary, signed, when it ends (docs/JOBS.md)."""
        return await self._send(job_submission(files, documents, options))

    async def job(self, job_id: uuid.UUID | str) -> Job:
        return await self._send(calls.get_job(job_id))

    async def list_jobs(
        self, *, status: JobStatus | str | None = None, limit: int | None = None, offset: int = 0
    ) -> JobPage:
        return await self._send(calls.list_jobs(status=status, limit=limit, offset=offset))

    async def cancel(self, job_id: uuid.UUID | str) -> Job:
        """A queued job never runs; a running one stops after the document in progress."""
        return await self._send(calls.cancel_job(job_id))

    async def wait(
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
            job = await self.job(job_id)
            if progress is not None:
                progress(job)
            if job.status.final:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.status} after {timeout_seconds} s")
            await anyio.sleep(poll_seconds)

    # admin (scope rag:admin)

    async def list_tenants(
        self,
        *,
        status: str | None = None,
        tier: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> TenantPage:
        call = calls.list_tenants(status=status, tier=tier, limit=limit, offset=offset)
        return await self._send(call)

    async def iter_tenants(
        self, *, status: str | None = None, tier: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Tenant]:
        offset = 0
        while True:
            page = await self.list_tenants(status=status, tier=tier, limit=page_size, offset=offset)
            for item in page.items:
                yield item
            offset += len(page.items)
            if len(page.items) < page_size or (page.total is not None and offset >= page.total):
                return

    async def create_tenant(
        self, tenant_id: str, *, name: str | None = None, tier: str | None = None
    ) -> Tenant:
        return await self._send(calls.create_tenant(tenant_id, name=name, tier=tier))

    async def update_tenant(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        tier: str | None = None,
        status: str | None = None,
    ) -> Tenant:
        call = calls.update_tenant(tenant_id, name=name, tier=tier, status=status)
        return await self._send(call)

    async def suspend_tenant(self, tenant_id: str) -> Tenant:
        return await self._send(calls.suspend_tenant(tenant_id))

    async def activate_tenant(self, tenant_id: str) -> Tenant:
        return await self._send(calls.activate_tenant(tenant_id))

    async def delete_tenant(self, tenant_id: str, *, confirm: str) -> uuid.UUID | None:
        """Delete a tenant and its documents; `confirm` must repeat the tenant id. The id of
        the deletion's receipt (`tenant_receipt()`)."""
        return await self._send(calls.delete_tenant(tenant_id, confirm=confirm))

    async def tenant_receipt(
        self, tenant_id: str, receipt_id: uuid.UUID | str
    ) -> dict[str, JsonValue]:
        """One of a tenant's receipts as signed, its deletion's included (kept after it)."""
        return await self._send(calls.tenant_receipt(tenant_id, receipt_id))

    async def tiers(self) -> TierList:
        return await self._send(calls.tiers())

    async def tenant_stats(self, tenant_id: str) -> TenantStats:
        return await self._send(calls.tenant_stats(tenant_id))

    async def audit(
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
        return await self._send(call)
