"""Operations on a live cluster while the service serves: a third worker added and the shards
rebalanced onto it under searches and ingests; a large tenant isolated to a shard of its own
and moved to a node of its own, its searches served throughout. Each on a cluster of its own
(they change its nodes)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr

from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.citus.cluster import Cluster, running_cluster
from tests.conftest import TenantClient, citus_database, new_tenant, running_app
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow

TENANTS = 6


@dataclass
class Served:
    cluster: Cluster
    database: str
    http: AsyncClient
    settings: Settings
    sessions: SessionMaker


@pytest.fixture
async def served(settings: Settings, embedder: WordHashEmbedder) -> AsyncIterator[Served]:
    with running_cluster(workers=2, shard_count=8) as cluster:
        database = f"rag_ops_{uuid.uuid4().hex[:6]}"
        urls = await citus_database(cluster, database)
        on_cluster = settings.model_copy(update={"database_url": SecretStr(urls.app_url)})
        engine = create_engine(urls.app_url, pool_size=4)
        sessions = create_sessionmaker(engine)
        try:
            async with (
                running_app(on_cluster, sessions, embedder) as app,
                AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
            ):
                yield Served(cluster, database, http, on_cluster, sessions)
        finally:
            await engine.dispose()


async def _ingest(tenant: TenantClient, name: str) -> int:
    body = {"title": name, "content": f"{name}: a note of {tenant.tenant_id} about ore."}
    reply = await tenant.http.post("/api/rag/documents", json=body, headers=tenant.headers)
    if reply.status_code == 201:
        WRITTEN.setdefault(tenant.tenant_id, []).append(reply.json()["document_id"])
    return reply.status_code


WRITTEN: dict[str, list[str]] = {}


async def _search(tenant: TenantClient) -> int:
    reply = await tenant.http.post(
        "/api/rag/search", json={"query": "ore note", "mode": "hybrid"}, headers=tenant.headers
    )
    if reply.status_code == 200:  # never another tenant's rows
        for chunk in reply.json()["chunks"]:
            assert tenant.tenant_id in chunk["content"], chunk
    return reply.status_code


async def _under_traffic(
    tenants: list[TenantClient], operation: Callable[[], Awaitable[None]], *, ingest: bool
) -> tuple[Counter[int], dict[str, int]]:
    """Run `operation` while every tenant searches (and ingests a note per round): the
    statuses seen, and how many notes each tenant was told were stored."""
    statuses: Counter[int] = Counter()
    stored = {t.tenant_id: 0 for t in tenants}
    stop = asyncio.Event()

    async def traffic() -> None:
        round_ = 0
        while not stop.is_set():
            round_ += 1
            for tenant in tenants:
                statuses[await _search(tenant)] += 1
                if ingest:
                    status = await _ingest(tenant, f"note {round_}")
                    statuses[status] += 1
                    stored[tenant.tenant_id] += status == 201
            await asyncio.sleep(0)

    load = asyncio.create_task(traffic())
    try:
        await asyncio.sleep(0.5)
        await operation()
        await asyncio.sleep(0.5)
    finally:
        stop.set()
        await load
    return statuses, stored


async def _documents(tenant: TenantClient) -> int:
    reply = await tenant.http.get("/api/rag/documents?limit=1", headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    total: int = reply.json()["total"]
    return total


async def test_a_worker_added_and_shards_rebalanced_under_searches_and_ingests(
    served: Served,
) -> None:
    tenants = [
        await new_tenant(served.http, served.settings, served.sessions, tier="enterprise")
        for _ in range(TENANTS)
    ]
    for tenant in tenants:
        assert await _ingest(tenant, "first") == 201

    async def add_and_rebalance() -> None:
        node = await asyncio.to_thread(served.cluster.add_worker)
        await asyncio.to_thread(
            served.cluster.sql, "SELECT rebalance_table_shards()", database=served.database
        )
        placements = await asyncio.to_thread(
            served.cluster.sql,
            f"SELECT count(*) FROM citus_shards WHERE nodeport = {node.port}",
            database=served.database,
        )
        assert int(placements) > 0, "the rebalance moved nothing onto the new worker"

    statuses, stored = await _under_traffic(tenants, add_and_rebalance, ingest=True)
    assert set(statuses) <= {200, 201}, statuses
    for tenant in tenants:  # nothing lost: the first note and every one stored meanwhile
        listed = await tenant.http.get("/api/rag/documents?limit=200", headers=tenant.headers)
        have = {d["document_id"] for d in listed.json()["items"]}
        missing = set(WRITTEN[tenant.tenant_id]) - have
        assert not missing, (missing, len(have), stored[tenant.tenant_id])
        assert await _documents(tenant) == 1 + stored[tenant.tenant_id]


async def test_a_large_tenant_isolated_and_moved_to_a_node_of_its_own(served: Served) -> None:
    large, *others = [
        await new_tenant(served.http, served.settings, served.sessions, tier="enterprise")
        for _ in range(3)
    ]
    for number in range(20):
        assert await _ingest(large, f"large {number}") == 201
    for tenant in others:
        assert await _ingest(tenant, "small") == 201
    moved: dict[str, int] = {}

    async def isolate_and_move() -> None:
        shard = int(
            await asyncio.to_thread(
                served.cluster.sql,
                f"SELECT isolate_tenant_to_new_shard('chunks', '{large.tenant_id}', 'CASCADE')",
                database=served.database,
            )
        )
        source = int(
            await asyncio.to_thread(
                served.cluster.sql,
                f"SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = {shard}",
                database=served.database,
            )
        )
        node = await asyncio.to_thread(served.cluster.add_worker)
        # a new node gets the reference tables (the tenant registry) before any shard
        await asyncio.to_thread(
            served.cluster.sql, "SELECT replicate_reference_tables()", database=served.database
        )
        await asyncio.to_thread(
            served.cluster.sql,
            f"SELECT citus_move_shard_placement({shard}, '127.0.0.1', {source},"
            f" '127.0.0.1', {node.port})",
            database=served.database,
        )
        moved.update(shard=shard, port=node.port)

    statuses, _ = await _under_traffic([large, *others], isolate_and_move, ingest=False)
    assert set(statuses) == {200}, statuses
    # the new node holds the large tenant's shard group (beside the reference tables' copy)
    # and nothing else
    shards = served.cluster.sql(
        "SELECT count(DISTINCT shardid) FROM citus_shards"
        f" WHERE nodeport = {moved['port']} AND citus_table_type = 'distributed'",
        database=served.database,
    )
    tables = served.cluster.sql(
        "SELECT count(*) FROM pg_dist_partition WHERE colocationid ="
        " (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'chunks'::regclass)",
        database=served.database,
    )
    assert int(shards) == int(tables)  # one shard per co-located table: the tenant's own
    assert await _documents(large) == 20
    assert all([await _search(t) == 200 for t in [large, *others]])
