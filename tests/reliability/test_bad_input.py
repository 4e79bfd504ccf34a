"""Every bad input through every door: a 4xx problem (or an MCP tool error), never a 500,
and nothing changed. The endpoints and their slots come from endpoints.py."""

from __future__ import annotations

import pytest
from httpx import AsyncClient, Response

from app.auth import issue_token
from app.settings import Settings
from tests.api.calls import assert_problem, total
from tests.conftest import TenantClient
from tests.reliability.conftest import send
from tests.reliability.endpoints import (
    INTEGER_PARAMS,
    SLOTS,
    TOO_BIG,
    UNSTORABLE,
    Call,
    Door,
    Json,
    Slot,
    mcp_call,
)


def _refused(response: Response, call: Call, field: str) -> None:
    """A 422 problem naming `field` (REST), or a tool error naming it (MCP)."""
    if call.door is Door.MCP:
        body: Json = response.json()
        if "error" in body:  # a JSON-RPC error (parse error, 400) is a refusal too
            assert response.status_code in (200, 400), response.text
            return
        assert response.status_code == 200, response.text
        assert body["result"]["isError"] is True, body
        assert field in body["result"]["content"][0]["text"], body
        return
    problem = assert_problem(response, 422)
    fields = [str(error.get("field", "")) for error in problem.get("errors", [])]
    assert any(name.startswith(field) for name in fields), problem


@pytest.mark.parametrize("slot", SLOTS, ids=lambda slot: slot.name)
@pytest.mark.parametrize("kind", sorted(UNSTORABLE))
async def test_text_the_database_cannot_store_is_refused(
    http: AsyncClient, tenant: TenantClient, settings: Settings, slot: Slot, kind: str
) -> None:
    call = slot.build(UNSTORABLE[kind])
    response = await send(http, tenant, settings, call)
    if call.params and kind == "surrogate":
        # a URL cannot carry a lone surrogate: its UTF-8 bytes decode to U+FFFD, which is text
        assert response.status_code < 500, response.text
    else:
        _refused(response, call, slot.field)
    assert await total(tenant) == 0


@pytest.mark.parametrize(("name", "path", "param", "admin"), INTEGER_PARAMS)
async def test_integers_beyond_their_bounds_are_a_422(
    http: AsyncClient,
    tenant: TenantClient,
    settings: Settings,
    name: str,
    path: str,
    param: str,
    admin: bool,
) -> None:
    for value in TOO_BIG:
        call = Call("GET", path, params={param: value}, admin=admin)
        response = await send(http, tenant, settings, call)
        problem = assert_problem(response, 422)
        assert param in problem["detail"], (name, value)


async def test_text_past_its_length_is_a_422(
    http: AsyncClient, tenant: TenantClient, settings: Settings
) -> None:
    call = Call("GET", "/api/rag/documents", params={"collection": "c" * 129})
    assert_problem(await send(http, tenant, settings, call), 422)
    blank = Call("POST", "/api/rag/search", json={"query": "   "})
    assert_problem(await send(http, tenant, settings, blank), 422)


def _signed_as(settings: Settings, tenant_id: str, subject: str, scopes: str) -> dict[str, str]:
    token = issue_token(
        settings, tenant_id=tenant_id, subject=subject, scopes=scopes.split(), ttl_seconds=300
    )
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("kind", sorted(UNSTORABLE))
async def test_a_token_subject_the_database_cannot_store_is_a_401(
    http: AsyncClient, tenant: TenantClient, settings: Settings, kind: str
) -> None:
    """A validly signed token whose `sub` is NUL or a lone surrogate: refused at the gate, as
    a bad tenant claim is, through every door (it was a 500 where the subject reached SQL)."""
    user = _signed_as(settings, tenant.tenant_id, UNSTORABLE[kind], "rag:search rag:ingest")
    admin = _signed_as(settings, tenant.tenant_id, UNSTORABLE[kind], "rag:admin")
    mcp = {**user, "Accept": "application/json, text/event-stream"}
    search = mcp_call("search", query="vault")
    keyword = {"query": "vault", "mode": "keyword"}
    replies = [
        await http.post("/api/rag/search", json=keyword, headers=user),
        await http.post("/api/rag/search", json={"query": "vault"}, headers=user),
        await http.post("/api/rag/jobs", json={"documents": [{"content": "x"}]}, headers=user),
        await http.get("/api/rag/documents/00000000-0000-4000-8000-000000000000", headers=user),
        await http.post("/api/admin/tenants", json={"tenant_id": "nul-admin"}, headers=admin),
        await http.post(search.path, json=search.json, headers=mcp),
    ]
    for reply in replies:
        problem = assert_problem(reply, 401)
        assert "sub" in problem["detail"], problem
    assert await total(tenant) == 0
