"""Migration 0014 (job callbacks) downgrades and upgrades again, keeping the jobs."""

from __future__ import annotations

import os

import pytest
from alembic import command
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.embedded import OWNER_ROLE, bootstrap, drop_database, with_database, with_user
from app.db.engine import async_url
from app.db.migrate import alembic_config, migrate
from tests.conftest import APP_PASSWORD, APP_ROLE, DIMENSIONS, OWNER_PASSWORD, DatabaseUrls

CALLBACK_COLUMNS = (
    "select count(*) from information_schema.columns"
    " where table_name = 'ingest_jobs' and column_name like 'callback\\_%'"
)


@pytest.mark.slow
@pytest.mark.single_node  # a database of its own, migrated down and up
async def test_migration_0014_downgrades_and_upgrades_again(database: DatabaseUrls) -> None:
    name = f"rag_test_callbacks_{os.getpid()}"
    server = database.superuser_url
    owner_url = with_user(with_database(server, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(server, name), APP_ROLE, APP_PASSWORD)
    await drop_database(server, name)
    await bootstrap(server, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD)
    common = {"embedding_dimensions": DIMENSIONS, "app_role": APP_ROLE, "app_url": app_url}
    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)

    def downgrade(conn: Connection) -> None:
        config.attributes["connection"] = conn
        command.downgrade(config, "0013")

    engine = create_async_engine(async_url(owner_url))
    try:
        await migrate(owner_url, **common)  # type: ignore[arg-type]
        async with engine.connect() as conn:
            assert await conn.scalar(text(CALLBACK_COLUMNS)) == 6
            await conn.run_sync(downgrade)
            await conn.commit()
            assert await conn.scalar(text(CALLBACK_COLUMNS)) == 0
            assert await conn.scalar(text("select version_num from alembic_version")) == "0013"
        await migrate(owner_url, **common)  # type: ignore[arg-type]
        async with engine.connect() as conn:
            assert await conn.scalar(text(CALLBACK_COLUMNS)) == 6
    finally:
        await engine.dispose()
        await drop_database(server, name)
