"""`rag serve`, `rag migrate`, `rag tenant create`, `rag token`."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import Annotated

import typer

from app.cli import data, indexes, mcp, worker
from app.cli.database import database_settings
from app.cli.settings import load_settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate as run_migrations
from app.db.tenancy import registry_transaction
from app.settings import Settings
from app.tenants import TENANT_ID_PATTERN, create_tenant

app = typer.Typer(help="Multi-tenant RAG retrieval service.", no_args_is_help=True)
tenant_app = typer.Typer(help="Manage tenants.", no_args_is_help=True)
app.add_typer(tenant_app, name="tenant")
app.command()(data.ingest)
app.command()(data.search)
app.command()(data.reindex)
app.command()(indexes.index)
app.command()(mcp.mcp)
app.command()(worker.worker)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (needs RAG_DATABASE_URL).")] = 1,
) -> None:
    """Run the API (the embedded database when RAG_DATABASE_URL is not set)."""
    import uvicorn

    from app.main import create_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with database_settings(load_settings()) as settings:
        typer.echo(f"serving on http://{host}:{port} (docs at /docs)", err=True)
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


@app.command()
def migrate() -> None:
    """Migrate the database (RAG_MIGRATION_DATABASE_URL, else RAG_DATABASE_URL, else embedded)."""
    settings = load_settings()
    if settings.database_url is None:
        with database_settings(settings):
            typer.echo("embedded database migrated", err=True)
        return
    owner = settings.migration_database_url or settings.database_url
    asyncio.run(
        run_migrations(
            owner.get_secret_value(),
            embedding_dimensions=settings.embedding_dimensions,
            app_role=settings.app_role,
            app_url=settings.database_url.get_secret_value(),
        )
    )
    typer.echo("database migrated", err=True)


@tenant_app.command("create")
def tenant_create(
    tenant_id: Annotated[str, typer.Argument(metavar="ID", help="Tenant id, e.g. acme.")],
    tier: Annotated[str, typer.Option(help="Rate-limit tier.")] = "basic",
    name: Annotated[str | None, typer.Option(help="Display name (default: the id).")] = None,
) -> None:
    """Create a tenant; creating one that exists changes nothing."""
    settings = load_settings()
    if not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
        typer.echo(f"invalid tenant id {tenant_id!r}: use 1-64 of A-Z a-z 0-9 . _ -", err=True)
        raise typer.Exit(2)
    if tier not in settings.rate_limit_tiers:
        typer.echo(
            f"unknown tier {tier!r}; known: {', '.join(settings.rate_limit_tiers)}", err=True
        )
        raise typer.Exit(2)
    with database_settings(settings) as ready:
        created = asyncio.run(_create_tenant(ready, tenant_id, name=name, tier=tier))
    typer.echo(f"tenant {tenant_id} {'created' if created else 'already exists'}", err=True)


async def _create_tenant(
    settings: Settings, tenant_id: str, *, name: str | None, tier: str
) -> bool:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        async with registry_transaction(create_sessionmaker(engine)) as session:
            _tenant, created = await create_tenant(session, tenant_id, name=name, tier=tier)
            return created
    finally:
        await engine.dispose()


@app.command()
def token(
    tenant: Annotated[str, typer.Option(help="Tenant id the token acts for.")],
    scopes: Annotated[str, typer.Option(help="Space-separated scopes.")] = "rag:search rag:ingest",
    ttl: Annotated[int, typer.Option(help="Lifetime in seconds.", min=1)] = 3600,
    subject: Annotated[str, typer.Option(help="The `sub` claim.")] = "cli",
) -> None:
    """Print a signed HS256 token (RAG_JWT_SECRET, or the embedded mode's own secret)."""
    from app.auth import issue_token

    settings = load_settings()
    sys.stdout.write(
        issue_token(
            settings, tenant_id=tenant, subject=subject, scopes=scopes.split(), ttl_seconds=ttl
        )
        + "\n"
    )
