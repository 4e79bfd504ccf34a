"""The engine's connection pool, measured: connections in use and open (pool events), and the
time a checkout waits when every connection is taken (`MeteredPool`).

Gauges move on events rather than being read from the pool at scrape time, so they add up
across the worker processes of `rag serve --workers N` (a scrape reaches one worker) and
across every engine of a process.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, ConnectionPoolEntry

from app.observability.metrics import DB_POOL_IN_USE, DB_POOL_OPEN, DB_POOL_TIMEOUTS, DB_POOL_WAIT


class MeteredPool(AsyncAdaptedQueuePool):
    """An asyncio queue pool that times the checkouts that had to wait for a connection."""

    # its log lines under SQLAlchemy's namespace, quiet (WARNING) unless configured otherwise
    _sqla_logger_namespace = "sqlalchemy.pool.impl.MeteredPool"

    def _do_get(self) -> ConnectionPoolEntry:
        if self._max_overflow < 0 or self.checkedin() or self.overflow() < self._max_overflow:
            return super()._do_get()  # an idle connection, or room to open one: no wait
        started = time.perf_counter()
        try:
            return super()._do_get()
        except sa_exc.TimeoutError:
            DB_POOL_TIMEOUTS.inc()
            raise
        finally:
            DB_POOL_WAIT.observe(time.perf_counter() - started)


def measure(engine: Engine) -> None:
    """Count the connections of `engine`'s pool (and of the pools it recreates)."""
    event.listen(engine, "checkout", _checked_out)
    event.listen(engine, "checkin", _checked_in)
    event.listen(engine, "connect", _opened)
    event.listen(engine, "close", _closed)


def _checked_out(_dbapi: Any, _record: Any, _proxy: Any) -> None:
    DB_POOL_IN_USE.inc()


def _checked_in(_dbapi: Any, _record: Any) -> None:
    DB_POOL_IN_USE.dec()


def _opened(_dbapi: Any, _record: Any) -> None:
    DB_POOL_OPEN.inc()


def _closed(_dbapi: Any, _record: Any) -> None:
    DB_POOL_OPEN.dec()
