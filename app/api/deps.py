"""Dependency wiring: the request gate (app/gate.py) and typed aliases.

Every `/api/*` route depends on one of the `*Caller` aliases, so it passes the gate before
any database or embedding work: bearer token -> principal (401), X-Tenant-ID check (403),
scope (403), tenant exists and is active (403), rate limit per tenant (429).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.middleware import RATE_LIMIT_HEADERS_STATE
from app.api.observe import TENANT_STATE
from app.api.openapi import BEARER_DESCRIPTION, BEARER_SCHEME
from app.auth import SCOPE_ADMIN, SCOPE_INGEST, SCOPE_SEARCH
from app.db.replicas import ReadConsistency
from app.gate import Caller, admit, spend
from app.ratelimit import raise_if_denied, rate_limit_headers
from app.resources import Resources

__all__ = [
    "AdminCaller",
    "AnyCaller",
    "Caller",
    "Consistency",
    "IngestCaller",
    "ResourcesDep",
    "SearchCaller",
    "admission",
    "gate",
    "get_resources",
]


async def get_resources(request: Request) -> Resources:
    """Async on purpose: FastAPI runs a plain `def` dependency on a worker thread."""
    resources: Resources = request.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]
AuthorizationHeader = Annotated[str | None, Header(include_in_schema=False)]
TenantHeader = Annotated[
    str | None, Header(description="Act for this tenant (another one needs rag:admin).")
]
# Declares the bearer scheme on every gated operation (Swagger UI's Authorize button); the
# gate itself reads the raw header, to say precisely what is wrong with it.
BEARER = HTTPBearer(
    bearerFormat="JWT", scheme_name=BEARER_SCHEME, description=BEARER_DESCRIPTION, auto_error=False
)
BearerDeclared = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


def admission(scope: str | None) -> Callable[..., Awaitable[Caller]]:
    """The gate without the rate limit: for doors that spend the budget per operation (MCP).
    `scope` None admits any valid token of an active tenant."""

    async def check(
        request: Request,
        resources: ResourcesDep,
        _bearer: BearerDeclared,
        authorization: AuthorizationHeader = None,
        x_tenant_id: TenantHeader = None,
    ) -> Caller:
        caller = await admit(resources, authorization, scope=scope, acting_for=x_tenant_id)
        setattr(request.state, TENANT_STATE, caller.tenant_id)  # for the access log
        return caller

    return check


def gate(scope: str | None) -> Callable[..., Awaitable[Caller]]:
    """The whole gate, one request spent from the tenant's budget (its headers on the reply)."""

    admitted = Depends(admission(scope))  # a default: an annotation here could not see `scope`

    async def check(request: Request, resources: ResourcesDep, caller: Caller = admitted) -> Caller:
        decision = await spend(resources, caller)
        setattr(request.state, RATE_LIMIT_HEADERS_STATE, rate_limit_headers(decision))
        raise_if_denied(decision)
        return caller

    return check


SearchCaller = Annotated[Caller, Depends(gate(SCOPE_SEARCH))]
IngestCaller = Annotated[Caller, Depends(gate(SCOPE_INGEST))]
AdminCaller = Annotated[Caller, Depends(gate(SCOPE_ADMIN))]
AnyCaller = Annotated[Caller, Depends(gate(None))]  # any valid token of an active tenant


CONSISTENCY_HEADER = "X-Read-Consistency"
ConsistencyHeader = Annotated[
    ReadConsistency,
    Header(
        alias=CONSISTENCY_HEADER,
        description="`primary` reads from the primary database: the answer reflects every write"
        " acknowledged before it (e.g. a document just ingested). `replica` (default) lets a"
        " read replica answer, which may be up to RAG_REPLICA_MAX_LAG_SECONDS behind.",
    ),
]


async def read_consistency(
    consistency: ConsistencyHeader = ReadConsistency.REPLICA,
) -> ReadConsistency:
    return consistency


Consistency = Annotated[ReadConsistency, Depends(read_consistency)]
