"""One turn of a job: up to `turn_documents` documents through the ingestion pipeline
(turn.py), each all-or-nothing, its result written as it comes out; then the job re-queues
itself behind whoever came meanwhile, or finishes. A cancel or a suspended tenant stops it
after the documents in progress. A turn run twice (its worker died) is harmless: a document
is removed from the inputs only with its result, and ingest is idempotent."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text

from app.db.tenancy import SessionMaker, reading_as, tenant_transaction
from app.jobs.callbacks import announce_end
from app.jobs.store import FINAL, queue_turn
from app.jobs.syncing import finish_sync
from app.jobs.turn import JobServices, TransientFailure, ingest_turn
from app.permissions import Readers
from app.settings import Settings

SUSPENDED = "stopped: the tenant was suspended"

__all__ = ["SUSPENDED", "JobServices", "TransientFailure", "fail_job", "run_turn"]


async def run_turn(services: JobServices, *, job_id: uuid.UUID, tenant_id: str) -> None:
    sessions = services.sessions
    async with tenant_transaction(sessions, tenant_id) as session:
        row = (
            await session.execute(
                text(
                    "select status, readers from ingest_jobs"
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
    readers = Readers.from_json(row.readers)
    await ingest_turn(services, job_id=job_id, tenant_id=tenant_id, readers=readers)
    # as the submitter: a sync job's end sees (and deletes) what its submitter may see
    async with tenant_transaction(reading_as(sessions, readers), tenant_id) as session:
        if await _finished(session, services.settings, job_id=job_id, tenant_id=tenant_id):
            return
        others = await session.scalar(
            text(
                "select count(*) from ingest_jobs where tenant_id = :tenant"
                " and status in ('queued', 'running') and id <> :id"
            ),
            {"tenant": tenant_id, "id": job_id},
        )
        await queue_turn(session, tenant_id=tenant_id, job_id=job_id, others=int(others or 0))


async def _finished(session: Any, settings: Settings, *, job_id: uuid.UUID, tenant_id: str) -> bool:
    """Finish the job when it was cancelled, its tenant suspended, or no input is left (a
    sync job's sync ends with it: app/jobs/syncing.py)."""
    cancel, tenant_status, left, syncing = (
        await session.execute(
            text(
                "select cancel_requested, (select status from tenants where id = :tenant),"
                " exists (select from ingest_job_inputs where tenant_id = :tenant"
                " and job_id = :id), sync is not null"
                " from ingest_jobs where tenant_id = :tenant and id = :id"
            ),
            {"tenant": tenant_id, "id": job_id},
        )
    ).one()
    # A suspended tenant's job stops as if cancelled (activating the tenant does not resume it)
    suspended = tenant_status != "active"
    if left and not cancel and not suspended:
        return False
    cancelled = bool(cancel) or suspended
    reason = SUSPENDED if suspended and not cancel else None
    refused = None
    if syncing and not cancelled:
        refused = await finish_sync(session, settings, tenant_id=tenant_id, job_id=job_id)
    await _finish(
        session,
        job_id,
        tenant_id=tenant_id,
        cancelled=cancelled,
        error=refused or reason,
        failed=refused is not None,
    )
    return True


async def _finish(
    session: Any,
    job_id: uuid.UUID,
    *,
    tenant_id: str,
    cancelled: bool,
    error: str | None = None,
    failed: bool = False,
) -> None:
    await session.execute(
        text(
            "update ingest_jobs set status = case when :cancelled then 'cancelled'"
            " when :failed then 'failed'"
            " when documents_failed = 0 then 'succeeded' when documents_done = 0 then 'failed'"
            " else 'partial' end, error = coalesce(:error, error), bytes_pending = 0,"
            " finished_at = now(), updated_at = now() where tenant_id = :tenant and id = :id"
        ),
        {
            "cancelled": cancelled,
            "failed": failed,
            "error": error,
            "tenant": tenant_id,
            "id": job_id,
        },
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
