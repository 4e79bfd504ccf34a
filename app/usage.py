"""Per-tenant traffic counters: searches, ingests and rate-limit rejections per 5-minute bucket.

Counted in memory and flushed in the background like every count of the service
(app/db/counters.py): `UsageRecorder.write` adds one tenant's counts to `tenant_usage` as one
upsert per bucket, in that tenant's transaction, and drops the tenant's buckets older than
`RETENTION`. The flush also runs before the admin API reads the counters. Several service
instances each flush their own counts; the upsert adds them up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import ColumnElement, case, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.counters import Tally
from app.db.models import TenantUsage

BUCKET = timedelta(minutes=5)
RETENTION = timedelta(days=8)
Kind = Literal["searches", "ingests", "rate_limited"]
_KINDS: tuple[Kind, ...] = ("searches", "ingests", "rate_limited")


def bucket_of(moment: datetime) -> datetime:
    """The start of the 5-minute bucket holding `moment` (UTC)."""
    seconds = BUCKET.total_seconds()
    return datetime.fromtimestamp(moment.timestamp() // seconds * seconds, tz=UTC)


class UsageRecorder(Tally[tuple[datetime, Kind]]):
    """Counts per (tenant, bucket, kind) in memory; `flush` moves them to the database."""

    what = "usage counters"

    def record(self, tenant_id: str, kind: Kind, count: int = 1) -> None:
        self.add(tenant_id, (bucket_of(datetime.now(UTC)), kind), count)

    async def write(
        self, session: AsyncSession, tenant_id: str, counts: dict[tuple[datetime, Kind], int]
    ) -> None:
        await write_counts(session, tenant_id, counts)


async def count_now(session: AsyncSession, tenant_id: str, kind: Kind, count: int = 1) -> None:
    """Add `count` to the tenant's current bucket inside `session`'s transaction: counted if
    and only if that transaction commits (the job worker counts a document's ingest with its
    result)."""
    if count:
        now = {(bucket_of(datetime.now(UTC)), kind): count}
        await write_counts(session, tenant_id, now, prune=False)


async def write_counts(
    session: AsyncSession,
    tenant_id: str,
    counts: dict[tuple[datetime, Kind], int],
    *,
    prune: bool = True,
) -> None:
    """Add one tenant's counts to `tenant_usage`, one upsert per bucket, and (`prune`) drop
    its buckets older than `RETENTION`."""
    rows: dict[datetime, dict[str, int]] = {}
    for (bucket, kind), count in counts.items():
        rows.setdefault(bucket, dict.fromkeys(_KINDS, 0))[kind] += count
    values = [{"tenant_id": tenant_id, "bucket": b, **kinds} for b, kinds in sorted(rows.items())]
    stmt = insert(TenantUsage).values(values)
    excluded = stmt.excluded
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[TenantUsage.tenant_id, TenantUsage.bucket],
            set_={kind: getattr(TenantUsage, kind) + getattr(excluded, kind) for kind in _KINDS},
        )
    )
    if not prune:
        return
    oldest = bucket_of(datetime.now(UTC) - RETENTION)
    await session.execute(
        delete(TenantUsage).where(TenantUsage.tenant_id == tenant_id, TenantUsage.bucket < oldest)
    )


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
