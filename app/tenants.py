"""The tenant registry: create (idempotent), read, list, change tier or status."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Tenant
from app.db.tenancy import SessionMaker, registry_transaction
from app.errors import Forbidden, NotFound
from app.storable import TENANT_ID_PATTERN as TENANT_ID_PATTERN


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
    await session.refresh(tenant)  # updated_at is set by the server
    return tenant


@dataclass(frozen=True, slots=True)
class TenantInfo:
    id: str
    tier: str
    status: str


class TenantDirectory:
    """Who may act: the tenant exists and is active. A short-lived cache saves a query per
    request; a suspension takes effect within `ttl_seconds`."""

    def __init__(self, sessions: SessionMaker, *, ttl_seconds: float, max_entries: int = 10_000):
        self._sessions = sessions
        self._ttl = ttl_seconds
        self._max = max_entries
        self._cache: dict[str, tuple[float, TenantInfo | None]] = {}

    async def lookup(self, tenant_id: str) -> TenantInfo | None:
        now = time.monotonic()
        cached = self._cache.get(tenant_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        async with registry_transaction(self._sessions) as session:
            tenant = await session.get(Tenant, tenant_id)
        info = TenantInfo(tenant.id, tenant.tier, tenant.status) if tenant else None
        if len(self._cache) >= self._max:
            self._cache.clear()
        self._cache[tenant_id] = (now + self._ttl, info)
        return info

    async def require_active(self, tenant_id: str) -> TenantInfo:
        info = await self.lookup(tenant_id)
        if info is None:
            raise Forbidden(f"tenant {tenant_id!r} does not exist")
        if info.status != "active":
            raise Forbidden(f"tenant {tenant_id!r} is suspended")
        return info

    def forget(self, tenant_id: str) -> None:
        self._cache.pop(tenant_id, None)
