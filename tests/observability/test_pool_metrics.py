"""The database pool's metrics on a real pool: connections in use and open follow checkouts,
and a checkout that finds every connection taken is timed as a wait."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY
from sqlalchemy import event, text

from app.db.engine import create_engine
from app.settings import Settings


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_pool_gauges_and_waits(settings: Settings) -> None:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=2)
    in_use = metric("rag_db_pool_connections_in_use")
    opened = metric("rag_db_pool_connections_open")
    waits = metric("rag_db_pool_wait_seconds_count")
    waited = metric("rag_db_pool_wait_seconds_sum")
    try:
        first, second = await engine.connect(), await engine.connect()
        await first.execute(text("select 1"))
        await second.execute(text("select 1"))
        assert metric("rag_db_pool_connections_in_use") == in_use + 2
        assert metric("rag_db_pool_connections_open") == opened + 2
        assert metric("rag_db_pool_wait_seconds_count") == waits  # no wait so far

        async def third() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("select 1"))

        waiting = asyncio.create_task(third())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # both connections are taken: it waits
        await first.close()
        await asyncio.wait_for(waiting, 5)
        assert metric("rag_db_pool_wait_seconds_count") == waits + 1
        assert metric("rag_db_pool_wait_seconds_sum") - waited >= 0.25
        await second.close()
        assert metric("rag_db_pool_connections_in_use") == in_use
    finally:
        await engine.dispose()
    assert metric("rag_db_pool_connections_open") == opened  # dispose closed them


async def test_a_busy_pool_keeps_its_connections(settings: Settings) -> None:
    """More transactions at once than the pool holds wait for one of its connections; none is
    opened beyond the pool's size, so none is closed at check-in and opened again (a new
    connection pays its start-up and its prepared statements again)."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=3)
    connects: list[object] = []
    event.listen(engine.sync_engine, "connect", lambda *_: connects.append(None))
    opened = metric("rag_db_pool_connections_open")

    async def one() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("select pg_sleep(0.01)"))

    try:
        for _ in range(4):
            await asyncio.gather(*(one() for _ in range(12)))
        assert len(connects) == 3
        assert metric("rag_db_pool_connections_open") == opened + 3
    finally:
        await engine.dispose()
