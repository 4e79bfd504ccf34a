"""Dedicated HNSW indexes for large tenants: what `rag index` plans, and that a search of the
tenant uses its own index (and finds the same chunks) once it exists."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.autoindex import LOCK_KEY, maintaining_indexes, upkeep_round
from app.db.embedded import OWNER_ROLE, drop_database, with_database, with_user
from app.db.engine import create_engine, create_sessionmaker
from app.db.indexes import (
    DedicatedIndex,
    by_dedicated_index_size,
    chunk_counts,
    create_dedicated_index,
    dedicated_index_name,
    dedicated_indexes,
    drop_dedicated_index,
    index_connection,
    plan_indexes,
)
from app.db.scoped import scoped_connection
from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.retrieval import SearchRequest, search
from app.retrieval.filters import SearchFilters
from app.retrieval.planning import EF_SHARED, EF_STEPS, index_settings
from tests.conftest import (
    OWNER_PASSWORD,
    DatabaseUrls,
    fresh_database,
    registered_tenant,
    small_chunker,
)
from tests.fakes import WordHashEmbedder
from tests.plans import vector_search_plan

WORDS = [
    "heron",
    "otter",
    "badger",
    "vole",
    "stoat",
    "marten",
    "beaver",
    "lynx",
    "wolf",
    "elk",
    "moose",
    "hare",
]


def test_plan_creates_over_the_threshold_and_drops_under_half_of_it() -> None:
    counts = {"big": 100, "edge": 60, "shrunk": 40, "small": 5}
    existing = [
        DedicatedIndex("ix_a", "edge", valid=True),
        DedicatedIndex("ix_b", "shrunk", valid=True),
        DedicatedIndex("ix_c", "gone", valid=True),
        DedicatedIndex("ix_d", "big", valid=False),
    ]
    plan = plan_indexes(counts, existing, min_chunks=100)
    assert plan.create == ["big"]  # its earlier build failed: built again
    assert [index.tenant_id for index in plan.drop] == ["shrunk", "gone", "big"]
    assert [index.tenant_id for index in plan.keep] == ["edge"]  # 60 >= 100 // 2


def test_index_names_are_identifiers_whatever_the_tenant_id() -> None:
    name = dedicated_index_name("Acme Corp; DROP TABLE chunks --")
    assert name.isidentifier()
    assert len(name) <= 63
    assert name == dedicated_index_name("Acme Corp; DROP TABLE chunks --")


@pytest.fixture
async def owner(database: DatabaseUrls) -> AsyncIterator[AsyncConnection]:
    async with index_connection(database.owner_url, maintenance_work_mem="64MB") as conn:
        yield conn


async def seeded_tenant(sessions: SessionMaker, rows: int) -> str:
    tenant_id = await registered_tenant(sessions, "idx")
    chunker = small_chunker()
    documents = [
        DocumentInput(
            content=" ".join(WORDS[(i * 5 + j) % len(WORDS)] for j in range(i % 7 + 2)) + f" {i}",
            source_type=SourceType.TEXT,
            external_id=f"d{i}",
        )
        for i in range(rows)
    ]
    await ingest_documents(
        sessions, WordHashEmbedder(384), chunker=chunker, tenant_id=tenant_id, documents=documents
    )
    return tenant_id


async def vector_plan(
    engine: AsyncEngine,
    sessions: SessionMaker,
    tenant_id: str,
    filters: SearchFilters | None = None,
) -> str:
    """EXPLAIN of the statement a vector search sends, with the search's own settings, and
    sorting made unattractive: a test tenant is small enough that sorting all its rows is the
    cheapest plan (as it should be); what is checked here is which index an index-ordered
    plan picks, i.e. that the planner proves the dedicated index's predicate from the query."""
    embedder = WordHashEmbedder(384)
    request = SearchRequest(query="otter badger", top_k=5, filters=filters or SearchFilters())
    vector = await embedder.embed_query(request.query)
    return await vector_search_plan(
        sessions, tenant_id, embedder.model_id, vector, request, {"enable_sort": "off"}
    )


