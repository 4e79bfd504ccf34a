"""Long-lived resources, opened and closed by the app's lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker
from app.errors import ServiceUnavailable
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class Resources:
    settings: Settings
    engine: AsyncEngine
    sessions: SessionMaker


@asynccontextmanager
async def open_resources(settings: Settings) -> AsyncIterator[Resources]:
    if settings.database_url is None:
        raise ServiceUnavailable(
            "RAG_DATABASE_URL is not set (use `rag serve` for the embedded one)"
        )
    engine = create_engine(
        settings.database_url.get_secret_value(), pool_size=settings.db_pool_size
    )
    try:
        yield Resources(settings=settings, engine=engine, sessions=create_sessionmaker(engine))
    finally:
        await engine.dispose()
