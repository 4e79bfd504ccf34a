"""Sharding by tenant on Citus: what `rag migrate` adds on a coordinator, and what `rag serve`
checks before it starts (docs/operations.md, "Sharding by tenant on Citus").

Every tenant-owned table is distributed by `tenant_id`, all co-located with `collections`, so
one tenant's rows of every table live in one shard group on one worker: its joins, foreign
keys and writes stay there, and a statement that names the tenant in its WHERE clause is sent
to that worker alone. The tenant registry is a reference table (a copy on every node, so the
foreign keys to it hold everywhere). The tables without tenant content, or with rows of no
tenant, stay on the coordinator (`COORDINATOR_ONLY`).

Distribution runs in one transaction after the migrations: Citus refuses foreign keys from
local or reference tables to distributed ones, so the keys between the tables it distributes
are dropped first and made again, from their own definitions, once every table is in place.
Nothing is half-distributed: on any error everything is rolled back. Run again, it finds the
tables distributed and does nothing, or distributes only the tables a later migration added.
Rows already in the tables (a database moved here) are copied into the shards, and the
coordinator's local copies emptied, in the same transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_log = logging.getLogger(__name__)

REFERENCE = ("tenants",)
# Parents first: each is co-located with the first.
DISTRIBUTED = (
    "collections",
    "documents",
    "chunks",
    "bm25_corpus",
    "bm25_terms",
    "bm25_postings",
    "ingest_jobs",
    "ingest_job_inputs",
    "receipts",
)
# Registry-side rows (some of no tenant at all: audit entries of cluster-wide actions) and the
# job queue's own tables, which hold job ids only.
COORDINATOR_ONLY = ("audit_log", "tenant_usage", "alembic_version")
DISTRIBUTION_COLUMN = "tenant_id"
# What the service relies on that a coordinator must be told: SET LOCAL statements (the
# tenant, who reads, hnsw.ef_search) forwarded to the workers of a transaction.
REQUIRED_SETTINGS = {"citus.propagate_set_commands": "local"}


class ClusterNotReady(RuntimeError):
    """The coordinator or a worker lacks what the service needs; the message says what to do."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "the Citus cluster is not ready:\n" + "\n".join(f"- {p}" for p in problems)
        )
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Worker:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


async def citus_version(conn: AsyncConnection) -> str | None:
    """The Citus extension's version in this database, None when it has none."""
    version = await conn.scalar(text("select extversion from pg_extension where extname = 'citus'"))
    return None if version is None else str(version)


async def workers(conn: AsyncConnection) -> list[Worker]:
    rows = await conn.execute(
        text("select node_name, node_port from citus_get_active_worker_nodes() order by 1, 2")
    )
    return [Worker(host, int(port)) for host, port in rows]


async def problems(conn: AsyncConnection) -> list[str]:
    """What keeps the cluster from serving this database, each with what to do; empty when
    nothing does."""
    found = [
        f"the coordinator runs with {name} = '{value}', the service needs '{wanted}': "
        f"ALTER SYSTEM SET {name} = '{wanted}'; SELECT pg_reload_conf(); (or start it with "
        f"-c {name}={wanted})"
        for name, wanted in REQUIRED_SETTINGS.items()
        if (value := await conn.scalar(text(f"show {name}"))) != wanted
    ]
    nodes = await workers(conn)
    if not nodes:
        found.append(
            "the coordinator has no workers: create this database and the citus extension on "
            "each worker, then add it here as superuser with SELECT citus_add_node('host', port)"
        )
    database = await conn.scalar(text("select current_database()"))
    rows = await conn.execute(
        text(
            "select nodename, nodeport, success, result from run_command_on_workers("
            "$$select coalesce((select extversion from pg_extension where extname = 'citus'),"
            " 'none')$$)"
        )
    )
    for host, port, success, result in rows:
        worker = Worker(host, int(port))
        if not success:
            found.append(f"worker {worker} cannot be used: {result}")
        elif result == "none":
            found.append(
                f"worker {worker}: database {database} has no citus extension: run "
                "CREATE EXTENSION citus in it (Citus creates neither databases nor its own "
                "extension on workers)"
            )
    return found


