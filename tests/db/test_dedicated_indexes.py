"""Dedicated HNSW indexes for large tenants: what `rag index` plans, and that a search of the
tenant uses its own index (and finds the same chunks) once it exists."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db.engine import create_sessionmaker
from app.db.indexes import (
    DedicatedIndex,
    chunk_counts,
    create_dedicated_index,
    dedicated_index_name,
    dedicated_indexes,
    drop_dedicated_index,
    index_connection,
    plan_indexes,
)
from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.documents import DocumentInput, ingest_documents
from app.ingest.parsing import SourceType
from app.retrieval import SearchRequest, search
from app.retrieval.search import _index_settings
from tests.conftest import DatabaseUrls, registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

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


async def vector_plan(engine: AsyncEngine, sessions: SessionMaker, tenant_id: str) -> str:
    """EXPLAIN of the statement a vector search sends, with the search's own settings, and
    sorting made unattractive: a test tenant is small enough that sorting all its rows is the
    cheapest plan (as it should be); what is checked here is which index an index-ordered
    plan picks, i.e. that the planner proves the dedicated index's predicate from the query."""
    captured: list[tuple[str, Any]] = []

    def capture(_c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "nearest" in statement:
            captured.append((statement, parameters))

    request = SearchRequest(query="otter badger", top_k=5)
    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        await search(sessions, WordHashEmbedder(384), tenant_id=tenant_id, request=request)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    [(statement, parameters)] = captured
    settings = {**_index_settings(request), "enable_sort": "off"}
    async with tenant_transaction(sessions, tenant_id, settings=settings) as s:
        conn = await s.connection()
        driver: Any = (await conn.get_raw_connection()).driver_connection
        rows = await driver.fetch(f"EXPLAIN (COSTS OFF) {statement}", *parameters)
    return "\n".join(row[0] for row in rows)


async def test_a_search_uses_the_tenants_dedicated_index_and_finds_the_same(
    app_engine: AsyncEngine, owner: AsyncConnection
) -> None:
    sessions = create_sessionmaker(app_engine)
    tenant_id = await seeded_tenant(sessions, 300)
    other = await seeded_tenant(sessions, 30)
    request = SearchRequest(query="otter badger marten", top_k=10, ef_search=100)
    embedder = WordHashEmbedder(384)
    before = await search(sessions, embedder, tenant_id=tenant_id, request=request)
    assert (await chunk_counts(sessions))[tenant_id] == 300

    name = await create_dedicated_index(owner, tenant_id)
    assert DedicatedIndex(name, tenant_id, valid=True) in await dedicated_indexes(owner)
    try:
        assert name in await vector_plan(app_engine, sessions, tenant_id)
        elsewhere = await vector_plan(app_engine, sessions, other)
        assert name not in elsewhere
        assert "ix_chunks_embedding_hnsw" in elsewhere
        after = await search(sessions, embedder, tenant_id=tenant_id, request=request)
        assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]
        async with tenant_transaction(sessions, tenant_id) as session:
            count = await session.scalar(text("select count(*) from chunks"))
        assert count == 300
    finally:
        await drop_dedicated_index(owner, DedicatedIndex(name, tenant_id, valid=True))
        assert tenant_id not in {i.tenant_id for i in await dedicated_indexes(owner)}
