"""Engine and sessionmaker for the runtime role."""

from __future__ import annotations

from typing import Any

from pgvector.asyncpg import register_vector
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    async_sessionmaker,
    create_async_engine,
)

from app.db.pool import MeteredPool, measure
from app.db.state import STATE, SessionsState
from app.db.tenancy import SessionMaker


def async_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` URLs and use the asyncpg driver."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def create_engine(
    url: str,
    *,
    pool_size: int = 4,
    statement_timeout_seconds: float = 0,
    connect_timeout_seconds: float = 5,
) -> AsyncEngine:
    """`statement_timeout_seconds` > 0 cancels any statement running longer (SQLSTATE 57014).
    Statement parameters (query and document text) never appear in errors or logs.
    `standard_conforming_strings` is on whatever the server's, database's or role's default
    (a connection parameter, applied after them): the transaction settings are inlined as
    literals whose backslashes must stay plain characters (settings_sql.py)."""
    server_settings = {"application_name": "rag-service", "standard_conforming_strings": "on"}
    if statement_timeout_seconds > 0:
        server_settings["statement_timeout"] = f"{round(statement_timeout_seconds * 1000)}ms"
    engine = create_async_engine(
        async_url(url),
        # At most `pool_size` connections, each kept once opened: no overflow. An overflow
        # connection is closed at check-in, so under steady load a process kept closing and
        # opening connections (80 new PostgreSQL sessions in 12 s at 16 clients), each new
        # one paying its start-up, its statements' preparation and its plans again
        # (docs/BENCHMARKS.md, "Real text, a small tenant").
        pool_size=pool_size,
        max_overflow=0,
        # No ping at checkout (a round trip on every request): a connection that died in
        # the pool fails at BEGIN and the transaction is opened again (tenancy.py, scoped.py).
        pool_pre_ping=False,
        pool_recycle=1800,
        # The connection used last goes out first: at low concurrency the same few
        # connections serve the requests, with their prepared statements and the plans kept
        # for them (app/retrieval/planning.py) warm, and the others are left to be recycled.
        pool_use_lifo=True,
        poolclass=MeteredPool,
        hide_parameters=True,
        connect_args={"server_settings": server_settings, "timeout": connect_timeout_seconds},
    )
    event.listen(engine.sync_engine, "connect", _binary_vectors)
    measure(engine.sync_engine)
    return engine


def _binary_vectors(dbapi_connection: Any, _record: object) -> None:
    """Vectors travel in pgvector's binary format on every connection (see BinaryVector)."""
    dbapi_connection.run_async(register_vector)


async def vector_column_dimensions(conn: AsyncConnection) -> int:
    """The dimension of `chunks.embedding` (0 when it has none)."""
    query = text(
        "select atttypmod from pg_attribute"
        " where attrelid = 'chunks'::regclass and attname = 'embedding'"
    )
    return int(await conn.scalar(query) or 0)


def create_sessionmaker(bind: AsyncEngine | AsyncConnection, **options: Any) -> SessionMaker:
    """Sessions on `bind` that share a state of their own (state.py): the plan choices they
    remember and the read-only transactions still committing."""
    info = {STATE: SessionsState()}
    return async_sessionmaker(bind, expire_on_commit=False, info=info, **options)
