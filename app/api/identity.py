"""GET /api/rag/me: who a token is, for clients that adapt to it (the web console's sign-in);
GET /api/rag/usage: its tenant's traffic (the console's overview)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Self

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.admin_models import WindowsOut
from app.api.deps import AnyCaller, ResourcesDep, SearchCaller
from app.api.openapi import GATED
from app.gate import Caller
from app.operations.usage import tenant_traffic

router = APIRouter(prefix="/api/rag", tags=["identity"], responses=GATED)


class IdentityOut(BaseModel):
    tenant_id: str = Field(description="The tenant the token acts for.")
    tenant_tier: str
    subject: str = Field(description="The token's `sub`.")
    scopes: list[str] = Field(description="Sorted; rag:search, rag:ingest, rag:admin, …")
    groups: list[str]
    expires_at: datetime | None = Field(description="The token's `exp`.")

    @classmethod
    def of(cls, caller: Caller) -> Self:
        principal = caller.principal
        expires = principal.expires_at
        return cls(
            tenant_id=caller.tenant_id,
            tenant_tier=caller.tenant.tier,
            subject=principal.subject,
            scopes=sorted(principal.scopes),
            groups=sorted(principal.groups),
            expires_at=None if expires is None else datetime.fromtimestamp(expires, tz=UTC),
        )


@router.get("/me", summary="Who the token is")
async def whoami(caller: AnyCaller) -> IdentityOut:
    """Any valid token of an active tenant: its tenant, subject, scopes, groups and expiry.
    A refused token gets the same 401 or 403 as on every other route, with the reason."""
    return IdentityOut.of(caller)


@router.get("/usage", summary="The tenant's traffic in the last hour and day")
async def usage(caller: SearchCaller, resources: ResourcesDep) -> WindowsOut:
    """Searches, documents ingested and requests refused with 429, for the token's tenant:
    the last hour, the last day and each of the last 24 hours (as the admin stats give them)."""
    windows, hourly = await tenant_traffic(resources, caller.tenant_id)
    return WindowsOut.of(windows, hourly)
