"""A collection sync run as a background job (POST …/collections/{name}/sync with
`"background": true`; docs/SYNC.md). The job ingests the sync's full entries turn by turn as
any job does (each document all-or-nothing, progress and cancel as usual); when none is left,
the transaction that ends the job also ends the sync, under the collection's sync lock:
the plan made again from what is stored now (the full entries named as ingested, the
references compared by version), the `max_deletions` guard checked again, the deletions, the
receipt, and the outcome on the job. A cancelled job, or one whose tenant was suspended,
deletes nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Conflict
from app.ingest.entries import Ingested, Reference
from app.ingest.sync import check_deletions, erase, lock_collection, plan, stored_documents
from app.ingest.sync_receipt import sync_changes
from app.receipts import record
from app.settings import Settings

REFUSED = "nothing was deleted; the documents sent in full were written"


def request_of(
    collection: str,
    *,
    full: list[tuple[str, tuple[str, ...]]],
    references: list[tuple[str, str]],
    max_deletions: int | float | None,
) -> dict[str, Any]:
    """What a sync job keeps of its request: `full` the full entries in input order (external
    id, access list), `references` (external id, version)."""
    return {
        "collection": collection,
        "request": {
            "full": [[external_id, list(access)] for external_id, access in full],
            "references": [list(reference) for reference in references],
            "max_deletions": max_deletions,
        },
    }


async def finish_sync(
    session: AsyncSession, settings: Settings, *, tenant_id: str, job_id: uuid.UUID
) -> str | None:
    """End the job's sync in the session's transaction (reading as its submitter); None, or
    the error that refused its deletions."""
    spec, results = (
        await session.execute(
            text("select sync, results from ingest_jobs where tenant_id = :tenant and id = :id"),
            {"tenant": tenant_id, "id": job_id},
        )
    ).one()
    collection: str = spec["collection"]
    request = spec["request"]
    by_position = {int(r["position"]): r for r in results}
    entries: list[Ingested | Reference] = []
    added, updated, unchanged, failed, written = [], [], [], [], []
    for position, (external_id, access) in enumerate(request["full"]):
        result = by_position.get(position)
        if result is None or result["status"] != "succeeded":
            entries.append(Ingested(external_id, None))  # what was stored stays
            detail = result["error"] if result else "not ingested"
            status = result.get("error_status", 422) if result else 422
            failed.append({"external_id": external_id, "status": status, "detail": detail})
            continue
        entries.append(Ingested(external_id, tuple(access)))
        if result["created"]:
            added.append(external_id)
        elif result["changed"]:
            updated.append(external_id)
        else:
            unchanged.append(external_id)
        if result["changed"]:
            written.append(uuid.UUID(result["document_id"]))
    entries.extend(Reference(e, version) for e, version in request["references"])

    await lock_collection(session, tenant_id, collection)
    stored = await stored_documents(session, collection)
    todo = plan(entries, stored)
    try:
        check_deletions(request["max_deletions"], len(todo.delete), len(stored), then=REFUSED)
    except Conflict as refused:
        return refused.detail
    erased = await erase(session, [d.document_id for d in todo.delete])
    missing = [reference.external_id for reference in todo.missing]
    kept = sorted({*unchanged, *(d.external_id for d in todo.unchanged)})
    receipt = await record(
        session,
        settings,
        kind="sync",
        collection=collection,
        changes=await sync_changes(
            session,
            added=added,
            updated=updated,
            unchanged=len(kept),
            missing=missing,
            failed=failed,
            written=written,
            deleted=todo.delete,
            erased=erased,
        ),
    )
    outcome = {
        "added": added,
        "updated": updated,
        "unchanged": kept,
        "deleted": [d.external_id for d in todo.delete],
        "missing": missing,
        "failed": failed,
    }
    await session.execute(
        text(
            "update ingest_jobs set sync = sync || cast(:outcome as jsonb), receipt_id = :receipt"
            " where tenant_id = :tenant and id = :id"
        ),
        {
            "outcome": json.dumps({"outcome": outcome}),
            "receipt": receipt.id,
            "tenant": tenant_id,
            "id": job_id,
        },
    )
    return None
