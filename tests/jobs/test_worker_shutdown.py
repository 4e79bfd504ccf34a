"""In-process workers stopped at any moment stop, and leave no connection behind: stopped
while their queue's pool is still opening, the pool is closed (its connections would otherwise
keep reconnecting to a server that has stopped); stopped while procrastinate's worker is
starting, the cancel is not swallowed, so `rag serve` finishes shutting down."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import workers

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
