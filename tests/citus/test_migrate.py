"""`rag migrate` on a Citus coordinator: the distributed schema, made once, kept by later
migrations; and a cluster that cannot serve stopped with a message, nothing changed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import pytest
from alembic import command
from sqlalchemy import Connection
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import sharding
from app.db.engine import async_url
from app.db.migrate import MIGRATIONS_DIR, alembic_config, migrate
from tests.citus.cluster import Cluster
from tests.conftest import APP_PASSWORD, APP_ROLE, DIMENSIONS, JWT_SECRET, DatabaseUrls

pytestmark = pytest.mark.slow


async def _fetch(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def fetch(url: str, sql: str) -> list[asyncpg.Record]:
    return asyncio.run(_fetch(url, sql))


def test_every_tenant_table_is_distributed_by_tenant_and_co_located(
    citus_db: DatabaseUrls,
) -> None:
    rows = fetch(
        citus_db.owner_url,
        "select logicalrelid::regclass::text as t, partmethod::text, colocationid,"
        " column_to_column_name(logicalrelid, partkey) as col from pg_dist_partition",
    )
    kinds = {r["t"]: (r["partmethod"], r["col"], r["colocationid"]) for r in rows}
    assert kinds["tenants"][0] == "n"  # a reference table
    distributed = {t: v for t, v in kinds.items() if v[0] == "h"}
    assert set(distributed) == set(sharding.DISTRIBUTED)
    assert {v[1] for v in distributed.values()} == {"tenant_id"}
    assert len({v[2] for v in distributed.values()}) == 1  # one co-location group
    # every table under forced row-level security is distributed (or kept on the
    # coordinator on purpose): a later migration's new tenant table cannot be forgotten
    forced = fetch(
        citus_db.owner_url,
        "select relname from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'public' and c.relkind = 'r' and c.relforcerowsecurity",
    )
    for row in forced:
        assert row["relname"] in (*sharding.DISTRIBUTED, *sharding.COORDINATOR_ONLY)
    # the shards keep forced row-level security and the policies
    shards = fetch(
        citus_db.owner_url,
        "select result from run_command_on_shards('chunks', $$select relforcerowsecurity"
        " and exists (select from pg_policy where polrelid = '%1$s'::regclass)"
        " from pg_class where oid = '%1$s'::regclass$$)",
    )
    assert {row["result"] for row in shards} == {"t"}


def test_migrating_again_changes_nothing(citus_db: DatabaseUrls) -> None:
    before = fetch(citus_db.owner_url, "select * from pg_dist_partition order by 1")
    shards = fetch(citus_db.owner_url, "select shardid from pg_dist_shard order by 1")
    asyncio.run(
        migrate(
            citus_db.owner_url,
            embedding_dimensions=DIMENSIONS,
            app_role=APP_ROLE,
            app_url=citus_db.app_url,
        )
    )
    assert fetch(citus_db.owner_url, "select * from pg_dist_partition order by 1") == before
    assert fetch(citus_db.owner_url, "select shardid from pg_dist_shard order by 1") == shards


LATER_MIGRATION = '''
"""A later migration, written as every migration is, run on a distributed schema."""
from alembic import op

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE documents ADD COLUMN reviewed_at timestamptz")
    op.execute(
        "CREATE INDEX ix_documents_tenant_id_reviewed_at ON documents (tenant_id, reviewed_at)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_documents_tenant_id_reviewed_at")
    op.execute("ALTER TABLE documents DROP COLUMN reviewed_at")
'''


def test_a_later_migration_applies_to_the_distributed_schema(
    citus_db: DatabaseUrls, tmp_path: Path
) -> None:
    head = sorted(p.name.split("_", 1)[0] for p in (MIGRATIONS_DIR / "versions").glob("0*.py"))
    (tmp_path / "9001_reviewed_at.py").write_text(LATER_MIGRATION.format(head=head[-1]))
    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)
    config.set_main_option("version_locations", f"{MIGRATIONS_DIR / 'versions'} {tmp_path}")

    def upgrade(conn: Connection) -> None:
        config.attributes["connection"] = conn
        command.upgrade(config, "heads")

    async def run() -> None:
        engine = create_async_engine(async_url(citus_db.owner_url))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade)
        finally:
            await engine.dispose()

    asyncio.run(run())
    # on every shard of documents: the column and the index
    rows = fetch(
        citus_db.owner_url,
        "select result from run_command_on_shards('documents', $$select"
        " (select count(*) from pg_attribute where attrelid = '%1$s'::regclass"
        " and attname = 'reviewed_at')"
        " + (select count(*) from pg_index where indrelid = '%1$s'::regclass"
        " and indexrelid::regclass::text like 'ix_documents_tenant_id_reviewed_at%%')$$)",
    )
    assert {row["result"] for row in rows} == {"2"}


def _rag(command_line: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("rag")), *command_line],
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _env(cluster: Cluster, database: str) -> dict[str, str]:
    return {
        "RAG_MIGRATION_DATABASE_URL": cluster.url(database=database),
        "RAG_DATABASE_URL": cluster.url(user=APP_ROLE, password=APP_PASSWORD, database=database),
        "RAG_JWT_SECRET": JWT_SECRET,
    }


def _untouched(cluster: Cluster, database: str) -> bool:
    return not fetch(
        cluster.url(database=database),
        "select from pg_tables where tablename in ('alembic_version', 'chunks')",
    )


@contextmanager
def _scratch_database(cluster: Cluster, prefix: str) -> Iterator[str]:
    """A database of the cluster's for one test, dropped after it."""
    name = f"{prefix}_{uuid.uuid4().hex[:6]}"
    cluster.create_database(name)
    try:
        yield name
    finally:
        cluster.drop_database(name)


