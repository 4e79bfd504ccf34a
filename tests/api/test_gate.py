"""The request gate over HTTP: token (401), tenant and X-Tenant-ID (403), scope (403).

The rate-limit part of the gate (429, headers, Redis failures) is in test_gate_ratelimit.py.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable

import pytest
from httpx import AsyncClient, Response
from jose import jwt
from pydantic import SecretStr

from app.auth import issue_token
from app.db.tenancy import SessionMaker, registry_transaction
from app.settings import Settings
from app.tenants import update_tenant
from tests.conftest import TenantClient, new_tenant, token_for

DOCUMENTS = "/api/rag/documents"
ADMIN_SCOPES = "rag:admin rag:search"


def assert_problem(response: Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    return body


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def ingest(tenant: TenantClient, content: str = "the quick brown fox") -> str:
    response = await tenant.http.post(
        DOCUMENTS, json={"title": "Gate", "content": content}, headers=tenant.headers
    )
    assert response.status_code == 201, response.text
    document_id: str = response.json()["document_id"]
    return document_id


async def document_ids(http: AsyncClient, headers: dict[str, str]) -> list[str]:
    response = await http.get(DOCUMENTS, headers=headers)
    assert response.status_code == 200, response.text
    return [item["document_id"] for item in response.json()["items"]]


# --- 401: the token -------------------------------------------------------------------------


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _claims(tenant_id: str) -> dict[str, object]:
    now = int(time.time())
    return {"tenant_id": tenant_id, "sub": "tester", "scope": "rag:search", "exp": now + 300}


def _not_a_jwt(_settings: Settings, _tenant_id: str) -> str:
    return "not-a-jwt"


def _expired(settings: Settings, tenant_id: str) -> str:
    long_ago = time.time() - 3600  # far beyond the 30 s leeway
    return issue_token(
        settings,
        tenant_id=tenant_id,
        subject="tester",
        scopes=["rag:search"],
        ttl_seconds=60,
        now=long_ago,
    )


def _wrong_secret(settings: Settings, tenant_id: str) -> str:
    other = settings.model_copy(update={"jwt_secret": SecretStr("another-secret-of-enough-length")})
    return token_for(other, tenant_id, "rag:search")


def _alg_none(_settings: Settings, tenant_id: str) -> str:
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims(tenant_id))}."


def _no_tenant_claim(settings: Settings, tenant_id: str) -> str:
    assert settings.jwt_secret is not None
    claims = {k: v for k, v in _claims(tenant_id).items() if k != "tenant_id"}
    token: str = jwt.encode(claims, settings.jwt_secret.get_secret_value(), algorithm="HS256")
    return token


BAD_TOKENS: dict[str, Callable[[Settings, str], str]] = {
    "not-a-jwt": _not_a_jwt,
    "expired": _expired,
    "wrong-secret": _wrong_secret,
    "alg-none": _alg_none,
    "no-tenant-claim": _no_tenant_claim,
}


async def test_missing_authorization_is_401_with_a_bearer_challenge(
    tenant_a: TenantClient,
) -> None:
    response = await tenant_a.http.get(DOCUMENTS)
    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_non_bearer_scheme_is_401(tenant_a: TenantClient) -> None:
    response = await tenant_a.http.get(DOCUMENTS, headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("make_token", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
async def test_bad_token_is_401_and_never_echoed(
    settings: Settings, tenant_a: TenantClient, make_token: Callable[[Settings, str], str]
) -> None:
    token = make_token(settings, tenant_a.tenant_id)
    response = await tenant_a.http.get(DOCUMENTS, headers=bearer(token))
    assert_problem(response, 401)
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer")
    assert token not in response.text
    assert token not in challenge
    assert "ratelimit-remaining" not in response.headers  # refused before the limiter


async def test_valid_token_is_admitted(tenant_a: TenantClient) -> None:
    response = await tenant_a.http.get(DOCUMENTS, headers=tenant_a.headers)
    assert response.status_code == 200, response.text
    assert response.json()["total"] == 0


# --- 403: the tenant ------------------------------------------------------------------------


async def test_token_for_a_tenant_that_was_never_created_is_403(
    client: AsyncClient, settings: Settings
) -> None:
    ghost = f"t-ghost-{uuid.uuid4().hex[:8]}"
    response = await client.get(DOCUMENTS, headers=bearer(token_for(settings, ghost)))
    body = assert_problem(response, 403)
    assert "does not exist" in str(body["detail"])


async def test_tenant_suspended_by_an_admin_is_403_until_reactivated(
    client: AsyncClient, settings: Settings, sessions: SessionMaker, tenant_a: TenantClient
) -> None:
    admin = await new_tenant(client, settings, sessions, scopes=ADMIN_SCOPES)
    assert (await client.get(DOCUMENTS, headers=tenant_a.headers)).status_code == 200

    patch = f"/api/admin/tenants/{tenant_a.tenant_id}"
    suspended = await client.patch(patch, json={"status": "suspended"}, headers=admin.headers)
    assert suspended.status_code == 200, suspended.text
    assert suspended.json()["status"] == "suspended"
    # The admin's change clears the directory's cache: it applies to the very next request.
    body = assert_problem(await client.get(DOCUMENTS, headers=tenant_a.headers), 403)
    assert "suspended" in str(body["detail"])
    ingest_refused = await client.post(DOCUMENTS, json={"content": "x"}, headers=tenant_a.headers)
    assert_problem(ingest_refused, 403)

    active = await client.patch(patch, json={"status": "active"}, headers=admin.headers)
    assert active.status_code == 200, active.text
    assert (await client.get(DOCUMENTS, headers=tenant_a.headers)).status_code == 200


async def test_tenant_suspended_in_the_registry_is_403(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant = await new_tenant(client, settings, sessions)
    async with registry_transaction(sessions) as session:
        await update_tenant(session, tenant.tenant_id, status="suspended")
    body = assert_problem(await client.get(DOCUMENTS, headers=tenant.headers), 403)
    assert "suspended" in str(body["detail"])


# --- 403: X-Tenant-ID -----------------------------------------------------------------------


async def test_x_tenant_id_equal_to_the_token_tenant_is_admitted(tenant_a: TenantClient) -> None:
    headers = {**tenant_a.headers, "X-Tenant-ID": tenant_a.tenant_id}
    response = await tenant_a.http.get(DOCUMENTS, headers=headers)
    assert response.status_code == 200, response.text


async def test_x_tenant_id_of_another_tenant_is_403_without_admin(
    tenant_a: TenantClient, tenant_b: TenantClient
) -> None:
    await ingest(tenant_b, "secret plans of tenant b")
    headers = {**tenant_a.headers, "X-Tenant-ID": tenant_b.tenant_id}
    body = assert_problem(await tenant_a.http.get(DOCUMENTS, headers=headers), 403)
    assert "X-Tenant-ID" in str(body["detail"])
    search = await tenant_a.http.post(
        "/api/rag/search", json={"query": "secret plans"}, headers=headers
    )
    assert_problem(search, 403)
    ingest_refused = await tenant_a.http.post(
        DOCUMENTS, json={"content": "planted by a"}, headers=headers
    )
    assert_problem(ingest_refused, 403)
    assert len(await document_ids(tenant_b.http, tenant_b.headers)) == 1


async def test_admin_with_x_tenant_id_acts_for_that_tenant(
    client: AsyncClient, settings: Settings, sessions: SessionMaker, tenant_a: TenantClient
) -> None:
    admin = await new_tenant(client, settings, sessions, scopes=ADMIN_SCOPES)
    document_id = await ingest(tenant_a)

    acting_for_a = {**admin.headers, "X-Tenant-ID": tenant_a.tenant_id}
    assert await document_ids(client, acting_for_a) == [document_id]
    read = await client.get(f"{DOCUMENTS}/{document_id}", headers=acting_for_a)
    assert read.status_code == 200, read.text
    # Without the header the admin acts for its own tenant, which has no documents.
    assert await document_ids(client, admin.headers) == []


async def test_admin_acting_for_an_unknown_tenant_is_403(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await new_tenant(client, settings, sessions, scopes=ADMIN_SCOPES)
    headers = {**admin.headers, "X-Tenant-ID": f"t-ghost-{uuid.uuid4().hex[:8]}"}
    body = assert_problem(await client.get(DOCUMENTS, headers=headers), 403)
    assert "does not exist" in str(body["detail"])


# --- 403: scopes ----------------------------------------------------------------------------


async def test_search_only_token_cannot_ingest(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    reader = await new_tenant(client, settings, sessions, scopes="rag:search")
    response = await client.post(
        DOCUMENTS, json={"title": "T", "content": "should not be stored"}, headers=reader.headers
    )
    body = assert_problem(response, 403)
    assert "rag:ingest" in str(body["detail"])
    assert await document_ids(client, reader.headers) == []


async def test_ingest_only_token_cannot_search_or_list(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    writer = await new_tenant(client, settings, sessions, scopes="rag:ingest")
    await ingest(writer)
    search = await client.post("/api/rag/search", json={"query": "fox"}, headers=writer.headers)
    body = assert_problem(search, 403)
    assert "rag:search" in str(body["detail"])
    assert_problem(await client.get(DOCUMENTS, headers=writer.headers), 403)


async def test_non_admin_cannot_use_the_admin_api(
    tenant_a: TenantClient, tenant_b: TenantClient
) -> None:
    http, headers = tenant_a.http, tenant_a.headers
    body = assert_problem(await http.get("/api/admin/tenants", headers=headers), 403)
    assert "rag:admin" in str(body["detail"])
    created = await http.post("/api/admin/tenants", json={"id": "t-sneaky"}, headers=headers)
    assert_problem(created, 403)
    stats = await http.get(f"/api/admin/tenants/{tenant_b.tenant_id}/stats", headers=headers)
    assert_problem(stats, 403)
    patch = f"/api/admin/tenants/{tenant_b.tenant_id}"
    suspend = await http.patch(patch, json={"status": "suspended"}, headers=headers)
    assert_problem(suspend, 403)
    # Nothing changed: tenant b still works.
    assert (await http.get(DOCUMENTS, headers=tenant_b.headers)).status_code == 200


async def test_admin_token_lists_tenants(
    client: AsyncClient, settings: Settings, sessions: SessionMaker, tenant_a: TenantClient
) -> None:
    admin = await new_tenant(client, settings, sessions, scopes=ADMIN_SCOPES)
    response = await client.get("/api/admin/tenants", params={"limit": 500}, headers=admin.headers)
    assert response.status_code == 200, response.text
    assert tenant_a.tenant_id in {item["id"] for item in response.json()["items"]}
