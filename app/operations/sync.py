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

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.errors import AppError, PayloadTooLarge, Unprocessable
from app.ingest.catalog import DocumentChange, get_document, update_document
from app.ingest.entries import Reference
from app.ingest.inputs import DocumentInput
from app.ingest.steps import prepare_slice
from app.ingest.sync import Plan, erase, lock_collection, plan, stored_documents
from app.ingest.sync_receipt import deleted_entry, erased_entry, stored_of, sync_changes
from app.inputs.sync import SyncInput
from app.jobs import submit_job
from app.jobs.store import input_of
from app.jobs.syncing import request_of
from app.operations.ingest import waited_for
from app.operations.jobs import limits_of
from app.receipts import ReceiptSummary, SignedReceipt, list_receipts, read, record
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
        await lock_collection(guard, tenant_id, asked.collection)
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
            changes=await sync_changes(
                guard,
                added=done.added,
                updated=done.updated,
                unchanged=len(done.unchanged),
                missing=done.missing,
                failed=[
                    {"external_id": e, "status": error.status, "detail": error.detail}
                    for e, error in done.failed
                ],
                written=written,
                deleted=todo.delete,
                erased=erased,
            ),
        )
    resources.usage.record(tenant_id, "ingests", len(done.added) + len(done.updated))
    return done


@dataclass(frozen=True, slots=True)
class SyncJob:
    """A sync accepted to run as a background job."""

    job_id: uuid.UUID
    documents: int  # full entries, ingested by the job
    references: int
    bytes: int


async def submit(
    resources: Resources,
    sessions: SessionMaker,
    tenant_id: str,
    asked: SyncInput,
    *,
    submitter: str,
    callback_url: str | None = None,
) -> SyncJob:
    """Queue `asked` as a background job (app/jobs/syncing.py): its `max_deletions` checked
    now against what is stored (409, nothing queued) and again when the job ends."""
    if asked.dry_run:
        raise Unprocessable("a dry run answers at once: send it without `background`")
    full = [e for e in asked.entries if isinstance(e, DocumentInput)]
    references = [e for e in asked.entries if isinstance(e, Reference)]
    settings = resources.settings
    if len(full) > settings.job_max_documents:
        raise PayloadTooLarge(
            f"a sync job holds at most {settings.job_max_documents} full documents "
            "(RAG_JOB_MAX_DOCUMENTS); send the others as references after ingesting them"
        )
    inputs = [input_of(document) for document in full]
    async with tenant_transaction(sessions, tenant_id) as session:
        stored = await stored_documents(session, asked.collection)
        todo = plan(asked.entries, stored)
        asked.check_deletions(len(todo.delete), len(stored))
        job_id = await submit_job(
            session,
            tenant_id=tenant_id,
            inputs=inputs,
            limits=limits_of(settings),
            submitter=submitter,
            readers=readers_of_sessions(sessions),
            callback_url=callback_url,
            sync=request_of(
                asked.collection,
                full=[(d.external_id or "", d.access) for d in full],
                references=[(r.external_id, r.version) for r in references],
                max_deletions=asked.max_deletions,
            ),
        )
    size = sum(len(item.content) for item in inputs)
    return SyncJob(job_id, len(full), len(references), size)


async def delete_document(
    settings: Settings, sessions: SessionMaker, tenant_id: str, document_id: uuid.UUID
) -> SignedReceipt:
    """Delete a document the caller may see (404 otherwise) and its chunks; its receipt."""
    async with tenant_transaction(sessions, tenant_id) as session:
        found = await get_document(session, document_id)
        gone = stored_of(found.document)
        erased = await erase(session, [document_id])
        return await record(
            session,
            settings,
            kind="delete",
            collection=found.collection,
            changes={"deleted": [deleted_entry(gone)], "erased": erased_entry(erased)},
        )


async def receipts(
    sessions: SessionMaker,
    tenant_id: str,
    *,
    collection: str | None,
    kind: str | None,
    limit: int,
    offset: int,
) -> tuple[list[ReceiptSummary], int]:
    """A page of the tenant's receipts, newest first, and how many there are."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await list_receipts(
            session, collection=collection, kind=kind, limit=limit, offset=offset
        )


async def receipt(sessions: SessionMaker, tenant_id: str, receipt_id: uuid.UUID) -> SignedReceipt:
    """The tenant's receipt as signed; 404 when it has none of that id."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await read(session, receipt_id)


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
