"""Shared fixtures: a real Redis (and, below, a real PostgreSQL + pgvector) once per session."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
import pytest
import redis
from fastapi import FastAPI, Request
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.api.deps import get_resources
from app.api.mcp import get_mcp_http
from app.auth import issue_token
from app.db.embedded import (
    OWNER_ROLE,
    bootstrap,
    drop_database,
    start_embedded,
    with_database,
    with_user,
)
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate
from app.db.tenancy import SessionMaker, registry_transaction
from app.embeddings import Embedder, WrappedEmbedder
from app.embeddings.local import LocalEmbedder, default_tokenizer_path
from app.ingest.chunking import Chunker, load_tokenizer
from app.main import create_app
from app.mcp.http import McpHttp
from app.resources import Resources
from app.settings import EmbeddingProvider, Settings
from app.tenants import TenantDirectory, create_tenant
from tests.citus.cluster import Cluster, running_cluster
from tests.fakes import WordHashEmbedder
from tests.parallel import ModuleScheduling, register_rss_log, slow_modules_first
from tests.processes import PrivateRedis, free_port

TEST_REDIS_DB = 15
DIMENSIONS = 384
APP_ROLE = "rag_app"
APP_PASSWORD = "rag-app-test"
OWNER_PASSWORD = "rag-owner-test"
JWT_SECRET = "test-secret-that-is-long-enough-for-hs256"


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """RAG_TEST_REDIS_URL; else a private redis-server on a free port (so concurrent runs never
    flush each other's counters); else the local Redis on 6379, database 15."""
    if url := os.environ.get("RAG_TEST_REDIS_URL"):
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        local = f"redis://127.0.0.1:6379/{TEST_REDIS_DB}"
        if not _redis_answers(local):
            pytest.fail("no Redis: set RAG_TEST_REDIS_URL or install redis-server")
        yield local
        return
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/{TEST_REDIS_DB}"
    deadline = time.monotonic() + 10
    while not _redis_answers(url):
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("redis-server did not start")
        time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(5)


# --- PostgreSQL + pgvector ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatabaseUrls:
    superuser_url: str
    owner_url: str
    app_url: str
    cluster: Cluster | None = None  # the Citus cluster the database is on (--citus)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--citus",
        action="store_true",
        help="run on a Citus cluster (a coordinator and two workers built from "
        "../shared/vendor/citus): the tests marked on_citus, whose every statement must go to "
        "one shard (scripts/test runs them so after the other tests)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--citus"):
        items[:] = [
            item
            for item in items
            if item.get_closest_marker("on_citus") and not item.get_closest_marker("single_node")
        ]
    slow_modules_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> ModuleScheduling:
    return ModuleScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """With --citus, the process that runs the session (xdist's controller, or pytest alone)
    starts the one cluster every worker's database lives on (`CITUS_CLUSTER`), unless one is
    given already."""
    register_rss_log(config)
    if not config.getoption("--citus") or hasattr(config, "workerinput"):
        return
    if CITUS_CLUSTER in os.environ:
        return
    stack = ExitStack()
    config.stash[_CLUSTER_STACK] = stack
    cluster = stack.enter_context(running_cluster())
    os.environ[CITUS_CLUSTER] = cluster.to_json()
    stack.callback(os.environ.pop, CITUS_CLUSTER, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if stack := config.stash.get(_CLUSTER_STACK, None):
        stack.close()


CITUS_CLUSTER = "RAG_TEST_CITUS_CLUSTER"  # a running cluster, as Cluster.to_json describes it
_CLUSTER_STACK = pytest.StashKey[ExitStack]()


# For a test's own SQL that reads every tenant's rows on purpose (to show row-level security
# hides them): on Citus such a statement goes to every shard, which the runtime role's
# statements may not do in `--citus` runs (`citus_database`), unless its transaction says so.
FAN_OUT = text(
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN"
    " SET LOCAL citus.multi_task_query_log_level = off; END IF; END $$"
)


async def allow_fan_out(session: AsyncSession) -> None:
    await session.execute(FAN_OUT)


# For a test transaction that changes a distributed table's definition (a policy) and then
# writes the tenant registry: Citus refuses a write to a reference table after parallel DDL
# in the same transaction, and does it sequentially when told so first.
SEQUENTIAL = text(
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN"
    " SET LOCAL citus.multi_shard_modify_mode TO 'sequential'; END IF; END $$"
)


def _start_server(tmp: Path) -> tuple[str, Callable[[], None]]:
    if url := os.environ.get("RAG_TEST_DATABASE_URL"):
        return url, lambda: None
    server = start_embedded(tmp / "pgdata", delete_on_exit=True)

    def stop() -> None:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # the data directory's parent, left empty

    return server.url(user="postgres", database="postgres"), stop


@pytest.fixture(scope="session")
def database(pytestconfig: pytest.Config) -> Iterator[DatabaseUrls]:
    """A fresh, migrated database on the embedded server (or RAG_TEST_DATABASE_URL, a
    superuser URL; or with --citus a Citus cluster): every run tests the migrations too. The
    server's directory is not under pytest's basetemp, which pytest keeps private (0700) from
    the server's system user."""
    if pytestconfig.getoption("--citus"):
        cluster = Cluster.from_json(os.environ[CITUS_CLUSTER])
        name = f"rag_test_{os.getpid()}"
        yield asyncio.run(citus_database(cluster, name))
        cluster.drop_database(name)
        return
    superuser_url, stop = _start_server(Path(tempfile.mkdtemp(prefix="rag-test-pg-")))
    name = f"rag_test_{os.getpid()}"
    owner_url = with_user(with_database(superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(superuser_url, name), APP_ROLE, APP_PASSWORD)

    async def prepare() -> None:
        # Several pytest processes on one server (xdist workers on RAG_TEST_DATABASE_URL)
        # create the same roles: one at a time.
        lock = await asyncpg.connect(superuser_url)
        try:
            await lock.execute("SELECT pg_advisory_lock(45)")
            await drop_database(superuser_url, name)
            await bootstrap(
                superuser_url, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD
            )
            await migrate(
                owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url
            )
        finally:
            await lock.close()

    asyncio.run(prepare())
    try:
        yield DatabaseUrls(superuser_url=superuser_url, owner_url=owner_url, app_url=app_url)
    finally:
        asyncio.run(drop_database(superuser_url, name))
        stop()


async def citus_database(cluster: Cluster, name: str) -> DatabaseUrls:
    """A database on the cluster, migrated by `rag migrate`'s path as the documented setup
    does it (the superuser's URL migrates, the runtime role serves). Any statement of the
    runtime role that Citus would send to more than one shard fails: every tenant statement
    must name its tenant."""
    owner_url = cluster.url(database=name)
    app_url = cluster.url(user=APP_ROLE, password=APP_PASSWORD, database=name)
    # Roles are the cluster's: several pytest processes on one cluster (the --citus pass's
    # workers) would create the runtime role at once. One at a time.
    lock = await asyncpg.connect(cluster.url())
    try:
        await lock.execute("SELECT pg_advisory_lock(45)")
        cluster.create_database(name)
        await migrate(
            owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url
        )
    finally:
        await lock.close()
    cluster.sql(
        f'ALTER ROLE {APP_ROLE} IN DATABASE "{name}" SET citus.multi_task_query_log_level = error',
        database=name,
    )
    return DatabaseUrls(cluster.url(), owner_url, app_url, cluster)


async def fresh_database(database: DatabaseUrls, name: str) -> str:
    """A database of its own on the tests' server, migrated: for data that must be committed
    (a live server, a replica); the runtime role's URL."""
    return (await fresh_database_urls(database, name)).app_url


async def fresh_database_urls(database: DatabaseUrls, name: str) -> DatabaseUrls:
    """`fresh_database`, with its owner's and the superuser's URLs."""
    if database.cluster is not None:
        database.cluster.drop_database(name)
        return await citus_database(database.cluster, name)
    owner_url = with_user(with_database(database.superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(database.superuser_url, name), APP_ROLE, APP_PASSWORD)
    await drop_database(database.superuser_url, name)
    await bootstrap(
        database.superuser_url, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD
    )
    await migrate(owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url)
    return DatabaseUrls(database.superuser_url, owner_url, app_url)


async def drop_fresh_database(database: DatabaseUrls, name: str) -> None:
    if database.cluster is not None:
        database.cluster.drop_database(name)
    else:
        await drop_database(database.superuser_url, name)


@pytest.fixture(scope="session")
def settings(database: DatabaseUrls, redis_url: str) -> Settings:
    return Settings(
        _env_file=None,
        database_url=SecretStr(database.app_url),
        redis_url=redis_url,
        jwt_secret=SecretStr(JWT_SECRET),
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_dimensions=DIMENSIONS,
        job_workers=0,  # tests start job workers themselves (tests/jobs)
        job_heartbeat_seconds=1,
        job_stalled_seconds=4,
    )


@pytest.fixture(scope="session")
async def app_engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    """The runtime role's engine: what the service connects as."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture
async def sessions(app_engine: AsyncEngine) -> AsyncIterator[SessionMaker]:
    """Sessions inside one outer transaction that rolls back after the test."""
    async with app_engine.connect() as conn:
        outer = await conn.begin()
        yield create_sessionmaker(conn, join_transaction_mode="create_savepoint")
        await outer.rollback()


@pytest.fixture(scope="session")
def embedder() -> WordHashEmbedder:
    return WordHashEmbedder(DIMENSIONS)


@pytest.fixture(scope="session", autouse=True)
def _clean_redis(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).flushdb()


@pytest.fixture
async def client(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    """The real app over ASGI; its sessions join the test's rolled-back transaction."""
    async with app_client(settings, sessions, embedder) as http:
        yield http


@asynccontextmanager
async def app_client(
    settings: Settings, sessions: SessionMaker, embedder: Embedder
) -> AsyncIterator[AsyncClient]:
    async with running_app(settings, sessions, embedder) as app:
        transport = ASGITransport(app=app)
        async with AsyncClient(transport=transport, base_url="http://test") as http:
            yield http


@asynccontextmanager
async def running_app(
    settings: Settings, sessions: SessionMaker, embedder: Embedder
) -> AsyncIterator[FastAPI]:
    """The app, its lifespan entered, its sessions joining the test's transaction."""
    app = create_app(settings, embedder=embedder)
    async with app.router.lifespan_context(app) as state:
        assert state is not None
        resources = replace(state["resources"], sessions=sessions)
        resources = replace(
            resources, tenants=TenantDirectory(sessions, ttl_seconds=settings.tenant_cache_seconds)
        )
        app.state.test_resources, app.state.test_mcp = resources, state["mcp"]
        app.dependency_overrides[get_resources] = _test_resources
        app.dependency_overrides[get_mcp_http] = _test_mcp
        yield app


# The overrides are the same two functions for every app: FastAPI keeps each callable it has
# seen in a cache of 4,096 entries, and a closure over one app's resources kept them alive.
def resources_of(app: FastAPI) -> Resources:
    """The resources a `running_app` serves with (the test's sessions in them)."""
    resources: Resources = app.state.test_resources
    return resources


# Async, as the service's own: FastAPI runs a plain `def` dependency on a worker thread.
async def _test_resources(request: Request) -> Resources:
    resources: Resources = request.app.state.test_resources
    return resources


async def _test_mcp(request: Request) -> McpHttp:
    transport: McpHttp = request.app.state.test_mcp
    return transport


@dataclass(frozen=True, slots=True)
class TenantClient:
    """A client for one fresh tenant, with a token carrying the given scopes."""

    http: AsyncClient
    tenant_id: str
    headers: dict[str, str]


def token_for(settings: Settings, tenant_id: str, scopes: str = "rag:search rag:ingest") -> str:
    return issue_token(
        settings, tenant_id=tenant_id, subject="tester", scopes=scopes.split(), ttl_seconds=300
    )


async def registered_tenant(
    sessions: SessionMaker, prefix: str = "t", *, tier: str = "basic"
) -> str:
    """A new tenant with a unique id in the registry; its id."""
    tenant_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
    async with registry_transaction(sessions) as session:
        await create_tenant(session, tenant_id, tier=tier)
    return tenant_id


def small_chunker() -> Chunker:
    """Chunks of 200 MiniLM tokens, overlap 20: what ingestion tests below the API use."""
    return Chunker(load_tokenizer(default_tokenizer_path()), chunk_tokens=200, overlap_tokens=20)


async def new_tenant(
    http: AsyncClient,
    settings: Settings,
    sessions: SessionMaker,
    *,
    tier: str = "basic",
    scopes: str = "rag:search rag:ingest",
) -> TenantClient:
    tenant_id = await registered_tenant(sessions, tier=tier)
    headers = {"Authorization": f"Bearer {token_for(settings, tenant_id, scopes)}"}
    return TenantClient(http, tenant_id, headers)


@pytest.fixture
async def tenant_a(client: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(client, settings, sessions)


@pytest.fixture
async def tenant_b(client: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(client, settings, sessions)


@pytest.fixture(scope="session")
def minilm() -> LocalEmbedder:
    """The bundled all-MiniLM-L6-v2, loaded once per run; tests must not close it."""
    local = Settings(_env_file=None, embedding_provider=EmbeddingProvider.LOCAL)
    return LocalEmbedder.load(local)


@pytest.fixture
async def real_client(
    settings: Settings, sessions: SessionMaker, minilm: LocalEmbedder
) -> AsyncIterator[AsyncClient]:
    """The app with the real local model: for ranking, threshold and quality tests."""
    async with app_client(settings, sessions, _Unclosable(minilm)) as http:
        yield http


class _Unclosable(WrappedEmbedder):
    """Shares the session's model with an app whose lifespan closes its embedder."""

    async def aclose(self) -> None:
        return None


@pytest.fixture
async def private_redis() -> AsyncIterator[PrivateRedis]:
    """A redis-server of this test's own, which it may stop and start again."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (scripts/test installs it)")
    server = PrivateRedis(binary)
    await server.start()
    yield server
    await server.stop()