async def ensure_ready(conn: AsyncConnection) -> None:
    """Before migrating: the cluster has what the service needs."""
    if found := await problems(conn):
        raise ClusterNotReady(found)


async def ensure_serving(conn: AsyncConnection) -> None:
    """Before serving (as the runtime role): the same, and the schema distributed."""
    found = await problems(conn)
    distributed = await conn.scalar(
        text(
            "select exists (select from pg_dist_partition"
            " where logicalrelid = to_regclass('chunks'))"
        )
    )
    if not distributed:
        found.append(
            "the tables are not distributed: run `rag migrate` with RAG_MIGRATION_DATABASE_URL "
            "set to the coordinator's superuser (or the tables' owner)"
        )
    if found:
        raise ClusterNotReady(found)


async def distribute(conn: AsyncConnection) -> list[str]:
    """Distribute (and make reference) the tables that are not yet, in the transaction `conn`
    is in; the tables it changed. Run as the tables' owner (or a superuser)."""
    done = set(
        await conn.scalars(
            text(
                "select logicalrelid::regclass::text from pg_dist_partition"
                " where logicalrelid::regclass::text = any(:tables)"
            ),
            {"tables": [*REFERENCE, *DISTRIBUTED]},
        )
    )
    pending = [table for table in (*REFERENCE, *DISTRIBUTED) if table not in done]
    if not pending:
        return []
    # One connection per worker for the whole transaction: Citus refuses a foreign key to a
    # reference table after parallel work on distributed tables in the same transaction.
    await conn.execute(text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
    keys = await _foreign_keys(conn, pending)
    for table, name, _ in keys:
        await conn.execute(text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
    for table in pending:
        await _distribute(conn, table, first=table == DISTRIBUTED[0])
    for table, name, definition in keys:
        await conn.execute(text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'))
    _log.info("Citus: distributed %s", ", ".join(pending))
    return pending


async def plan_per_statement(conn: AsyncConnection, role: str) -> None:
    """The runtime role's statements are planned with their parameters' values: Citus finds a
    statement's shard from the tenant in its WHERE clause, and a prepared statement's generic
    plan (PostgreSQL's choice after five runs) hides that value, so a join or an UPDATE ...
    FROM would go to every shard. A transaction that keeps a plan on purpose (the direct
    search statement, whose tenant is written in as a constant) still says so itself."""
    database = await conn.scalar(text("select current_database()"))
    await conn.execute(
        text(
            f'ALTER ROLE "{role}" IN DATABASE "{database}" SET plan_cache_mode = force_custom_plan'
        )
    )


async def _foreign_keys(conn: AsyncConnection, pending: list[str]) -> list[tuple[str, str, str]]:
    """(table, name, definition) of every foreign key from or to a table about to change."""
    rows = await conn.execute(
        text(
            "select conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            " from pg_constraint where contype = 'f'"
            " and (conrelid::regclass::text = any(:tables)"
            " or confrelid::regclass::text = any(:tables))"
            " order by conrelid::regclass::text, conname"
        ),
        {"tables": pending},
    )
    return [(table, name, definition) for table, name, definition in rows]


async def _distribute(conn: AsyncConnection, table: str, *, first: bool) -> None:
    """One table into Citus' metadata, with its rows. Its owner is under forced row-level
    security and would copy none of them: forced off for the copy, on again after (on every
    shard too)."""
    forced = bool(
        await conn.scalar(
            text("select relforcerowsecurity from pg_class where oid = cast(:t as regclass)"),
            {"t": table},
        )
    )
    if forced:
        await conn.execute(text(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY"))
    if table in REFERENCE:
        await conn.execute(text("select create_reference_table(:t)"), {"t": table})
    else:
        colocate = "none" if first else DISTRIBUTED[0]
        await conn.execute(
            text("select create_distributed_table(:t, :column, colocate_with => :with)"),
            {"t": table, "column": DISTRIBUTION_COLUMN, "with": colocate},
        )
    # the rows were copied into the shards: the coordinator's own copy goes
    await conn.execute(
        text("select truncate_local_data_after_distributing_table(:t)"), {"t": table}
    )
    if forced:
        await conn.execute(text(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY"))
