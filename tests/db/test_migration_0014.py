"""Migration 0014 (job callbacks) downgrades and upgrades again."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.conftest import DatabaseUrls
from tests.db.migrations import down_and_up

CALLBACK_COLUMNS = (
    "select count(*) from information_schema.columns"
    " where table_name = 'ingest_jobs' and column_name like 'callback\\_%'"
)


@pytest.mark.slow
@pytest.mark.single_node  # a database of its own, migrated down and up
async def test_migration_0014_downgrades_and_upgrades_again(database: DatabaseUrls) -> None:
    async def six_columns(conn: AsyncConnection) -> None:
        assert await conn.scalar(text(CALLBACK_COLUMNS)) == 6

    async def none_at_0013(conn: AsyncConnection) -> None:
        assert await conn.scalar(text(CALLBACK_COLUMNS)) == 0
        assert await conn.scalar(text("select version_num from alembic_version")) == "0013"

    await down_and_up(
        database, to="0013", before=six_columns, after_down=none_at_0013, after_up=six_columns
    )
