"""POST /mcp: the MCP door over HTTP (app/mcp/http.py), behind the same gate as the API.

The gate runs as for any route, through FastAPI: bearer token (401 with WWW-Authenticate),
scope rag:search and active tenant (403), as RFC 9457 problems, before the SDK sees the
request; so no request without a valid token gets a JSON-RPC reply. The rate limit is spent
per tool call and resource read instead (app/mcp/access.py), from the tenant's one budget: a
denial is a tool error the agent reads, and the reply carries the RateLimit-* headers.
GET and DELETE (server-to-client streams, session ends) do not exist in stateless mode: 405.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.deps import Consistency, ResourcesDep, admission
from app.api.middleware import RATE_LIMIT_HEADERS_STATE
from app.auth import SCOPE_SEARCH
from app.gate import Caller
from app.mcp.access import ToolAccess, acting
from app.mcp.http import McpHttp
from app.ratelimit import Decision, rate_limit_headers

router = APIRouter(tags=["mcp"])
McpCaller = Annotated[Caller, Depends(admission(SCOPE_SEARCH))]


async def get_mcp_http(request: Request) -> McpHttp:
    """The MCP transport the lifespan runs (beside the resources); async like get_resources."""
    transport: McpHttp = request.state.mcp
    return transport


McpHttpDep = Annotated[McpHttp, Depends(get_mcp_http)]


class Delegated(Response):
    """A reply the SDK's transport writes itself, while the tools act for `access`."""

    def __init__(self, app: ASGIApp, access: ToolAccess) -> None:
        super().__init__()
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with acting(self.access):
            await self.app(scope, receive, send)


@router.post("/mcp", include_in_schema=False)
async def mcp(
    request: Request,
    caller: McpCaller,
    resources: ResourcesDep,
    transport: McpHttpDep,
    consistency: Consistency,
) -> Response:
    """MCP over streamable HTTP (JSON-RPC; see docs/REFERENCE.md, "Agents (MCP)")."""

    def record(decision: Decision) -> None:
        setattr(request.state, RATE_LIMIT_HEADERS_STATE, rate_limit_headers(decision))

    access = ToolAccess(caller, resources, on_decision=record, consistency=consistency)
    return Delegated(transport.app, access)
