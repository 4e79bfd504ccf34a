"""The admin API: tenants listed with counts, changed and deleted with an audit trail;
statistics with storage and traffic; refused to every token without rag:admin."""

from __future__ import annotations

import itertools
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from httpx import AsyncClient

from app.auth.keys import key_id
from app.db import bm25
from app.db.tenancy import SessionMaker
from app.main import create_app
from app.settings import Settings
from tests.api.calls import assert_problem, ingested, search
from tests.api.test_gate_ratelimit import limited, tenant_on
from tests.conftest import TenantClient, new_tenant, token_for
from tests.fakes import WordHashEmbedder

ADMIN = "/api/admin"


def admin_headers(settings: Settings, tenant_id: str = "ops", sub: str = "alice") -> dict[str, str]:
    from app.auth import issue_token

    token = issue_token(
        settings, tenant_id=tenant_id, subject=sub, scopes=["rag:admin"], ttl_seconds=300
    )
    return {"Authorization": f"Bearer {token}"}


async def admin_of(client: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    """An admin acting from its own (active) tenant, subject `alice`."""
    tenant = await new_tenant(client, settings, sessions, scopes="rag:admin")
    return TenantClient(client, tenant.tenant_id, admin_headers(settings, tenant.tenant_id))


async def audit_of(admin: TenantClient, tenant_id: str) -> list[dict[str, Any]]:
    reply = await admin.http.get(
        f"{ADMIN}/audit", params={"tenant_id": tenant_id}, headers=admin.headers
    )
    assert reply.status_code == 200, reply.text
    items: list[dict[str, Any]] = reply.json()["items"]
    return list(reversed(items))  # oldest first


async def test_admin_actions_appear_in_the_audit_log_with_their_actor(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await admin_of(client, settings, sessions)
    tenant_id = f"t-audit-{uuid.uuid4().hex[:8]}"
    h = admin.headers
    assert (
        await client.post(f"{ADMIN}/tenants", json={"id": tenant_id}, headers=h)
    ).status_code == 201
    # Creating it again changes nothing and records nothing.
    assert (
        await client.post(f"{ADMIN}/tenants", json={"id": tenant_id}, headers=h)
    ).status_code == 200
    patched = await client.patch(f"{ADMIN}/tenants/{tenant_id}", json={"tier": "pro"}, headers=h)
    assert patched.json()["tier"] == "pro"
    assert (await client.post(f"{ADMIN}/tenants/{tenant_id}/suspend", headers=h)).status_code == 200
    assert (
        await client.post(f"{ADMIN}/tenants/{tenant_id}/activate", headers=h)
    ).status_code == 200
    await client.post(f"{ADMIN}/tenants/{tenant_id}/suspend", headers=h)
    deleted = await client.delete(
        f"{ADMIN}/tenants/{tenant_id}", params={"confirm": tenant_id}, headers=h
    )
    assert deleted.status_code == 204, deleted.text

    entries = await audit_of(admin, tenant_id)
    assert [e["action"] for e in entries] == [
        "tenant.create",
        "tenant.update",
        "tenant.suspend",
        "tenant.activate",
        "tenant.suspend",
        "tenant.delete",
    ]
    assert {(e["actor"], e["actor_tenant_id"]) for e in entries} == {("alice", admin.tenant_id)}
    kid = key_id(settings.jwt_secret.get_secret_value().encode())  # type: ignore[union-attr]
    assert {(e["actor_kind"], e["actor_key_id"]) for e in entries} == {("token", kid)}
    create, update, *_, delete = entries
    assert create["before"] is None
    assert create["after"]["tier"] == "basic"
    assert (update["before"]["tier"], update["after"]["tier"]) == ("basic", "pro")
    assert delete["before"]["status"] == "suspended"
    assert delete["after"] is None
    stamps = [e["at"] for e in entries]
    assert stamps == sorted(stamps)
    by_actor = await client.get(
        f"{ADMIN}/audit", params={"actor": "alice", "action": "tenant.delete"}, headers=h
    )
    assert tenant_id in {e["tenant_id"] for e in by_actor.json()["items"]}


async def test_a_token_cannot_pass_for_an_operator_or_hide_what_it_is(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    """A token whose `sub` reads like the command line's actor is recorded as a token; one
    whose `sub` holds control characters or bidirectional text controls is refused (401), and
    so is a tenant name holding them (422), with nothing changed or recorded."""
    admin = await admin_of(client, settings, sessions)
    posing = admin_headers(settings, admin.tenant_id, sub="cli:root")
    tenant_id = f"t-pose-{uuid.uuid4().hex[:8]}"
    made = await client.post(f"{ADMIN}/tenants", json={"id": tenant_id}, headers=posing)
    assert made.status_code == 201, made.text
    [entry] = await audit_of(admin, tenant_id)
    assert (entry["actor"], entry["actor_kind"]) == ("cli:root", "token")
    assert entry["actor_tenant_id"] == admin.tenant_id

    for sub in ("alice\u202e", "alice\nroot", "a\u2066b", "\x1b[2Jops"):
        hidden = admin_headers(settings, admin.tenant_id, sub=sub)
        reply = await client.post(f"{ADMIN}/tenants", json={"id": f"{tenant_id}-x"}, headers=hidden)
        assert reply.status_code == 401, (sub, reply.text)
    for name in ("Acme\u202eevil", "two\nlines", "bell\x07", "\u061cmark"):
        created = await client.post(
            f"{ADMIN}/tenants", json={"id": f"{tenant_id}-y", "name": name}, headers=admin.headers
        )
        assert_problem(created, 422)
        renamed = await client.patch(
            f"{ADMIN}/tenants/{tenant_id}", json={"name": name}, headers=admin.headers
        )
        assert_problem(renamed, 422)
    for suffix in ("-x", "-y"):
        missing = await client.get(f"{ADMIN}/tenants/{tenant_id}{suffix}", headers=admin.headers)
        assert missing.status_code == 404
    assert len(await audit_of(admin, tenant_id)) == 1
    unchanged = await client.get(f"{ADMIN}/tenants/{tenant_id}", headers=admin.headers)
    assert unchanged.json()["name"] == tenant_id


async def test_a_non_admin_token_is_refused_on_every_admin_route(
    client: AsyncClient, tenant_a: TenantClient, settings: Settings
) -> None:
    """Every route under /api/admin, found in the app itself so a new one cannot be missed."""
    token = token_for(settings, tenant_a.tenant_id, "rag:search rag:ingest")
    headers = {"Authorization": f"Bearer {token}"}
    paths = create_app(settings).openapi()["paths"]
    routes = [
        (method.upper(), path)
        for path, operations in paths.items()
        if path.startswith(ADMIN)
        for method in operations
    ]
    assert len(routes) >= 9
    for method, path in routes:
        url = re.sub(r"\{[^}]+\}", tenant_a.tenant_id, path)
        body = {"id": "t-sneaky"} if method == "POST" and path.endswith("/tenants") else None
        reply = await client.request(
            method, url, json=body, params={"confirm": tenant_a.tenant_id}, headers=headers
        )
        problem = assert_problem(reply, 403)
        assert "rag:admin" in str(problem["detail"]), (method, path)
    # Nothing changed: the tenant is still there and active.
    admin = admin_headers(settings, tenant_a.tenant_id)
    still = await client.get(f"{ADMIN}/tenants/{tenant_a.tenant_id}", headers=admin)
    assert still.json()["status"] == "active"
    refused = await client.get(
        f"{ADMIN}/audit", params={"tenant_id": tenant_a.tenant_id}, headers=admin
    )
    assert refused.json()["items"] == []


async def test_tenant_list_filters_pages_and_counts(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await admin_of(client, settings, sessions)
    pro = await new_tenant(client, settings, sessions, tier="enterprise")
    await ingested(pro, title="A", content="Backups run nightly.\n\nRestores are tested monthly.")
    await ingested(pro, title="B", content="Second document.")
    other = await new_tenant(client, settings, sessions, tier="enterprise")
    await client.post(f"{ADMIN}/tenants/{other.tenant_id}/suspend", headers=admin.headers)

    listed = await client.get(
        f"{ADMIN}/tenants", params={"tier": "enterprise", "limit": 500}, headers=admin.headers
    )
    items = {t["id"]: t for t in listed.json()["items"]}
    assert {pro.tenant_id, other.tenant_id} <= set(items)
    assert all(t["tier"] == "enterprise" for t in items.values())
    assert items[pro.tenant_id]["documents"] == 2
    assert items[pro.tenant_id]["chunks"] >= 2
    assert items[other.tenant_id]["documents"] == 0
    # storage: the same estimate as the tenant's stats, and none for an empty tenant
    assert items[other.tenant_id]["storage_bytes"] == 0
    stats = await client.get(f"{ADMIN}/tenants/{pro.tenant_id}/stats", headers=admin.headers)
    total = stats.json()["storage"]["total_bytes"]
    assert 0 < items[pro.tenant_id]["storage_bytes"] <= 2 * total
    read = await client.get(f"{ADMIN}/tenants/{pro.tenant_id}", headers=admin.headers)
    assert read.json()["storage_bytes"] == items[pro.tenant_id]["storage_bytes"]

    suspended = await client.get(
        f"{ADMIN}/tenants",
        params={"tier": "enterprise", "status": "suspended"},
        headers=admin.headers,
    )
    assert other.tenant_id in {t["id"] for t in suspended.json()["items"]}
    assert pro.tenant_id not in {t["id"] for t in suspended.json()["items"]}

    first = (
        await client.get(f"{ADMIN}/tenants", params={"limit": 1}, headers=admin.headers)
    ).json()
    second = (
        await client.get(
            f"{ADMIN}/tenants", params={"limit": 1, "offset": 1}, headers=admin.headers
        )
    ).json()
    assert first["total"] == second["total"] >= 3
    assert len(first["items"]) == len(second["items"]) == 1
    assert first["items"][0]["id"] < second["items"][0]["id"]


async def test_delete_needs_confirmation_and_a_suspended_tenant(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await admin_of(client, settings, sessions)
    victim = await new_tenant(client, settings, sessions)
    await ingested(victim, title="Doomed", content="This document goes with its tenant.")
    url = f"{ADMIN}/tenants/{victim.tenant_id}"

    assert_problem(
        await client.delete(url, params={"confirm": "other"}, headers=admin.headers), 422
    )
    assert_problem(await client.delete(url, headers=admin.headers), 422)
    assert_problem(
        await client.delete(url, params={"confirm": victim.tenant_id}, headers=admin.headers), 409
    )
    assert await search(victim, "doomed document")  # nothing changed

    await client.post(f"{url}/suspend", headers=admin.headers)
    assert (
        await client.delete(url, params={"confirm": victim.tenant_id}, headers=admin.headers)
    ).status_code == 204
    assert_problem(await client.get(url, headers=admin.headers), 404)
    assert_problem(
        await client.delete(url, params={"confirm": victim.tenant_id}, headers=admin.headers), 404
    )
    # Its token no longer works, and recreating the id starts empty.
    assert_problem(await client.get("/api/rag/documents", headers=victim.headers), 403)
    await client.post(f"{ADMIN}/tenants", json={"id": victim.tenant_id}, headers=admin.headers)
    listed = await client.get("/api/rag/documents", headers=victim.headers)
    assert listed.json()["items"] == []
    assert await search(victim, "doomed document") == []
    check = await bm25.verify(sessions, victim.tenant_id)  # no keyword statistic or posting left
    assert check.ok
    assert check.terms == 0


async def test_stats_report_storage_traffic_and_rejections(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tight = limited(settings)  # basic: 5 requests per 2 s window
    async with tenant_on(tight, sessions, embedder) as tenant:
        await ingested(
            tenant, title="Ops", content="Backups run nightly at two.\n\nPages get answered."
        )
        await search(tenant, "backups")
        await search(tenant, "pages")
        replies = [
            await tenant.http.get("/api/rag/documents", headers=tenant.headers) for _ in range(4)
        ]
        assert 429 in [r.status_code for r in replies]
        rejected = sum(r.status_code == 429 for r in replies)
        admin = await admin_of(tenant.http, tight, sessions)  # its own tenant, its own budget
        reply = await tenant.http.get(
            f"{ADMIN}/tenants/{tenant.tenant_id}/stats", headers=admin.headers
        )
    assert reply.status_code == 200, reply.text
    stats = reply.json()
    assert stats["documents"] == 1
    assert stats["chunks_by_model"] == {embedder.model_id: stats["chunks"]}
    storage = stats["storage"]
    assert storage["rows"] == {"collections": 1, "documents": 1, "chunks": stats["chunks"]}
    assert storage["table_bytes"] > 0
    assert storage["index_bytes"] > 0
    assert storage["total_bytes"] >= storage["table_bytes"] + storage["index_bytes"]
    for window in ("last_hour", "last_day"):
        traffic = stats["traffic"][window]
        assert (traffic["searches"], traffic["ingests"]) == (2, 1)
        assert traffic["rate_limited"] >= rejected
    # the last day hour by hour, oldest first: this test's traffic is in the current hour
    hourly = stats["traffic"]["hourly"]
    starts = [datetime.fromisoformat(hour["start"]) for hour in hourly]
    assert len(hourly) == 24
    assert starts == sorted(starts)
    assert {b - a for a, b in itertools.pairwise(starts)} == {timedelta(hours=1)}
    assert starts[-1] <= datetime.now(UTC) < starts[-1] + timedelta(hours=1)
    assert (hourly[-1]["searches"], hourly[-1]["ingests"]) == (2, 1)
    assert sum(hour["searches"] for hour in hourly[:-1]) == 0


async def test_tiers_name_their_rate_limits(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await admin_of(client, settings, sessions)
    reply = await client.get(f"{ADMIN}/tiers", headers=admin.headers)
    assert reply.status_code == 200, reply.text
    window = settings.rate_limit_window_seconds
    assert reply.json()["items"] == [
        {"name": name, "requests": requests, "window_seconds": window}
        for name, requests in settings.rate_limit_tiers.items()
    ]
    tenant = await new_tenant(client, settings, sessions)
    assert_problem(await client.get(f"{ADMIN}/tiers", headers=tenant.headers), 403)


async def test_unknown_tenants_are_404(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    admin = await admin_of(client, settings, sessions)
    ghost = f"{ADMIN}/tenants/t-ghost-{uuid.uuid4().hex[:8]}"
    for method, url in [
        ("GET", ghost),
        ("GET", f"{ghost}/stats"),
        ("PATCH", ghost),
        ("POST", f"{ghost}/suspend"),
    ]:
        body = {"tier": "pro"} if method == "PATCH" else None
        assert_problem(await client.request(method, url, json=body, headers=admin.headers), 404)
