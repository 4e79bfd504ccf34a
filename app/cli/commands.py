"""`rag serve`, `rag migrate`, `rag tenant create`, `rag token`, and the root of `rag`.

Nothing heavy at module level, here or in the modules registered below: `rag --help`,
`rag --version` and `rag token` must answer at once, so the database layer, the model and
the HTTP client are imported inside the commands that use them (tests/cli/test_fast_cli.py).
"""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer

from app import __version__
from app.cli import bm25, data, documents, evaluate, indexes, mcp, sync, tenants, worker
from app.cli.options import Remote, TokenOption, UrlOption, remote

# Plain (click) help: typer's rich help rendering alone takes ~0.2 s to import.
app = typer.Typer(
    help="Multi-tenant RAG retrieval service.", no_args_is_help=True, rich_markup_mode=None
)
tenant_app = typer.Typer(help="Manage tenants.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(tenant_app, name="tenant")
app.add_typer(documents.documents_app, name="documents")
app.add_typer(bm25.bm25_app, name="bm25")
app.command(name="eval")(evaluate.evaluate_command)
tenant_app.command("list")(tenants.tenant_list)
tenant_app.command("suspend")(tenants.tenant_suspend)
tenant_app.command("activate")(tenants.tenant_activate)
tenant_app.command("delete")(tenants.tenant_delete)
app.command()(data.ingest)
app.command()(sync.sync)
app.command()(data.search)
app.command()(data.context)
app.command()(documents.similar)
app.command()(documents.dedupe)
app.command()(data.reindex)
app.command()(indexes.index)
app.command()(mcp.mcp)
app.command()(worker.worker)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"rag-service {__version__}")
        raise typer.Exit


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Multi-tenant RAG retrieval service."""


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            help="Worker processes on one socket (one database, started once; the rate limit "
            "shared through Redis, or split between them without it). Default: one per core "
            "when RAG_REDIS_URL is set, else 1.",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the libraries' start-up detail.")
    ] = False,
) -> None:
    """Run the API (the embedded database when RAG_DATABASE_URL is not set)."""
    from app.cli import logs
    from app.cli.database import database_settings, refuse_unready_cluster
    from app.cli.server import default_workers, run_server, stop_on_sigterm
    from app.cli.settings import load_settings, require_embedder
    from app.settings import with_dev_jwt_secret

    stop_on_sigterm()
    base = load_settings(dev_secret=False)
    require_embedder(base, command="rag serve")
    log_config = logs.configure(verbose=verbose, log_format=base.log_format)
    refuse_unready_cluster(base)
    with database_settings(with_dev_jwt_secret(base)) as settings:
        count = workers or default_workers(settings)
        run_server(settings, host=host, port=port, workers=count, log_config=log_config)


@app.command()
def migrate() -> None:
    """Migrate the database (RAG_MIGRATION_DATABASE_URL, else RAG_DATABASE_URL, else embedded)."""
    import asyncio

    from app.cli.database import database_settings
    from app.cli.settings import load_settings
    from app.db.migrate import migrate as run_migrations
    from app.db.sharding import ClusterNotReady

    settings = load_settings()
    if settings.database_url is None:
        with database_settings(settings):
            typer.echo("embedded database migrated", err=True)
        return
    owner = settings.migration_database_url or settings.database_url
    try:
        asyncio.run(
            run_migrations(
                owner.get_secret_value(),
                embedding_dimensions=settings.embedding_dimensions,
                app_role=settings.app_role,
                app_url=settings.database_url.get_secret_value(),
            )
        )
    except ClusterNotReady as error:
        typer.echo(f"rag: {error}\nnothing was changed", err=True)
        raise typer.Exit(1) from None
    typer.echo("database migrated", err=True)


@tenant_app.command("create")
def tenant_create(
    ctx: typer.Context,
    tenant_id: Annotated[str, typer.Argument(metavar="ID", help="Tenant id, e.g. acme.")],
    tier: Annotated[str, typer.Option(help="Rate-limit tier.")] = "basic",
    name: Annotated[str | None, typer.Option(help="Display name (default: the id).")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create a tenant; creating one that exists changes nothing. In the local database
    (RAG_DATABASE_URL, else the embedded one); with --url or RAG_URL, through that service's
    admin API (a token with rag:admin). It says which."""
    if target := remote(url, token, None):
        source = ctx.get_parameter_source("url")  # typer's own click: its enum, by name
        exported = source is not None and source.name == "ENVIRONMENT"
        _create_remote_tenant(target, tenant_id, name=name, tier=tier, exported=exported)
        return
    from app.cli.database import database_place
    from app.cli.settings import load_settings
    from app.cli.tenants import create_local
    from app.tenants import TENANT_ID_PATTERN

    if not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
        typer.echo(f"invalid tenant id {tenant_id!r}: use 1-64 of A-Z a-z 0-9 . _ -", err=True)
        raise typer.Exit(2)

    settings = load_settings()
    if tier not in settings.rate_limit_tiers:
        typer.echo(
            f"unknown tier {tier!r}; known: {', '.join(settings.rate_limit_tiers)}", err=True
        )
        raise typer.Exit(2)
    created = create_local(settings, tenant_id, name=name, tier=tier)
    typer.echo(
        f"tenant {tenant_id} {'created' if created else 'already exists'} in "
        f"{database_place(settings)} (with --url or RAG_URL: through a running service)",
        err=True,
    )


