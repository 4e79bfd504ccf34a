"""The tenant-scoped transactions of both paths (app/db/scoped.py, the direct one; tenancy.py,
the session's), as the runtime role with real commits: the settings (settings_sql.py) arrive
exactly, as SET LOCAL, end with the transaction, and a connection never goes back to the pool
inside one; a connection that died in the pool is replaced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.db.engine import create_engine, create_sessionmaker
from app.db.scoped import scoped_connection, settled
from app.db.settings_sql import Computed, scope_message, sql_literal, text_array_literal
from app.db.state import plans_of_sessions
from app.db.tenancy import SessionMaker, reading_as, registry_transaction, tenant_transaction
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.permissions import Readers
from app.retrieval.filters import SearchFilters
from app.retrieval.nearest import nearest_hits
from app.retrieval.requests import SearchRequest
from app.retrieval.search import _where, search
from app.settings import Settings
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

HOSTILE = "t'; select pg_sleep(10); --\\' \"x\" ünï"


@pytest.fixture
async def one_connection(settings: Settings) -> AsyncIterator[SessionMaker]:
    """A pool of exactly one connection: whatever a transaction leaves on it, the next sees."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    yield create_sessionmaker(engine)
    await engine.dispose()


LEFT = (
    "select coalesce(current_setting('app.tenant_id', true), ''),"
    " coalesce(current_setting('app.principals', true), ''),"
    " coalesce(nullif(current_setting('hnsw.ef_search', true), '40'), '')"
)
CLEAN = ("", "", "", "no")  # no tenant, principals or ef_search left; no transaction open
PRINCIPALS = frozenset({"user:o'brien", "group:a\\b", 'group:"q"', "group:'; reset all; --"})
EXPECTED_PRINCIPALS = text_array_literal(sorted(PRINCIPALS))


async def _state(sessions: SessionMaker) -> tuple[str, str, str, str]:
    """The settings and the transaction status a fresh transaction on the pool starts from
    (`hnsw.ef_search` only when it is not the server's default)."""
    engine = sessions.kw["bind"]
    assert isinstance(engine, AsyncEngine)
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        row = await driver.fetchrow(LEFT)
        assert row is not None
        in_transaction = "yes" if driver.is_in_transaction() else "no"
    return str(row[0]), str(row[1]), str(row[2]), in_transaction


async def _last_message(sessions: SessionMaker, pid: int) -> str:
    """What the server last received from backend `pid`, read on a connection of its own."""
    engine = sessions.kw["bind"]
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    other = await asyncpg.connect(url)
    try:
        query = await other.fetchval("select query from pg_stat_activity where pid = $1", pid)
    finally:
        await other.close()
    return str(query)


def test_every_setting_is_a_set_local_statement_computed_ones_through_execute() -> None:
    message = scope_message(
        "BEGIN",
        {"app.tenant_id": "it's", "hnsw.ef_search": Computed("'7'"), "plan_cache_mode": "x"},
    )
    assert message == (
        "BEGIN;"
        " DO 'BEGIN SET LOCAL app.tenant_id = ''it''''s'';"
        " SET LOCAL plan_cache_mode = ''x'';"
        " EXECUTE format(''SET LOCAL hnsw.ef_search = %L'', (''7'')); END'"
    )
    assert scope_message(None, {"x.y": "1"}) == "DO 'BEGIN SET LOCAL x.y = ''1''; END'"
    assert scope_message(None, {"x.y": Computed("'1'")}) == (
        "DO 'BEGIN EXECUTE format(''SET LOCAL x.y = %L'', (''1'')); END'"
    )


def test_a_guarded_computed_value_is_worked_out_only_when_its_condition_holds() -> None:
    guarded = Computed("(select '9')", when="to_regclass('ix') is not null", otherwise="5")
    assert scope_message(None, {"x.y": guarded}) == (
        "DO 'BEGIN IF to_regclass(''ix'') is not null"
        " THEN EXECUTE format(''SET LOCAL x.y = %L'', ((select ''9'')));"
        " ELSE SET LOCAL x.y = ''5''; END IF; END'"
    )


