"""MCP over HTTP against the real app: the SDK's own client, and bare JSON-RPC POSTs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient, Response
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant, running_app
from tests.fakes import WordHashEmbedder

HOST = "test"
Json = dict[str, Any]


def mcp_settings(settings: Settings, **update: object) -> Settings:
    """The test settings, with the test client's Host ("test") allowed to reach /mcp."""
    values = {"mcp_allowed_hosts": [HOST], "mcp_allowed_origins": [f"http://{HOST}"], **update}
    return settings.model_copy(update=values)


@pytest.fixture
async def mcp_app(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[FastAPI]:
    async with running_app(mcp_settings(settings), sessions, embedder) as app:
        yield app


@pytest.fixture
async def http(mcp_app: FastAPI) -> AsyncIterator[AsyncClient]:
    """REST and bare JSON-RPC calls to the same app the MCP clients reach."""
    async with AsyncClient(transport=ASGITransport(mcp_app), base_url=f"http://{HOST}") as client:
        yield client


@pytest.fixture
async def tenant(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(http, settings, sessions)


def token_of(tenant: TenantClient) -> str:
    return tenant.headers["Authorization"].removeprefix("Bearer ")


@asynccontextmanager
async def mcp_client(
    app: FastAPI, tenant: TenantClient, *, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, carrying the tenant's bearer token."""
    async with (
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app), base_url=f"http://{HOST}", headers=tenant.headers
        ) as transport,
        Client(streamable_http_client(f"http://{HOST}/mcp", http_client=transport), mode=mode) as c,
    ):
        yield c


async def rpc(
    http: AsyncClient,
    method: str,
    params: Json | None = None,
    *,
    headers: dict[str, str] | None = None,
    accept: str | None = None,
) -> Response:
    """One JSON-RPC request POSTed as a plain client would, with no Accept header unless given
    (httpx would send `*/*` on its own)."""
    body: Json = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    request = http.build_request("POST", "/mcp", json=body, headers=headers)
    del request.headers["accept"]
    if accept is not None:
        request.headers["accept"] = accept
    return await http.send(request)


async def call(http: AsyncClient, tenant: TenantClient, tool: str, **arguments: object) -> Json:
    """A bare `tools/call`; the JSON-RPC `result` (a CallToolResult on the wire)."""
    response = await rpc(
        http, "tools/call", {"name": tool, "arguments": arguments}, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    body: Json = response.json()
    assert "error" not in body, body
    result: Json = body["result"]
    return result


async def structured(http: AsyncClient, tenant: TenantClient, tool: str, **args: object) -> Json:
    """A tool's structured reply, after checking the call succeeded and the text matches it."""
    result = await call(http, tenant, tool, **args)
    assert result["isError"] is False, result
    [text] = result["content"]
    content: Json = result["structuredContent"]
    assert json.loads(text["text"]) == content
    return content


async def tool_error(http: AsyncClient, tenant: TenantClient, tool: str, **args: object) -> str:
    """The message of a call that must fail as a tool error (an isError result, not a 5xx)."""
    result = await call(http, tenant, tool, **args)
    assert result["isError"] is True, result
    message: str = result["content"][0]["text"]
    return message


def sdk_structured(result: CallToolResult) -> Json:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    [text] = result.content
    assert isinstance(text, TextContent)
    assert json.loads(text.text) == result.structured_content
    content: Json = result.structured_content
    return content


async def read_json(client: Client, uri: str) -> Json:
    """A resource's JSON content, read with the SDK client."""
    [content] = (await client.read_resource(uri)).contents
    assert isinstance(content, TextResourceContents), content
    parsed: Json = json.loads(content.text)
    return parsed


async def ingest(tenant: TenantClient, title: str, content: str, **body: object) -> Json:
    response = await tenant.http.post(
        "/api/rag/documents",
        json={"title": title, "content": content, **body},
        headers=tenant.headers,
    )
    assert response.status_code == 201, response.text
    created: Json = response.json()
    return created
