"""Per-tenant traffic counters: searches, ingests and rate-limit rejections per 5-minute bucket.

Counting must not slow the request it counts, so `UsageRecorder.record` only adds to a dict
in this process; `flush` writes what accumulated to `tenant_usage` as one upsert per
(tenant, bucket), and runs every `RAG_USAGE_FLUSH_SECONDS` from the lifespan, at shutdown, and
before the admin API reads the counters. A flush that fails puts its counts back for the next.
Several service instances each flush their own counts; the upsert adds them up.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import ColumnElement, case, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import TenantUsage
from app.db.tenancy import SessionMaker, ledger_transaction

_log = logging.getLogger(__name__)
BUCKET = timedelta(minutes=5)
RETENTION = timedelta(days=8)
Kind = Literal["searches", "ingests", "rate_limited"]
_KINDS: tuple[Kind, ...] = ("searches", "ingests", "rate_limited")


def bucket_of(moment: datetime) -> datetime:
    """The start of the 5-minute bucket holding `moment` (UTC)."""
    seconds = BUCKET.total_seconds()
    return datetime.fromtimestamp(moment.timestamp() // seconds * seconds, tz=UTC)


class UsageRecorder:
    """Counts in memory; `flush` moves them to the database."""

    def __init__(self) -> None:
        self._pending: Counter[tuple[str, datetime, Kind]] = Counter()
        self._lock = asyncio.Lock()

    def record(self, tenant_id: str, kind: Kind, count: int = 1) -> None:
        self._pending[(tenant_id, bucket_of(datetime.now(UTC)), kind)] += count

    async def flush(self, sessions: SessionMaker) -> None:
        async with self._lock:
            taken, self._pending = self._pending, Counter()
            if not taken:
                return
            try:
                async with ledger_transaction(sessions) as session:
                    await _upsert(session, taken)
            except BaseException:
                self._pending.update(taken)
                raise


async def _upsert(session: AsyncSession, counts: Counter[tuple[str, datetime, Kind]]) -> None:
    rows: dict[tuple[str, datetime], dict[str, int]] = {}
    for (tenant_id, bucket, kind), count in counts.items():
        rows.setdefault((tenant_id, bucket), dict.fromkeys(_KINDS, 0))[kind] += count
    values = [{"tenant_id": t, "bucket": b, **kinds} for (t, b), kinds in sorted(rows.items())]
    stmt = insert(TenantUsage).values(values)
    excluded = stmt.excluded
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[TenantUsage.tenant_id, TenantUsage.bucket],
            set_={kind: getattr(TenantUsage, kind) + getattr(excluded, kind) for kind in _KINDS},
        )
    )
    oldest = bucket_of(datetime.now(UTC) - RETENTION)
    await session.execute(delete(TenantUsage).where(TenantUsage.bucket < oldest))


@asynccontextmanager
async def flushing(
    recorder: UsageRecorder, sessions: SessionMaker, *, every_seconds: float
) -> AsyncIterator[None]:
    """Flush every `every_seconds` while the block runs, and once more at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_seconds)
            try:
                await recorder.flush(sessions)
            except Exception:  # the next round retries; traffic counts must never stop the app
                _log.warning("usage counters not flushed; retrying later", exc_info=True)

    task = asyncio.create_task(loop(), name="usage-flush")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        try:
            await recorder.flush(sessions)
        except Exception:
            _log.warning("usage counters lost at shutdown", exc_info=True)


@dataclass(frozen=True, slots=True)
class Traffic:
    searches: int
    ingests: int
    rate_limited: int


@dataclass(frozen=True, slots=True)
class TrafficWindows:
    last_hour: Traffic
    last_day: Traffic


async def traffic(session: AsyncSession, tenant_id: str) -> TrafficWindows:
    """The tenant's counts in the buckets that started within the last hour and day."""
    now = datetime.now(UTC)
    hour_from, day_from = bucket_of(now - timedelta(hours=1)), bucket_of(now - timedelta(days=1))

    def summed(kind: Kind, since: datetime) -> ColumnElement[int]:
        column = getattr(TenantUsage, kind)
        return func.coalesce(func.sum(case((TenantUsage.bucket > since, column), else_=0)), 0)

    columns = [summed(kind, since) for since in (hour_from, day_from) for kind in _KINDS]
    stmt = select(*columns).where(TenantUsage.tenant_id == tenant_id)
    stmt = stmt.where(TenantUsage.bucket > day_from)
    values = [int(v) for v in (await session.execute(stmt)).one()]
    return TrafficWindows(last_hour=Traffic(*values[:3]), last_day=Traffic(*values[3:]))


@dataclass(frozen=True, slots=True)
class HourTraffic:
    start: datetime  # the hour's first moment (UTC)
    traffic: Traffic


async def hourly_traffic(
    session: AsyncSession, tenant_id: str, *, hours: int = 24
) -> list[HourTraffic]:
    """The tenant's counts per hour, oldest first, ending with the current (partial) hour;
    hours without traffic count zero."""
    last = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    first = last - timedelta(hours=hours - 1)
    hour = func.date_trunc("hour", TenantUsage.bucket, "UTC")
    sums = [func.sum(getattr(TenantUsage, kind)) for kind in _KINDS]
    stmt = select(hour, *sums).where(TenantUsage.tenant_id == tenant_id)
    stmt = stmt.where(TenantUsage.bucket >= first).group_by(hour)
    found = {start.astimezone(UTC): row for start, *row in (await session.execute(stmt)).all()}
    series = []
    for n in range(hours):
        start = first + timedelta(hours=n)
        counts = [int(v) for v in found.get(start, (0, 0, 0))]
        series.append(HourTraffic(start=start, traffic=Traffic(*counts)))
    return series


async def forget_tenant(session: AsyncSession, tenant_id: str) -> None:
    await session.execute(delete(TenantUsage).where(TenantUsage.tenant_id == tenant_id))
