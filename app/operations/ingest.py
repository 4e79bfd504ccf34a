"""Ingesting documents as the HTTP API asks for it (one document, a batch, an upload), and
changing one: the domain's ingestion (app/ingest) with the service's parser, chunker and
embedder, the batch limit, and the bookkeeping: each document ingested is one `ingests` in the
tenant's usage, whatever door it came through."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.errors import AppError, PayloadTooLarge
from app.ingest.catalog import DocumentChange, DocumentSummary, update_document
from app.ingest.documents import ingest_documents, synchronous
from app.ingest.inputs import DocumentInput
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


async def update(
    sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID, change: DocumentChange
) -> DocumentSummary:
    """Change a document's metadata and/or access list without re-embedding; a document the
    caller cannot see is not found."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await update_document(
            session, document_id, change, readers=readers_of_sessions(sessions)
        )
