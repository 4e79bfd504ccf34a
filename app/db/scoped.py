"""A tenant-scoped transaction on the driver's own connection, for the hot read paths.

`tenant_transaction` (tenancy.py) goes through an ORM session: a BEGIN, then the settings
statement, then the query, then COMMIT, each a round trip, with the session's bookkeeping
around them. A vector search needs none of that bookkeeping, so `scoped_connection` checks a
connection out of the same pool and opens the transaction with its settings in ONE
simple-protocol message (`BEGIN; DO 'BEGIN SET LOCAL ...; END'; SELECT set_config(...)`, built
by settings_sql.py, which also says why the SET LOCAL statements sit in a DO block): the query
that follows is the second round trip, COMMIT the third. The settings are the same
transaction-local ones as the session path's (the tenant for row-level security,
`hnsw.ef_search`, ...), so nothing outlives the transaction on the pooled connection.

A read-only transaction (`read_only=True`, BEGIN READ ONLY: the vector search's) ends off the
caller's path: once the caller's block is done, COMMIT is sent by a task of its own, which
then returns the connection to the pool, so the caller waits for two round trips, not three.
A read-only transaction's COMMIT cannot lose anything; until it is done the connection stays
checked out, so no other transaction ever sees it inside this one. The sessionmaker's state
(state.py) holds those still under way, and `settled(sessions)` waits for them (the app awaits it
before closing the pool); a sessionmaker without state commits before returning.

The pool does not ping a connection before handing it out (a round trip on every search): a
connection that died meanwhile (the server restarted) fails at the first message, before any
query ran; the pool is then replaced and the transaction opened once more on a new one. So does
a connection caught between the server's last words and its closed socket (asyncpg's
InternalClientError at that first message).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.failures import CONNECTION_ERRORS
from app.db.settings_sql import Setting, scope_message
from app.db.state import sessions_state
from app.db.tenancy import SessionMaker, transaction_settings

SAVEPOINT = "rag_scoped"
_log = logging.getLogger(__name__)


@asynccontextmanager
async def scoped_connection(
    sessions: SessionMaker,
    tenant_id: str,
    *,
    settings: Mapping[str, Setting] | None = None,
    read_only: bool = False,
) -> AsyncIterator[asyncpg.Connection[Any]]:
    """The driver connection inside a transaction scoped to `tenant_id` with `settings`;
    committed on success (`read_only`: READ ONLY, committed off the caller's path), rolled back
    on error. A sessionmaker bound to a connection that is already in a transaction (a caller's
    own, or the tests' rolled back after each test) gets a savepoint in it instead."""
    scope = tenant_scope(sessions, tenant_id, settings)
    bind = sessions.kw["bind"]
    if isinstance(bind, AsyncConnection):
        async with _savepoint(bind, scope, read_only=read_only) as driver:
            yield driver
        return
    if not isinstance(bind, AsyncEngine):
        raise TypeError("the sessionmaker is bound to neither an engine nor a connection")
    message = scope_message("BEGIN READ ONLY" if read_only else "BEGIN", scope)
    for attempt in (1, 2):
        conn = await bind.connect()
        committing = False  # the task committing a read-only transaction returns `conn`
        try:
            driver = await _driver(conn)
            try:
                await driver.execute(message)
            except (*CONNECTION_ERRORS, asyncpg.InternalClientError):
                # InternalClientError: an idle pooled connection that read the server's FATAL
                # (shutting down) but not yet the closed socket is in a state no message can
                # follow; seen in CI with PostgreSQL stopped under traffic. Nothing has run yet,
                # so a new connection is as safe here as for a lost one (tests/reliability/
                # test_goodbye.py).
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
            if read_only and (state := sessions_state(sessions)) is not None:
                state.commits.add(asyncio.create_task(_commit_then_close(conn, driver)))
                committing = True
                return
            await _end(conn, driver, "COMMIT")
            return
        finally:
            if not committing:
                await conn.close()


def tenant_scope(
    sessions: SessionMaker, tenant_id: str, settings: Mapping[str, Setting] | None = None
) -> dict[str, Setting]:
    """The transaction-local settings of a `scoped_connection`: `settings`, the tenant and who
    reads (the caller's principals), exactly as the session path sets them."""
    info = {**(sessions.kw.get("info") or {}), "tenant_id": tenant_id, "settings": settings or {}}
    return transaction_settings(info)


async def _commit_then_close(conn: AsyncConnection, driver: asyncpg.Connection[Any]) -> None:
    try:
        await _end(conn, driver, "COMMIT")
    except Exception:  # nothing to lose in a read-only transaction; the connection is closed
        _log.warning("COMMIT of a read-only transaction failed", exc_info=True)
    finally:
        await conn.close()


async def settled(sessions: SessionMaker) -> None:
    """Wait for the read-only transactions of `sessions` still committing (before the pool is
    closed)."""
    if (state := sessions_state(sessions)) is not None:
        await state.commits.settled()


@asynccontextmanager
async def _savepoint(
    conn: AsyncConnection, scope: Mapping[str, Setting], *, read_only: bool
) -> AsyncIterator[asyncpg.Connection[Any]]:
    """A savepoint in the caller's transaction. A read-only one is rolled back when done, as
    a transaction's end would: its settings (a kept plan's `plan_cache_mode`, ...) must not
    outlive it in the caller's transaction; it wrote nothing to keep."""
    driver = await _driver(conn)
    await driver.execute(scope_message(f"SAVEPOINT {SAVEPOINT}", scope))
    try:
        yield driver
    except BaseException:
        await driver.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        raise
    if read_only:
        await driver.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
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
