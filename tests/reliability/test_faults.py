"""Faults under traffic: PostgreSQL restarted, Redis stopped, paused and
restarted, the embedding provider timing out. Each time: no 500, a 503 with Retry-After where
the service cannot answer, and recovery without restarting the app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from redis.asyncio import Redis

from app.api.deps import get_resources
from app.api.mcp import get_mcp_http
from app.db.embedded import EmbeddedServer, provision, start_embedded
from app.db.tenancy import SessionMaker, registry_transaction
from app.embeddings import build_embedder
from app.main import create_app
from app.resources import Resources
from app.settings import EmbeddingProvider, Settings
from app.tenants import create_tenant
from tests.api.calls import assert_problem, total
from tests.conftest import DIMENSIONS, TenantClient, app_client, new_tenant, token_for
from tests.embeddings.conftest import fake_openai, openai_server  # noqa: F401  (fixtures)
from tests.embeddings.fakes import FakeOpenAI
from tests.fakes import WordHashEmbedder
from tests.processes import PrivateRedis, scratch_directory

pytestmark = pytest.mark.slow
DOCUMENT = {"title": "Harbour", "content": "The harbour master logs every ship at dawn."}


@dataclass
class Traffic:
    """Searches sent one after another until stopped; every status seen, in order."""

    http: AsyncClient
    headers: dict[str, str]
    statuses: list[int] = field(default_factory=list)
    missing_retry_after: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            reply = await self.http.post(
                "/api/rag/search", json={"query": "harbour ships"}, headers=self.headers
            )
            self.statuses.append(reply.status_code)
            if reply.status_code == 503 and "retry-after" not in reply.headers:
                self.missing_retry_after += 1
            await asyncio.sleep(0.02)

    async def until(self, status: int, *, after: int, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while status not in self.statuses[after:]:
            assert time.monotonic() < deadline, f"no {status} since {after}: {self.statuses}"
            await asyncio.sleep(0.05)


@asynccontextmanager
async def under_traffic(http: AsyncClient, headers: dict[str, str]) -> AsyncIterator[Traffic]:
    traffic, stop = Traffic(http, headers), asyncio.Event()
    task = asyncio.create_task(traffic.run(stop))
    try:
        await traffic.until(200, after=0)
        yield traffic
    finally:
        stop.set()
        await task


@asynccontextmanager
async def own_app(settings: Settings) -> AsyncIterator[tuple[AsyncClient, Resources]]:
    """The app on its own sessions (not the test's transaction): what it writes commits."""
    app = create_app(settings, embedder=WordHashEmbedder(DIMENSIONS))
    async with app.router.lifespan_context(app) as state:
        assert state is not None
        app.dependency_overrides[get_resources] = lambda: state["resources"]
        app.dependency_overrides[get_mcp_http] = lambda: state["mcp"]
        transport = ASGITransport(app=app)
        async with AsyncClient(transport=transport, base_url="http://test") as http:
            yield http, state["resources"]


async def tenant_with_a_document(
    http: AsyncClient, resources: Resources, settings: Settings, tenant_id: str
) -> dict[str, str]:
    """A new tenant holding DOCUMENT, committed; its request headers."""
    async with registry_transaction(resources.sessions) as session:
        await create_tenant(session, tenant_id, tier="enterprise")
    headers = {"Authorization": f"Bearer {token_for(settings, tenant_id)}"}
    created = await http.post("/api/rag/documents", json=DOCUMENT, headers=headers)
    assert created.status_code == 201, created.text
    return headers


@dataclass
class PrivateDatabase:
    """An embedded PostgreSQL of this test's own, which it may stop and start again."""

    pgdata: Path
    server: EmbeddedServer | None = None

    def start(self) -> EmbeddedServer:
        self.server = start_embedded(self.pgdata)
        self.server.handle.cleanup_mode = "stop"  # type: ignore[attr-defined]
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


@pytest.fixture
def private_database() -> Iterator[PrivateDatabase]:
    with scratch_directory("rag-fault-pg-") as directory:
        database = PrivateDatabase(directory / "pgdata")
        database.start()
        yield database
        database.stop()


# alone: under the other workers' load a search could outwait the 60 s the test allows
@pytest.mark.serial
async def test_postgres_restarting_under_traffic_is_503_then_recovers(
    settings: Settings, private_database: PrivateDatabase
) -> None:
    assert private_database.server is not None
    url = await provision(
        private_database.server, app_role=settings.app_role, embedding_dimensions=DIMENSIONS
    )
    own = settings.model_copy(update={"database_url": SecretStr(url), "redis_url": None})
    async with own_app(own) as (http, resources):
        headers = await tenant_with_a_document(http, resources, own, "fault-pg")
        async with under_traffic(http, headers) as traffic:
            await anyio.to_thread.run_sync(private_database.stop)
            down = len(traffic.statuses)
            await traffic.until(503, after=down)
            await anyio.to_thread.run_sync(private_database.start)
            back = len(traffic.statuses)
            await traffic.until(200, after=back)  # the same app: the pool reconnects
        assert 500 not in traffic.statuses
        assert set(traffic.statuses) <= {200, 503}
        assert traffic.missing_retry_after == 0
        again = await http.post(
            "/api/rag/documents", json={**DOCUMENT, "title": "Again"}, headers=headers
        )
        assert again.status_code == 201, again.text


async def test_redis_stopped_paused_and_restarted_under_traffic(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    private_redis: PrivateRedis,
) -> None:
    """fail_open: searches go on through every Redis fault, none is a 5xx, and the limit's
    headers stay on every reply."""
    with_redis = settings.model_copy(update={"redis_url": private_redis.url})
    async with app_client(with_redis, sessions, embedder) as http:
        tenant = await new_tenant(http, settings, sessions, tier="enterprise")
        async with under_traffic(http, tenant.headers) as traffic:
            await private_redis.stop()
            await asyncio.sleep(1.0)
            await private_redis.start()
            await asyncio.sleep(1.0)
            raw = Redis.from_url(private_redis.url)
            await raw.client_pause(1500)  # the server holds every client's commands
            await raw.aclose()
            await asyncio.sleep(2.0)
            seen = len(traffic.statuses)
            await traffic.until(200, after=seen)
        assert set(traffic.statuses) == {200}, traffic.statuses
        reply = await http.get("/api/rag/documents", headers=tenant.headers)
        assert "ratelimit-remaining" in reply.headers


async def test_an_embedding_provider_timing_out_is_503_and_stores_nothing(
    settings: Settings,
    sessions: SessionMaker,
    fake_openai: FakeOpenAI,  # noqa: F811
    openai_server: tuple[FakeOpenAI, str],  # noqa: F811
) -> None:
    slow = settings.model_copy(
        update={
            "embedding_provider": EmbeddingProvider.OPENAI,
            "openai_api_key": SecretStr(fake_openai.api_key),
            "openai_base_url": openai_server[1],
            "openai_timeout_seconds": 0.5,
            "openai_max_retries": 0,
        }
    )
    embedder = await build_embedder(slow)
    fake_openai.delay = 3.0  # after the start-up check: every embedding call now times out
    async with app_client(slow, sessions, embedder) as http:
        tenant: TenantClient = await new_tenant(http, settings, sessions)
        started = time.monotonic()
        searched = await http.post(
            "/api/rag/search", json={"query": "ships"}, headers=tenant.headers
        )
        problem = assert_problem(searched, 503)
        assert int(searched.headers["retry-after"]) >= 1
        assert "did not answer within its timeout" in problem["detail"]
        ingested = await http.post("/api/rag/documents", json=DOCUMENT, headers=tenant.headers)
        assert_problem(ingested, 503)
        assert time.monotonic() - started < 10  # bounded by the timeout, not the provider
        fake_openai.delay = 0.0
        assert await total(tenant) == 0


async def _ready(http: AsyncClient) -> tuple[int, dict[str, object]]:
    reply = await http.get("/readyz")
    checks: dict[str, object] = reply.json()["checks"]
    return reply.status_code, checks


async def test_the_first_readyz_after_postgres_restarted_is_200(
    settings: Settings, private_database: PrivateDatabase
) -> None:
    """The pool's connections died with the server; readiness must not report them: the first
    /readyz after the restart is a 200, not a 503 for a dead pooled connection."""
    assert private_database.server is not None
    url = await provision(
        private_database.server, app_role=settings.app_role, embedding_dimensions=DIMENSIONS
    )
    own = settings.model_copy(update={"database_url": SecretStr(url), "redis_url": None})
    async with own_app(own) as (http, _resources):
        assert (await _ready(http))[0] == 200  # a connection now waits in the pool
        await anyio.to_thread.run_sync(private_database.stop)
        await anyio.to_thread.run_sync(private_database.start)  # returns once it accepts
        status, checks = await _ready(http)
        assert status == 200, checks


async def test_the_first_readyz_after_redis_restarted_is_200(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    private_redis: PrivateRedis,
) -> None:
    with_redis = settings.model_copy(update={"redis_url": private_redis.url})
    async with app_client(with_redis, sessions, embedder) as http:
        assert (await _ready(http))[0] == 200
        await private_redis.stop()
        await private_redis.start()  # returns once it answers a ping
        status, checks = await _ready(http)
        assert status == 200, checks
