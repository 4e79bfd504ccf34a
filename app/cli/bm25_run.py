"""What `rag bm25` runs (app/cli/bm25.py is the command: imported only when it runs)."""

from __future__ import annotations

import asyncio

from rich.table import Table
from sqlalchemy import select

from app.cli.database import database_settings
from app.cli.settings import load_settings
from app.db import bm25
from app.db.engine import create_engine, create_sessionmaker
from app.db.models import Tenant
from app.db.tenancy import reading_as, registry_transaction
from app.permissions import EVERY_DOCUMENT
from app.settings import Settings


def run(tenants: list[str] | None, *, rebuild: bool) -> list[bm25.Bm25Check]:
    with database_settings(load_settings()) as settings:
        return asyncio.run(_each(settings, tenants, rebuild=rebuild))


async def _each(
    settings: Settings, tenants: list[str] | None, *, rebuild: bool
) -> list[bm25.Bm25Check]:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        sessions = reading_as(create_sessionmaker(engine), EVERY_DOCUMENT)  # every chunk
        if not tenants:
            async with registry_transaction(sessions) as session:
                tenants = list(await session.scalars(select(Tenant.id).order_by(Tenant.id)))
        action = bm25.rebuild if rebuild else bm25.verify
        return [await action(sessions, tenant_id) for tenant_id in tenants]
    finally:
        await engine.dispose()


def table(checks: list[bm25.Bm25Check], title: str) -> Table:
    table = Table(title=title)
    for name in ("tenant", "chunks", "terms", "corpus", "wrong terms", "wrong postings", "status"):
        table.add_column(name, justify="left" if name in {"tenant", "status"} else "right")
    for c in checks:
        table.add_row(
            c.tenant_id,
            str(c.chunks),
            str(c.terms),
            "ok" if c.corpus_ok else "differs",
            str(c.wrong_terms),
            str(c.wrong_postings),
            "ok" if c.ok else "[red]differs[/red]",
        )
    return table
