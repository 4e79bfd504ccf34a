"""The audit log and the usage counters under row-level security, attacked as the runtime role.

Two tenants each get usage counters (the service's own flush) and audit entries (the admin
use cases, as a token); an entry of no tenant is written too. Then, in each kind of
transaction the service opens: a tenant's sees and writes its own rows only, reading,
inserting, updating and deleting the other's by every means SQL offers; a registry transaction
sees neither table's rows; only a ledger transaction sees them all. The guard runs the same
probes as the superuser (which bypasses row-level security): there they must report leaks,
or they could not see one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.admin import tenants as admin_tenants
from app.admin.audit import Actor, record
from app.auth.tokens import Principal
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import (
    SessionMaker,
    ledger_transaction,
    registry_transaction,
    tenant_transaction,
)
from app.usage import UsageRecorder
from tests.conftest import DatabaseUrls

pytestmark = pytest.mark.on_citus

Opener = AbstractAsyncContextManager[AsyncSession]


async def _seed(sessions: SessionMaker) -> tuple[str, str, str]:
    """Two tenants with counters and entries, and an entry of no tenant; a marker naming
    this run's rows."""
    marker = uuid.uuid4().hex[:10]
    mine, theirs = f"own-{marker}", f"other-{marker}"
    actor = Actor.of_token(Principal("ops", f"alice-{marker}", frozenset({"rag:admin"})))
    async with ledger_transaction(sessions) as session:
        for tenant_id in (mine, theirs):
            await admin_tenants.create(session, actor, tenant_id, name=None, tier="basic")
        await record(session, actor, "cluster.note", tenant_id=None, before=None, after=None)
    usage = UsageRecorder()
    for tenant_id in (mine, theirs):
        usage.record(tenant_id, "searches", 3)
    await usage.flush(sessions)
    return mine, theirs, marker


async def _rows(session: AsyncSession, marker: str) -> dict[str, set[str | None]]:
    """The tenants of this run's rows each table shows the session."""
    audit = await session.execute(
        text("select tenant_id from audit_log where actor_subject = :s"), {"s": f"alice-{marker}"}
    )
    usage = await session.execute(
        text("select tenant_id from tenant_usage where tenant_id like :m"), {"m": f"%-{marker}"}
    )
    return {"audit_log": {r[0] for r in audit}, "tenant_usage": {r[0] for r in usage}}


async def _writes_refused(session: AsyncSession, victim: str) -> list[str]:
    """Each write aimed at `victim`'s rows that went through (empty when all were refused)."""
    through = []
    now = datetime.now(UTC)
    probes = {
        "insert usage": (
            "insert into tenant_usage (tenant_id, bucket, searches) values (:t, :b, 1)",
            True,
        ),
        "insert audit entry": (
            "insert into audit_log (actor_kind, actor_subject, action, tenant_id)"
            " values ('operator', 'cli:root', 'tenant.delete', :t)",
            True,
        ),
        "insert audit entry of no tenant": (
            "insert into audit_log (actor_kind, actor_subject, action)"
            " values ('operator', 'cli:root', 'cluster.note')",
            True,
        ),
        "update usage": ("update tenant_usage set searches = 0 where tenant_id = :t", False),
        "delete usage": ("delete from tenant_usage where tenant_id = :t", False),
    }
    for name, (statement, inserts) in probes.items():
        try:
            async with session.begin_nested():
                done = await session.execute(text(statement), {"t": victim, "b": now})
        except DBAPIError as error:
            if "row-level security" not in str(error):
                raise
            continue
        if inserts or done.rowcount:  # type: ignore[attr-defined]
            through.append(name)
    return through


@asynccontextmanager
async def _rolled_back(opener: Opener) -> AsyncIterator[AsyncSession]:
    """The transaction `opener` gives, rolled back at the end: the probes change nothing."""
    async with opener as session:
        try:
            yield session
        finally:
            await session.rollback()


async def test_each_transaction_sees_and_writes_only_the_ledger_rows_it_may(
    app_engine: AsyncEngine,
) -> None:
    sessions = create_sessionmaker(app_engine)  # real transactions, committed
    mine, theirs, marker = await _seed(sessions)
    async with _rolled_back(tenant_transaction(sessions, mine)) as session:
        assert await _rows(session, marker) == {"audit_log": {mine}, "tenant_usage": {mine}}
        assert await _writes_refused(session, theirs) == []
    async with _rolled_back(registry_transaction(sessions)) as session:
        assert await _rows(session, marker) == {"audit_log": set(), "tenant_usage": set()}
        assert await _writes_refused(session, theirs) == []
    async with _rolled_back(ledger_transaction(sessions)) as session:
        assert await _rows(session, marker) == {
            "audit_log": {mine, theirs, None},
            "tenant_usage": {mine, theirs},
        }
    async with ledger_transaction(sessions) as session:  # nothing was changed
        counts = await session.execute(
            text("select tenant_id, searches from tenant_usage where tenant_id like :m"),
            {"m": f"%-{marker}"},
        )
        assert sorted(counts.all()) == [(theirs, 3), (mine, 3)]


async def test_the_guard_the_probes_report_leaks_when_rls_is_bypassed(
    database: DatabaseUrls, app_engine: AsyncEngine
) -> None:
    mine, theirs, marker = await _seed(create_sessionmaker(app_engine))
    engine = create_engine(_superuser(database))
    try:
        superuser = create_sessionmaker(engine)
        async with _rolled_back(tenant_transaction(superuser, mine)) as session:
            seen = await _rows(session, marker)
            assert seen["audit_log"] >= {mine, theirs}
            assert seen["tenant_usage"] == {mine, theirs}
            assert set(await _writes_refused(session, theirs)) >= {"insert usage", "delete usage"}
    finally:
        await engine.dispose()


def _superuser(database: DatabaseUrls) -> str:
    """The superuser's URL to the tests' database (the owner's database, the superuser)."""
    owner = make_url(database.owner_url)
    superuser = make_url(database.superuser_url)
    return superuser.set(database=owner.database).render_as_string(hide_password=False)
