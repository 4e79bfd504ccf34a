"""The gate every door passes (HTTP API, MCP over HTTP, MCP over stdio).

`admit`: bearer token -> principal (401), X-Tenant-ID check (403; only rag:admin may act for
another tenant), scope (403), the acting tenant exists and is active (403). `spend`: one request
from the tenant's rate-limit budget, under one key per tenant whichever door spends it, so
REST and MCP share a budget. No FastAPI here: `api/deps.py` and `app/mcp` wire it in.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.auth import SCOPE_ADMIN, Principal, principal_from_authorization
from app.db.tenancy import SessionMaker, reading_as
from app.errors import Forbidden, Unprocessable
from app.observability.metrics import RATE_LIMIT_DECISIONS, tenant_label
from app.ratelimit import Decision, limit_for_tier
from app.resources import Resources
from app.storable import is_tenant_id
from app.tenants import TenantInfo


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling and for which tenant (an admin may act for another one)."""

    principal: Principal
    tenant: TenantInfo

    @property
    def tenant_id(self) -> str:
        return self.tenant.id

    def sessions(self, resources: Resources) -> SessionMaker:
        """Sessions that read as this caller: its tenant transactions see the documents its
        principals may see (every one for rag:admin and rag:all-documents)."""
        return reading_as(resources.sessions, self.principal.readers)

    def resources(self, resources: Resources) -> Resources:
        """`resources` whose sessions and reads (on a replica too) read as this caller."""
        return resources.reading_as_caller(self.principal.readers)


async def admit(
    resources: Resources,
    authorization: str | None,
    *,
    scope: str | None,
    acting_for: str | None = None,
) -> Caller:
    """The caller of an `Authorization` header value, allowed `scope` (None: any valid token)
    for the acting tenant."""
    principal = principal_from_authorization(authorization, resources.verifier)
    return await authorize(resources, principal, scope=scope, acting_for=acting_for)


async def authorize(
    resources: Resources, principal: Principal, *, scope: str | None, acting_for: str | None = None
) -> Caller:
    """The caller `principal` is, when it has `scope` and its acting tenant is active."""
    if scope is not None and not principal.has_scope(scope):
        raise Forbidden(f"this endpoint needs the {scope} scope")
    tenant = await resources.tenants.require_active(_acting_tenant(principal, acting_for))
    return Caller(principal=principal, tenant=tenant)


def _acting_tenant(principal: Principal, header: str | None) -> str:
    if header is None or header == principal.tenant_id:
        return principal.tenant_id
    if not is_tenant_id(header):
        raise Unprocessable(
            "X-Tenant-ID is not a tenant id",
            extra={"errors": [{"field": "X-Tenant-ID", "message": "not a tenant id"}]},
        )
    if principal.has_scope(SCOPE_ADMIN):
        return header
    raise Forbidden("X-Tenant-ID does not match the token's tenant (only rag:admin may differ)")


def rate_limit_key(tenant_id: str) -> str:
    return f"tenant:{tenant_id}"


async def spend(resources: Resources, caller: Caller) -> Decision:
    """Count one request against the caller's tenant; the decision says whether it may go on."""
    settings = resources.settings
    decision = await resources.limiter.hit(
        rate_limit_key(caller.tenant_id),
        limit=limit_for_tier(settings, caller.tenant.tier),
        window_seconds=settings.rate_limit_window_seconds,
    )
    tenant = tenant_label(settings.metrics_tenant_label, caller.tenant_id)
    RATE_LIMIT_DECISIONS.labels("allowed" if decision.allowed else "limited", tenant).inc()
    if not decision.allowed:
        resources.usage.record(caller.tenant_id, "rate_limited")
    return decision
