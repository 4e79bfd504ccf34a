"""The documents of one turn through the ingestion pipeline, one document a slice: a document
is parsed while the one before it is embedded and the one before that written. Before each
document is embedded the turn reads whether the job was cancelled or its tenant suspended:
either stops it, and the documents already embedded are still written. Each result is
written, and its input removed, as its document comes out, in the order of the inputs."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from app.db.tenancy import SessionMaker, reading_as, tenant_transaction
from app.embeddings import Embedder
from app.errors import AppError
from app.ingest.chunking import Chunker
from app.ingest.documents import Limits, ingest_stream
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import Parser, SourceType
from app.ingest.steps import Outcome
from app.jobs.progress import ProgressEmbedder
from app.permissions import Readers
from app.settings import Settings
from app.usage import count_now

ONE_BY_ONE = Limits(slice_documents=1)  # a cancel stops after the documents in progress


@dataclass(frozen=True, slots=True)
class JobServices:
    sessions: SessionMaker
    embedder: Embedder
    chunker: Chunker
    parser: Parser
    turn_documents: int
    settings: Settings  # a sync job's receipt is signed with its webhook secret


class TransientFailure(Exception):
    """The embedder or the database failed, not the document: the turn runs again later."""


class Refused(AppError):
    """A document refused when the job was submitted (unsupported or empty file)."""

    def __init__(self, detail: str, *, status: int) -> None:
        super().__init__(detail)
        self.refused_status = status


@dataclass(frozen=True, slots=True)
class _Input:
    """An input without its content: what its result row needs."""

    id: uuid.UUID
    position: int
    name: str
    size_bytes: int
    refused: Refused | None
    started: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class _Turn:
    services: JobServices
    job_id: uuid.UUID
    tenant_id: str
    waiting: deque[_Input] = field(default_factory=deque)  # read, result not yet written

    async def run(self, readers: Readers) -> None:
        # Written as whoever submitted the job: its documents' access lists are checked
        # against the submitter's principals, as a synchronous ingest's would be.
        sessions = reading_as(self.services.sessions, readers)
        embedder = ProgressEmbedder(
            self.services.embedder, self.services.sessions, self.tenant_id, self.job_id
        )
        completed = await ingest_stream(
            sessions,
            embedder,
            chunker=self.services.chunker,
            tenant_id=self.tenant_id,
            documents=self._documents(),
            deliver=self._deliver,
            parser=self.services.parser,
            limits=ONE_BY_ONE,
            admit=self._wanted,
        )
        if completed:
            await self._refused_before(None)

    async def _documents(self) -> AsyncIterator[DocumentInput]:
        position = -1
        for _ in range(self.services.turn_documents):
            async with tenant_transaction(self.services.sessions, self.tenant_id) as session:
                row = (
                    await session.execute(
                        text(
                            "select id, position, name, content, is_text, source_type, fields,"
                            " size_bytes from ingest_job_inputs where tenant_id = :tenant"
                            " and job_id = :id and position > :after order by position limit 1"
                        ),
                        {"tenant": self.tenant_id, "id": self.job_id, "after": position},
                    )
                ).one_or_none()
            if row is None:
                return
            position = row.position
            refused = row.fields.get("refused")  # found unreadable at submission
            item = _Input(
                row.id,
                row.position,
                row.name,
                row.size_bytes,
                Refused(refused["detail"], status=refused["status"]) if refused else None,
            )
            self.waiting.append(item)
            if item.refused is None:
                yield _document(row)

    async def _wanted(self) -> bool:
        """Neither cancelled nor suspended. A suspended tenant's job stops as if cancelled: its
        tokens are refused already, and its work must stop too."""
        async with tenant_transaction(self.services.sessions, self.tenant_id) as session:
            cancel, tenant_status = (
                await session.execute(
                    text(
                        "select cancel_requested, (select status from tenants where id = :tenant)"
                        " from ingest_jobs where tenant_id = :tenant and id = :id"
                    ),
                    {"tenant": self.tenant_id, "id": self.job_id},
                )
            ).one()
        return not cancel and tenant_status == "active"

    async def _deliver(self, _index: int, outcome: Outcome) -> None:
        if isinstance(outcome, AppError) and outcome.status >= 500:
            raise TransientFailure(outcome.detail)
        item = await self._refused_before(outcome)
        assert item is not None
        await self._record(item, outcome)

    async def _refused_before(self, outcome: Outcome | None) -> _Input | None:
        """Record the refused inputs read before the next document (all of them when
        `outcome` is None); that document's input, or None."""
        while self.waiting:
            item = self.waiting.popleft()
            if item.refused is None:
                return item
            await self._record(item, item.refused)
        return None

    async def _record(self, item: _Input, outcome: Outcome) -> None:
        result = _result(item, outcome, time.perf_counter() - item.started)
        async with tenant_transaction(self.services.sessions, self.tenant_id) as session:
            await session.execute(
                text(
                    "update ingest_jobs set results = results || cast(:result as jsonb),"
                    " documents_done = documents_done + :ok, documents_failed ="
                    " documents_failed + :bad, chunks_done = chunks_done + :chunks,"
                    " chunks_in_progress = 0, chunks_in_progress_total = 0, bytes_pending ="
                    " greatest(bytes_pending - :size, 0), updated_at = now()"
                    " where tenant_id = :tenant and id = :id"
                ),
                {
                    "result": json.dumps([result]),
                    "ok": int(result["status"] == "succeeded"),
                    "bad": int(result["status"] == "failed"),
                    "chunks": result.get("chunks", 0),
                    "size": item.size_bytes,
                    "tenant": self.tenant_id,
                    "id": self.job_id,
                },
            )
            await session.execute(
                text("delete from ingest_job_inputs where tenant_id = :tenant and id = :id"),
                {"tenant": self.tenant_id, "id": item.id},
            )
            # one `ingests` per document written, with its result: a turn run twice counts once
            await count_now(
                session, self.tenant_id, "ingests", int(result["status"] == "succeeded")
            )


async def ingest_turn(
    services: JobServices, *, job_id: uuid.UUID, tenant_id: str, readers: Readers
) -> None:
    """Up to `turn_documents` of the job's inputs; stops early when the job is cancelled or
    its tenant suspended. TransientFailure when the embedder or the database failed."""
    await _Turn(services, job_id, tenant_id).run(readers)


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
        version=fields.get("version"),
    )


def _result(item: _Input, outcome: Outcome, seconds: float) -> dict[str, Any]:
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
