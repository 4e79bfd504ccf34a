"""Job callbacks: a job submitted with a `callback_url` announces its end there (docs/JOBS.md,
"Callbacks"). The URL is checked at submission; when the job ends, the transaction that ends
it marks the callback `pending` and queues its first delivery attempt, so the two commit
together. Each attempt is one queue entry (job id and tenant only); a failed one queues the
next after a growing delay, until the retry window has passed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Self

import anyio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Unprocessable
from app.settings import Settings
from app.webhooks import Target, TargetRefused, check_target, resolve

CALLBACK_QUEUE = "callbacks"
CALLBACK_TASK = "rag.deliver_callback"
FIELD = "callback_url"


@dataclass(frozen=True, slots=True)
class CallbackPolicy:
    """What deliveries need from the settings."""

    secret: str | None
    allowed_hosts: Sequence[str]
    timeout_seconds: float
    retry_base_seconds: float
    retry_max_delay_seconds: float
    retry_window_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> Self:
        secret = settings.webhook_secret
        return cls(
            secret=None if secret is None else secret.get_secret_value(),
            allowed_hosts=tuple(settings.webhook_allowed_hosts),
            timeout_seconds=settings.webhook_timeout_seconds,
            retry_base_seconds=settings.webhook_retry_base_seconds,
            retry_max_delay_seconds=settings.webhook_retry_max_delay_seconds,
            retry_window_seconds=settings.webhook_retry_window_seconds,
        )

    def target(self, url: str) -> Target:
        return check_target(url, allowed_hosts=self.allowed_hosts)

    def next_attempt(self, *, attempts: int, now: datetime, ended: datetime) -> datetime | None:
        """When to try again after `attempts` failed ones: the delay doubles from the base up
        to the longest; the last attempt falls at the window's end; None once it has passed."""
        closes = ended + timedelta(seconds=self.retry_window_seconds)
        if now >= closes:
            return None
        delay = self.retry_base_seconds * 2 ** min(attempts - 1, 40)
        return min(now + timedelta(seconds=min(delay, self.retry_max_delay_seconds)), closes)


async def check_callback_url(url: str, policy: CallbackPolicy) -> str:
    """The URL a job may call back, checked now (its addresses too); 422 naming the field."""
    if policy.secret is None:
        _refuse(
            "callbacks are not enabled on this service: its operator sets RAG_WEBHOOK_SECRET "
            "(a Standard Webhooks `whsec_` secret) to sign them"
        )
    try:
        with anyio.fail_after(policy.timeout_seconds):
            await resolve(policy.target(url))
    except TargetRefused as error:
        _refuse(str(error))
    except TimeoutError:
        _refuse(f"its host did not resolve within {policy.timeout_seconds:g} s")
    return url


def _refuse(message: str) -> None:
    raise Unprocessable(
        f"{FIELD}: {message}", extra={"errors": [{"field": FIELD, "message": message}]}
    )


async def announce_end(session: AsyncSession, *, tenant_id: str, job_id: uuid.UUID) -> None:
    """In the transaction that ends the job: its callback (if any) becomes pending and its
    first attempt is queued, now."""
    marked = await session.execute(
        text(
            "update ingest_jobs set callback_status = 'pending', callback_next_at = now()"
            " where tenant_id = :tenant and id = :id and callback_status = 'waiting'"
            " returning id"
        ),
        {"tenant": tenant_id, "id": job_id},
    )
    if marked.one_or_none() is not None:
        await queue_attempt(session, tenant_id=tenant_id, job_id=job_id, attempt=1, at=None)


async def queue_attempt(
    session: AsyncSession,
    *,
    tenant_id: str,
    job_id: uuid.UUID,
    attempt: int,
    at: datetime | None,
) -> None:
    """Queue delivery attempt number `attempt`, at `at` (None: now), in the caller's
    transaction; the lock keeps two attempts of one callback from running at once."""
    args = json.dumps({"job_id": str(job_id), "tenant_id": tenant_id, "attempt": attempt})
    await session.execute(
        text(
            "select procrastinate_defer_jobs_v1(array[row(:queue, :task, 1, :lock, null,"
            " cast(:args as jsonb), cast(:at as timestamptz))::procrastinate_job_to_defer_v1])"
        ),
        {
            "queue": CALLBACK_QUEUE,
            "task": CALLBACK_TASK,
            "lock": f"callback:{job_id}",
            "args": args,
            "at": at,
        },
    )
