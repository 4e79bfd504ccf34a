"""Every bad input through every door: a 4xx problem (or an MCP tool error), never a 500,
and nothing changed. The endpoints and their slots come from endpoints.py."""

from __future__ import annotations

import pytest
from httpx import AsyncClient, Response

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
