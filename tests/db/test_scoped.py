"""The direct tenant-scoped transaction (app/db/scoped.py), as the runtime role with real
commits: the settings arrive exactly, end with the transaction, and a connection never goes
back to the pool inside one; a connection that died in the pool is replaced."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, create_sessionmaker
from app.db.scoped import scope_message, scoped_connection, sql_literal
from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.ingest.documents import DocumentInput, ingest_documents
from app.ingest.parsing import SourceType
from app.retrieval.filters import SearchFilters
from app.retrieval.search import SearchRequest, _nearest_hits, _where, search
from app.settings import Settings
from app.tenants import create_tenant
from tests.conftest import small_chunker
from tests.fakes import WordHashEmbedder

HOSTILE = "t'; select pg_sleep(10); --\\' \"x\" ünï"


@pytest.fixture
async def one_connection(settings: Settings) -> AsyncIterator[SessionMaker]:
    """A pool of exactly one connection: whatever a transaction leaves on it, the next sees."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    engine.pool._max_overflow = 0  # type: ignore[attr-defined]
    yield create_sessionmaker(engine)
    await engine.dispose()


async def _state(sessions: SessionMaker) -> tuple[str, str]:
    """The tenant setting and the transaction status a fresh scoped transaction starts from."""
    engine = sessions.kw["bind"]
    assert isinstance(engine, AsyncEngine)
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        tenant = await driver.fetchval(
            "select coalesce(current_setting('app.tenant_id', true), '')"
        )
        in_transaction = "yes" if driver.is_in_transaction() else "no"
    return str(tenant), in_transaction


def test_literals_are_quoted_and_nul_refused() -> None:
    assert sql_literal("it's") == "'it''s'"
    assert sql_literal("a\\b") == "'a\\b'"
    with pytest.raises(ValueError, match="NUL"):
        sql_literal("a\x00b")
    assert scope_message("BEGIN", {"x.y": "1"}) == "BEGIN; SELECT set_config('x.y', '1', true)"


async def test_settings_arrive_exactly_and_end_with_the_transaction(
    one_connection: SessionMaker,
) -> None:
    async with scoped_connection(
        one_connection, HOSTILE, settings={"hnsw.ef_search": "77"}
    ) as driver:
        assert await driver.fetchval("select current_setting('app.tenant_id')") == HOSTILE
        assert await driver.fetchval("select current_setting('hnsw.ef_search')") == "77"
        assert driver.is_in_transaction()
    assert await _state(one_connection) == ("", "no")


async def test_an_error_rolls_back_and_the_connection_is_clean(
    one_connection: SessionMaker,
) -> None:
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with scoped_connection(one_connection, "scoped-error") as driver:
            await driver.fetchval("select 1 / 0")
    assert await _state(one_connection) == ("", "no")


async def test_a_cancelled_query_never_returns_its_transaction_to_the_pool(
    one_connection: SessionMaker,
) -> None:
    async def slow() -> None:
        async with scoped_connection(one_connection, "scoped-cancel") as driver:
            await driver.fetchval("select pg_sleep(5)")

    task = asyncio.create_task(slow())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _state(one_connection) == ("", "no")
    async with scoped_connection(one_connection, "scoped-after") as driver:
        assert await driver.fetchval("select current_setting('app.tenant_id')") == "scoped-after"


async def _terminate(sessions: SessionMaker, pid: int) -> None:
    """Kill a backend from another connection, as a server restart would."""
    engine = sessions.kw["bind"]
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    killer = await asyncpg.connect(url)
    try:
        assert await killer.fetchval("select pg_terminate_backend($1)", pid)
    finally:
        await killer.close()
    await asyncio.sleep(0.2)


async def test_a_connection_that_died_in_the_pool_is_replaced(
    one_connection: SessionMaker,
) -> None:
    async with scoped_connection(one_connection, "scoped-first") as driver:
        pid = await driver.fetchval("select pg_backend_pid()")
    await _terminate(one_connection, pid)
    async with scoped_connection(one_connection, "scoped-second") as driver:
        assert await driver.fetchval("select pg_backend_pid()") != pid
        assert await driver.fetchval("select current_setting('app.tenant_id')") == "scoped-second"


async def test_the_orm_path_replaces_a_dead_connection_too(one_connection: SessionMaker) -> None:
    async with tenant_transaction(one_connection, "orm-first") as session:
        pid = (await session.execute(text("select pg_backend_pid()"))).scalar_one()
    await _terminate(one_connection, pid)
    async with tenant_transaction(one_connection, "orm-after") as session:
        tenant = await session.scalar(text("select current_setting('app.tenant_id')"))
        assert tenant == "orm-after"
    async with registry_transaction(one_connection) as session:
        assert await session.scalar(text("select 1")) == 1


async def test_the_direct_search_equals_the_session_search(
    one_connection: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """The direct statement (no filters) and the session's give the same hits, with and
    without a threshold."""
    tenant_id = f"scoped-{uuid.uuid4().hex[:8]}"
    async with registry_transaction(one_connection) as session:
        await create_tenant(session, tenant_id)
    documents = [
        DocumentInput(
            content=f"{topic} " * 3 + f"note {i} about {topic} and other things",
            source_type=SourceType.TEXT,
            external_id=f"d{i}",
            title=f"Doc {i}",
        )
        for i, topic in enumerate(["solar power", "wind power", "rivers", "solar cells", "tea"])
    ]
    await ingest_documents(
        one_connection,
        embedder,
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=documents,
    )
    for threshold in (None, 0.2):
        request = SearchRequest(query="solar power", top_k=3, threshold=threshold)
        direct = await search(one_connection, embedder, tenant_id=tenant_id, request=request)
        async with tenant_transaction(one_connection, tenant_id) as session:
            where = _where(tenant_id, embedder.model_id, request, [])
            expected, total = await _nearest_hits(
                session, await embedder.embed_query("solar power"), where, request
            )
        assert direct.hits == expected
        assert direct.total_found == total
        assert direct.hits
    filtered = SearchRequest(query="solar", top_k=3, filters=SearchFilters(collections=["x"]))
    outcome = await search(one_connection, embedder, tenant_id=tenant_id, request=filtered)
    assert outcome.hits == []
