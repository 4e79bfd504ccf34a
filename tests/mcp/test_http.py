"""MCP over streamable HTTP: the SDK client in both protocol eras, the seed-style bare POST,
every tool and resource answering from the caller's tenant, and bad calls as tool errors."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi import FastAPI
from httpx import AsyncClient

from tests.conftest import TenantClient
from tests.mcp.conftest import (
    Json,
    call,
    ingest,
    mcp_client,
    read_json,
    rpc,
    sdk_structured,
    structured,
    tool_error,
)

pytestmark = pytest.mark.on_citus

TOOLS = {
    "search_similar",
    "semantic_search",
    "search",
    "fetch",
    "get_context",
    "find_similar",
    "find_duplicates",
}
SEED_CALL = {
    "name": "search_similar",
    "arguments": {"query": "REST API authentication", "limit": 5},
}
DOCUMENT_KEYS = {
    "id",
    "content",
    "similarity",
    "source_file",
    "source_type",
    "chunk_index",
    "page_number",
    "total_chunks",
    "metadata",
}
API_GUIDE = (
    "REST API authentication uses OAuth 2.0 bearer tokens. Clients send the token in the "
    "Authorization header of every request; tokens expire after one hour."
)


async def seed(tenant: TenantClient) -> Json:
    guide = await ingest(
        tenant,
        "API guide",
        API_GUIDE,
        metadata={"filename": "api_guide.pdf", "team": "platform"},
        collection="guides",
    )
    await ingest(tenant, "Gardening", "Tomatoes need sun, water and patience to ripen.")
    return guide


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_lists_tools_with_schemas_and_calls_them(
    mcp_app: FastAPI, tenant: TenantClient, mode: str
) -> None:
    guide = await seed(tenant)
    async with mcp_client(mcp_app, tenant, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description
            assert len(tool.description) > 60
            assert tool.input_schema["properties"], tool.name
            assert tool.output_schema is not None
            assert tool.output_schema["properties"]
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint
        assert listed["semantic_search"].input_schema["properties"]["threshold"]["default"] == 0.7
        limit = listed["search_similar"].input_schema["properties"]["limit"]
        assert (limit["default"], limit["minimum"], limit["maximum"]) == (5, 1, 100)
        reply = sdk_structured(await client.call_tool("search_similar", {"query": "OAuth tokens"}))
        assert reply["documents"][0]["id"]
        assert reply["count"] >= 1
        assert reply["documents"][0]["source_file"] == "api_guide.pdf"
        fetched = sdk_structured(await client.call_tool("fetch", {"id": guide["document_id"]}))
        assert fetched["text"] == API_GUIDE


async def test_seed_style_bare_post_gets_the_exact_reply_shape(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    for accept in (None, "application/json", "application/json, text/event-stream", "*/*"):
        response = await rpc(http, "tools/call", SEED_CALL, headers=tenant.headers, accept=accept)
        assert response.status_code == 200, (accept, response.text)
        assert response.headers["content-type"].startswith("application/json")
        assert "mcp-session-id" not in response.headers  # stateless
        body = response.json()
        assert (body["jsonrpc"], body["id"]) == ("2.0", 1)
        result = body["result"]
        reply = result["structuredContent"]
        assert set(reply) == {"success", "count", "documents"}
        assert reply["success"] is True
        assert reply["count"] == len(reply["documents"]) >= 1
        first = reply["documents"][0]
        assert set(first) == DOCUMENT_KEYS
        assert first["content"] == API_GUIDE
        assert first["source_file"] == "api_guide.pdf"
        assert (first["source_type"], first["chunk_index"], first["total_chunks"]) == ("text", 0, 1)
        assert first["page_number"] is None
        assert first["metadata"] == {"filename": "api_guide.pdf", "team": "platform"}
        assert 0 < first["similarity"] <= 1
        assert json.loads(result["content"][0]["text"]) == reply


async def test_source_file_falls_back_to_the_url_file_then_the_title(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await ingest(tenant, "Quarterly report", "revenue grew", source_url="https://x.org/r/q3.pdf")
    await ingest(tenant, "Team wiki", "revenue targets", source_url="https://wiki.x.org/team")
    reply = await structured(http, tenant, "search_similar", query="revenue", limit=5)
    assert sorted(d["source_file"] for d in reply["documents"]) == ["Team wiki", "q3.pdf"]


async def test_every_tool_answers(http: AsyncClient, tenant: TenantClient) -> None:
    guide = await seed(tenant)
    similar = await structured(http, tenant, "semantic_search", query="OAuth tokens", threshold=0.1)
    assert [d["source_file"] for d in similar["documents"]] == ["api_guide.pdf"]
    found = await structured(http, tenant, "search", query="OAuth bearer tokens")
    first = found["results"][0]
    assert set(first) == {"id", "title", "url", "text"}
    assert first["title"] == "API guide"
    assert first["url"] == f"rag://documents/{guide['document_id']}"
    fetched = await structured(http, tenant, "fetch", id=first["id"])
    assert fetched["text"] == API_GUIDE
    assert fetched["metadata"]["kind"] == "chunk"
    assert fetched["metadata"]["citation"] == "**API guide** (Text)"
    context = await structured(http, tenant, "get_context", query="OAuth tokens", max_tokens=500)
    assert context["context"].startswith(f"[1] {API_GUIDE}")
    assert context["citations"][0]["title"] == "API guide"
    assert context["metrics"]["total_tokens"] <= 500


async def test_resources_list_collections_with_document_counts(
    mcp_app: FastAPI, tenant: TenantClient
) -> None:
    await seed(tenant)
    async with mcp_client(mcp_app, tenant) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {"rag://collections"}
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert templates == {"rag://collections/{name}", "rag://documents/{document_id}"}
        listing = await read_json(client, "rag://collections")
        counts = {c["name"]: (c["documents"], c["chunks"]) for c in listing["collections"]}
        assert counts == {"default": (1, 1), "guides": (1, 1)}
        assert listing["total_documents"] == 2
        guides = next(c for c in listing["collections"] if c["name"] == "guides")
        detail = await read_json(client, guides["uri"])
        assert [d["title"] for d in detail["latest"]] == ["API guide"]
        document = await read_json(client, detail["latest"][0]["url"])
        assert document["text"] == API_GUIDE
        await ingest(tenant, "Odd", "odd names", collection="team docs/../2026")
        odd = await read_json(client, "rag://collections/team%20docs%2F..%2F2026")
        assert (odd["name"], odd["documents"]) == ("team docs/../2026", 1)
        assert odd["uri"] == "rag://collections/team%20docs%2F..%2F2026"


async def test_bad_calls_are_tool_errors_with_clear_messages(
    http: AsyncClient, tenant: TenantClient
) -> None:
    await seed(tenant)
    assert "limit" in await tool_error(http, tenant, "search_similar", query="x", limit=0)
    assert "query" in await tool_error(http, tenant, "search_similar", query="   ")
    assert "threshold" in await tool_error(http, tenant, "semantic_search", query="x", threshold=2)
    long = await tool_error(http, tenant, "search_similar", query="word " * 3000)
    assert "query is longer than 10000 characters" in long
    assert "id" in await tool_error(http, tenant, "fetch", id="not-a-uuid")
    unknown = uuid.uuid4()
    assert f"no chunk or document with id {unknown}" in await tool_error(
        http, tenant, "fetch", id=str(unknown)
    )
    assert "mode" in await tool_error(http, tenant, "search", query="x", mode="semantic")
    assert "filters" in await tool_error(http, tenant, "search", query="x", filters={"bad": 1})
    assert "Unknown tool" in await tool_error(http, tenant, "delete_everything")
    missing = await call(http, tenant, "search_similar")
    assert missing["isError"] is True


async def test_malformed_requests_get_client_errors_never_500(
    http: AsyncClient, tenant: TenantClient
) -> None:
    bad_json = await http.post(
        "/mcp",
        content=b"{not json",
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    assert bad_json.status_code == 400
    assert bad_json.json()["error"]["code"] == -32700
    not_rpc = await http.post("/mcp", json={"hello": "world"}, headers=tenant.headers)
    assert not_rpc.status_code == 400
    text = await http.post(
        "/mcp", content=b"hi", headers={**tenant.headers, "Content-Type": "text/plain"}
    )
    assert text.status_code in (400, 415)
    unknown_method = await rpc(http, "tools/destroy", {}, headers=tenant.headers)
    assert unknown_method.status_code == 200
    assert unknown_method.json()["error"]["code"] == -32601
    stream = await http.get("/mcp", headers=tenant.headers)
    assert stream.status_code == 405
    assert stream.headers["allow"] == "POST"
