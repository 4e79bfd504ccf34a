"""In-process workers stopped at any moment stop, and leave no connection behind: stopped
while their queue's pool is still opening, the pool is closed (its connections would otherwise
keep reconnecting to a server that has stopped); stopped while procrastinate's worker is
starting, the cancel is not swallowed, so `rag serve` finishes shutting down."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.embedded import provision
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import DIMENSIONS
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import workers
from tests.processes import scratch_directory
from tests.reliability.test_faults import PrivateDatabase

QUEUE_CONNECTIONS = text(
    "select count(*) from pg_stat_activity"
    " where application_name = 'rag-jobs' and datname = current_database()"
)


async def queue_connections(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        count: int = (await conn.execute(QUEUE_CONNECTIONS)).scalar_one()
        return count


@pytest.mark.parametrize("seconds", [0.0, 0.002, 0.01, 0.05, 1.0])
async def test_workers_stopped_at_any_moment_close_their_connections(
    settings: Settings,
    committed: SessionMaker,
    embedder: WordHashEmbedder,
    app_engine: AsyncEngine,
    seconds: float,
) -> None:
    async def started_and_stopped() -> None:
        async with workers(settings, committed, embedder):
            await asyncio.sleep(0)  # the workers' task starts
            await asyncio.sleep(seconds)

    # a cancel swallowed by a worker still starting would leave this block waiting forever
    await asyncio.wait_for(started_and_stopped(), timeout=60)
    for _ in range(10):  # a pool left open would connect again in the background meanwhile
        await asyncio.sleep(0.1)
        assert await queue_connections(app_engine) == 0


WORKERS_STOP_SECONDS = 3.0  # no turn in flight: nothing to wait for


async def test_workers_stop_within_their_bound_while_the_database_is_down(
    settings: Settings, embedder: WordHashEmbedder
) -> None:
    """Issue 47: with the database down, a SIGTERM took 18 s (here 30) to end the process,
    the workers' shutdown waiting on connections that could not come. With no turn in
    flight they stop within seconds, heartbeat interval of production included."""
    with scratch_directory("rag-workers-pg-") as directory:
        database = PrivateDatabase(directory / "pgdata")
        server = await anyio.to_thread.run_sync(database.start)
        try:
            url = await provision(
                server, app_role=settings.app_role, embedding_dimensions=DIMENSIONS
            )
            own = settings.model_copy(
                update={
                    "database_url": SecretStr(url),
                    "job_heartbeat_seconds": 10.0,
                    "job_stalled_seconds": 30.0,
                }
            )
            engine = create_engine(url, pool_size=1)
            try:
                async with workers(own, create_sessionmaker(engine), embedder):
                    await asyncio.sleep(2)  # registered, listening, polling
                    await anyio.to_thread.run_sync(database.stop)
                    await asyncio.sleep(4)  # the pool and the listener find it gone
                    started = time.monotonic()
                took = time.monotonic() - started
            finally:
                await engine.dispose()
        finally:
            await anyio.to_thread.run_sync(database.stop)
    assert took < WORKERS_STOP_SECONDS, f"{took:.1f} s to stop"
