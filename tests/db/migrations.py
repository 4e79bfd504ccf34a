"""A database of its own, migrated to the head, down to a revision and up again: how the
tests of a migration's downgrade walk it. `after_down` and `after_up` look at the schema on
the owner's connection."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from alembic import command
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.db.embedded import OWNER_ROLE, bootstrap, drop_database, with_database, with_user
from app.db.engine import async_url
from app.db.migrate import alembic_config, migrate
from tests.conftest import APP_PASSWORD, APP_ROLE, DIMENSIONS, OWNER_PASSWORD, DatabaseUrls

Look = Callable[[AsyncConnection], Awaitable[None]]


async def down_and_up(
    database: DatabaseUrls, *, to: str, after_down: Look, after_up: Look, before: Look | None = None
) -> None:
    name = f"rag_test_walk_{to}_{os.getpid()}"
    server = database.superuser_url
    owner_url = with_user(with_database(server, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(server, name), APP_ROLE, APP_PASSWORD)
    await drop_database(server, name)
    await bootstrap(server, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD)
    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)

    def downgrade(conn: Connection) -> None:
        config.attributes["connection"] = conn
        command.downgrade(config, to)

    async def head() -> None:
        await migrate(
            owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url
        )

    engine = create_async_engine(async_url(owner_url))
    try:
        await head()
        async with engine.connect() as conn:
            if before is not None:
                await before(conn)
            await conn.run_sync(downgrade)
            await conn.commit()
            await after_down(conn)
        await head()
        async with engine.connect() as conn:
            await after_up(conn)
    finally:
        await engine.dispose()
        await drop_database(server, name)
