"""Schema migrations (Alembic) and role bootstrap, run as the owner role."""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.db import sharding
from app.db.engine import async_url

_log = logging.getLogger(__name__)
# Installed from a wheel, the migrations ship inside this package (setup.py); in a checkout
# they are the repository's migrations/ folder.
_PACKAGED = Path(__file__).resolve().parent / "migrations"
MIGRATIONS_DIR = _PACKAGED if _PACKAGED.is_dir() else _PACKAGED.parents[2] / "migrations"
_MIGRATION_LOCK = 727_101  # pg_advisory_lock key: one migration at a time per database


def alembic_config(*, embedding_dimensions: int, app_role: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["embedding_dimensions"] = embedding_dimensions
    config.attributes["app_role"] = app_role
    return config


async def migrate(
    owner_url: str,
    *,
    embedding_dimensions: int,
    app_role: str,
    app_url: str | None = None,
    revision: str = "head",
) -> None:
    """Upgrade to `revision` as the owner; on a Citus coordinator, check the cluster first and
    distribute the tables after (app/db/sharding.py); then let the runtime role log in with
    its URL's password."""
    config = alembic_config(embedding_dimensions=embedding_dimensions, app_role=app_role)
    engine = create_async_engine(async_url(owner_url))
    try:
        async with engine.connect() as conn:
            citus = await sharding.citus_version(conn)
            if citus is not None:
                await sharding.ensure_ready(conn)
            await conn.commit()
            await conn.execute(text("select pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK})
            try:
                await conn.run_sync(_upgrade, config, revision)
                await conn.commit()
                if citus is not None:
                    await sharding.distribute(conn)
                    await sharding.plan_per_statement(conn, app_role)
                    await conn.commit()
                await _enable_login(conn, app_role=app_role, app_url=app_url)
            finally:
                await conn.rollback()  # whatever failed, the unlock must run
                await conn.execute(text("select pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK})
                await conn.commit()
    finally:
        await engine.dispose()


def _upgrade(conn: Connection, config: Config, revision: str) -> None:
    config.attributes["connection"] = conn
    command.upgrade(config, revision)


async def _enable_login(conn: AsyncConnection, *, app_role: str, app_url: str | None) -> None:
    password = make_url(app_url).password if app_url else None
    user = make_url(app_url).username if app_url else app_role
    if user != app_role:
        _log.warning("RAG_DATABASE_URL connects as %r, not the runtime role %r", user, app_role)
        return
    if password:
        # ALTER ROLE takes no bind parameters; quote the literal through the server.
        quoted = (await conn.execute(text("select quote_literal(:p)"), {"p": password})).scalar()
        await conn.execute(text(f'ALTER ROLE "{app_role}" LOGIN PASSWORD {quoted}'))
    else:
        await conn.execute(text(f'ALTER ROLE "{app_role}" LOGIN'))
    await conn.commit()
