"""Tenant-scoped transactions.

A session opened with `info={"tenant_id": ...}` sets `app.tenant_id` at the start of every
transaction, transaction-locally (`set_config(..., true)`), so a pooled connection never
carries a tenant into the next request. Row-level security does the rest: no tenant set
means no rows. `info={"settings": {...}}` sets other parameters (`hnsw.ef_search`, …) the
same way, in the same statement.

Beside the tenant, every tenant transaction carries who reads (`app.permissions.Readers`):
`app.principals` (a JSON array) and `app.all_documents` ('on' or ''), which the policies on
documents and chunks read (migration 0008). A session maker made by `reading_as` puts its
readers into every session's info; without them a transaction sees only the documents that
have no access list (fail closed). `transaction_settings` is the one place that turns a
session's info into these settings: any path that sets them by other means calls it too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, SessionTransaction

from app.permissions import NO_READERS, Readers

SessionMaker = async_sessionmaker[AsyncSession]
READERS = "readers"  # the session info key `reading_as` fills


@dataclass(frozen=True, slots=True)
class Computed:
    """A setting's value that the server works out as the transaction begins, in the same
    statement: `sql` is an SQL expression of type text, built by our own code from constants
    and identifiers we made (never from a caller's input)."""

    sql: str


Setting = str | Computed


def reading_as(sessions: SessionMaker, readers: Readers) -> SessionMaker:
    """The same sessions, each of whose tenant transactions reads as `readers`."""
    kw = dict(sessions.kw)
    kw["info"] = {**kw.get("info", {}), READERS: readers}
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
        local["app.principals"] = json.dumps(sorted(readers.principals))
        local["app.all_documents"] = "on" if readers.all_documents else ""
    return local


@event.listens_for(Session, "after_begin")
def _scope_to_tenant(session: Session, _tx: SessionTransaction, conn: Connection) -> None:
    local = transaction_settings(session.info)
    if not local:
        return
    # One round trip for all of them; names and plain values are bound parameters.
    calls, params = [], {}
    for i, (name, value) in enumerate(local.items()):
        params[f"name{i}"] = name
        if isinstance(value, Computed):
            calls.append(f"set_config(:name{i}, ({value.sql}), true)")
        else:
            params[f"value{i}"] = value
            calls.append(f"set_config(:name{i}, :value{i}, true)")
    conn.execute(text(f"select {', '.join(calls)}"), params)


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
    meanwhile fails here, before any statement of the caller ran, SQLAlchemy drops the pool's
    connections of that age, and the transaction is opened once more on a new one."""
    for attempt in (1, 2):
        session = sessions(info=info)
        try:
            connection = await session.connection()
            if not info:  # nothing for the settings hook to send: check the connection
                await connection.execute(text("select 1"))
        except DBAPIError as error:
            await session.close()
            if attempt == 2 or not error.connection_invalidated:
                raise
            continue
        return session
    raise AssertionError("unreachable")