def test_literals_are_quoted_and_nul_refused() -> None:
    assert sql_literal("it's") == "'it''s'"
    assert sql_literal("a\\b") == "'a\\b'"
    with pytest.raises(ValueError, match="NUL"):
        sql_literal("a\x00b")
    with pytest.raises(ValueError, match="NUL"):
        scope_message("BEGIN", {"app.tenant_id": "a\x00b"})


@pytest.mark.parametrize(
    "name", ["App.tenant", "a.b.c", "x; reset all", "x = '1'; set y", "", "1a", "a.", "é"]
)
def test_a_bad_setting_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a setting name"):
        scope_message("BEGIN", {name: "1"})
    with pytest.raises(ValueError, match="not a setting name"):
        scope_message(None, {name: Computed("'1'")})


async def test_nul_and_a_bad_name_are_refused_on_both_paths(one_connection: SessionMaker) -> None:
    for tenant, settings in (("t", {"a;b": "1"}), ("t\x00", {})):
        with pytest.raises(ValueError, match=r"setting name|NUL"):
            async with scoped_connection(one_connection, tenant, settings=settings):
                pass
        with pytest.raises(ValueError, match=r"setting name|NUL"):
            async with tenant_transaction(one_connection, tenant, settings=settings):
                pass
    assert await _state(one_connection) == CLEAN


async def test_the_connection_keeps_backslashes_plain(app_engine: AsyncEngine) -> None:
    """On whatever the server's or the role's default: the inlined literals depend on it."""
    async with app_engine.connect() as conn:
        query = "select setting, source from pg_settings where name = :name"
        row = await conn.execute(text(query), {"name": "standard_conforming_strings"})
        assert tuple(row.one()) == ("on", "client")


async def test_settings_arrive_exactly_as_set_local_and_end_with_the_transaction(
    one_connection: SessionMaker,
) -> None:
    sessions = reading_as(one_connection, Readers(PRINCIPALS))
    async with scoped_connection(sessions, HOSTILE, settings={"hnsw.ef_search": "77"}) as driver:
        # pg_settings reports source 'session' for SET LOCAL and set_config alike: the text
        # the server received is what tells them apart
        message = await _last_message(one_connection, driver.get_server_pid())
        assert message.startswith("BEGIN; DO 'BEGIN SET LOCAL hnsw.ef_search = ''77'';")
        assert " SET LOCAL app.tenant_id = " in message
        assert "set_config" not in message
        assert tuple(await driver.fetchrow(LEFT) or ()) == (HOSTILE, EXPECTED_PRINCIPALS, "77")
        # what the policies compare access lists with: exactly the caller's principals
        assert set(await driver.fetchval("select rag_principals()")) == PRINCIPALS
        assert driver.is_in_transaction()
    assert await _state(one_connection) == CLEAN


async def test_an_error_rolls_back_and_the_connection_is_clean(
    one_connection: SessionMaker,
) -> None:
    with pytest.raises(asyncpg.DivisionByZeroError):
        await _fail_directly(reading_as(one_connection, Readers(PRINCIPALS)))
    assert await _state(one_connection) == CLEAN


async def test_the_session_path_sets_them_in_its_transaction_before_its_first_statement(
    one_connection: SessionMaker,
) -> None:
    """The hook opens the transaction the driver adapter would open lazily, then sends the
    settings in it: they are the last thing the server received before the caller's first
    statement, and that statement sees them."""
    sessions = reading_as(one_connection, Readers(PRINCIPALS))
    async with sessions(info={"tenant_id": HOSTILE}) as session, session.begin():
        conn = await session.connection()
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        assert driver.is_in_transaction()
        message = await _last_message(one_connection, driver.get_server_pid())
        assert message.startswith("DO 'BEGIN SET LOCAL app.tenant_id = ")
        assert "set_config" not in message
        row = (await session.execute(text(LEFT))).one()
        assert tuple(row) == (HOSTILE, EXPECTED_PRINCIPALS, "")
    assert await _state(one_connection) == CLEAN
    with pytest.raises(DBAPIError, match="division by zero"):
        await _fail_in_session(sessions)
    assert await _state(one_connection) == CLEAN