def _assert_refused(cluster: Cluster, name: str, command_line: list[str], *said: str) -> None:
    """`rag COMMAND` exits 1 saying each of `said`, without a traceback, and changes nothing."""
    done = _rag(command_line, _env(cluster, name))
    assert done.returncode == 1, done.stderr
    for text in said:
        assert text in done.stderr
    assert "Traceback" not in done.stderr
    assert _untouched(cluster, name)


def test_a_coordinator_without_the_needed_setting_is_refused_with_what_to_do(
    cluster: Cluster,
) -> None:
    with _scratch_database(cluster, "rag_unset") as name:
        cluster.sql(
            f'ALTER DATABASE "{name}" SET citus.propagate_set_commands = none', database=name
        )
        for command_line in (["migrate"], ["serve", "--port", "1"]):
            _assert_refused(
                cluster,
                name,
                command_line,
                "citus.propagate_set_commands",
                "ALTER SYSTEM SET citus.propagate_set_commands = 'local'",
            )


def test_a_worker_without_the_extension_is_named(cluster: Cluster) -> None:
    worker = cluster.workers[0]
    with _scratch_database(cluster, "rag_noext") as name:
        cluster.sql("DROP EXTENSION citus", node=worker, database=name)
        _assert_refused(
            cluster,
            name,
            ["migrate"],
            f"worker 127.0.0.1:{worker.port}",
            "CREATE EXTENSION citus",
        )


def test_a_coordinator_without_workers_is_refused(cluster: Cluster) -> None:
    with _scratch_database(cluster, "rag_alone") as name:
        for worker in cluster.workers:
            cluster.sql(f"SELECT citus_remove_node('127.0.0.1', {worker.port})", database=name)
        _assert_refused(cluster, name, ["migrate"], "no workers", "citus_add_node")


def test_the_job_callbacks_migration_downgrades_and_upgrades_on_the_distributed_schema(
    citus_db: DatabaseUrls,
) -> None:
    """0014 adds columns to `ingest_jobs`, already distributed: on every shard, and back."""
    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)

    def to(revision: str) -> None:
        def step(conn: Connection) -> None:
            config.attributes["connection"] = conn
            if revision == "0013":
                command.downgrade(config, revision)
            else:
                command.upgrade(config, revision)

        async def run() -> None:
            engine = create_async_engine(async_url(citus_db.owner_url))
            try:
                async with engine.begin() as conn:
                    await conn.run_sync(step)
            finally:
                await engine.dispose()

        asyncio.run(run())

    def columns() -> set[str]:
        rows = fetch(
            citus_db.owner_url,
            "select result from run_command_on_shards('ingest_jobs', $$select count(*)"
            " from pg_attribute where attrelid = '%1$s'::regclass"
            " and attname like 'callback\\_%%' and not attisdropped$$)",
        )
        return {row["result"] for row in rows}

    assert columns() == {"6"}
    to("0013")
    assert columns() == {"0"}
    to("0014")
    assert columns() == {"6"}


def test_the_keyword_headings_migration_rebuilds_existing_chunks_on_the_distributed_schema(
    citus_db: DatabaseUrls,
) -> None:
    """0015's batches on distributed tables with a tenant's chunks in place: back to 0014
    (content-only terms, recounted) and up again, every statement on the tenant's shard, the
    statistics exact at both ends."""
    from tests.db.test_migration_0015 import CHUNKS, exact, seed

    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)

    def step(conn: Connection, revision: str) -> None:
        config.attributes["connection"] = conn
        if revision == "0014":
            command.downgrade(config, revision)
        else:
            command.upgrade(config, revision)

    async def run() -> None:
        engine = create_async_engine(async_url(citus_db.owner_url))
        try:
            async with engine.connect() as conn:
                await seed(conn)
                await conn.run_sync(step, "0014")
                await conn.commit()
                await conn.execute(sql("ALTER TABLE chunks ADD COLUMN heading_vector tsvector"))
                await conn.commit()
                assert "vorpalix" not in await exact(conn)
                await conn.execute(sql("ALTER TABLE chunks DROP COLUMN heading_vector"))
                await conn.commit()
                await conn.run_sync(step, "head")
                await conn.commit()
                terms = await exact(conn)
                assert terms["vorpalix"] == CHUNKS
                assert terms["pump"] == CHUNKS
        finally:
            await engine.dispose()

    asyncio.run(run())
