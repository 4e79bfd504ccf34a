"""Alembic environment: runs on the connection `app.db.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from app.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations with `rag migrate`, which provides the connection")
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; use `rag migrate`")
run_migrations_online()
