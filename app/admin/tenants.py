"""Admin actions on tenants. Each change and its audit entry commit together or not at all."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app import receipts
from app.admin.audit import Actor, record, tenant_snapshot
from app.db import bm25_upkeep
from app.db.models import Collection, Document, Tenant
from app.db.sharding import DISTRIBUTED
from app.db.tenancy import scope_to_tenant
from app.errors import Conflict, Unprocessable
from app.ingest.catalog import DOCUMENT_COLLECTION
from app.receipts import SignedReceipt
from app.settings import Settings
from app.storable import printable_reason
from app.tenants import create_tenant, get_tenant
from app.usage import forget_tenant


@dataclass(frozen=True, slots=True)
class TenantCounts:
    documents: int
    chunks: int
    collections: int = 0


async def tenant_page(
    session: AsyncSession,
    *,
    status: str | None,
    tier: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[Tenant], int]:
    stmt = select(Tenant)
    if status is not None:
        stmt = stmt.where(Tenant.status == status)
    if tier is not None:
        stmt = stmt.where(Tenant.tier == tier)
    total = await session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    found = await session.scalars(stmt.order_by(Tenant.id).limit(limit).offset(offset))
    return found.all(), total


async def counts_of(session: AsyncSession, tenant_ids: Sequence[str]) -> dict[str, TenantCounts]:
    """Documents and chunks per tenant, each counted under that tenant's own RLS scope and
    every document of it, restricted ones included (the scope is cleared before the caller's
    registry transaction goes on)."""
    counts: dict[str, TenantCounts] = {}
    for tenant_id in tenant_ids:
        await scope_to_tenant(session, tenant_id)
        collections = (
            select(func.count())
            .select_from(Collection)
            .where(Collection.tenant_id == tenant_id)
            .scalar_subquery()
        )
        stmt = select(
            func.count(Document.id), func.coalesce(func.sum(Document.chunk_count), 0), collections
        ).where(Document.tenant_id == tenant_id)
        documents, chunks, collection_count = (await session.execute(stmt)).one()
        counts[tenant_id] = TenantCounts(int(documents), int(chunks), int(collection_count))
    await scope_to_tenant(session, None)
    return counts


def _check_name(name: str | None) -> None:
    if name is not None and (reason := printable_reason(name)) is not None:
        raise Unprocessable(
            f"name {reason}", extra={"errors": [{"field": "name", "message": reason}]}
        )


async def create(
    session: AsyncSession, actor: Actor, tenant_id: str, *, name: str | None, tier: str
) -> tuple[Tenant, bool]:
    """Create the tenant unless it exists; an entry in the audit log when it was created."""
    _check_name(name)
    tenant, created = await create_tenant(session, tenant_id, name=name, tier=tier)
    if created:
        await record(
            session,
            actor,
            "tenant.create",
            tenant_id=tenant_id,
            before=None,
            after=tenant_snapshot(tenant),
        )
    return tenant, created


async def update(
    session: AsyncSession,
    actor: Actor,
    tenant_id: str,
    *,
    name: str | None = None,
    tier: str | None = None,
    status: str | None = None,
) -> Tenant:
    """Change what is given; an entry in the audit log when something changed."""
    _check_name(name)
    tenant = await get_tenant(session, tenant_id)
    before = tenant_snapshot(tenant)
    for field, value in (("name", name), ("tier", tier), ("status", status)):
        if value is not None:
            setattr(tenant, field, value)
    await session.flush()
    await session.refresh(tenant)
    after = tenant_snapshot(tenant)
    if after != before:
        await record(
            session, actor, _action(before, after), tenant_id=tenant_id, before=before, after=after
        )
    return tenant


def _action(before: dict[str, object], after: dict[str, object]) -> str:
    changed = {key for key in after if after[key] != before[key]}
    if changed == {"status"}:
        return "tenant.suspend" if after["status"] == "suspended" else "tenant.activate"
    return "tenant.update"


async def delete_tenant(
    session: AsyncSession, settings: Settings, actor: Actor, tenant_id: str, *, confirm: str
) -> SignedReceipt:
    """Delete a suspended tenant with its collections, documents and chunks (the foreign
    keys cascade) and its usage counters; `confirm` must repeat its id. Its receipt (kept
    with the tenant's other receipts, which outlive it) says what went and that no row of
    the tenant's data is left."""
    if confirm != tenant_id:
        raise Unprocessable(
            "confirm must repeat the tenant id to delete",
            extra={"errors": [{"field": "confirm", "message": "must equal the tenant id"}]},
        )
    tenant = await get_tenant(session, tenant_id)
    if tenant.status != "suspended":
        raise Conflict(f"tenant {tenant_id!r} is active: suspend it before deleting it")
    before = tenant_snapshot(tenant)
    # The postings have no foreign key to cascade by (db/models.py): deleted first, inside
    # the tenant's scope; the rest of its rows go by cascade with the registry row.
    await scope_to_tenant(session, tenant_id)
    held = await _collections_held(session, tenant_id)
    rows_before = await _rows_of(session, tenant_id)
    await bm25_upkeep.forget_tenant(session, tenant_id)
    await session.execute(delete(Tenant).where(Tenant.id == tenant_id))
    await forget_tenant(session, tenant_id)
    receipt = await receipts.record(
        session,
        settings,
        kind="tenant_delete",
        collection=None,
        tenant_id=tenant_id,
        changes={
            "collections": held,
            "erased": _erased(rows_before, await _rows_of(session, tenant_id)),
        },
    )
    await record(session, actor, "tenant.delete", tenant_id=tenant_id, before=before, after=None)
    return receipt


async def tenant_receipt(
    session: AsyncSession, tenant_id: str, receipt_id: uuid.UUID
) -> SignedReceipt:
    """One of the tenant's receipts, as signed, for the admin: its tenant deletion's among
    them, after the tenant is gone."""
    await scope_to_tenant(session, tenant_id)
    return await receipts.read(session, receipt_id, of_any_owner=tenant_id)


def _erased(before: dict[str, int], after: dict[str, int]) -> dict[str, object]:
    return {"rows": before, "remaining": after, "gone": not any(after.values())}


# The tenant's data: every distributed table but its receipts (which outlive it).
_DATA_TABLES = tuple(name for name in DISTRIBUTED if name != "receipts")


async def _rows_of(session: AsyncSession, tenant_id: str) -> dict[str, int]:
    """The tenant's rows in each of its data tables (the session scoped to it)."""
    found = {}
    for name in _DATA_TABLES:
        count = await session.scalar(
            text(f"select count(*) from {name} where tenant_id = :tenant"), {"tenant": tenant_id}
        )
        found[name] = int(count or 0)
    return found


async def _collections_held(session: AsyncSession, tenant_id: str) -> list[dict[str, object]]:
    """Each collection of the tenant with its documents and chunks (named by tenant: on Citus
    a statement of a registry transaction is routed by it)."""
    rows = await session.execute(
        select(
            Collection.name,
            func.count(Document.id),
            func.coalesce(func.sum(Document.chunk_count), 0),
        )
        .join(Document, DOCUMENT_COLLECTION)
        .where(Collection.tenant_id == tenant_id, Document.tenant_id == tenant_id)
        .group_by(Collection.id, Collection.name)
        .order_by(Collection.name)
    )
    return [
        {"collection": name, "documents": documents, "chunks": int(chunks)}
        for name, documents, chunks in rows
    ]
