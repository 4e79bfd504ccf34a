"""Collection sync, and a document's deletion, each with its receipt (docs/SYNC.md).

A sync runs under a lock of its (tenant, collection), held by an open transaction for the
whole sync, so two syncs of one collection run one after the other. Its steps, each safe to
stop after (a retry computes the plan again from what is stored and finishes the job):
1. plan, under the lock: the guards (`max_deletions`) refuse before anything changes;
2. a stored document that a full entry names under another access list takes the entry's
   list (as PATCH would: same id, nothing re-embedded), its other copies are deleted with the
   rest in step 4;
3. the full entries are ingested, each document all-or-nothing (app/ingest/documents.py);
4. the deletions and the receipt, in the lock's transaction: both or neither.
A dry run stops after the plan, telling what each full entry would become (its content hash
compared, nothing embedded).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Document
from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.errors import AppError
from app.ingest.catalog import DocumentChange, get_document, update_document
from app.ingest.inputs import DocumentInput
from app.ingest.steps import prepare_slice
from app.ingest.sync import Erased, Plan, Stored, erase, plan, stored_documents
from app.inputs.sync import SyncInput
from app.operations.ingest import waited_for
from app.receipts import SignedReceipt, read, record
from app.resources import Resources
from app.settings import Settings


@dataclass(slots=True)
class Synced:
    """What a sync did (or, dry, would do): external ids under each outcome."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[tuple[str, AppError]] = field(default_factory=list)
    dry_run: bool = False
    receipt: SignedReceipt | None = None


async def sync(
    resources: Resources, sessions: SessionMaker, tenant_id: str, asked: SyncInput
) -> Synced:
    """Make `asked.collection` hold `asked.entries`, as the caller (`sessions`) sees it."""
    async with tenant_transaction(sessions, tenant_id) as guard:
        await _lock(guard, tenant_id, asked.collection)
        stored = await stored_documents(guard, asked.collection)
        todo = plan(asked.entries, stored)
        asked.check_deletions(len(todo.delete), len(stored))
        done = Synced(
            unchanged=sorted({d.external_id for d in todo.unchanged}),
            missing=[reference.external_id for reference in todo.missing],
            dry_run=asked.dry_run,
        )
        if asked.dry_run:
            await _predict(resources, sessions, todo, done)
            done.deleted = [d.external_id for d in todo.delete]
            return done
        realigned = await _realign(sessions, tenant_id, todo)
        written = await _ingest(resources, sessions, tenant_id, todo.ingest, realigned, done)
        erased = await erase(guard, [d.document_id for d in todo.delete])
        done.deleted = [d.external_id for d in todo.delete]
        done.receipt = await record(
            guard,
            resources.settings,
            kind="sync",
            collection=asked.collection,
            changes=await _changes(guard, done, written, todo.delete, erased),
        )
    resources.usage.record(tenant_id, "ingests", len(done.added) + len(done.updated))
    return done


async def delete_document(
    settings: Settings, sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID
) -> SignedReceipt:
    """Delete a document the caller may see (404 otherwise) and its chunks; its receipt."""
    async with tenant_transaction(sessions, tenant_id) as session:
        found = await get_document(session, document_id)
        gone = _stored(found.document)
        erased = await erase(session, [document_id])
        return await record(
            session,
            settings,
            kind="delete",
            collection=found.collection,
            changes={"deleted": [_deleted(gone)], "erased": _erased(erased)},
        )


