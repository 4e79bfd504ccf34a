"""Dependency wiring: the request gate (token, tenant, scope, rate limit) and typed aliases.

Every `/api/*` route depends on one of the `*Caller` aliases, so it passes the gate before
any database or embedding work: bearer token -> principal (401), X-Tenant-ID check (403),
scope (403), tenant exists and is active (403), rate limit per tenant (429).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request

from app.api.middleware import RATE_LIMIT_HEADERS_STATE
from app.auth import (
    SCOPE_ADMIN,
    SCOPE_INGEST,
    SCOPE_SEARCH,
    Principal,
    principal_from_authorization,
)
from app.errors import Forbidden
from app.ratelimit import limit_for_tier, raise_if_denied, rate_limit_headers
from app.resources import Resources
from app.tenants import TenantInfo


def get_resources(request: Request) -> Resources:
    resources: Resources = request.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling and for which tenant (an admin may act for another one)."""

    principal: Principal
    tenant: TenantInfo

    @property
    def tenant_id(self) -> str:
        return self.tenant.id


def authenticate(
    resources: ResourcesDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    return principal_from_authorization(authorization, resources.verifier)


def _acting_tenant(principal: Principal, header: str | None) -> str:
    if header is None or header == principal.tenant_id:
        return principal.tenant_id
    if principal.has_scope(SCOPE_ADMIN):
        return header
    raise Forbidden("X-Tenant-ID does not match the token's tenant (only rag:admin may differ)")


def gate(scope: str) -> Callable[..., Awaitable[Caller]]:
    async def check(
        request: Request,
        resources: ResourcesDep,
        principal: Annotated[Principal, Depends(authenticate)],
        x_tenant_id: Annotated[str | None, Header(description="Act for this tenant.")] = None,
    ) -> Caller:
        if not principal.has_scope(scope):
            raise Forbidden(f"this endpoint needs the {scope} scope")
        tenant = await resources.tenants.require_active(_acting_tenant(principal, x_tenant_id))
        settings = resources.settings
        decision = await resources.limiter.hit(
            f"tenant:{tenant.id}",
            limit=limit_for_tier(settings, tenant.tier),
            window_seconds=settings.rate_limit_window_seconds,
        )
        setattr(request.state, RATE_LIMIT_HEADERS_STATE, rate_limit_headers(decision))
        raise_if_denied(decision)
        return Caller(principal=principal, tenant=tenant)

    return check


SearchCaller = Annotated[Caller, Depends(gate(SCOPE_SEARCH))]
IngestCaller = Annotated[Caller, Depends(gate(SCOPE_INGEST))]
AdminCaller = Annotated[Caller, Depends(gate(SCOPE_ADMIN))]
