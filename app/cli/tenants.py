"""`rag tenant create|list|suspend|activate|delete` on the local database: the admin API's
use cases (app/admin/tenants.py), so the same rules and answers.

Every change is written to the audit log as an operator's (`cli:<user>`, kind `operator`),
in the transaction that makes it. The database layer is imported inside the commands:
`rag tenant --help` stays fast.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from app.admin.audit import Actor
    from app.settings import Settings

T = TypeVar("T")
TenantArg = Annotated[str, typer.Argument(metavar="ID", help="Tenant id.")]


def _actor() -> Actor:
    from app.admin.audit import Actor

    return Actor.operator()


def local_settings(command: str, settings: Settings | None = None) -> Settings:
    """The settings of a command that acts on the local database; with RAG_URL set (as after
    the tutorial's exports), it first says that it does not go to that service."""
    from app.cli.database import database_place
    from app.cli.settings import load_settings

    loaded = settings or load_settings()
    if url := os.environ.get("RAG_URL"):
        typer.echo(
            f"note: `rag tenant {command}` acts on {database_place(loaded)}, not the service "
            f"at RAG_URL={url}; for the service, use its admin API (/api/admin/tenants) with a "
            "rag:admin token",
            err=True,
        )
    return loaded


def _run(
    action: Callable[[AsyncSession], Awaitable[T]],
    *,
    command: str,
    changes: bool = True,
    settings: Settings | None = None,
) -> T:
    """`action` in one transaction on the local database: a ledger transaction when it
    `changes` something (its audit entry is written with it), else a registry one."""
    from app.cli.database import database_settings
    from app.db.engine import create_engine, create_sessionmaker
    from app.db.tenancy import ledger_transaction, registry_transaction
    from app.errors import AppError

    transaction = ledger_transaction if changes else registry_transaction

    async def run() -> T:
        assert ready.database_url is not None
        engine = create_engine(ready.database_url.get_secret_value(), pool_size=1)
        try:
            async with transaction(create_sessionmaker(engine)) as session:
                return await action(session)
        finally:
            await engine.dispose()

    with database_settings(settings or local_settings(command)) as ready:
        try:
            return asyncio.run(run())
        except AppError as error:
            typer.echo(f"{error.title}: {error.detail}", err=True)
            raise typer.Exit(1) from None


def tenant_list(
    status: Annotated[str | None, typer.Option(help="active or suspended.")] = None,
    tier: Annotated[str | None, typer.Option(help="Only this tier.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 100,
    offset: Annotated[int, typer.Option(min=0)] = 0,
) -> None:
    """List tenants with their document and chunk counts."""
    from app.admin import tenants as admin_tenants

    async def rows(session: AsyncSession) -> list[str]:
        found, total = await admin_tenants.tenant_page(
            session, status=status, tier=tier, limit=limit, offset=offset
        )
        counts = await admin_tenants.counts_of(session, [t.id for t in found])
        lines = [
            f"{t.id}\t{t.status}\t{t.tier}\t{counts[t.id].documents}\t{counts[t.id].chunks}"
            for t in found
        ]
        return ["id\tstatus\ttier\tdocuments\tchunks", *lines, f"({total} in all)"]

    for line in _run(rows, command="list", changes=False):
        typer.echo(line)


def create_local(settings: Settings, tenant_id: str, *, name: str | None, tier: str) -> bool:
    """Create the tenant in the local database unless it exists; whether this call did."""
    from app.admin import tenants as admin_tenants

    async def create(session: AsyncSession) -> bool:
        _tenant, created = await admin_tenants.create(
            session, _actor(), tenant_id, name=name, tier=tier
        )
        return created

    return _run(create, command="create", settings=settings)


def _set_status(tenant_id: str, status: str, *, verb: str) -> None:
    from app.admin import tenants as admin_tenants
    from app.cli.database import database_place

    async def change(session: AsyncSession) -> None:
        await admin_tenants.update(session, _actor(), tenant_id, status=status)

    settings = local_settings(verb)
    _run(change, command=verb, settings=settings)
    typer.echo(f"tenant {tenant_id} {status} in {database_place(settings)}", err=True)


def tenant_suspend(tenant_id: TenantArg) -> None:
    """Suspend a tenant: its tokens get 403 (within RAG_TENANT_CACHE_SECONDS); data stays."""
    _set_status(tenant_id, "suspended", verb="suspend")


def tenant_activate(tenant_id: TenantArg) -> None:
    """Activate a suspended tenant."""
    _set_status(tenant_id, "active", verb="activate")


def tenant_delete(
    tenant_id: TenantArg,
    confirm: Annotated[
        str | None, typer.Option(help="The tenant id again (asked for when not given).")
    ] = None,
) -> None:
    """Delete a suspended tenant with all its documents. Cannot be undone."""
    if confirm is None:
        confirm = typer.prompt(f"type {tenant_id} to delete it and all its documents")

    from app.admin import tenants as admin_tenants
    from app.cli.database import database_place

    settings = local_settings("delete")
    receipts: list[uuid.UUID] = []

    async def remove(session: AsyncSession) -> None:
        receipt = await admin_tenants.delete_tenant(
            session, settings, _actor(), tenant_id, confirm=confirm or ""
        )
        receipts.append(receipt.id)

    _run(remove, command="delete", settings=settings)
    typer.echo(
        f"tenant {tenant_id} deleted from {database_place(settings)}; receipt {receipts[0]}",
        err=True,
    )
