"""A tenant-scoped transaction on the driver's own connection, for the hot read paths.

`tenant_transaction` (tenancy.py) goes through an ORM session: a BEGIN, then the settings
statement, then the query, then COMMIT, each a round trip, with the session's bookkeeping
around them. A vector search needs none of that bookkeeping, so `scoped_connection` checks a
connection out of the same pool and opens the transaction with its settings in ONE
simple-protocol message (`BEGIN; SELECT set_config(..., true), ...`): the query that follows
is the second round trip, COMMIT the third. The settings are the same transaction-local
ones (the tenant for row-level security, `hnsw.ef_search`, ...), so nothing outlives the
transaction on the pooled connection.

The values are inlined as SQL string literals, since a simple-protocol message cannot carry
bound parameters: `sql_literal` doubles quotes (the connection runs with
`standard_conforming_strings = on`, set at connect, so backslashes are plain characters) and
refuses NUL, which PostgreSQL text cannot hold. The names are ours, never a caller's.

The pool does not ping a connection before handing it out (a round trip on every search): a
connection that died meanwhile (the server restarted) fails at the first message, before any
query ran; the pool is then replaced and the transaction opened once more on a new one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.failures import CONNECTION_ERRORS
from app.db.tenancy import Computed, SessionMaker, Setting, transaction_settings

SAVEPOINT = "rag_scoped"


def sql_literal(value: str) -> str:
    """`value` as a standard-conforming SQL string literal."""
    if "\x00" in value:
        raise ValueError("a NUL character cannot be sent to PostgreSQL")
    return "'" + value.replace("'", "''") + "'"


def scope_message(begin: str, settings: Mapping[str, Setting]) -> str:
    """`begin` (BEGIN or SAVEPOINT) and every transaction-local setting, as one
    simple-protocol message."""
    calls = ", ".join(
        f"set_config({sql_literal(name)}, {_value(value)}, true)"
        for name, value in settings.items()
    )
    return f"{begin}; SELECT {calls}"


def _value(value: Setting) -> str:
    return f"({value.sql})" if isinstance(value, Computed) else sql_literal(value)


@asynccontextmanager
async def scoped_connection(
    sessions: SessionMaker, tenant_id: str, *, settings: Mapping[str, Setting] | None = None
) -> AsyncIterator[asyncpg.Connection[Any]]:
    """The driver connection inside a transaction scoped to `tenant_id` with `settings`;
    committed on success, rolled back on error. A sessionmaker bound to a connection that is
    already in a transaction (a caller's own, or the tests' rolled back after each test) gets
    a savepoint in it instead."""
    # the tenant and who reads (the caller's principals), exactly as the session path sets them
    info = {**(sessions.kw.get("info") or {}), "tenant_id": tenant_id, "settings": settings or {}}
    scope = transaction_settings(info)
    bind = sessions.kw["bind"]
    if isinstance(bind, AsyncConnection):
        async with _savepoint(bind, scope) as driver:
            yield driver
        return
    if not isinstance(bind, AsyncEngine):
        raise TypeError("the sessionmaker is bound to neither an engine nor a connection")
    message = scope_message("BEGIN", scope)
    for attempt in (1, 2):
        async with bind.connect() as conn:
            driver = await _driver(conn)
            try:
                await driver.execute(message)
            except CONNECTION_ERRORS:
                await conn.invalidate()
                if attempt == 2:
                    raise
                await bind.dispose(close=False)  # the others in the pool died with it
                continue
            try:
                yield driver
            except BaseException:
                await _end(conn, driver, "ROLLBACK")
                raise
            await _end(conn, driver, "COMMIT")
            return


@asynccontextmanager
async def _savepoint(
    conn: AsyncConnection, scope: Mapping[str, Setting]
) -> AsyncIterator[asyncpg.Connection[Any]]:
    driver = await _driver(conn)
    await driver.execute(scope_message(f"SAVEPOINT {SAVEPOINT}", scope))
    try:
        yield driver
    except BaseException:
        await driver.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        raise
    await driver.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")


async def _driver(conn: AsyncConnection) -> asyncpg.Connection[Any]:
    raw = await conn.get_raw_connection()
    driver: asyncpg.Connection[Any] = raw.driver_connection  # type: ignore[assignment]
    return driver


async def _end(conn: AsyncConnection, driver: asyncpg.Connection[Any], command: str) -> None:
    """COMMIT or ROLLBACK. A connection whose transaction may still be open (the command failed
    or was cancelled half-way) is closed on the spot: the pool knows nothing of this
    transaction and would hand the connection out again inside it."""
    try:
        await driver.execute(command)
    except BaseException:
        driver.terminate()
        with suppress(Exception):
            await conn.invalidate()
        if command == "COMMIT":
            raise
