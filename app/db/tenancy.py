"""Tenant-scoped transactions.

A session opened with `info={"tenant_id": ...}` sets `app.tenant_id` at the start of every
transaction, transaction-locally (SET LOCAL), so a pooled connection never carries a tenant
into the next request. Row-level security does the rest: no tenant set means no rows.
`info={"settings": {...}}` sets other parameters (`hnsw.ef_search`, …) the same way, in the
same message.

Beside the tenant, every tenant transaction carries who reads (`app.permissions.Readers`):
`app.principals` (a text-array literal) and `app.all_documents` ('on' or ''), which the policies on
documents and chunks read (migration 0008). A session maker made by `reading_as` puts its
readers into every session's info; without them a transaction sees only the documents that
have no access list (fail closed). `transaction_settings` is the one place that turns a
session's info into these settings: any path that sets them by other means calls it too.

The settings go as SET LOCAL statements (settings_sql.py says why: Citus forwards those to its
workers, never a `set_config()` call), in ONE simple-protocol message on the driver's
connection, which SQLAlchemy's statements cannot carry (its asyncpg adapter prepares every
statement, one statement each). That message must run inside the transaction: the adapter
opens it lazily, sending BEGIN just before the first statement of the session, and a SET
LOCAL sent before that BEGIN would be a no-op with a warning (fail closed, but every query of
the transaction would see nothing). So the hook opens the transaction itself with the
adapter's own `_start_transaction()`, the method its cursor calls before a first statement (a
private name: its absence fails every tenant transaction at once, loudly), then checks with
asyncpg's public `is_in_transaction()` that a transaction really is open, and refuses to send
anything otherwise. Two round trips (BEGIN, then the settings); the
alternative without private names, any statement through SQLAlchemy to trigger the BEGIN,
costs a third on every transaction. Errors are translated as SQLAlchemy translates its own
(a lost connection is invalidated and raised as a `DBAPIError` that says so), so `_begun`
still replaces a connection that died in the pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy import Connection, event, text
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import ORMExecuteState, Session, SessionTransaction, with_loader_criteria

from app.db.models import TenantOwned
from app.db.settings_sql import Setting as Setting  # part of this module's interface
from app.db.settings_sql import scope_message, text_array_literal
from app.permissions import EVERY_DOCUMENT, NO_READERS, Readers

SessionMaker = async_sessionmaker[AsyncSession]
READERS = "readers"  # the session info key `reading_as` fills
NO_TENANT_PREDICATES = "no_tenant_predicates"  # `without_tenant_predicates`


def reading_as(sessions: SessionMaker, readers: Readers) -> SessionMaker:
    """The same sessions, each of whose tenant transactions reads as `readers`."""
    kw = dict(sessions.kw)
    kw["info"] = {**kw.get("info", {}), READERS: readers}
    return async_sessionmaker(class_=sessions.class_, **kw)


def without_tenant_predicates(sessions: SessionMaker) -> SessionMaker:
    """The same sessions, whose ORM statements do not name their tenant: row-level security
    alone keeps other tenants' rows away. For the isolation suite's guard, which must see
    leaks through sessions that bypass row-level security."""
    kw = dict(sessions.kw)
    kw["info"] = {**kw.get("info", {}), NO_TENANT_PREDICATES: True}
    return async_sessionmaker(class_=sessions.class_, **kw)


def readers_of_sessions(sessions: SessionMaker) -> Readers:
    """Who the transactions of `sessions` read as (for checks before a write)."""
    return readers_of(sessions.kw.get("info") or {})


def readers_of(info: Mapping[str, Any]) -> Readers:
    readers = info.get(READERS, NO_READERS)
    return readers if isinstance(readers, Readers) else NO_READERS


def transaction_settings(info: Mapping[str, Any]) -> dict[str, Setting]:
    """The transaction-local settings of a session with this info: its `settings`, and for a
    tenant session the tenant and its readers (always all three, so a savepoint or a reused
    connection never keeps a previous transaction's)."""
    local: dict[str, Setting] = dict(info.get("settings", {}))
    if (tenant_id := info.get("tenant_id")) is not None:
        readers = readers_of(info)
        local["app.tenant_id"] = str(tenant_id)
        local["app.principals"] = text_array_literal(sorted(readers.principals))
        local["app.all_documents"] = "on" if readers.all_documents else ""
    return local


def tenant_of(session: AsyncSession) -> str:
    """The tenant a tenant session is scoped to."""
    tenant_id = session.info.get("tenant_id")
    if tenant_id is None:
        raise RuntimeError("not a tenant session")
    return str(tenant_id)


@event.listens_for(Session, "after_begin")
def _scope_to_tenant(session: Session, _tx: SessionTransaction, conn: Connection) -> None:
    local = transaction_settings(session.info)
    if local:
        _send_in_transaction(conn, scope_message(None, local))


@event.listens_for(Session, "do_orm_execute")
def _name_the_tenant(state: ORMExecuteState) -> None:
    """Every ORM SELECT, UPDATE and DELETE of a tenant session names its tenant in the WHERE
    clause of each tenant-owned table it reads (`tenant_id = :tenant`, also in joins and
    subqueries). Row-level security is what isolates tenants; the predicate is what lets
    Citus send the statement to the tenant's shard alone, and the planner use the indexes
    that lead with tenant_id. Statements written as SQL text name their tenant themselves."""
    tenant_id = state.session.info.get("tenant_id")
    if tenant_id is None or not (state.is_select or state.is_update or state.is_delete):
        return
    if state.session.info.get(NO_TENANT_PREDICATES):
        return
    state.statement = state.statement.options(
        with_loader_criteria(
            TenantOwned,
            lambda owned: owned.tenant_id == tenant_id,
            include_aliases=True,
        )
    )


async def scope_to_tenant(session: AsyncSession, tenant_id: str | None) -> None:
    """Scope the session's open transaction to `tenant_id`, every document of it visible, from
    here on (None: back to no tenant): for the registry's work on one tenant's rows (counting
    them, deleting it). The settings are transaction-local like every other."""
    info = {} if tenant_id is None else {"tenant_id": tenant_id, READERS: EVERY_DOCUMENT}
    local = transaction_settings(info) or {"app.tenant_id": "", "app.all_documents": ""}
    await (await session.connection()).exec_driver_sql(scope_message(None, local))


def _send_in_transaction(conn: Connection, message: str) -> None:
    """`message` as one simple-protocol message inside the transaction `conn` has begun (the
    module's docstring says how and why)."""
    adapter = conn.connection.dbapi_connection
    if not isinstance(adapter, AsyncAdapt_asyncpg_connection):
        raise TypeError("tenant sessions need the asyncpg driver")

    async def send(driver: asyncpg.Connection[Any]) -> None:
        if not driver.is_in_transaction():
            await adapter._start_transaction()
        if not driver.is_in_transaction():  # e.g. an AUTOCOMMIT connection: nothing to scope
            raise RuntimeError("no transaction to scope the settings to: refusing SET LOCAL")
        await driver.execute(message)

    try:
        adapter.run_async(send)
    except RuntimeError:
        raise
    except Exception as error:
        lost = conn.dialect.is_disconnect(error, adapter, None)
        if lost:
            conn.invalidate(error)
            # its pool's other connections died with it (a server restart): start afresh
            conn.engine.dispose(close=False)
        raise DBAPIError.instance(
            None, None, error, Exception, connection_invalidated=lost, dialect=conn.dialect
        ) from error


@asynccontextmanager
async def tenant_transaction(
    sessions: SessionMaker, tenant_id: str, *, settings: Mapping[str, Setting] | None = None
) -> AsyncIterator[AsyncSession]:
    """One transaction scoped to `tenant_id`, with optional transaction-local `settings`
    (e.g. `hnsw.ef_search`); commits on success, rolls back on error."""
    info = {"tenant_id": tenant_id, "settings": dict(settings or {})}
    async with _transaction(sessions, info) as session:
        yield session


@asynccontextmanager
async def registry_transaction(sessions: SessionMaker) -> AsyncIterator[AsyncSession]:
    """A transaction with no tenant: it sees the tenant registry and no tenant-owned row."""
    async with _transaction(sessions, {}) as session:
        yield session


# The setting that opens the audit log and the usage counters of every tenant (their policies,
# migration 0013), and nothing else.
LEDGERS = {"app.ledgers": "on"}


@asynccontextmanager
async def ledger_transaction(sessions: SessionMaker) -> AsyncIterator[AsyncSession]:
    """A registry transaction that may also read and write every tenant's audit entries and
    usage counters: for the admin actions that record themselves and the audit log's readers.
    Documents, chunks and the other tenant tables stay closed to it."""
    async with _transaction(sessions, {"settings": LEDGERS}) as session:
        yield session


@asynccontextmanager
async def _transaction(sessions: SessionMaker, info: dict[str, Any]) -> AsyncIterator[AsyncSession]:
    session = await _begun(sessions, info)
    try:
        yield session
        await session.commit()
    except BaseException:
        await session.rollback()
        raise
    finally:
        await session.close()


async def _begun(sessions: SessionMaker, info: dict[str, Any]) -> AsyncSession:
    """A session whose transaction is open (BEGIN and the settings sent). The pool does not
    ping connections before handing them out (a round trip on every request): one that died
    meanwhile fails here, before any statement of the caller ran, the pool's connections of
    that age are dropped, and the transaction is opened once more on a new one."""
    for attempt in (1, 2):
        session = sessions(info=info)
        try:
            connection = await session.connection()
            if not info:  # nothing for the settings hook to send: check the connection
                await connection.execute(text("select 1"))
        except Exception as error:
            await session.close()
            lost = isinstance(error, DBAPIError) and error.connection_invalidated
            if attempt == 2 or not lost:
                raise
            continue
        return session
    raise AssertionError("unreachable")
