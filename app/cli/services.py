"""What the data commands (ingest, search, reindex) need, without the HTTP gate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.db.engine import create_engine, create_sessionmaker
from app.db.scoped import settled
from app.db.tenancy import SessionMaker, reading_as
from app.embeddings import Embedder, build_embedder
from app.ingest.chunking import Chunker
from app.ingest.parsing import Parser
from app.permissions import EVERY_DOCUMENT
from app.resources import build_chunker, sandboxed_parser
from app.settings import Settings
from app.tenants import TenantDirectory


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    sessions: SessionMaker
    embedder: Embedder
    chunker: Chunker
    parser: Parser


@asynccontextmanager
async def open_services(settings: Settings, *, tenant_id: str | None) -> AsyncIterator[Services]:
    """Engine, model and chunker; checks first that `tenant_id` exists and is active. The
    data commands run on the database's host as its operator: they read every document of a
    tenant, whatever its access list (docs/PERMISSIONS.md)."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=2)
    sessions = reading_as(create_sessionmaker(engine), EVERY_DOCUMENT)
    try:
        if tenant_id is not None:
            await TenantDirectory(sessions, ttl_seconds=0).require_active(tenant_id)
        embedder = await build_embedder(settings)
        try:
            with sandboxed_parser(settings) as parser:
                yield Services(
                    settings, sessions, embedder, build_chunker(settings, embedder), parser
                )
        finally:
            await embedder.aclose()
    finally:
        await settled(sessions)  # the read-only transactions still committing (scoped.py)
        await engine.dispose()
