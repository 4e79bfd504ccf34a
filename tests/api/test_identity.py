"""GET /api/rag/me: any valid token learns who it is; a refused one gets the gate's reason."""

from __future__ import annotations

import time
from datetime import datetime

from httpx import AsyncClient
from sqlalchemy import update

from app.auth import issue_token
from app.db.models import Tenant
from app.db.tenancy import SessionMaker, registry_transaction
from app.settings import Settings
from tests.api.calls import assert_problem
from tests.conftest import TenantClient, registered_tenant, token_for

ME = "/api/rag/me"


async def test_a_token_learns_its_tenant_scopes_groups_and_expiry(
    client: AsyncClient, settings: Settings, sessions: SessionMaker
) -> None:
    tenant_id = await registered_tenant(sessions, tier="pro")
    before = time.time()
    token = issue_token(
        settings,
        tenant_id=tenant_id,
        subject="carol",
        scopes=["rag:search", "rag:admin"],
        groups=["legal", "hr"],
        ttl_seconds=600,
    )
    reply = await client.get(ME, headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 200, reply.text
    me = reply.json()
    assert (me["tenant_id"], me["tenant_tier"], me["subject"]) == (tenant_id, "pro", "carol")
    assert me["scopes"] == ["rag:admin", "rag:search"]
    assert me["groups"] == ["hr", "legal"]
    expires = datetime.fromisoformat(me["expires_at"]).timestamp()
    assert before + 590 <= expires <= time.time() + 610


async def test_any_scope_will_do_but_a_refused_token_gets_the_gates_reason(
    client: AsyncClient, settings: Settings, sessions: SessionMaker, tenant_a: TenantClient
) -> None:
    only_ingest = issue_token(
        settings, tenant_id=tenant_a.tenant_id, subject="bot", scopes=["rag:ingest"], ttl_seconds=60
    )
    reply = await client.get(ME, headers={"Authorization": f"Bearer {only_ingest}"})
    assert reply.json()["scopes"] == ["rag:ingest"]

    expired = issue_token(
        settings,
        tenant_id=tenant_a.tenant_id,
        subject="old",
        scopes=["rag:search"],
        ttl_seconds=60,
        now=time.time() - 3600,
    )
    problem = assert_problem(
        await client.get(ME, headers={"Authorization": f"Bearer {expired}"}), 401
    )
    assert "expired" in str(problem["detail"])
    assert_problem(await client.get(ME), 401)

    suspended = await registered_tenant(sessions)  # not looked up yet: nothing cached
    async with registry_transaction(sessions) as session:
        await session.execute(
            update(Tenant).where(Tenant.id == suspended).values(status="suspended")
        )
    headers = {"Authorization": f"Bearer {token_for(settings, suspended)}"}
    problem = assert_problem(await client.get(ME, headers=headers), 403)
    assert "suspended" in str(problem["detail"])
