"""The tenant registry: create (idempotent), read, list, change tier or status."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Tenant
from app.errors import NotFound

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


async def create_tenant(
    session: AsyncSession, tenant_id: str, *, name: str | None = None, tier: str = "basic"
) -> tuple[Tenant, bool]:
    """Create the tenant if it does not exist; return it and whether this call created it."""
    stmt = (
        insert(Tenant)
        .values(id=tenant_id, name=name or tenant_id, tier=tier)
        .on_conflict_do_nothing(index_elements=[Tenant.id])
        .returning(Tenant.id)
    )
    created = (await session.execute(stmt)).scalar_one_or_none() is not None
    return await get_tenant(session, tenant_id), created


async def get_tenant(session: AsyncSession, tenant_id: str) -> Tenant:
    tenant = await session.get(Tenant, tenant_id, populate_existing=True)
    if tenant is None:
        raise NotFound(f"tenant {tenant_id!r} does not exist")
    return tenant


async def list_tenants(session: AsyncSession, *, limit: int, offset: int) -> Sequence[Tenant]:
    stmt = select(Tenant).order_by(Tenant.id).limit(limit).offset(offset)
    return (await session.scalars(stmt)).all()


async def update_tenant(
    session: AsyncSession, tenant_id: str, *, tier: str | None = None, status: str | None = None
) -> Tenant:
    tenant = await get_tenant(session, tenant_id)
    if tier is not None:
        tenant.tier = tier
    if status is not None:
        tenant.status = status
    await session.flush()
    return tenant
