"""One delivery attempt of a job's callback: the job's summary, signed, POSTed to its URL;
then the outcome written on the job and, after a failure, the next attempt queued (or, past
the retry window, the callback given up as `failed`). A URL that can never be sent (stored
before its characters were checked at submission: a CR, LF or space) is given up at its first
attempt, its reason in `last_error`, never retried. A receiver may get a callback more than
once (an attempt whose outcome was lost is made again): it keeps the `webhook-id`s it has
accepted and ignores a second one."""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tenancy import SessionMaker, tenant_transaction
from app.jobs.callbacks import CallbackPolicy, queue_attempt
from app.jobs.store import JobView, get_job_of
from app.observability.metrics import JOB_CALLBACK_ATTEMPTS
from app.webhooks import Attempt, TargetRefused, Unsendable, deliver, signed_headers

_log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 500


async def deliver_callback(
    sessions: SessionMaker,
    policy: CallbackPolicy,
    *,
    job_id: uuid.UUID,
    tenant_id: str,
    attempt: int,
) -> None:
    async with tenant_transaction(sessions, tenant_id) as session:
        job = await get_job_of(session, tenant_id=tenant_id, job_id=job_id)
    if job is None or job.callback_status != "pending" or job.callback_attempts >= attempt:
        return  # delivered, given up, made already (a repeated queue entry) or deleted
    assert job.callback_url is not None
    body = json.dumps(payload(job), separators=(",", ":")).encode()
    outcome, final = await _attempt(policy, job.callback_url, message_id=str(job.id), body=body)
    async with tenant_transaction(sessions, tenant_id) as session:
        later = await _record(session, policy, job, attempt=attempt, outcome=outcome, final=final)
    if outcome.error is None:
        JOB_CALLBACK_ATTEMPTS.labels(outcome="delivered").inc()
        return
    JOB_CALLBACK_ATTEMPTS.labels(outcome="retry" if later else "failed").inc()
    _log.warning(
        "job %s: callback attempt %d failed (%s); %s",
        job_id,
        attempt,
        outcome.error,
        f"next at {later.isoformat()}" if later else "given up",
    )


def payload(job: JobView) -> dict[str, Any]:
    """What a callback says: the job's end and counts (its per-document results are read from
    the job), in the Standard Webhooks payload form `{type, timestamp, data}`."""
    ended = job.finished_at or job.updated_at
    return {
        "type": f"job.{job.status}",
        "timestamp": ended.isoformat(),
        "data": {
            "job_id": str(job.id),
            "status": job.status,
            "error": job.error,
            "progress": {
                "documents_total": job.documents_total,
                "documents_done": job.documents_done,
                "documents_failed": job.documents_failed,
                "chunks_done": job.chunks_done,
                "bytes_total": job.bytes_total,
            },
            "created_at": job.created_at.isoformat(),
            "started_at": None if job.started_at is None else job.started_at.isoformat(),
            "finished_at": ended.isoformat(),
            "sync": _sync(job),
        },
    }


def _sync(job: JobView) -> dict[str, Any] | None:
    """A sync job's collection, counts and receipt (its lists are read from the job)."""
    if job.sync is None:
        return None
    outcome = job.sync.get("outcome")
    return {
        "collection": job.sync["collection"],
        "counts": None if outcome is None else {k: len(v) for k, v in outcome.items()},
        "receipt_id": None if job.receipt_id is None else str(job.receipt_id),
    }


async def _record(
    session: AsyncSession,
    policy: CallbackPolicy,
    job: JobView,
    *,
    attempt: int,
    outcome: Attempt,
    final: bool,
) -> datetime | None:
    """Write how the attempt went; after a failure queue the next one (none when `final`), and
    return its time (None: delivered, or given up)."""
    key = {"tenant": job.tenant_id, "id": job.id, "n": attempt}
    if outcome.error is None:
        await session.execute(
            text(
                "update ingest_jobs set callback_status = 'delivered', callback_attempts = :n,"
                " callback_last_error = null, callback_next_at = null,"
                " callback_delivered_at = now() where tenant_id = :tenant and id = :id"
            ),
            key,
        )
        return None
    now = datetime.now(UTC)
    ended = job.finished_at or now
    later = None if final else policy.next_attempt(attempts=attempt, now=now, ended=ended)
    await session.execute(
        text(
            "update ingest_jobs set callback_status = :status, callback_attempts = :n,"
            " callback_last_error = :error, callback_next_at = :at"
            " where tenant_id = :tenant and id = :id"
        ),
        {
            **key,
            "status": "pending" if later else "failed",
            "error": outcome.error[:MAX_ERROR_CHARS],
            "at": later,
        },
    )
    if later is not None:
        await queue_attempt(
            session, tenant_id=job.tenant_id, job_id=job.id, attempt=attempt + 1, at=later
        )
    return later


async def _attempt(
    policy: CallbackPolicy, url: str, *, message_id: str, body: bytes
) -> tuple[Attempt, bool]:
    """The attempt, and whether no later one could go otherwise (the URL can never be sent)."""
    if policy.secret is None:
        return Attempt(None, "RAG_WEBHOOK_SECRET is not set: callbacks cannot be signed"), False
    try:
        target = policy.target(url)  # the allowed hosts may have changed since submission
    except Unsendable as error:
        return Attempt(None, f"can never be sent: {error}"), True
    except TargetRefused as error:
        return Attempt(None, f"refused: {error}"), False
    headers = signed_headers(
        policy.secret, message_id=message_id, timestamp=int(time.time()), body=body
    )
    attempt = await deliver(
        target,
        body=body,
        headers={**headers, "user-agent": "rag-service-webhooks"},
        timeout_seconds=policy.timeout_seconds,
    )
    return attempt, False
