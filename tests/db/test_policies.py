"""app/db/policies.py says what the migrations made: the row-level security of a freshly migrated
database, table by table, and the helpers future migrations use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import policies
from app.db.engine import create_engine
from tests.conftest import DatabaseUrls

ROW_SECURITY = text(
    """
    select c.relname as table, c.relrowsecurity as enabled, c.relforcerowsecurity as forced,
           exists (select 1 from pg_attribute a where a.attrelid = c.oid
                    and a.attname = 'tenant_id' and not a.attisdropped) as has_tenant
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and c.relkind in ('r', 'p')
    """
)
POLICY_ROWS = text(
    "select tablename, policyname, permissive, roles, cmd, qual, with_check"
    " from pg_policies where schemaname = 'public'"
)


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    permissive: str
    roles: tuple[str, ...]
    command: str
    using: str
    check: str


async def _policies(conn: AsyncConnection) -> dict[str, list[Policy]]:
    found: dict[str, list[Policy]] = {}
    for row in (await conn.execute(POLICY_ROWS)).all():
        policy = Policy(row[1], row[2], tuple(row[3]), row[4], row[5], row[6])
        found.setdefault(row.tablename, []).append(policy)
    return found


def _in_migration(action: Callable[[], None]) -> Callable[[Connection], None]:
    """`action` run as a migration runs it: alembic's `op` bound to the connection."""

    def run(conn: Connection) -> None:
        with Operations.context(MigrationContext.configure(conn)):
            action()

    return run


@pytest.fixture
async def owner(database: DatabaseUrls) -> AsyncIterator[AsyncConnection]:
    """The tables' owner, in a transaction that is rolled back."""
    engine = create_engine(database.owner_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.begin()
            yield conn
            await conn.rollback()
    finally:
        await engine.dispose()


async def test_every_tenant_table_is_listed_enabled_and_forced(owner: AsyncConnection) -> None:
    tables = (await owner.execute(ROW_SECURITY)).all()
    secured = {row.table for row in tables if row.enabled}
    assert secured == set(policies.POLICIES)
    assert {row.table for row in tables if row.has_tenant} <= secured
    assert {row.table for row in tables if row.forced} == secured


async def test_each_policy_is_the_one_the_module_states(owner: AsyncConnection) -> None:
    """The module's conditions, set by its own helper in a rolled-back transaction, read back
    from the server exactly as the migrations' (the server prints both the same way)."""
    made = await _policies(owner)
    assert set(made) == set(policies.POLICIES)

    def restate() -> None:
        for table, condition in policies.POLICIES.items():
            policies.change_condition(table, condition)

    await owner.run_sync(_in_migration(restate))
    stated = await _policies(owner)
    for table in policies.POLICIES:
        [policy] = made[table]
        assert (policy.name, policy.permissive, policy.roles, policy.command) == (
            policies.POLICY,
            "PERMISSIVE",
            ("public",),
            "ALL",
        ), table
        assert policy.using == policy.check, table
        assert stated[table] == [policy], f"{table}: app/db/policies.py differs from the database"


async def test_a_new_table_is_isolated_and_released_by_the_helpers(owner: AsyncConnection) -> None:
    await owner.execute(text("create table rls_probe (tenant_id varchar(64) not null)"))
    await owner.run_sync(_in_migration(lambda: policies.isolate("rls_probe", policies.TENANT)))
    state = text(
        "select relrowsecurity, relforcerowsecurity from pg_class where relname = 'rls_probe'"
    )
    assert tuple((await owner.execute(state)).one()) == (True, True)
    [policy] = (await _policies(owner))["rls_probe"]
    [reference] = (await _policies(owner))["collections"]
    assert policy == reference  # the plain tenant policy, as migration 0001 wrote it

    await owner.run_sync(_in_migration(lambda: policies.release("rls_probe")))
    assert tuple((await owner.execute(state)).one()) == (False, False)
    assert "rls_probe" not in await _policies(owner)
