"""What kind of database failure an exception is: the server cannot be reached, (on a
replica) it gave up a statement for a reason another server would not have, or (on Citus) the
shard a statement was planned on was replaced before it ran."""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

# What a lost or refused connection raises: wrapped by SQLAlchemy on the ORM path, raised by
# the driver itself on the direct search path (app/db/scoped.py).
CONNECTION_ERRORS = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
)
# A standby ends statements and sessions on its own: shutting down or restarting (57P01-57P03),
# the database dropped under it (57P04), a conflict with WAL replay (40001 "canceling statement
# due to conflict with recovery", 40P01 for a buffer-pin deadlock). Reads do nothing else that
# raises these, so on a replica they say "try the primary", never "your request is wrong".
REPLICA_GAVE_UP = frozenset({"57P01", "57P02", "57P03", "57P04", "40001", "40P01"})
# Citus ends a statement planned on a shard that a tenant isolation or a shard move replaced
# before it ran with an internal error (XX000) naming the shard (metadata_cache.c); planned
# again, the statement reads the new shard. Seen once in 333 searches while a tenant was
# isolated under traffic (tests/citus/test_operations.py).
SHARD_GONE = "could not find valid entry for shard"


def is_unreachable(exc: BaseException) -> bool:
    """The database cannot be reached (as opposed to a bug in a query)."""
    if isinstance(exc, (sa_exc.TimeoutError, *CONNECTION_ERRORS)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        cause = getattr(exc.orig, "__cause__", None)
        return (
            exc.connection_invalidated
            or isinstance(exc.orig, CONNECTION_ERRORS)
            or isinstance(cause, CONNECTION_ERRORS)
        )
    return False


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error, wrapped by SQLAlchemy or not."""
    for candidate in (exc, getattr(exc, "orig", None), getattr(exc, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None)
        if isinstance(code, str):
            return code
        cause = getattr(candidate, "__cause__", None)
        code = getattr(cause, "sqlstate", None)
        if isinstance(code, str):
            return code
    return None


def is_replica_failure(exc: BaseException) -> bool:
    """A replica failed the read: the same read on the primary should succeed. That includes
    asyncpg's InternalClientError on the direct path: a connection that read the standby's
    FATAL between two of a search's messages is left consuming that error ("cannot switch to
    state 12; another operation (2) is in progress"; seen with the standby stopped under
    traffic, tests/replicas/test_failover.py)."""
    return (
        is_unreachable(exc)
        or sqlstate(exc) in REPLICA_GAVE_UP
        or isinstance(exc, asyncpg.InternalClientError)
    )


def is_shard_gone(exc: BaseException) -> bool:
    """Citus replaced the shard a statement was planned on: the same read again succeeds."""
    if sqlstate(exc) != "XX000":
        return False
    causes = (exc, getattr(exc, "orig", None), getattr(exc, "__cause__", None))
    return any(SHARD_GONE in str(cause) for cause in causes if cause is not None)