async def receipt(sessions: SessionMaker, tenant_id: str, receipt_id: uuid.UUID) -> SignedReceipt:
    """The tenant's receipt as signed; 404 when it has none of that id."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await read(session, receipt_id)


async def _lock(session: AsyncSession, tenant_id: str, collection: str) -> None:
    key = func.hashtextextended(f"rag-sync/{tenant_id}/{collection}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))


async def _predict(resources: Resources, sessions: SessionMaker, todo: Plan, done: Synced) -> None:
    """For a dry run: each full entry added, updated or unchanged, by its content hash."""
    prepared = await asyncio.to_thread(
        prepare_slice,
        todo.ingest,
        start=0,
        chunker=resources.chunker,
        embedder=resources.embedder,
        parser=resources.parser,
        readers=readers_of_sessions(sessions),
    )
    for document, ready in zip(todo.ingest, prepared, strict=True):
        external_id = document.external_id or ""
        have = todo.stored.get(external_id, [])
        if isinstance(ready, AppError):
            done.failed.append((external_id, ready))
        elif not have:
            done.added.append(external_id)
        elif any(
            d.content_hash == ready.content_hash and d.access == document.access for d in have
        ):
            done.unchanged.append(external_id)
        else:
            done.updated.append(external_id)
    done.unchanged.sort()


async def _realign(sessions: SessionMaker, tenant_id: str, todo: Plan) -> set[str]:
    """Step 2: stored documents named under another access list take the entry's."""
    moved: set[str] = set()
    for document in todo.ingest:
        external_id = document.external_id or ""
        have = todo.stored.get(external_id, [])
        if not have or any(d.access == document.access for d in have):
            continue
        keep = have[0]
        todo.delete.remove(keep)
        async with tenant_transaction(sessions, tenant_id) as session:
            change = DocumentChange(access=document.access)
            await update_document(
                session, keep.document_id, change, readers=readers_of_sessions(sessions)
            )
        moved.add(external_id)
    return moved


async def _ingest(
    resources: Resources,
    sessions: SessionMaker,
    tenant_id: str,
    documents: Sequence[DocumentInput],
    realigned: set[str],
    done: Synced,
) -> list[uuid.UUID]:
    """Step 3; the ids of the documents written."""
    outcomes = await waited_for(resources, sessions, tenant_id, documents)
    written = []
    for document, outcome in zip(documents, outcomes, strict=True):
        external_id = document.external_id or ""
        if isinstance(outcome, AppError):
            done.failed.append((external_id, outcome))
        elif outcome.created and external_id not in realigned:
            done.added.append(external_id)
        elif outcome.changed or external_id in realigned:
            done.updated.append(external_id)
        else:
            done.unchanged.append(external_id)
        if not isinstance(outcome, AppError) and (outcome.changed or external_id in realigned):
            written.append(outcome.document_id)
    done.unchanged.sort()
    return written


async def _changes(
    session: AsyncSession,
    done: Synced,
    written: list[uuid.UUID],
    deleted: list[Stored],
    erased: Erased,
) -> dict[str, Any]:
    """A sync receipt's body: the documents written and deleted with their content hashes."""
    rows = await session.execute(
        select(Document.id, Document.external_id, Document.content_hash, Document.version).where(
            Document.id.in_(written)
        )
    )
    now = {external_id: (i, h, v) for i, external_id, h, v in rows}

    def entry(external_id: str) -> dict[str, Any]:
        document_id, content_hash, version = now[external_id]
        return {
            "external_id": external_id,
            "document_id": str(document_id),
            "content_hash": content_hash,
            "version": version,
        }

    return {
        "added": [entry(e) for e in done.added if e in now],
        "updated": [entry(e) for e in done.updated if e in now],
        "deleted": [_deleted(d) for d in deleted],
        "unchanged": len(done.unchanged),
        "missing": done.missing,
        "failed": [
            {"external_id": e, "status": error.status, "detail": error.detail}
            for e, error in done.failed
        ],
        "erased": _erased(erased),
    }


def _stored(document: Document) -> Stored:
    return Stored(
        document.id,
        document.external_id,
        document.version,
        document.content_hash,
        tuple(document.access),
        document.chunk_count,
    )


def _deleted(document: Stored) -> dict[str, Any]:
    return {
        "external_id": document.external_id,
        "document_id": str(document.document_id),
        "content_hash": document.content_hash,
        "version": document.version,
        "chunks": document.chunks,
    }


def _erased(erased: Erased) -> dict[str, Any]:
    """What the deletion removed and the check that nothing of it is left."""
    return {
        "documents": erased.documents,
        "chunks": erased.chunks,
        "vectors": erased.chunks + erased.documents,  # each chunk's, each document's mean
        "keyword_postings": erased.postings,
        "keyword_statistics": {
            "chunks_before": erased.corpus_chunks_before,
            "chunks_after": erased.corpus_chunks_after,
        },
        "remaining": {"chunks": erased.remaining_chunks, "postings": erased.remaining_postings},
        "gone": erased.remaining_chunks == 0 and erased.remaining_postings == 0,
    }
