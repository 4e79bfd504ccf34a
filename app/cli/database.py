"""Where the CLI's database comes from: RAG_DATABASE_URL, or the embedded server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
import typer
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import embedded
from app.db.tuning import embedded_tuning
from app.settings import Settings

_log = logging.getLogger("app.db")


@contextmanager
def database_settings(settings: Settings) -> Iterator[Settings]:
    """Settings with both database URLs set; starts, provisions and finally stops the embedded
    server when none is configured (other `rag` processes attached to it keep it running)."""
    if settings.database_url is not None:
        owner = settings.migration_database_url or settings.database_url
        if _log.isEnabledFor(logging.INFO):  # `rag serve` says where its database is
            _log.info("database: %s", asyncio.run(_describe(settings.database_url)))
        yield settings.model_copy(update={"migration_database_url": owner})
        return
    server = embedded.start_embedded(
        settings.data_dir / "pgdata",
        tuning=embedded_tuning(settings.embedded_shared_buffers_mb),
    )
    try:
        url = asyncio.run(
            embedded.provision(
                server,
                app_role=settings.app_role,
                embedding_dimensions=settings.embedding_dimensions,
            )
        )
        owner_url = server.url(user=embedded.OWNER_ROLE, database=embedded.DATABASE)
        yield settings.model_copy(
            update={"database_url": SecretStr(url), "migration_database_url": SecretStr(owner_url)}
        )
    finally:
        server.stop()
        if not server.is_running():
            _log.info("database: embedded PostgreSQL stopped")


def database_place(settings: Settings) -> str:
    """Which database a local command acts on, without a password: "the database at
    postgresql://… (RAG_DATABASE_URL)" or "the embedded database in <data dir>/pgdata"."""
    if settings.database_url is None:
        return f"the embedded database in {settings.data_dir / 'pgdata'}"
    where = make_url(settings.database_url.get_secret_value()).set(password=None)
    plain = where.set(drivername="postgresql").render_as_string(hide_password=True)
    return f"the database at {plain} (RAG_DATABASE_URL)"


async def _describe(url: SecretStr) -> str:
    """Where RAG_DATABASE_URL points (no password) and what it runs."""
    where = make_url(url.get_secret_value()).set(password=None)
    plain = where.set(drivername="postgresql").render_as_string(hide_password=True)
    try:
        return f"{await embedded.versions(plain)} at {plain} (RAG_DATABASE_URL)"
    except (OSError, asyncpg.PostgresError) as error:
        return f"{plain} (RAG_DATABASE_URL; not reachable yet: {type(error).__name__})"


def refuse_unready_cluster(settings: Settings) -> None:
    """On a Citus coordinator that lacks what the service needs (app/db/sharding.py): say
    what and what to do, and stop with status 1. A database not reachable yet is left to the
    service, which answers 503 until it is."""
    from app.db.sharding import ClusterNotReady

    if settings.database_url is None:
        return
    try:
        asyncio.run(_check_cluster(settings.database_url))
    except ClusterNotReady as error:
        typer.echo(f"rag: {error}", err=True)
        raise typer.Exit(1) from None
    except (OSError, asyncpg.PostgresError, DBAPIError) as error:
        _log.warning("database: not checked for Citus (%s)", type(error).__name__)


async def _check_cluster(url: SecretStr) -> None:
    from app.db import sharding
    from app.db.engine import async_url

    engine = create_async_engine(async_url(url.get_secret_value()))
    try:
        async with engine.connect() as conn:
            if await sharding.citus_version(conn) is not None:
                await sharding.ensure_serving(conn)
    finally:
        await engine.dispose()
