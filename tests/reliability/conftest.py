"""The app (REST, admin and /mcp) over ASGI, and a way to send any row of endpoints.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest
from httpx import ASGITransport, AsyncClient, Response

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant, running_app, token_for
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import HOST, mcp_settings
from tests.reliability.endpoints import Call, Door


@pytest.fixture
async def http(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    async with (
        running_app(mcp_settings(settings), sessions, embedder) as app,
        AsyncClient(transport=ASGITransport(app), base_url=f"http://{HOST}") as client,
    ):
        yield client


@pytest.fixture
async def tenant(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(http, settings, sessions)


async def send(http: AsyncClient, tenant: TenantClient, settings: Settings, call: Call) -> Response:
    """`call` as the tenant (or as its admin); bodies are encoded here, so a lone surrogate
    travels as the `\\ud800` escape a JSON client would send."""
    headers = dict(tenant.headers)
    if call.admin:
        headers["Authorization"] = f"Bearer {token_for(settings, tenant.tenant_id, 'rag:admin')}"
    url = call.path
    if call.params:
        query = "&".join(
            f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}"
            for k, v in call.params.items()
        )
        url = f"{url}?{query}"
    content = None
    if call.json is not None:
        content = json.dumps(call.json).encode()
        headers["Content-Type"] = "application/json"
    if call.door is Door.MCP:
        headers["Accept"] = "application/json, text/event-stream"
    return await http.request(call.method, url, content=content, headers=headers)