async def test_a_search_uses_the_tenants_dedicated_index_and_finds_the_same(
    app_engine: AsyncEngine, owner: AsyncConnection
) -> None:
    sessions = create_sessionmaker(app_engine)
    tenant_id = await seeded_tenant(sessions, 300)
    other = await seeded_tenant(sessions, 30)
    request = SearchRequest(query="otter badger marten", top_k=10, ef_search=100)
    # the direct path's collection filter, a parameter of the tenant's own statement
    in_default = replace(request, filters=SearchFilters(collections=["default"]))
    embedder = WordHashEmbedder(384)
    before = await search(sessions, embedder, tenant_id=tenant_id, request=request)
    assert (await search(sessions, embedder, tenant_id=tenant_id, request=in_default)).hits
    assert (await chunk_counts(sessions))[tenant_id] == 300

    name = await create_dedicated_index(owner, tenant_id)
    assert DedicatedIndex(name, tenant_id, valid=True) in await dedicated_indexes(owner)
    options = await owner.scalar(
        text("select reloptions from pg_class where relname = :name"), {"name": name}
    )
    assert options == ["m=12", "ef_construction=128"]  # the dedicated graph's, not the shared
    try:
        assert name in await vector_plan(app_engine, sessions, tenant_id)
        assert name in await vector_plan(app_engine, sessions, tenant_id, in_default.filters)
        elsewhere = await vector_plan(app_engine, sessions, other)
        assert name not in elsewhere
        assert "ix_chunks_embedding_hnsw" in elsewhere
        after = await search(sessions, embedder, tenant_id=tenant_id, request=request)
        assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]
        filtered = await search(sessions, embedder, tenant_id=tenant_id, request=in_default)
        assert [h.chunk_id for h in filtered.hits] == [h.chunk_id for h in before.hits]
        async with tenant_transaction(sessions, tenant_id) as session:
            count = await session.scalar(text("select count(*) from chunks"))
        assert count == 300
    finally:
        await drop_dedicated_index(owner, DedicatedIndex(name, tenant_id, valid=True))
        assert tenant_id not in {i.tenant_id for i in await dedicated_indexes(owner)}


async def _ef_search(sessions: SessionMaker, tenant_id: str, ef_search: int | None) -> set[str]:
    """`hnsw.ef_search` as both transaction paths set it for a search of `tenant_id`, and as
    the statement reading the tenant's rows sees it (on Citus: on the tenant's worker)."""
    settings = index_settings(ef_search, tenant_id)
    on_rows = "select current_setting('hnsw.ef_search') from bm25_corpus where tenant_id = $1"
    async with tenant_transaction(sessions, tenant_id, settings=settings) as session:
        orm = await session.scalar(text("select current_setting('hnsw.ef_search')"))
    async with scoped_connection(sessions, tenant_id, settings=settings) as driver:
        direct = await driver.fetchval("select current_setting('hnsw.ef_search')")
        where_rows_are = await driver.fetchval(on_rows, tenant_id)
    return {orm, direct, where_rows_are}


@pytest.mark.on_citus
async def test_ef_search_follows_the_size_of_the_index_a_search_uses(
    app_engine: AsyncEngine, owner: AsyncConnection
) -> None:
    """No ef_search given: the shared index's value until the tenant has its own index, then
    the step its index's size falls in; a given ef_search always wins."""
    sessions = create_sessionmaker(app_engine)
    tenant_id = await seeded_tenant(sessions, 40)
    assert await _ef_search(sessions, tenant_id, None) == {str(EF_SHARED)}
    assert await _ef_search(sessions, tenant_id, 77) == {"77"}
    name = await create_dedicated_index(owner, tenant_id)
    try:
        assert await _ef_search(sessions, tenant_id, None) == {str(EF_STEPS[0][1])}
        assert await _ef_search(sessions, tenant_id, 77) == {"77"}
        steps = ((10, 11), (40, 22), (41, 33))  # the tenant has 40 chunks: not under 40
        async with tenant_transaction(
            sessions,
            tenant_id,
            settings={"x.ef": by_dedicated_index_size(tenant_id, steps, largest=44, shared=55)},
        ) as session:
            assert await session.scalar(text("select current_setting('x.ef')")) == "33"
    finally:
        await drop_dedicated_index(owner, DedicatedIndex(name, tenant_id, valid=True))
    assert await _ef_search(sessions, tenant_id, None) == {str(EF_SHARED)}


async def test_the_service_gives_a_tenant_that_crossed_the_threshold_its_own_index(
    database: DatabaseUrls,
) -> None:
    """The upkeep loop (what a `rag serve` with the owner's URL runs) builds the index of a
    tenant over the threshold, leaves a small one alone, and one round at a time runs: a
    round that finds the lock taken skips."""
    name = "rag_autoindex_test"
    app_url = await fresh_database(database, name)
    owner_url = with_user(with_database(database.superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    engine = create_engine(app_url, pool_size=2)
    sessions = create_sessionmaker(engine)
    try:
        big = await seeded_tenant(sessions, 40)
        small = await seeded_tenant(sessions, 5)
        async with maintaining_indexes(
            app_url, owner_url, every_seconds=0.2, min_chunks=20, build_memory_max_mb=64
        ):
            for _ in range(100):
                async with index_connection(owner_url, maintenance_work_mem="64MB") as conn:
                    built = {i.tenant_id for i in await dedicated_indexes(conn) if i.valid}
                if big in built:
                    break
                await asyncio.sleep(0.2)
        assert built == {big}
        assert small not in built
        async with index_connection(owner_url, maintenance_work_mem="64MB") as holder:
            await holder.execute(text("select pg_advisory_lock(:key)"), {"key": LOCK_KEY})
            assert not await upkeep_round(
                sessions, owner_url, min_chunks=20, build_memory_max_mb=64
            )
        assert await upkeep_round(sessions, owner_url, min_chunks=20, build_memory_max_mb=64)
        assert await _ef_search(sessions, big, None) == {str(EF_STEPS[0][1])}
    finally:
        await engine.dispose()
        await drop_database(database.superuser_url, name)