async def _fail_in_session(sessions: SessionMaker) -> None:
    async with tenant_transaction(sessions, HOSTILE, settings={"hnsw.ef_search": "77"}) as session:
        row = (await session.execute(text(LEFT))).one()
        assert tuple(row) == (HOSTILE, EXPECTED_PRINCIPALS, "77")
        await session.execute(text("select 1 / 0"))


async def _fail_directly(sessions: SessionMaker) -> None:
    async with scoped_connection(sessions, HOSTILE, settings={"hnsw.ef_search": "77"}) as driver:
        assert tuple(await driver.fetchrow(LEFT) or ()) == (HOSTILE, EXPECTED_PRINCIPALS, "77")
        await driver.fetchval("select 1 / 0")


async def test_the_session_path_refuses_a_connection_without_a_transaction(
    one_connection: SessionMaker,
) -> None:
    """SET LOCAL outside a transaction would be a no-op: refused before anything is sent."""
    engine = one_connection.kw["bind"]
    autocommit = create_sessionmaker(engine.execution_options(isolation_level="AUTOCOMMIT"))
    with pytest.raises(RuntimeError, match="refusing SET LOCAL"):
        async with tenant_transaction(autocommit, "never"):
            pass
    assert await _state(one_connection) == CLEAN


async def test_a_rolled_back_savepoint_leaves_no_settings(app_engine: AsyncEngine) -> None:
    """A sessionmaker bound to a connection in a transaction gets savepoints on both paths;
    ROLLBACK TO SAVEPOINT takes their settings back."""
    async with app_engine.connect() as conn:
        outer = await conn.begin()
        await conn.execute(text("select 1"))  # the driver adapter sends BEGIN with a statement
        sessions = async_sessionmaker(
            bind=conn, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        sessions = reading_as(sessions, Readers(PRINCIPALS))
        with pytest.raises(asyncpg.DivisionByZeroError):
            await _fail_directly(sessions)
        assert tuple((await conn.execute(text(LEFT))).one()) == ("", "", "")
        with pytest.raises(DBAPIError, match="division by zero"):
            await _fail_in_session(sessions)
        assert tuple((await conn.execute(text(LEFT))).one()) == ("", "", "")
        await outer.rollback()


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
    assert await _state(one_connection) == CLEAN
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
    tenant_id = await registered_tenant(one_connection, "scoped")
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
            expected, total, _measured = await nearest_hits(
                session, await embedder.embed_query("solar power"), where, request
            )
        assert direct.hits == expected
        assert direct.total_found == total
        assert direct.hits
    filtered = SearchRequest(query="solar", top_k=3, filters=SearchFilters(collections=["x"]))
    outcome = await search(one_connection, embedder, tenant_id=tenant_id, request=filtered)
    assert outcome.hits == []


PLANS = (
    "select statement, generic_plans, custom_plans from pg_prepared_statements"
    " where statement like '%nearest AS MATERIALIZED%'"
)


async def test_a_tenant_searched_again_gets_its_own_statement_and_keeps_its_plan(
    one_connection: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """From a tenant's third direct search, its own statement (the tenant a constant, quoted:
    a hostile id finds nothing), planned once per connection and kept; before, the statement
    every tenant shares, planned at each run. The threshold's shortfall needs no second
    transaction on either."""
    tenant_id = await registered_tenant(one_connection, "plans")
    documents = [
        DocumentInput(content=f"{topic} notes", source_type=SourceType.TEXT, external_id=topic)
        for topic in ("solar power", "wind power", "river deltas", "green tea")
    ]
    await ingest_documents(
        one_connection, embedder, chunker=small_chunker(), tenant_id=tenant_id, documents=documents
    )
    request = SearchRequest(query="solar power", top_k=4, threshold=0.99)
    hits = set()
    for _ in range(6):  # every one direct: the tenant has no access lists (probed once)
        outcome = await search(one_connection, embedder, tenant_id=tenant_id, request=request)
        assert outcome.shortfall is not None
        assert outcome.shortfall.reason == "threshold"
        hits.add(tuple(h.chunk_id for h in outcome.hits))
    assert len(hits) == 1
    for _ in range(4):
        hostile = await search(one_connection, embedder, tenant_id=HOSTILE, request=request)
        assert hostile.hits == []
    async with scoped_connection(one_connection, tenant_id) as driver:
        rows = await driver.fetch(PLANS)
    mine = [row for row in rows if f"chunks.tenant_id = '{tenant_id}'" in row["statement"]]
    assert len(mine) == 1
    assert "$3" in mine[0]["statement"]  # the vector, the constant 1.0, the threshold
    assert "$4" not in mine[0]["statement"]
    assert (mine[0]["generic_plans"], mine[0]["custom_plans"]) == (4, 0)  # searches 3 to 6
    shared = [row for row in rows if "chunks.tenant_id = $" in row["statement"]]
    # the session's statement and the shared direct one: planned at each run, never kept
    assert sum(row["custom_plans"] for row in shared) >= 3
    assert all(row["generic_plans"] == 0 for row in shared)
    assert any(HOSTILE.replace("'", "''") in row["statement"] for row in rows)
    assert await _state(one_connection) == CLEAN


async def test_a_read_only_transaction_commits_after_the_caller_is_done(
    one_connection: SessionMaker,
) -> None:
    """`read_only`: BEGIN READ ONLY (a write fails), and COMMIT off the caller's path: the
    caller goes on while the connection is still out of the pool, committing; `settled`
    waits for it, and the connection comes back clean."""
    engine = one_connection.kw["bind"]
    assert isinstance(engine, AsyncEngine)
    async with scoped_connection(
        one_connection, "scoped-ro", settings={"hnsw.ef_search": "77"}, read_only=True
    ) as driver:
        assert await driver.fetchval("select current_setting('transaction_read_only')") == "on"
        assert await driver.fetchval("select current_setting('app.tenant_id')") == "scoped-ro"
    assert engine.pool.checkedout() == 1  # type: ignore[attr-defined]  # still committing
    await settled(one_connection)
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    assert await _state(one_connection) == CLEAN
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        async with scoped_connection(one_connection, "scoped-ro", read_only=True) as driver:
            await driver.execute("create temporary table scoped_ro_write (x int)")
    assert await _state(one_connection) == CLEAN
    for _ in range(3):  # back to back, each waiting for the one connection its commit frees
        async with scoped_connection(one_connection, "scoped-ro", read_only=True) as driver:
            assert await driver.fetchval("select current_setting('app.tenant_id')") == "scoped-ro"
    await settled(one_connection)
    assert await _state(one_connection) == CLEAN


TOPICS = ("solar power", "wind power", "green tea")


async def test_the_first_search_goes_direct_unless_the_caller_must_be_counted(
    one_connection: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """A tenant not searched lately is probed for access lists; without any, its first search
    takes the direct path (no session). With lists, a caller who sees part of the tenant goes
    the session's way once, where its count is made, then direct."""
    for listed in (False, True):
        tenant_id = await registered_tenant(one_connection, f"first-{listed}")
        documents = [
            DocumentInput(
                content=f"{topic} notes",
                source_type=SourceType.TEXT,
                external_id=topic,
                access=("group:a",) if listed and topic == "green tea" else (),
            )
            for topic in TOPICS
        ]
        await ingest_documents(
            reading_as(one_connection, Readers(frozenset({"group:a"}))),
            embedder,
            chunker=small_chunker(),
            tenant_id=tenant_id,
            documents=documents,
        )
        caller = reading_as(one_connection, Readers(frozenset({"user:b"})))
        request = SearchRequest(query="green tea", top_k=3)
        first = await search(caller, embedder, tenant_id=tenant_id, request=request)
        seen = {h.external_id for h in first.hits}
        assert seen == ({"solar power", "wind power"} if listed else set(TOPICS))  # RLS
        searches = plans_of_sessions(one_connection).searches
        assert searches.get(tenant_id) == (None if listed else 1)  # direct searches
        await search(caller, embedder, tenant_id=tenant_id, request=request)
        assert searches.get(tenant_id) == (1 if listed else 2)