def _create_remote_tenant(
    target: Remote, tenant_id: str, *, name: str | None, tier: str, exported: bool
) -> None:
    """Through the service's admin API, saying so first, and how to create it locally."""
    from rag_client import Forbidden

    from app.cli.options import fail
    from app.cli.remote import connect

    local = (
        "unset RAG_URL to create it in the local database"
        if exported
        else "without --url: the local database"
    )
    source = "RAG_URL" if exported else "--url"
    typer.echo(
        f"creating tenant {tenant_id} through the service at {target.url} ({source}; {local})",
        err=True,
    )
    with connect(target) as rag:
        try:
            made = rag.create_tenant(tenant_id, name=name, tier=tier)
        except Forbidden as error:
            fail(
                f"{error.detail}: creating a tenant through the service takes a token with "
                "rag:admin (`rag token --tenant ID --scopes rag:admin` where the service runs); "
                f"or {local}"
            )
    typer.echo(
        f"tenant {made.id} ready (tier {made.tier}, {made.status}) in the service at {target.url}",
        err=True,
    )


@app.command()
def token(
    tenant: Annotated[str, typer.Option(help="Tenant id the token acts for.")],
    scopes: Annotated[str, typer.Option(help="Space-separated scopes.")] = "rag:search rag:ingest",
    ttl: Annotated[int, typer.Option(help="Lifetime in seconds.", min=1)] = 3600,
    subject: Annotated[str, typer.Option(help="The `sub` claim.")] = "cli",
    groups: Annotated[
        str,
        typer.Option(
            help="Comma-separated groups (the groups claim): the caller sees documents whose "
            "access list names group:<one of them>."
        ),
    ] = "",
) -> None:
    """Print a signed HS256 token (RAG_JWT_SECRET, or the embedded mode's own secret)."""
    from app.auth import issue_token
    from app.auth.keys import hmac_key_source
    from app.cli.settings import load_settings

    settings = load_settings()
    chosen = [group.strip() for group in groups.split(",") if group.strip()]
    try:
        signed = issue_token(
            settings,
            tenant_id=tenant,
            subject=subject,
            scopes=scopes.split(),
            groups=chosen,
            ttl_seconds=ttl,
        )
    except ValueError as error:
        typer.echo(f"--groups: {error}", err=True)
        raise typer.Exit(2) from None
    sys.stdout.write(signed + "\n")
    typer.echo(f"signed with the secret in {hmac_key_source(settings)}", err=True)
