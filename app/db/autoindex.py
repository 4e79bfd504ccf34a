"""The service's own upkeep of dedicated HNSW indexes: what `rag index` does, every
`RAG_AUTO_INDEX_SECONDS`, so a tenant that crosses `RAG_DEDICATED_INDEX_MIN_CHUNKS` gets its
own graph (and its recall at the automatic ef_search) without anyone running a command.

It needs the owner's URL (`RAG_MIGRATION_DATABASE_URL`; `rag serve` on its embedded database
has it): index DDL is the tables' owner's. Deployments that keep that URL away from the app
(the compose stack) run `rag index` from the migration service instead. Among several
processes or replicas, a session-level advisory lock on the owner's connection lets one do a
round while the others skip it. A round that fails is logged and tried again at the next.
Each build gets the memory its graph needs, up to `RAG_INDEX_BUILD_MEMORY_MAX_MB`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text

from app.db.engine import create_engine, create_sessionmaker
from app.db.indexes import index_connection, maintain_dedicated_indexes
from app.db.tenancy import SessionMaker

_log = logging.getLogger(__name__)
LOCK_KEY = 0x7261675F69647831  # "rag_idx1": one upkeep round at a time, whatever the process


@asynccontextmanager
async def maintaining_indexes(
    runtime_url: str,
    owner_url: str | None,
    *,
    every_seconds: float,
    min_chunks: int,
    build_memory_max_mb: int,
) -> AsyncIterator[None]:
    """Upkeep rounds every `every_seconds` while the block runs (none without an owner URL or
    with `every_seconds` 0)."""
    if not runtime_url or owner_url is None or every_seconds <= 0:
        yield
        return
    engine = create_engine(runtime_url, pool_size=1)
    sessions = create_sessionmaker(engine)

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_seconds)
            await upkeep_round(
                sessions, owner_url, min_chunks=min_chunks, build_memory_max_mb=build_memory_max_mb
            )

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await engine.dispose()


async def upkeep_round(
    sessions: SessionMaker, owner_url: str, *, min_chunks: int, build_memory_max_mb: int
) -> bool:
    """One round unless another process holds the lock; False when it skipped or failed."""
    try:
        async with index_connection(owner_url, maintenance_work_mem="64MB") as lock:
            taken = await lock.scalar(text("select pg_try_advisory_lock(:key)"), {"key": LOCK_KEY})
            if not taken:
                return False
            try:
                changes = await maintain_dedicated_indexes(
                    sessions,
                    owner_url,
                    min_chunks=min_chunks,
                    build_memory_max_mb=build_memory_max_mb,
                )
            finally:
                await lock.execute(text("select pg_advisory_unlock(:key)"), {"key": LOCK_KEY})
    except Exception:
        _log.exception("dedicated index upkeep failed; tried again at the next round")
        return False
    for change in changes:
        if change.action != "kept":
            _log.info(
                "dedicated index %s for a tenant of %d chunks in %.1f s%s",
                change.action,
                change.chunks,
                change.seconds or 0.0,
                f" (maintenance_work_mem {change.memory})" if change.memory else "",
            )
    return True
