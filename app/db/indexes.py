"""The HNSW indexes on `chunks.embedding`: the shared one, and dedicated ones for large tenants.

The shared index holds every tenant's vectors; a search walks it and drops other tenants' rows
(`hnsw.iterative_scan` keeps it walking until enough of the tenant's rows turned up). That is
cheap when the tenant owns most of the table, and small tenants never use it (the btree on
`tenant_id` answers them exactly). In between it is slow: a tenant with 10% of 100,000 rows
needs ~400 index tuples visited for 40 of its own, 16 ms in the database.

A dedicated index is a partial HNSW index `WHERE tenant_id = '<tenant>'`. The search query
names the tenant as a constant beside RLS (and plans are custom, so the planner sees the
value), so the planner proves the predicate and scans the tenant's own graph with no
filtering: 1.3 ms for that 10% tenant. The cost: the tenant's new chunks are inserted into two
HNSW indexes, and each index is one more relation for the planner to consider.

`rag index` (owner role) gives every tenant with at least `min_chunks` chunks its own index
and drops the indexes of tenants that fell under half of it (so a tenant on the edge does not
flap). Builds and drops are CONCURRENTLY: ingestion and search go on meanwhile. An index
records its tenant in its comment; its name is a hash (tenant ids are free text).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.db.engine import async_url
from app.db.models import Chunk, Tenant
from app.db.settings_sql import Computed, sql_literal
from app.db.tenancy import (
    SessionMaker,
    reading_as,
    registry_transaction,
    tenant_transaction,
)
from app.permissions import EVERY_DOCUMENT

HNSW_OPTIONS = "m = 16, ef_construction = 64"  # the shared and document indexes (migrations)
# A tenant's own graph: 24 neighbours a node on the bottom layer instead of 32 make each step
# of a walk cheaper, and a longer list while building keeps (at 500,000 rows: raises) the
# recall of a given ef_search. At the same recall its walk took 0.85x the time at 50,000 rows
# and 0.48x the P95 at 500,000 (docs/BENCHMARKS.md, "Graph parameters, a binary graph, build
# memory"), for 1.3-1.45x the build time.
DEDICATED_HNSW_OPTIONS = "m = 12, ef_construction = 128"
SHARED_INDEX = "ix_chunks_embedding_hnsw"
SHARED_INDEX_DDL = (
    f"CREATE INDEX IF NOT EXISTS {SHARED_INDEX} ON chunks"
    f" USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_OPTIONS})"
)
DOCUMENT_INDEX = "ix_documents_embedding_hnsw"  # document vectors (app/retrieval/similar.py)
DOCUMENT_INDEX_DDL = (
    f"CREATE INDEX IF NOT EXISTS {DOCUMENT_INDEX} ON documents"
    f" USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_OPTIONS})"
)
DEDICATED_PREFIX = "ix_chunks_hnsw_tenant_"

# pgvector builds a graph in maintenance_work_mem and finishes on disk the part that does not
# fit, 4-5x slower (docs/BENCHMARKS.md, "Graph parameters, a binary graph, build memory"). A
# row of the graph in memory at m 16 is its vector (4 bytes a dimension) and ~720 bytes of
# neighbour lists and bookkeeping: pgvector 0.8.6 reported a 4 MB graph full after 5,611 rows
# of 8 dimensions, 1,863 of 384 and 609 of 1,536 (748, 2,251 and 6,887 bytes a row).
GRAPH_ROW_BYTES = 750  # beyond the vector's 4 bytes a dimension; covers every measured size
BUILD_MEMORY_SPARE = 1.1  # upper layers are drawn at random: a tenth to spare
BUILD_MEMORY_FLOOR_MB = 64  # PostgreSQL's own default


@dataclass(frozen=True, slots=True)
class DedicatedIndex:
    name: str
    tenant_id: str
    valid: bool  # False: a CONCURRENTLY build that failed half-way


@dataclass(frozen=True, slots=True)
class IndexPlan:
    create: list[str]  # tenant ids
    drop: list[DedicatedIndex]
    keep: list[DedicatedIndex]


def dedicated_index_name(tenant_id: str) -> str:
    return DEDICATED_PREFIX + hashlib.sha256(tenant_id.encode()).hexdigest()[:24]


def by_dedicated_index_size(
    tenant_id: str, steps: Sequence[tuple[int, int]], *, largest: int, shared: int
) -> Computed:
    """A number chosen by the server from the size of the tenant's dedicated graph as the
    transaction begins: the value of the first (rows, value) step whose rows exceed the
    tenant's chunks (`bm25_corpus`, exact), else `largest`; `shared` when the tenant has no
    dedicated index (its searches walk the shared index, or the btree when it is small). A
    catalog lookup and, with a dedicated index, one row read by its key, in the message that
    sets the tenant; the lookup is the coordinator's own on Citus (`Computed.when`). The
    chunks are counted from the tenant's own row rather than the index's `reltuples` because
    on Citus the coordinator's index is an empty shell: the row is read from the tenant's
    shard, and the same expression gives the same value on one server and on a cluster."""
    cases = " ".join(f"when b.chunks < {int(rows)} then '{int(value)}'" for rows, value in steps)
    smallest = int(steps[0][1]) if steps else int(largest)
    return Computed(
        f"coalesce((select case {cases} else '{int(largest)}' end"
        f" from bm25_corpus b where b.tenant_id = {sql_literal(tenant_id)}), '{smallest}')",
        when=f"to_regclass('{dedicated_index_name(tenant_id)}') is not null",
        otherwise=str(int(shared)),
    )


async def chunk_counts(sessions: SessionMaker) -> dict[str, int]:
    """Chunks per registered tenant, each counted inside its own tenant transaction (RLS is
    forced, so no role sees every tenant's rows at once)."""
    async with registry_transaction(sessions) as session:
        tenant_ids = list(await session.scalars(select(Tenant.id).order_by(Tenant.id)))
    counts: dict[str, int] = {}
    for tenant_id in tenant_ids:
        async with tenant_transaction(sessions, tenant_id) as session:
            counts[tenant_id] = await session.scalar(select(func.count()).select_from(Chunk)) or 0
    return counts


@asynccontextmanager
async def index_connection(
    owner_url: str, *, maintenance_work_mem: str
) -> AsyncIterator[AsyncConnection]:
    """A connection as the tables' owner in AUTOCOMMIT mode (CREATE/DROP INDEX CONCURRENTLY
    refuse a transaction), with `maintenance_work_mem` for the graph builds."""
    engine = create_async_engine(async_url(owner_url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(
                text("select set_config('maintenance_work_mem', :value, false)"),
                {"value": maintenance_work_mem},
            )
            yield conn
    finally:
        await engine.dispose()


async def dedicated_indexes(conn: AsyncConnection) -> list[DedicatedIndex]:
    rows = await conn.execute(
        text(
            "select c.relname, obj_description(c.oid, 'pg_class'), i.indisvalid"
            " from pg_index i join pg_class c on c.oid = i.indexrelid"
            " where i.indrelid = 'chunks'::regclass and c.relname like :prefix"
            " order by c.relname"
        ),
        {"prefix": DEDICATED_PREFIX + "%"},
    )
    return [DedicatedIndex(name, tenant_id or "", valid) for name, tenant_id, valid in rows]


def plan_indexes(
    counts: dict[str, int], existing: list[DedicatedIndex], *, min_chunks: int
) -> IndexPlan:
    """Tenants at or over `min_chunks` get an index; an index goes when its tenant is under
    half of it (or gone), or when its build failed (it is then built again)."""
    indexed = {index.tenant_id: index for index in existing if index.valid}
    create = [
        tenant_id
        for tenant_id, count in counts.items()
        if count >= min_chunks and tenant_id not in indexed
    ]
    drop = [
        index
        for index in existing
        if not index.valid or counts.get(index.tenant_id, 0) < min_chunks // 2
    ]
    keep = [index for index in existing if index not in drop]
    return IndexPlan(create=create, drop=drop, keep=keep)


def build_memory_mb(rows: int, dimensions: int, *, ceiling_mb: int) -> int:
    """maintenance_work_mem (MB) that holds the graph of `rows` vectors while it is built,
    at least PostgreSQL's default and at most `ceiling_mb` (`RAG_INDEX_BUILD_MEMORY_MAX_MB`: a
    larger graph is finished on disk, slower but whole)."""
    needed = math.ceil(build_memory_bytes(rows, dimensions) / 2**20)
    return max(BUILD_MEMORY_FLOOR_MB, min(ceiling_mb, needed))


def build_memory_bytes(rows: int, dimensions: int) -> int:
    """The graph's memory with a tenth to spare, before the floor and the ceiling."""
    return math.ceil(graph_bytes(rows, dimensions) * BUILD_MEMORY_SPARE)


def graph_bytes(rows: int, dimensions: int) -> int:
    """What pgvector's HNSW build holds in memory for `rows` vectors at m 16 (a little more
    than a dedicated graph's, at m 12)."""
    return rows * (4 * dimensions + GRAPH_ROW_BYTES)


async def embedding_dimensions(conn: AsyncConnection) -> int:
    """The dimensions of `chunks.embedding` (a vector column's type modifier)."""
    dimensions = await conn.scalar(
        text(
            "select atttypmod from pg_attribute"
            " where attrelid = 'chunks'::regclass and attname = 'embedding'"
        )
    )
    return int(dimensions)


async def create_dedicated_index(
    conn: AsyncConnection, tenant_id: str, *, maintenance_work_mem: str | None = None
) -> str:
    """Build the tenant's index CONCURRENTLY, on an `index_connection`, with
    `maintenance_work_mem` when given (else the connection's)."""
    name = dedicated_index_name(tenant_id)
    if maintenance_work_mem is not None:
        await conn.execute(
            text("select set_config('maintenance_work_mem', :value, false)"),
            {"value": maintenance_work_mem},
        )
    literal = await conn.scalar(
        text("select quote_literal(cast(:value as text))"), {"value": tenant_id}
    )
    # IF NOT EXISTS: another `rag index` may have built it meanwhile. A failed earlier build
    # (INVALID) is in the plan's drops, which run first.
    await conn.execute(
        text(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON chunks"
            f" USING hnsw (embedding vector_cosine_ops) WITH ({DEDICATED_HNSW_OPTIONS})"
            f" WHERE tenant_id = {literal}"
        )
    )
    await conn.execute(text(f"COMMENT ON INDEX {name} IS {literal}"))
    return name


async def drop_dedicated_index(conn: AsyncConnection, index: DedicatedIndex) -> None:
    """Drop it CONCURRENTLY, on an `index_connection`."""
    quoted = await conn.scalar(text("select quote_ident(:name)"), {"name": index.name})
    await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {quoted}"))


@dataclass(frozen=True, slots=True)
class IndexChange:
    tenant_id: str
    chunks: int
    action: str  # kept, created, dropped, dropped (failed build); "would be …" on a dry run
    seconds: float | None
    memory: str | None = None  # a build's maintenance_work_mem


async def maintain_dedicated_indexes(
    sessions: SessionMaker,
    owner_url: str,
    *,
    min_chunks: int,
    build_memory_max_mb: int,
    maintenance_work_mem: str | None = None,
    dry_run: bool = False,
) -> list[IndexChange]:
    """What `rag index` and the service's own upkeep (app/db/autoindex.py) do: count each
    tenant's chunks as the runtime role, then drop and build dedicated indexes as the owner,
    CONCURRENTLY, by `plan_indexes`. Each build gets the memory its graph needs
    (`build_memory_mb`, up to `build_memory_max_mb`), or `maintenance_work_mem` when given."""
    # every chunk counts, whoever may read it: the service's own bookkeeping
    counts = await chunk_counts(reading_as(sessions, EVERY_DOCUMENT))
    changes: list[IndexChange] = []
    floor = f"{BUILD_MEMORY_FLOOR_MB}MB"  # each build sets its own
    async with index_connection(owner_url, maintenance_work_mem=floor) as conn:
        plan = plan_indexes(counts, await dedicated_indexes(conn), min_chunks=min_chunks)
        dimensions = await embedding_dimensions(conn) if plan.create else 0
        for index in plan.keep:
            changes.append(
                IndexChange(index.tenant_id, counts.get(index.tenant_id, 0), "kept", None)
            )
        for index in plan.drop:
            began = time.perf_counter()
            if not dry_run:
                await drop_dedicated_index(conn, index)
            action = "dropped" if index.valid else "dropped (failed build)"
            changes.append(
                IndexChange(index.tenant_id, counts.get(index.tenant_id, 0), action, _since(began))
            )
        for tenant_id in plan.create:
            sized = build_memory_mb(counts[tenant_id], dimensions, ceiling_mb=build_memory_max_mb)
            memory = maintenance_work_mem or f"{sized}MB"
            began = time.perf_counter()
            if not dry_run:
                await create_dedicated_index(conn, tenant_id, maintenance_work_mem=memory)
            changes.append(
                IndexChange(tenant_id, counts[tenant_id], "created", _since(began), memory)
            )
    if dry_run:
        return [
            c if c.action == "kept" else replace(c, action=f"would be {c.action}", seconds=None)
            for c in changes
        ]
    return changes


def _since(began: float) -> float:
    return round(time.perf_counter() - began, 1)
