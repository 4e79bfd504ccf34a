"""A worker stopped under traffic: the tenants on the other worker are served throughout, the
stopped worker's tenants get 503 with Retry-After (never a 500), and all of them are served
again once it is back, by the same service (no restart)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr

from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.citus.cluster import Cluster, Node
from tests.conftest import DatabaseUrls, TenantClient, new_tenant, running_app
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow

PER_WORKER = 2
RECOVERY_SECONDS = 30


def worker_of(cluster: Cluster, database: str, tenant_id: str) -> int:
    """The port of the worker holding `tenant_id`'s shard group."""
    return int(
        cluster.sql(
            "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid ="
            f" get_shard_id_for_distribution_column('chunks', '{tenant_id}')",
            database=database,
        )
    )


@pytest.fixture
async def served(
    citus_db: DatabaseUrls, settings: Settings, embedder: WordHashEmbedder
) -> AsyncIterator[tuple[AsyncClient, Settings, SessionMaker]]:
    on_cluster = settings.model_copy(update={"database_url": SecretStr(citus_db.app_url)})
    engine = create_engine(citus_db.app_url, pool_size=4)
    sessions = create_sessionmaker(engine)
    try:
        async with (
            running_app(on_cluster, sessions, embedder) as app,
            AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
        ):
            yield http, on_cluster, sessions
    finally:
        await engine.dispose()


async def _tenants_on_each_worker(
    http: AsyncClient, settings: Settings, sessions: SessionMaker, cluster: Cluster, database: str
) -> dict[int, list[TenantClient]]:
    placed: dict[int, list[TenantClient]] = {w.port: [] for w in cluster.workers}
    while any(len(found) < PER_WORKER for found in placed.values()):
        tenant = await new_tenant(http, settings, sessions, tier="enterprise")
        port = worker_of(cluster, database, tenant.tenant_id)
        if len(placed[port]) < PER_WORKER:
            body = {"title": "Note", "content": f"A note of {tenant.tenant_id} about ore."}
            reply = await http.post("/api/rag/documents", json=body, headers=tenant.headers)
            assert reply.status_code == 201, reply.text
            placed[port].append(tenant)
    return placed


async def _search(tenant: TenantClient) -> tuple[int, str | None]:
    reply = await tenant.http.post(
        "/api/rag/search", json={"query": "ore", "mode": "hybrid"}, headers=tenant.headers
    )
    if reply.status_code == 200:
        assert reply.json()["chunks"], reply.text
    return reply.status_code, reply.headers.get("retry-after")


async def test_a_stopped_worker_takes_only_its_tenants_down_and_back(
    served: tuple[AsyncClient, Settings, SessionMaker], citus_db: DatabaseUrls
) -> None:
    http, settings, sessions = served
    cluster = citus_db.cluster
    assert cluster is not None
    database = citus_db.app_url.rsplit("/", 1)[1]
    placed = await _tenants_on_each_worker(http, settings, sessions, cluster, database)
    stopped: Node = cluster.workers[0]
    down, up = placed[stopped.port], placed[cluster.workers[1].port]
    replies: dict[str, Counter[tuple[int, str | None]]] = {"down": Counter(), "up": Counter()}
    stop = asyncio.Event()

    async def traffic() -> None:
        while not stop.is_set():
            for side, tenants in (("down", down), ("up", up)):
                for tenant in tenants:
                    replies[side][await _search(tenant)] += 1

    load = asyncio.create_task(traffic())
    try:
        await asyncio.sleep(1)
        await asyncio.to_thread(cluster.stop_node, stopped)
        await asyncio.sleep(3)
        during = dict(replies["down"])
        await asyncio.to_thread(cluster.start_node, stopped)
        deadline = time.monotonic() + RECOVERY_SECONDS
        recovered = False
        while time.monotonic() < deadline and not recovered:
            await asyncio.sleep(0.5)
            recovered = all([(await _search(t))[0] == 200 for t in down])
    finally:
        stop.set()
        await load
    assert set(replies["up"]) == {(200, None)}, replies["up"]
    statuses = {status for status, _ in replies["down"]}
    assert statuses <= {200, 503}, replies["down"]
    assert any(status == 503 for status, _ in during), during
    assert all(retry is not None for status, retry in replies["down"] if status == 503)
    assert recovered, "the stopped worker's tenants were not served again"
