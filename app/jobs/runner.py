"""One turn of a job: up to `turn_documents` documents through `ingest_documents`, one at a
time (each all-or-nothing), progress written after each; then the job re-queues itself behind
whoever came meanwhile, or finishes. Before each document the job reads whether it was
cancelled or its tenant suspended: either stops it after the document in progress. A turn
run twice (its worker died) is harmless: a document is removed from the inputs only with its
result, and ingest is idempotent."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text

from app.db.tenancy import SessionMaker, reading_as, tenant_transaction
from app.embeddings import Embedder, WrappedEmbedder
from app.errors import AppError
from app.ingest.chunking import Chunker
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import Parser, SourceType
from app.ingest.versions import IngestResult
from app.jobs.callbacks import announce_end
from app.jobs.store import FINAL, queue_turn
from app.permissions import Readers

PROGRESS_BATCH = 64  # chunks embedded between two progress writes
SUSPENDED = "stopped: the tenant was suspended"


@dataclass(frozen=True, slots=True)
class JobServices:
    sessions: SessionMaker
    embedder: Embedder
    chunker: Chunker
    parser: Parser
    turn_documents: int


class TransientFailure(Exception):
    """The embedder or the database failed, not the document: the turn runs again later."""


async def run_turn(services: JobServices, *, job_id: uuid.UUID, tenant_id: str) -> None:
    sessions = services.sessions
    async with tenant_transaction(sessions, tenant_id) as session:
        row = (
            await session.execute(
                text(
                    "select status from ingest_jobs"
                    " where tenant_id = :tenant and id = :id for update"
                ),
                {"tenant": tenant_id, "id": job_id},
            )
        ).one_or_none()
        if row is None or row.status in FINAL:
            return  # cancelled while queued, or deleted with its tenant
        # least() skips NULL: the first turn's time, kept by the later ones (the same as
        # coalesce(started_at, now()), which Citus refuses in an UPDATE)
        await session.execute(
            text(
                "update ingest_jobs set status = 'running', turns = turns + 1,"
                " started_at = least(started_at, now()), updated_at = now()"
                " where tenant_id = :tenant and id = :id"
            ),
            {"tenant": tenant_id, "id": job_id},
        )
    for _ in range(services.turn_documents):
        if not await _run_next(services, job_id=job_id, tenant_id=tenant_id):
            return
    async with tenant_transaction(sessions, tenant_id) as session:
        others = await session.scalar(
            text(
                "select count(*) from ingest_jobs where tenant_id = :tenant"
                " and status in ('queued', 'running') and id <> :id"
            ),
            {"tenant": tenant_id, "id": job_id},
        )
        await queue_turn(session, tenant_id=tenant_id, job_id=job_id, others=int(others or 0))


async def _run_next(services: JobServices, *, job_id: uuid.UUID, tenant_id: str) -> bool:
    """Ingest the next document; False when the job has finished (or was cancelled)."""
    async with tenant_transaction(services.sessions, tenant_id) as session:
        cancel, readers, tenant_status = (
            await session.execute(
                text(
                    "select cancel_requested, readers,"
                    " (select status from tenants where id = :tenant)"
                    " from ingest_jobs where tenant_id = :tenant and id = :id"
                ),
                {"tenant": tenant_id, "id": job_id},
            )
        ).one()
        # A suspended tenant's job stops as if cancelled: its tokens are refused already,
        # and its work must stop too (activating the tenant does not resume it).
        suspended = tenant_status != "active"
        item = None
        if not cancel and not suspended:
            item = (
                await session.execute(
                    text(
                        "select id, position, name, content, is_text, source_type, fields,"
                        " size_bytes from ingest_job_inputs"
                        " where tenant_id = :tenant and job_id = :id"
                        " order by position limit 1"
                    ),
                    {"tenant": tenant_id, "id": job_id},
                )
            ).one_or_none()
        if item is None:
            reason = SUSPENDED if suspended and not cancel else None
            await _finish(
                session,
                job_id,
                tenant_id=tenant_id,
                cancelled=bool(cancel) or suspended,
                error=reason,
            )
            return False
    # Written as whoever submitted the job: its documents' access lists are checked against
    # the submitter's principals, as a synchronous ingest's would be.
    writer = replace(services, sessions=reading_as(services.sessions, Readers.from_json(readers)))
    result = await _ingest(writer, item, job_id=job_id, tenant_id=tenant_id)
    async with tenant_transaction(services.sessions, tenant_id) as session:
        await session.execute(
            text(
                "update ingest_jobs set results = results || cast(:result as jsonb),"
                " documents_done = documents_done + :ok, documents_failed = documents_failed"
                " + :bad, chunks_done = chunks_done + :chunks, chunks_in_progress = 0,"
                " chunks_in_progress_total = 0, bytes_pending = greatest(bytes_pending - :size,"
                " 0), updated_at = now() where tenant_id = :tenant and id = :id"
            ),
            {
                "result": json.dumps([result]),
                "ok": int(result["status"] == "succeeded"),
                "bad": int(result["status"] == "failed"),
                "chunks": result.get("chunks", 0),
                "size": item.size_bytes,
                "tenant": tenant_id,
                "id": job_id,
            },
        )
        await session.execute(
            text("delete from ingest_job_inputs where tenant_id = :tenant and id = :id"),
            {"tenant": tenant_id, "id": item.id},
        )
    return True


async def _ingest(
    services: JobServices, item: Any, *, job_id: uuid.UUID, tenant_id: str
) -> dict[str, Any]:
    started = time.perf_counter()
    if refused := item.fields.get("refused"):  # found unreadable at submission
        return _result(item, Refused(refused["detail"], status=refused["status"]), 0.0)
    embedder = ProgressEmbedder(services.embedder, services.sessions, tenant_id, job_id)
    [outcome] = await ingest_documents(
        services.sessions,
        embedder,
        chunker=services.chunker,
        tenant_id=tenant_id,
        documents=[_document(item)],
        parser=services.parser,
    )
    if isinstance(outcome, AppError) and outcome.status >= 500:
        raise TransientFailure(outcome.detail)
    return _result(item, outcome, time.perf_counter() - started)


class Refused(AppError):
    """A document refused when the job was submitted (unsupported or empty file)."""

    def __init__(self, detail: str, *, status: int) -> None:
        super().__init__(detail)
        self.refused_status = status


async def _finish(
    session: Any,
    job_id: uuid.UUID,
    *,
    tenant_id: str,
    cancelled: bool,
    error: str | None = None,
) -> None:
    await session.execute(
        text(
            "update ingest_jobs set status = case when :cancelled then 'cancelled'"
            " when documents_failed = 0 then 'succeeded' when documents_done = 0 then 'failed'"
            " else 'partial' end, error = coalesce(:error, error), bytes_pending = 0,"
            " finished_at = now(), updated_at = now() where tenant_id = :tenant and id = :id"
        ),
        {"cancelled": cancelled, "error": error, "tenant": tenant_id, "id": job_id},
    )
    await session.execute(
        text("delete from ingest_job_inputs where tenant_id = :tenant and job_id = :id"),
        {"tenant": tenant_id, "id": job_id},
    )
    await announce_end(session, tenant_id=tenant_id, job_id=job_id)


async def fail_job(
    sessions: SessionMaker, *, job_id: uuid.UUID, tenant_id: str, error: str
) -> None:
    """The job could not run (retries exhausted): failed, inputs removed."""
    async with tenant_transaction(sessions, tenant_id) as session:
        await session.execute(
            text(
                "update ingest_jobs set status = 'failed', error = :error, bytes_pending = 0,"
                " finished_at = now(), updated_at = now()"
                " where tenant_id = :tenant and id = :id and status in ('queued', 'running')"
            ),
            {"error": error, "tenant": tenant_id, "id": job_id},
        )
        await session.execute(
            text("delete from ingest_job_inputs where tenant_id = :tenant and job_id = :id"),
            {"tenant": tenant_id, "id": job_id},
        )
        await announce_end(session, tenant_id=tenant_id, job_id=job_id)


def _document(item: Any) -> DocumentInput:
    fields: dict[str, Any] = item.fields
    content: str | bytes = bytes(item.content)
    if item.is_text:
        content = bytes(item.content).decode()
    return DocumentInput(
        content=content,
        source_type=SourceType(item.source_type),
        title=fields.get("title"),
        external_id=fields.get("external_id"),
        collection=fields["collection"],
        source_url=fields.get("source_url"),
        metadata=fields.get("metadata") or {},
        access=tuple(fields.get("access") or ()),
    )


def _result(item: Any, outcome: IngestResult | AppError, seconds: float) -> dict[str, Any]:
    base: dict[str, Any] = {
        "position": item.position,
        "name": item.name,
        "worker_pid": os.getpid(),
        "seconds": round(seconds, 3),
    }
    if isinstance(outcome, AppError):
        code = outcome.refused_status if isinstance(outcome, Refused) else outcome.status
        return {**base, "status": "failed", "error": outcome.detail, "error_status": code}
    return {
        **base,
        "status": "succeeded",
        "document_id": str(outcome.document_id),
        "external_id": outcome.external_id,
        "collection": outcome.collection,
        "title": outcome.title,
        "chunks": outcome.chunks,
        "embedded": outcome.embedded,
        "unchanged": outcome.unchanged,
        "created": outcome.created,
        "changed": outcome.changed,
        "access": list(outcome.access),
    }


class ProgressEmbedder(WrappedEmbedder):
    """The service's embedder, embedding a document's chunks in slices and writing how many
    are done to the job after each slice (progress inside one large document)."""

    def __init__(
        self, inner: Embedder, sessions: SessionMaker, tenant_id: str, job_id: uuid.UUID
    ) -> None:
        super().__init__(inner)
        self._sessions, self._tenant_id, self._job_id = sessions, tenant_id, job_id

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), PROGRESS_BATCH):
            vectors.extend(await self.inner.embed_documents(texts[start : start + PROGRESS_BATCH]))
            await self._report(len(vectors), len(texts))
        return vectors

    async def _report(self, done: int, total: int) -> None:
        async with tenant_transaction(self._sessions, self._tenant_id) as session:
            await session.execute(
                text(
                    "update ingest_jobs set chunks_in_progress = :done,"
                    " chunks_in_progress_total = :total, updated_at = now()"
                    " where tenant_id = :tenant and id = :id"
                ),
                {"done": done, "total": total, "tenant": self._tenant_id, "id": self._job_id},
            )

    async def aclose(self) -> None:
        return None  # the service's embedder: closed by the lifespan
