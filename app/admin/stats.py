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

from app.db.indexes import dedicated_index_name
from app.db.models import Chunk, Collection, Document
from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.ingest.catalog import TenantStats, tenant_stats
from app.jobs.store import JobCounts, job_counts
from app.tenants import get_tenant
from app.usage import TrafficWindows, traffic

_TABLES = {"collections": Collection, "documents": Document, "chunks": Chunk}
_SIZES = text(
    "select c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid),"
    " greatest(coalesce(s.n_live_tup, 0), 0)"
    " from pg_class c left join pg_stat_all_tables s on s.relid = c.oid"
    " where c.relname = any(:names) and c.relnamespace = 'public'::regnamespace"
)
_INDEX_SIZE = text("select coalesce(pg_relation_size(to_regclass(:name)), 0)")


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
class Statistics:
    content: TenantStats
    storage: Storage
    traffic: TrafficWindows
    jobs: JobCounts


async def statistics(sessions: SessionMaker, tenant_id: str) -> Statistics:
    async with registry_transaction(sessions) as session:
        await get_tenant(session, tenant_id)
        windows = await traffic(session, tenant_id)
        sizes = (await session.execute(_SIZES, {"names": list(_TABLES)})).all()
        dedicated = await session.scalar(_INDEX_SIZE, {"name": dedicated_index_name(tenant_id)})
    async with tenant_transaction(sessions, tenant_id) as session:
        content = await tenant_stats(session)
        jobs = await job_counts(session)
        rows = {name: await _count(session, name) for name in _TABLES}
    table_bytes = index_bytes = 0.0
    for name, table_size, index_size, live in sizes:
        share = rows[name] / max(int(live), rows[name], 1)
        table_bytes += share * table_size
        index_bytes += share * index_size
    storage = Storage(round(table_bytes), round(index_bytes), int(dedicated or 0), rows)
    return Statistics(content=content, storage=storage, traffic=windows, jobs=jobs)


async def _count(session: AsyncSession, table: str) -> int:
    return await session.scalar(select(func.count()).select_from(_TABLES[table])) or 0
