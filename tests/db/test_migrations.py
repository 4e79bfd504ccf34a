"""Migrations over data that is already there: the upgrade builds what it adds for every
tenant, although the owner who runs it is under forced row-level security."""

from __future__ import annotations

import os
import uuid

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import bm25
from app.db.embedded import OWNER_ROLE, bootstrap, drop_database, with_database, with_user
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate
from tests.conftest import APP_PASSWORD, APP_ROLE, DIMENSIONS, OWNER_PASSWORD, DatabaseUrls

TEXTS = {
    "t-old-a": ["cobalt mining in the north", "nickel mining and cobalt refining"],
    "t-old-b": ["glacier ice melts in spring"],
}


async def _chunks_before_statistics(owner_url: str) -> None:
    """Tenants with chunks, written at revision 0002 (before BM25 statistics existed)."""
    conn = await asyncpg.connect(owner_url.replace("+asyncpg", ""))
    try:
        for tenant_id, texts in TEXTS.items():
            async with conn.transaction():
                await conn.execute("select set_config('app.tenant_id', $1, true)", tenant_id)
                await conn.execute(
                    "insert into tenants (id, name) values ($1, $2)", tenant_id, tenant_id
                )
                collection, document = uuid.uuid4(), uuid.uuid4()
                await conn.execute(
                    "insert into collections (id, tenant_id, name) values ($1, $2, 'default')",
                    collection,
                    tenant_id,
                )
                await conn.execute(
                    "insert into documents (id, tenant_id, collection_id, external_id, title,"
                    " source_type, content_hash, chunk_count)"
                    " values ($1, $2, $3, 'doc', 'Doc', 'text', $4, $5)",
                    document,
                    tenant_id,
                    collection,
                    "0" * 64,
                    len(texts),
                )
                vector = "[" + ",".join(["0.1"] * DIMENSIONS) + "]"
                for index, content in enumerate(texts):
                    await conn.execute(
                        "insert into chunks (id, tenant_id, document_id, collection_id,"
                        " chunk_index, content, token_count, embedding, embedding_model,"
                        " embedded_text_hash) values ($1, $2, $3, $4, $5, $6, 5,"
                        " $7::vector, 'test:model', $8)",
                        uuid.uuid4(),
                        tenant_id,
                        document,
                        collection,
                        index,
                        content,
                        vector,
                        f"{index:064x}",
                    )
    finally:
        await conn.close()


@pytest.mark.slow
async def test_upgrade_builds_statistics_and_postings_for_existing_chunks(
    database: DatabaseUrls,
) -> None:
    name = f"rag_test_migrations_{os.getpid()}"
    server = database.superuser_url
    owner_url = with_user(with_database(server, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(server, name), APP_ROLE, APP_PASSWORD)
    await drop_database(server, name)
    await bootstrap(server, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD)
    engine: AsyncEngine | None = None
    try:
        common = {"embedding_dimensions": DIMENSIONS, "app_role": APP_ROLE, "app_url": app_url}
        await migrate(owner_url, revision="0002", **common)  # type: ignore[arg-type]
        await _chunks_before_statistics(owner_url)
        await migrate(owner_url, **common)  # type: ignore[arg-type]
        engine = create_engine(app_url, pool_size=1)
        sessions = create_sessionmaker(engine)
        for tenant_id, texts in TEXTS.items():
            check = await bm25.verify(sessions, tenant_id)
            assert check.ok, check
            assert check.chunks == len(texts)
            assert check.terms > 0
    finally:
        if engine is not None:
            await engine.dispose()
        await drop_database(server, name)
