"""Admin: tenants (create, tier, suspend) and per-tenant statistics. Scope rag:admin."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from fastapi import APIRouter, Path, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.api.deps import AdminCaller, ResourcesDep
from app.db.models import Tenant
from app.db.tenancy import registry_transaction, tenant_transaction
from app.errors import Unprocessable
from app.ingest.catalog import tenant_stats
from app.jobs.store import job_counts
from app.tenants import TENANT_ID_PATTERN, create_tenant, get_tenant, list_tenants, update_tenant

router = APIRouter(prefix="/api/admin", tags=["admin"])
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]


class TenantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: TenantId
    name: Annotated[str | None, StringConstraints(max_length=200)] = None
    tier: str = "basic"


class TenantPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tier: str | None = None
    status: Literal["active", "suspended"] | None = None


class TenantOut(BaseModel):
    id: str
    name: str
    tier: str
    status: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, tenant: Tenant) -> Self:
        return cls(
            id=tenant.id,
            name=tenant.name,
            tier=tenant.tier,
            status=tenant.status,
            created_at=tenant.created_at,
            updated_at=tenant.updated_at,
        )


class TenantList(BaseModel):
    items: list[TenantOut]
    limit: int
    offset: int


class JobsOut(BaseModel):
    queued: int = Field(description="Ingestion jobs waiting for a worker.")
    running: int
    queued_bytes: int = Field(description="Input bytes still to ingest.")


class StatsOut(BaseModel):
    tenant_id: str
    documents: int
    chunks: int
    collections: int
    chunks_by_model: dict[str, int] = Field(description="Chunks per embedding model id.")
    jobs: JobsOut


def _known_tier(tier: str | None, tiers: dict[str, int]) -> None:
    if tier is not None and tier not in tiers:
        raise Unprocessable(
            f"unknown tier {tier!r}; known: {', '.join(tiers)}",
            extra={"errors": [{"field": "tier", "message": "unknown tier"}]},
        )


@router.get("/tenants")
async def tenants(
    _caller: AdminCaller,
    resources: ResourcesDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TenantList:
    async with registry_transaction(resources.sessions) as session:
        found = await list_tenants(session, limit=limit, offset=offset)
        return TenantList(items=[TenantOut.of(t) for t in found], limit=limit, offset=offset)


@router.post("/tenants", status_code=201, responses={200: {"model": TenantOut}})
async def create(
    body: TenantIn, _caller: AdminCaller, resources: ResourcesDep, response: Response
) -> TenantOut:
    """Create a tenant; creating one that exists changes nothing (200)."""
    _known_tier(body.tier, resources.settings.rate_limit_tiers)
    async with registry_transaction(resources.sessions) as session:
        tenant, created = await create_tenant(session, body.id, name=body.name, tier=body.tier)
        response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return TenantOut.of(tenant)


@router.patch("/tenants/{tenant_id}")
async def change(
    tenant_id: Annotated[str, Path(pattern=TENANT_ID_PATTERN)],
    body: TenantPatch,
    _caller: AdminCaller,
    resources: ResourcesDep,
) -> TenantOut:
    """Change a tenant's tier or suspend/reactivate it."""
    _known_tier(body.tier, resources.settings.rate_limit_tiers)
    async with registry_transaction(resources.sessions) as session:
        tenant = await update_tenant(session, tenant_id, tier=body.tier, status=body.status)
        out = TenantOut.of(tenant)
    resources.tenants.forget(tenant_id)
    return out


@router.get("/tenants/{tenant_id}/stats")
async def stats(
    tenant_id: Annotated[str, Path(pattern=TENANT_ID_PATTERN)],
    _caller: AdminCaller,
    resources: ResourcesDep,
) -> StatsOut:
    """Documents, chunks, collections and chunks per embedding model of one tenant."""
    async with registry_transaction(resources.sessions) as session:
        await get_tenant(session, tenant_id)
    async with tenant_transaction(resources.sessions, tenant_id) as session:
        found = await tenant_stats(session)
        jobs = await job_counts(session)
    return StatsOut(
        tenant_id=tenant_id,
        documents=found.documents,
        chunks=found.chunks,
        collections=found.collections,
        chunks_by_model=found.chunks_by_model,
        jobs=JobsOut(queued=jobs.queued, running=jobs.running, queued_bytes=jobs.queued_bytes),
    )
