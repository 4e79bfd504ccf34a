"""Admin: tenants (list, create, update, suspend, delete), statistics, the audit log.

Every route needs the rag:admin scope (a token of any tenant) and is written to the audit log
when it changes something, with the token's subject as the actor.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.admin import tenants as admin_tenants
from app.admin.audit import Actor, entries
from app.admin.stats import statistics, storage_by_tenant
from app.api import examples
from app.api.admin_models import (
    AuditList,
    AuditOut,
    StatsOut,
    Status,
    TenantIn,
    TenantList,
    TenantOut,
    TenantPatch,
    TierList,
    TierOut,
)
from app.api.deps import AdminCaller, ResourcesDep
from app.api.openapi import GATED, WITH_BODY, errors
from app.api.sync import RECEIPT_SCHEMA
from app.db.models import Tenant
from app.db.tenancy import ledger_transaction, registry_transaction
from app.errors import Unprocessable
from app.gate import Caller
from app.resources import Resources
from app.storable import MAX_OFFSET
from app.tenants import TENANT_ID_PATTERN, get_tenant

router = APIRouter(prefix="/api/admin", tags=["admin"], responses=GATED)
TenantPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN, examples=["acme"])]
Limit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL: a 422, not a 500


def _actor(caller: Caller) -> Actor:
    return Actor.of_token(caller.principal)


def _known_tier(tier: str | None, tiers: dict[str, int]) -> None:
    if tier is not None and tier not in tiers:
        raise Unprocessable(
            f"unknown tier {tier!r}; known: {', '.join(tiers)}",
            extra={"errors": [{"field": "tier", "message": "unknown tier"}]},
        )


@router.get("/tenants", summary="List tenants with their document and chunk counts")
async def tenants(
    _caller: AdminCaller,
    resources: ResourcesDep,
    status: Annotated[Status | None, Query()] = None,
    tier: Annotated[str | None, Query(max_length=32, pattern=NO_NUL)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> TenantList:
    async with registry_transaction(resources.sessions) as session:
        found, total = await admin_tenants.tenant_page(
            session, status=status, tier=tier, limit=limit, offset=offset
        )
        items = await _with_counts(session, found)
    return TenantList(items=items, total=total, limit=limit, offset=offset)


async def _with_counts(session: AsyncSession, found: Sequence[Tenant]) -> list[TenantOut]:
    """Tenants with their counts and estimated storage."""
    counts = await admin_tenants.counts_of(session, [t.id for t in found])
    storage = await storage_by_tenant(session, counts)
    return [TenantOut.of(t, counts[t.id], storage[t.id]) for t in found]


@router.get("/tiers", summary="The tiers a tenant may have, with their rate limits")
async def tiers(_caller: AdminCaller, resources: ResourcesDep) -> TierList:
    settings = resources.settings
    window = settings.rate_limit_window_seconds
    return TierList(
        items=[
            TierOut(name=name, requests=requests, window_seconds=window)
            for name, requests in settings.rate_limit_tiers.items()
        ]
    )


@router.post(
    "/tenants",
    status_code=201,
    summary="Create a tenant (idempotent)",
    responses={
        200: {"model": TenantOut, "description": "It existed: nothing changed"},
        **WITH_BODY,
    },
)
async def create(
    body: Annotated[TenantIn, Body(openapi_examples=examples.TENANT_CREATE)],
    caller: AdminCaller,
    resources: ResourcesDep,
    response: Response,
) -> TenantOut:
    _known_tier(body.tier, resources.settings.rate_limit_tiers)
    async with ledger_transaction(resources.sessions) as session:
        tenant, created = await admin_tenants.create(
            session, _actor(caller), body.id, name=body.name, tier=body.tier
        )
        response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        out = TenantOut.of(tenant)
    resources.tenants.forget(body.id)  # a lookup may have cached its absence
    return out


@router.get("/tenants/{tenant_id}", summary="Read a tenant", responses=errors(404))
async def read(tenant_id: TenantPath, _caller: AdminCaller, resources: ResourcesDep) -> TenantOut:
    async with registry_transaction(resources.sessions) as session:
        [out] = await _with_counts(session, [await get_tenant(session, tenant_id)])
        return out


async def _update(
    resources: Resources, caller: Caller, tenant_id: str, patch: TenantPatch
) -> TenantOut:
    _known_tier(patch.tier, resources.settings.rate_limit_tiers)
    async with ledger_transaction(resources.sessions) as session:
        tenant = await admin_tenants.update(
            session,
            _actor(caller),
            tenant_id,
            name=patch.name,
            tier=patch.tier,
            status=patch.status,
        )
        out = TenantOut.of(tenant)
    resources.tenants.forget(tenant_id)  # a suspension applies to the very next request
    return out


@router.patch(
    "/tenants/{tenant_id}",
    summary="Rename, re-tier, suspend or activate",
    responses={**errors(404), **WITH_BODY},
)
async def change(
    tenant_id: TenantPath,
    body: Annotated[TenantPatch, Body(openapi_examples=examples.TENANT_PATCH)],
    caller: AdminCaller,
    resources: ResourcesDep,
) -> TenantOut:
    return await _update(resources, caller, tenant_id, body)


@router.post("/tenants/{tenant_id}/suspend", summary="Suspend a tenant", responses=errors(404))
async def suspend(tenant_id: TenantPath, caller: AdminCaller, resources: ResourcesDep) -> TenantOut:
    """Its tokens get 403 until it is activated again; its data stays."""
    return await _update(resources, caller, tenant_id, TenantPatch(status="suspended"))


@router.post("/tenants/{tenant_id}/activate", summary="Activate a tenant", responses=errors(404))
async def activate(
    tenant_id: TenantPath, caller: AdminCaller, resources: ResourcesDep
) -> TenantOut:
    return await _update(resources, caller, tenant_id, TenantPatch(status="active"))


@router.delete(
    "/tenants/{tenant_id}",
    status_code=204,
    summary="Delete a suspended tenant and all its documents",
    responses={
        204: {
            "description": "Deleted; `Receipt-Id` names its receipt",
            "headers": {"Receipt-Id": {"schema": {"type": "string", "format": "uuid"}}},
        },
        **errors(404, 409),
    },
)
async def remove(
    tenant_id: TenantPath,
    caller: AdminCaller,
    resources: ResourcesDep,
    confirm: Annotated[str, Query(description="The tenant id again.", examples=["acme"])],
    response: Response,
) -> None:
    """Deletes its collections, documents, chunks and usage counters; cannot be undone.
    The tenant must be suspended first (409 otherwise) and `confirm` repeat its id (422).
    The `Receipt-Id` header names the signed receipt of the deletion (GET
    /api/admin/tenants/{tenant_id}/receipts/{receipt_id}), which outlives the tenant."""
    async with ledger_transaction(resources.sessions) as session:
        receipt = await admin_tenants.delete_tenant(
            session, resources.settings, _actor(caller), tenant_id, confirm=confirm
        )
    resources.tenants.forget(tenant_id)
    response.headers["Receipt-Id"] = str(receipt.id)


@router.get(
    "/tenants/{tenant_id}/receipts/{receipt_id}",
    summary="Read a tenant's receipt, with its signature",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {"schema": RECEIPT_SCHEMA}}},
        **errors(404),
    },
)
async def tenant_receipt(
    tenant_id: TenantPath, receipt_id: uuid.UUID, caller: AdminCaller, resources: ResourcesDep
) -> Response:
    """A receipt of the tenant (a sync, a deletion, the tenant's own deletion: it is kept
    when the tenant is deleted) exactly as signed, with the Standard Webhooks headers."""
    async with ledger_transaction(resources.sessions) as session:
        signed = await admin_tenants.tenant_receipt(session, tenant_id, receipt_id)
    return Response(signed.payload, media_type="application/json", headers=signed.headers())


@router.get("/tenants/{tenant_id}/stats", summary="A tenant's statistics", responses=errors(404))
async def stats(tenant_id: TenantPath, caller: AdminCaller, resources: ResourcesDep) -> StatsOut:
    """Documents, chunks by embedding model, storage, and traffic in the last hour and day."""
    await resources.usage.flush(resources.sessions)
    return StatsOut.of(tenant_id, await statistics(caller.sessions(resources), tenant_id))


@router.get("/audit", summary="The audit log of admin actions, newest first")
async def audit(
    _caller: AdminCaller,
    resources: ResourcesDep,
    tenant_id: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    action: Annotated[
        str | None, Query(max_length=64, pattern=NO_NUL, examples=["tenant.suspend"])
    ] = None,
    actor: Annotated[str | None, Query(max_length=256, pattern=NO_NUL)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AuditList:
    async with ledger_transaction(resources.sessions) as session:
        found, total = await entries(
            session, tenant_id=tenant_id, action=action, actor=actor, limit=limit, offset=offset
        )
    return AuditList(items=[AuditOut.of(e) for e in found], total=total, limit=limit, offset=offset)
