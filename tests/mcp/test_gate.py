"""/mcp behind the same gate as the API: token (401, never a JSON-RPC reply), scope and
tenant (403), the tenant's one rate-limit budget shared with REST, and the Host/Origin
allowlists of the transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from httpx import ASGITransport, AsyncClient, Response

from app.db.tenancy import SessionMaker, registry_transaction
from app.settings import Settings
from app.tenants import update_tenant
from tests.api.test_gate import _alg_none, _expired, _not_a_jwt, _wrong_secret
from tests.conftest import TenantClient, new_tenant, running_app, token_for
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import HOST, call, mcp_settings, rpc

pytestmark = pytest.mark.on_citus

Call = tuple[str, dict[str, object]]
LIST_TOOLS: Call = ("tools/list", {})
SEARCH: Call = ("tools/call", {"name": "search_similar", "arguments": {"query": "fox"}})


def assert_refused(response: Response, status: int) -> str:
    """A problem (not a JSON-RPC message) with this status; its detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert "jsonrpc" not in body
    assert "result" not in body
    detail: str = body["detail"]
    return detail


@pytest.mark.parametrize("method", [LIST_TOOLS, SEARCH])
async def test_no_token_is_401_with_a_bearer_challenge(http: AsyncClient, method: Call) -> None:
    response = await rpc(http, *method)
    assert_refused(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("make", [_not_a_jwt, _expired, _wrong_secret, _alg_none])
async def test_bad_or_expired_token_is_401_invalid_token(
    http: AsyncClient,
    settings: Settings,
    tenant: TenantClient,
    make: Callable[[Settings, str], str],
) -> None:
    headers = {"Authorization": f"Bearer {make(settings, tenant.tenant_id)}"}
    response = await rpc(http, *SEARCH, headers=headers)
    assert_refused(response, 401)
    assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')


async def test_expired_token_says_so(
    http: AsyncClient, settings: Settings, tenant: TenantClient
) -> None:
    headers = {"Authorization": f"Bearer {_expired(settings, tenant.tenant_id)}"}
    assert "token expired" in assert_refused(await rpc(http, *SEARCH, headers=headers), 401)


async def test_suspended_tenant_is_refused(
    http: AsyncClient, sessions: SessionMaker, tenant: TenantClient
) -> None:
    async with registry_transaction(sessions) as session:
        await update_tenant(session, tenant.tenant_id, status="suspended")
    detail = assert_refused(await rpc(http, *SEARCH, headers=tenant.headers), 403)
    assert "suspended" in detail


async def test_unknown_tenant_and_missing_scope_are_403(
    http: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    ghost = {"Authorization": f"Bearer {token_for(settings, 'never-created')}"}
    assert "does not exist" in assert_refused(await rpc(http, *SEARCH, headers=ghost), 403)
    ingest_only = await new_tenant(http, settings, sessions, scopes="rag:ingest")
    detail = assert_refused(await rpc(http, *SEARCH, headers=ingest_only.headers), 403)
    assert "rag:search" in detail


async def test_x_tenant_id_of_another_tenant_is_403(
    http: AsyncClient, settings: Settings, sessions: SessionMaker, tenant: TenantClient
) -> None:
    other = await new_tenant(http, settings, sessions)
    headers = {**tenant.headers, "X-Tenant-ID": other.tenant_id}
    assert "X-Tenant-ID" in assert_refused(await rpc(http, *SEARCH, headers=headers), 403)


# --- one rate-limit budget with REST ----------------------------------------------------------

BUDGET = 3


@pytest.fixture
async def limited(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    tiers = {"basic": BUDGET, "pro": 10}
    app_settings = mcp_settings(settings, rate_limit_tiers=tiers, rate_limit_window_seconds=60)
    async with (
        running_app(app_settings, sessions, embedder) as app,
        AsyncClient(transport=ASGITransport(app), base_url=f"http://{HOST}") as client,
    ):
        yield client


async def test_budget_spent_on_rest_is_a_rate_limit_tool_error(
    limited: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(limited, settings, sessions)
    for _ in range(BUDGET):
        assert (await limited.get("/api/rag/documents", headers=tenant.headers)).status_code == 200
    listed = await rpc(limited, *LIST_TOOLS, headers=tenant.headers)  # listing spends nothing
    assert listed.status_code == 200
    assert listed.json()["result"]["tools"]
    response = await rpc(limited, *SEARCH, headers=tenant.headers)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is True
    assert f"rate limit of {BUDGET} requests exceeded; retry after" in result["content"][0]["text"]
    assert response.headers["RateLimit-Remaining"] == "0"
    assert int(response.headers["Retry-After"]) >= 1


async def test_budget_spent_on_mcp_is_a_429_on_rest(
    limited: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(limited, settings, sessions)
    remaining = []
    for _ in range(BUDGET):
        response = await rpc(limited, *SEARCH, headers=tenant.headers)
        assert response.json()["result"]["isError"] is False, response.text
        remaining.append(int(response.headers["RateLimit-Remaining"]))
    assert remaining == [BUDGET - 1, BUDGET - 2, 0]
    refused = await limited.get("/api/rag/documents", headers=tenant.headers)
    assert refused.status_code == 429
    other = await new_tenant(limited, settings, sessions)  # budgets are per tenant
    assert (await call(limited, other, "search_similar", query="fox"))["isError"] is False


# --- transport security: Host and Origin --------------------------------------------------------


async def host_app_status(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    *,
    base_url: str,
    headers: dict[str, str] | None = None,
) -> int:
    """The status of a tools/list sent with `base_url`'s Host to an app built from `settings`."""
    async with (
        running_app(settings, sessions, embedder) as app,
        AsyncClient(transport=ASGITransport(app), base_url=base_url) as client,
    ):
        tenant = await new_tenant(client, settings, sessions)
        response = await rpc(client, *LIST_TOOLS, headers={**tenant.headers, **(headers or {})})
        return response.status_code


async def test_a_real_hostname_is_refused_unless_configured(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    public = "https://rag.example.com"
    assert await host_app_status(settings, sessions, embedder, base_url=public) == 421
    assert (
        await host_app_status(settings, sessions, embedder, base_url="http://localhost:8000") == 200
    )
    configured = settings.model_copy(
        update={
            "mcp_allowed_hosts": ["rag.example.com"],
            "mcp_allowed_origins": ["https://app.example.com"],
        }
    )
    assert await host_app_status(configured, sessions, embedder, base_url=public) == 200
    assert await host_app_status(configured, sessions, embedder, base_url="http://localhost") == 421
    origin = {"Origin": "https://evil.example.net"}
    assert (
        await host_app_status(configured, sessions, embedder, base_url=public, headers=origin)
        == 403
    )
    open_ = settings.model_copy(update={"mcp_allowed_hosts": ["*"]})
    assert await host_app_status(open_, sessions, embedder, base_url=public) == 200


async def test_allowlists_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MCP_ALLOWED_HOSTS", "rag.example.com, rag.example.com:*")
    monkeypatch.setenv("RAG_MCP_ALLOWED_ORIGINS", '["https://app.example.com"]')
    loaded = Settings(_env_file=None)
    assert loaded.mcp_allowed_hosts == ["rag.example.com", "rag.example.com:*"]
    assert loaded.mcp_allowed_origins == ["https://app.example.com"]
