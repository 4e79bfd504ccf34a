"""A real streaming replica of the tests' server, and the app reading from it.

One standby per run (tests/standby.py), made when the first replica test needs it. The app
here runs on a database of its own with committed data, since a replica only sees what the
primary committed; each test gets a fresh tenant and leaves the standby running and replaying.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from app.api.deps import get_resources
from app.api.mcp import get_mcp_http
from app.db.embedded import drop_database
from app.db.lag import primary_position, standby_state
from app.db.tenancy import registry_transaction
from app.main import create_app
from app.resources import Resources
from app.settings import Settings
from app.tenants import create_tenant
from tests.conftest import APP_PASSWORD, APP_ROLE, DatabaseUrls, fresh_database, token_for
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import mcp_settings
from tests.processes import free_port
from tests.standby import Standby, running_standby, wait_until_replaying

CATCH_UP_SECONDS = 20
WAIT_SECONDS = 15


@dataclass(frozen=True, slots=True)
class Replicated:
    """The standby and the database (of its own) the replicated apps use."""

    standby: Standby
    app_url: str
    database: str


@pytest.fixture(scope="session")
def replicated(database: DatabaseUrls) -> Iterator[Replicated]:
    if os.environ.get("RAG_TEST_DATABASE_URL"):
        pytest.skip("the replica is made from the embedded server's files")
    name = f"rag_replicas_{os.getpid()}"
    app_url = asyncio.run(fresh_database(database, name))
    socket_dir = make_url(database.superuser_url).query["host"]
    assert isinstance(socket_dir, str)
    try:
        with running_standby(socket_dir, port=free_port()) as standby:
            yield Replicated(standby, app_url, name)
    finally:
        asyncio.run(drop_database(database.superuser_url, name))


@pytest.fixture
def standby(replicated: Replicated) -> Iterator[Standby]:
    """The standby, running and replaying at the start and at the end of every test."""
    _restore(replicated.standby)
    yield replicated.standby
    _restore(replicated.standby)


def _restore(standby: Standby) -> None:
    if not (standby.pgdata / "postmaster.pid").exists():
        standby.start()
    wait_until_replaying(standby)
    if standby.psql("select pg_is_wal_replay_paused()") == "t":
        standby.psql("select pg_wal_replay_resume()")


@dataclass(frozen=True, slots=True)
class ReplicatedApp:
    asgi: FastAPI
    http: AsyncClient
    resources: Resources
    tenant_id: str
    headers: dict[str, str]

    @property
    def replica(self) -> int:
        """Reads the replica has served so far."""
        return self.resources.replicas.replicas[0].served

    async def ingest(self, title: str, content: str) -> str:
        reply = await self.http.post(
            "/api/rag/documents",
            json={"title": title, "content": content},
            headers=self.headers,
        )
        assert reply.status_code == 201, reply.text
        document_id: str = reply.json()["document_id"]
        return document_id

    async def search(self, query: str, **headers: str) -> list[str]:
        """Titles found; any status but 200 fails the test."""
        reply = await self.http.post(
            "/api/rag/search",
            json={"query": query, "mode": "keyword", "max_results": 5},
            headers={**self.headers, **headers},
        )
        assert reply.status_code == 200, reply.text
        return [chunk["title"] for chunk in reply.json()["chunks"]]

    async def caught_up(self) -> None:
        """Until the replica has replayed everything the primary wrote, and is in use."""
        replicas, deadline = self.resources.replicas, time.monotonic() + CATCH_UP_SECONDS
        async with self.resources.engine.connect() as conn:
            target = await primary_position(conn)
        while True:
            try:
                async with replicas.replicas[0].engine.connect() as conn:
                    state = await standby_state(conn)
                await replicas.check(self.resources.engine)
                if (state.replay_lsn or 0) >= target and replicas.pick() is not None:
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, replicas.statuses()
            await asyncio.sleep(0.05)


async def wait_for(check: Callable[[], bool]) -> None:
    """Until `check()` is true (polled every 50 ms); fails the test after WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


AppFactory = Callable[..., AbstractAsyncContextManager[ReplicatedApp]]


@pytest.fixture
def replicated_app(settings: Settings, replicated: Replicated, standby: Standby) -> AppFactory:
    """`async with replicated_app(max_lag=…, check_seconds=…, **settings) as app`: the service
    with the standby as its replica (or `replica_url`), a fresh enterprise tenant (no rate
    limit in the way) and a token."""

    @asynccontextmanager
    async def started(
        *,
        max_lag: float = 5.0,
        check_seconds: float = 0.2,
        replica_url: str | None = None,
        **overrides: object,
    ) -> AsyncIterator[ReplicatedApp]:
        replica_url = replica_url or standby.url(
            user=APP_ROLE, database=replicated.database, password=APP_PASSWORD
        )
        configured = mcp_settings(
            settings,
            **{
                "database_url": SecretStr(replicated.app_url),
                "database_replica_urls": [SecretStr(replica_url)],
                "replica_max_lag_seconds": max_lag,
                "replica_check_seconds": check_seconds,
                # generous: on a loaded machine a slow check must not take a replica out
                # (a stopped one fails at once: connection refused)
                "replica_connect_timeout_seconds": 5.0,
                "tenant_cache_seconds": 0.0,
                # no background commits: the tests decide when the primary writes
                "usage_flush_seconds": 3600.0,
                "access_flush_seconds": 3600.0,
                **overrides,
            },
        )
        app = create_app(configured, embedder=WordHashEmbedder())
        async with app.router.lifespan_context(app) as state:
            assert state is not None
            resources: Resources = state["resources"]
            app.dependency_overrides[get_resources] = lambda: resources
            app.dependency_overrides[get_mcp_http] = lambda: state["mcp"]
            tenant_id = f"r-{uuid.uuid4().hex[:12]}"
            async with registry_transaction(resources.sessions) as session:
                await create_tenant(session, tenant_id, tier="enterprise")
            headers = {"Authorization": f"Bearer {token_for(configured, tenant_id)}"}
            transport = ASGITransport(app=app)
            async with AsyncClient(transport=transport, base_url="http://test") as http:
                yield ReplicatedApp(app, http, resources, tenant_id, headers)

    return started
