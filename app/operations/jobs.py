"""Background ingestion jobs (docs/JOBS.md): submit, list, read and cancel, as the HTTP API
asks (the console and `rag ingest --background` go through it)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.jobs import JobInput, JobLimits, JobView, cancel_job, get_job, list_jobs, submit_job
from app.settings import Settings


def limits_of(settings: Settings) -> JobLimits:
    return JobLimits(
        max_queued_jobs=settings.job_max_queued_jobs,
        max_queued_bytes=settings.job_max_queued_bytes,
    )


async def submit(
    settings: Settings,
    sessions: SessionMaker,
    tenant_id: str,
    inputs: Sequence[JobInput],
    *,
    submitter: str,
    callback_url: str | None = None,
) -> uuid.UUID:
    """Queue a job of `inputs` for the tenant, within its limits; the job's id. Its documents
    are written later as the caller (`sessions`' readers) would write them."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await submit_job(
            session,
            tenant_id=tenant_id,
            inputs=inputs,
            limits=limits_of(settings),
            submitter=submitter,
            readers=readers_of_sessions(sessions),
            callback_url=callback_url,
        )


async def jobs(
    sessions: SessionMaker, tenant_id: str, *, status: str | None, limit: int, offset: int
) -> tuple[list[JobView], int]:
    """A page of the jobs the caller may see, newest first, and how many there are."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await list_jobs(session, status=status, limit=limit, offset=offset)


async def job(sessions: SessionMaker, tenant_id: str, job_id: uuid.UUID) -> JobView:
    async with tenant_transaction(sessions, tenant_id) as session:
        return await get_job(session, job_id)


async def cancel(sessions: SessionMaker, tenant_id: str, job_id: uuid.UUID) -> JobView:
    """A queued job never runs; a running one stops after the document in progress."""
    async with tenant_transaction(sessions, tenant_id) as session:
        return await cancel_job(session, job_id)
