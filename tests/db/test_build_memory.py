"""A dedicated index's build gets the maintenance_work_mem its graph needs: pgvector builds the
graph in memory and finishes on disk, 4-5x slower, the part that does not fit."""

from __future__ import annotations

import asyncio
import math

import asyncpg
import pytest

from app.db.indexes import BUILD_MEMORY_FLOOR_MB, build_memory_bytes, build_memory_mb
from tests.conftest import DatabaseUrls

SPILLED = "hnsw graph no longer fits into maintenance_work_mem"


def test_build_memory_grows_with_the_graph_between_the_floor_and_the_ceiling() -> None:
    assert build_memory_mb(5_000, 384, ceiling_mb=2048) == BUILD_MEMORY_FLOOR_MB
    assert build_memory_mb(50_000, 384, ceiling_mb=2048) == 120  # 50,000 x 2,286 B, +10%
    assert build_memory_mb(500_000, 384, ceiling_mb=2048) == 1_200
    assert build_memory_mb(500_000, 1536, ceiling_mb=2048) == 2048  # the ceiling
    assert build_memory_mb(100_000, 1536, ceiling_mb=64) == 64


async def spilled(conn: asyncpg.Connection, memory_kb: int) -> bool:
    notices: list[str] = []
    conn.add_log_listener(lambda _conn, message: notices.append(message.message))
    await conn.execute(f"SET maintenance_work_mem = '{memory_kb}kB'")
    await conn.execute("CREATE INDEX probe_hnsw ON probe USING hnsw (v vector_cosine_ops)")
    await conn.execute("DROP INDEX probe_hnsw")
    await asyncio.sleep(0)  # notices are delivered by the event loop
    return any(SPILLED in notice for notice in notices)


@pytest.mark.parametrize("dimensions", [8, 384, 1536])
async def test_the_estimate_holds_pgvectors_graph_and_is_not_twice_it(
    database: DatabaseUrls, dimensions: int
) -> None:
    """Built with the memory the service would give it, a graph stays in memory; with half of
    it, pgvector says it no longer fits: the estimate is neither short nor wasteful."""
    rows = math.ceil(6 * 2**20 / (4 * dimensions + 750))  # a graph of ~6 MB
    conn = await asyncpg.connect(database.owner_url)
    try:
        await conn.execute("SET max_parallel_maintenance_workers = 0")
        await conn.execute(f"CREATE TEMP TABLE probe (v vector({dimensions}))")
        await conn.execute(
            f"INSERT INTO probe SELECT (SELECT array_agg(random() - 0.5)"
            f" FROM generate_series(1, {dimensions}) WHERE g > 0)::vector"
            f" FROM generate_series(1, {rows}) g"
        )
        given_kb = math.ceil(build_memory_bytes(rows, dimensions) / 1024)
        assert not await spilled(conn, given_kb)
        assert await spilled(conn, given_kb // 2)
    finally:
        await conn.close()
