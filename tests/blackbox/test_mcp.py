"""MCP over streamable HTTP at /mcp, with the official SDK's client: the tools list, a search
from the caller's tenant, and another tenant's document out of reach."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.blackbox.conftest import Seeded
from tests.blackbox.target import Target

pytestmark = pytest.mark.slow


@asynccontextmanager
async def mcp_session(target: Target, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{target.url}/mcp", http_client=http)) as client,
    ):
        yield client


async def test_mcp_tools_answer_from_the_callers_tenant(
    target: Target, alpha: Seeded, beta: Seeded
) -> None:
    async with mcp_session(target, alpha.tenant.token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"search", "search_similar", "fetch", "get_context"} <= names
        found = await client.call_tool("search_similar", {"query": "harbour channel dredging"})
        assert not found.is_error, found.content
        assert found.structured_content is not None
        documents = found.structured_content["documents"]
        assert documents
        assert alpha.canary in documents[0]["content"]
        theirs = await client.call_tool("search_similar", {"query": beta.canary, "limit": 20})
        assert beta.canary not in str(theirs.structured_content)
        fetched = await client.call_tool("fetch", {"id": beta.document_id})
        assert fetched.is_error
        assert beta.canary not in str(fetched.content)


async def test_mcp_without_a_token_is_refused(target: Target) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        reply = await http.post(
            f"{target.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert reply.status_code == 401
