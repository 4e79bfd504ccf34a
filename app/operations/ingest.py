"""Ingesting documents as the doors ask for it (one document, a batch, an upload, the command
line's stream of files), and changing one: the domain's ingestion (app/ingest) with the
service's parser, chunker and embedder, the batch limit, and the bookkeeping: each document
ingested is one `ingests` in the tenant's usage, whatever door it came through (the job
worker counts its documents with their results: app/jobs/turn.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.errors import AppError, PayloadTooLarge
from app.ingest.catalog import DocumentChange, DocumentSummary, update_document
from app.ingest.documents import ingest_documents, ingest_stream, synchronous
from app.ingest.inputs import DocumentInput
from app.ingest.steps import Outcome
from app.ingest.versions import IngestResult
from app.resources import Resources


async def ingest(
    resources: Resources, sessions: SessionMaker, tenant_id: str, document: DocumentInput
) -> IngestResult:
    """Ingest one document (its failure raised); the same external id again updates it."""
    [outcome] = await waited_for(resources, sessions, tenant_id, [document])
    if isinstance(outcome, AppError):
        raise outcome
    resources.usage.record(tenant_id, "ingests")
    return outcome


async def ingest_batch(
    resources: Resources,
    sessions: SessionMaker,
    tenant_id: str,
    documents: Sequence[DocumentInput],
) -> list[IngestResult | AppError]:
    """Ingest a batch through the pipeline; one outcome per document, in order."""
    limit = resources.settings.batch_max_documents
    if len(documents) > limit:
        raise PayloadTooLarge(f"a batch holds at most {limit} documents (RAG_BATCH_MAX_DOCUMENTS)")
    outcomes = await waited_for(resources, sessions, tenant_id, documents)
    done = sum(1 for outcome in outcomes if not isinstance(outcome, AppError))
    resources.usage.record(tenant_id, "ingests", done)
    return outcomes


async def waited_for(
    resources: Resources,
    sessions: SessionMaker,
    tenant_id: str,
    documents: Sequence[DocumentInput],
) -> list[IngestResult | AppError]:
    """The documents of one request its caller waits for (an ingest, a batch, a sync's full
    entries), under the synchronous bound on chunks; one outcome per document, in order."""
    return await ingest_documents(
        sessions,
        resources.embedder,
        chunker=resources.chunker,
        tenant_id=tenant_id,
        documents=documents,
        parser=resources.parser,
        limits=synchronous(resources.settings.sync_ingest_max_chunks),
    )


async def stream(
    resources: Resources,
    sessions: SessionMaker,
    tenant_id: str,
    documents: AsyncIterator[DocumentInput],
    deliver: Callable[[int, Outcome], Awaitable[None]],
) -> None:
    """Documents as they are read (the command line's files, however many), each written as
    it comes out and its outcome handed to `deliver` in order. No synchronous bound: the
    caller is the operator, who waits for the whole of it."""

    async def counted(index: int, outcome: Outcome) -> None:
        if not isinstance(outcome, AppError):
            resources.usage.record(tenant_id, "ingests")
        await deliver(index, outcome)

    await ingest_stream(
        sessions,
        resources.embedder,
        chunker=resources.chunker,
        tenant_id=tenant_id,
        documents=documents,
        deliver=counted,
        parser=resources.parser,
    )


async def update(
    sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID, change: DocumentChange
) -> DocumentSummary:
    """Change a document's metadata and/or access list without re-embedding; a document the
    caller cannot see is not found."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await update_document(
            session, document_id, change, readers=readers_of_sessions(sessions)
        )
