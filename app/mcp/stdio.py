"""MCP over stdio for desktop agents: `rag mcp --tenant T` on the machine of the service.

There is no token on a pipe: whoever can start the process already has the database (its
URL, or the embedded server's data directory), so the tenant named on the command line is the
caller, with the rag:search scope. The rest is the HTTP door's: the tenant must exist and be
active (checked before the model loads, so a wrong tenant fails fast, and again at every
call), every call spends from the tenant's rate-limit budget (shared with the HTTP API when
RAG_REDIS_URL is set), same tools, same answers. stdout carries the protocol only.
"""

from __future__ import annotations

from app.auth import SCOPE_SEARCH, Principal, TokenVerifier
from app.db.engine import create_engine, create_sessionmaker
from app.gate import authorize
from app.mcp.access import ToolAccess, acting
from app.mcp.server import build_server
from app.resources import open_resources
from app.settings import Settings
from app.tenants import TenantDirectory

SUBJECT = "stdio"


async def serve_stdio(settings: Settings, tenant_id: str) -> None:
    """Serve the tools for `tenant_id` on stdin/stdout until the client closes them."""
    await _require_active(settings, tenant_id)
    principal = Principal(tenant_id=tenant_id, subject=SUBJECT, scopes=frozenset({SCOPE_SEARCH}))
    async with open_resources(settings, verifier=TokenVerifier([])) as resources:
        caller = await authorize(resources, principal, scope=SCOPE_SEARCH)
        server = build_server(settings, resources.embedder.model_id)
        with acting(ToolAccess(caller, resources)):
            await server.run_stdio_async()


async def _require_active(settings: Settings, tenant_id: str) -> None:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        await TenantDirectory(create_sessionmaker(engine), ttl_seconds=0).require_active(tenant_id)
    finally:
        await engine.dispose()
