"""deploy/citus/distribute.sql against the real schema (no Citus here): every tenant-owned
table is distributed by tenant_id, and its key changes apply to the migrated database (run
as the owner inside a transaction that is rolled back)."""

from __future__ import annotations

import re

import asyncpg

from tests.conftest import DatabaseUrls
from tests.deploy.compose import ROOT

SQL = (ROOT / "deploy" / "citus" / "distribute.sql").read_text()


def distributed_tables() -> dict[str, str]:
    """table -> distribution column, from the create_distributed_table calls."""
    calls = re.findall(r"create_distributed_table\('(\w+)', '(\w+)'", SQL)
    return dict(calls)


def key_changes() -> str:
    """The ALTER TABLE block (between BEGIN and COMMIT)."""
    return SQL.split("BEGIN;", 1)[1].split("COMMIT;", 1)[0]


async def test_every_tenant_owned_table_is_distributed_by_tenant(database: DatabaseUrls) -> None:
    conn = await asyncpg.connect(database.owner_url)
    try:
        # tenant-owned: row-level security forced (a test in tests/db holds every table with a
        # tenant_id column to it, except the registry-side audit_log and tenant_usage)
        rows = await conn.fetch(
            "select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where n.nspname = 'public' and c.relkind = 'r' and c.relforcerowsecurity"
        )
    finally:
        await conn.close()
    tenant_owned = {r["relname"] for r in rows}
    assert tenant_owned, "no table with forced row-level security: wrong database?"
    distributed = distributed_tables()
    assert set(distributed) == tenant_owned
    assert set(distributed.values()) == {"tenant_id"}
    assert "SELECT create_reference_table('tenants');" in SQL
    # all in one co-location group, so a tenant's rows of every table share a node
    assert SQL.count("colocate_with => 'collections'") == len(distributed) - 1


async def test_keys_gain_the_distribution_column_on_the_migrated_schema(
    database: DatabaseUrls,
) -> None:
    conn = await asyncpg.connect(database.owner_url)
    try:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute(key_changes())
            keys = await conn.fetch(
                "select conrelid::regclass::text as tbl, conname, pg_get_constraintdef(oid) as def"
                " from pg_constraint"
                " where contype in ('p', 'u') and connamespace = 'public'::regnamespace"
            )
        finally:
            await transaction.rollback()
    finally:
        await conn.close()
    distributed = set(distributed_tables())
    for key in keys:
        if key["tbl"] in distributed:
            # Citus enforces uniqueness per shard: every key must hold the distribution column
            assert re.search(r"\(tenant_id\b", key["def"]), (key["tbl"], key["conname"], key["def"])
