"""MCP over streamable HTTP: the SDK's transport, stateless and answering in plain JSON.

Stateless: every POST is served on its own (no `Mcp-Session-Id`, nothing kept between
requests), so any replica answers any request. JSON responses: a request gets one
`application/json` JSON-RPC reply, which every client accepts (a spec client that also
accepts `text/event-stream` handles either) and which the seed-style bare `curl` expects.
Protocol era: a request naming `MCP-Protocol-Version: 2026-07-28` takes the SDK's sessionless
modern path; one naming an older version, or none (a bare POST, an `initialize`), the legacy
path, which stateless mode runs "born ready", so a lone `tools/call` needs no `initialize`.

One adaptation in front of the SDK: a POST with no `Accept` header gets `Accept:
application/json`. The SDK answers 406 unless Accept names application/json (or a wildcard),
but RFC 9110 §12.5.1 says a request without Accept accepts any media type, and the agent
setups this service replaces send none. curl, httpx and requests send `*/*` on their own.

Transport security (DNS-rebinding protection): the Host and Origin allowlists come from
RAG_MCP_ALLOWED_HOSTS / RAG_MCP_ALLOWED_ORIGINS (localhost by default; a Host outside the list
gets the SDK's 421, an Origin outside it 403); "*" as the only host turns the check off, for
a proxy that already controls Host.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from app.mcp.server import build_server
from app.settings import Settings

ACCEPT = b"accept"
JSON = b"application/json"


@dataclass(frozen=True, slots=True)
class McpHttp:
    server: MCPServer
    app: ASGIApp  # the SDK's transport, behind the Accept adaptation


def transport_security(settings: Settings) -> TransportSecuritySettings:
    if settings.mcp_allowed_hosts == ["*"]:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        allowed_hosts=settings.mcp_allowed_hosts, allowed_origins=settings.mcp_allowed_origins
    )


@asynccontextmanager
async def serve_http(settings: Settings, model_id: str) -> AsyncIterator[McpHttp]:
    """The MCP transport for the app's lifespan: its session manager runs while this is open."""
    server = build_server(settings, model_id)
    server.streamable_http_app(
        json_response=True,
        stateless_http=True,
        transport_security=transport_security(settings),
    )
    # Stateless mode opens and closes a transport per request and logs both at INFO.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
    manager = server.session_manager
    async with running(manager):
        yield McpHttp(server=server, app=accepting_json(manager.handle_request))


@asynccontextmanager
async def running(manager: StreamableHTTPSessionManager) -> AsyncIterator[None]:
    """`manager.run()` in a task of its own: it holds an anyio task group, which must be left
    by the task that entered it, and a host may run lifespan startup and shutdown in two
    different tasks (pytest-asyncio fixtures do)."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        async with manager.run():
            started.set()
            await stop.wait()

    task = asyncio.create_task(run(), name="mcp-session-manager")
    ready = asyncio.create_task(started.wait())
    await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
    if task.done():  # it failed to start: its error
        ready.cancel()
        task.result()
        raise RuntimeError("the MCP session manager stopped as it started")
    try:
        yield
    finally:
        stop.set()
        await task


def accepting_json(app: ASGIApp) -> ASGIApp:
    """`app`, with `Accept: application/json` added to requests that carry no Accept header."""

    async def adapted(scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get("headers", [])
        if not any(name == ACCEPT and value.strip() for name, value in headers):
            kept = [(name, value) for name, value in headers if name != ACCEPT]
            scope = {**scope, "headers": [*kept, (ACCEPT, JSON)]}
        await app(scope, receive, send)

    return adapted
