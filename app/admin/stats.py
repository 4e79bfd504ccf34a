"""A tenant's statistics: content counts, storage, traffic.

Storage is the tenant's share of the shared tables: for each tenant-owned table, the table
(heap + TOAST) and index sizes times the tenant's fraction of its rows (live rows from the
statistics collector, so an estimate between autovacuum runs), plus the whole size of the
tenant's dedicated HNSW index when `rag index` built one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.admin.tenants import TenantCounts
from app.db.indexes import dedicated_index_name
from app.db.models import Chunk, Collection, Document
from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.ingest.catalog import TenantStats, tenant_stats
from app.jobs.store import JobCounts, job_counts
from app.tenants import get_tenant
from app.usage import HourTraffic, TrafficWindows, hourly_traffic, traffic

_TABLES = {"collections": Collection, "documents": Document, "chunks": Chunk}
_SIZES = text(
    "select c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid),"
    " greatest(coalesce(s.n_live_tup, 0), 0)"
    " from pg_class c left join pg_stat_all_tables s on s.relid = c.oid"
    " where c.relname = any(:names) and c.relnamespace = 'public'::regnamespace"
)
_INDEX_SIZES = text(
    "select name, coalesce(pg_relation_size(to_regclass(name)), 0)"
    " from unnest(cast(:names as text[])) as name"
)


@dataclass(frozen=True, slots=True)
class Storage:
    table_bytes: int
    index_bytes: int
    dedicated_index_bytes: int
    rows: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return self.table_bytes + self.index_bytes + self.dedicated_index_bytes


@dataclass(frozen=True, slots=True)
class TableSize:
    table_bytes: int
    index_bytes: int
    live_rows: int


@dataclass(frozen=True, slots=True)
class Statistics:
    content: TenantStats
    storage: Storage
    traffic: TrafficWindows
    hourly: list[HourTraffic]
    jobs: JobCounts


async def statistics(sessions: SessionMaker, tenant_id: str) -> Statistics:
    async with registry_transaction(sessions) as session:
        await get_tenant(session, tenant_id)
        sizes = await table_sizes(session)
        dedicated = await dedicated_index_sizes(session, [tenant_id])
    async with tenant_transaction(sessions, tenant_id) as session:
        windows = await traffic(session, tenant_id)  # its own counters (row-level security)
        hours = await hourly_traffic(session, tenant_id)
        content = await tenant_stats(session)
        jobs = await job_counts(session)
        rows = {name: await _count(session, name) for name in _TABLES}
    storage = storage_of(sizes, rows, dedicated=dedicated[tenant_id])
    return Statistics(content=content, storage=storage, traffic=windows, hourly=hours, jobs=jobs)


async def table_sizes(session: AsyncSession) -> dict[str, TableSize]:
    """The tenant-owned tables' sizes and live rows, all tenants together."""
    found = await session.execute(_SIZES, {"names": list(_TABLES)})
    return {name: TableSize(int(t), int(i), int(live)) for name, t, i, live in found.all()}


async def dedicated_index_sizes(session: AsyncSession, tenant_ids: list[str]) -> dict[str, int]:
    """The size of each tenant's own HNSW index (0 without one)."""
    names = {dedicated_index_name(tenant_id): tenant_id for tenant_id in tenant_ids}
    found = await session.execute(_INDEX_SIZES, {"names": list(names)})
    return {names[name]: int(size) for name, size in found.all()}


def storage_of(sizes: dict[str, TableSize], rows: dict[str, int], *, dedicated: int) -> Storage:
    """A tenant's share of each table: its fraction of the live rows times the sizes."""
    table_bytes = index_bytes = 0.0
    for name, size in sizes.items():
        share = rows.get(name, 0) / max(size.live_rows, rows.get(name, 0), 1)
        table_bytes += share * size.table_bytes
        index_bytes += share * size.index_bytes
    return Storage(round(table_bytes), round(index_bytes), dedicated, rows)


async def storage_by_tenant(
    session: AsyncSession, counts: dict[str, TenantCounts]
) -> dict[str, Storage]:
    """Each tenant's storage from its counts (`counts_of`): one size query for them all."""
    sizes = await table_sizes(session)
    dedicated = await dedicated_index_sizes(session, list(counts))
    return {
        tenant_id: storage_of(
            sizes,
            {"collections": c.collections, "documents": c.documents, "chunks": c.chunks},
            dedicated=dedicated[tenant_id],
        )
        for tenant_id, c in counts.items()
    }


async def _count(session: AsyncSession, table: str) -> int:
    return await session.scalar(select(func.count()).select_from(_TABLES[table])) or 0
