"""`rag tenant create|list|suspend|activate|delete` against the test database (separate
processes), each change recorded in the audit log as an operator's: cli:<user>."""

from __future__ import annotations

import asyncio
import getpass
import os
import subprocess
import sys
import uuid

import pytest
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.admin.audit import entries
from app.db.tenancy import ledger_transaction, registry_transaction
from app.errors import NotFound
from app.settings import Settings
from app.tenants import get_tenant

RAG = [sys.executable, "-m", "app.cli.main"]


async def rag(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    assert settings.database_url is not None
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env = {**clean, "RAG_DATABASE_URL": settings.database_url.get_secret_value()}
    return await asyncio.to_thread(
        subprocess.run, [*RAG, *args], env=env, capture_output=True, text=True, timeout=120
    )


async def test_tenant_commands_change_tenants_and_are_audited(
    settings: Settings, app_engine: AsyncEngine
) -> None:
    sessions = async_sessionmaker(app_engine, expire_on_commit=False)
    tenant_id = f"t-cli-{uuid.uuid4().hex[:8]}"
    created = await rag(settings, "tenant", "create", tenant_id, "--tier", "pro")
    assert created.returncode == 0, created.stderr
    assert f"tenant {tenant_id} created in the database at postgresql://" in created.stderr
    assert "(RAG_DATABASE_URL)" in created.stderr
    assert "with --url or RAG_URL: through a running service" in created.stderr
    assert settings.database_url is not None
    password = make_url(settings.database_url.get_secret_value()).password
    assert not password or str(password) not in created.stderr
    again = await rag(settings, "tenant", "create", tenant_id, "--tier", "pro")
    assert "already exists" in again.stderr  # and no second entry (below)

    listed = await rag(settings, "tenant", "list", "--tier", "pro", "--limit", "500")
    assert listed.returncode == 0, listed.stderr
    assert f"{tenant_id}\tactive\tpro\t0\t0" in listed.stdout.splitlines()

    assert (await rag(settings, "tenant", "suspend", tenant_id)).returncode == 0
    suspended = await rag(settings, "tenant", "list", "--status", "suspended", "--limit", "500")
    assert tenant_id in suspended.stdout
    assert (await rag(settings, "tenant", "activate", tenant_id)).returncode == 0

    refused = await rag(settings, "tenant", "delete", tenant_id, "--confirm", tenant_id)
    assert refused.returncode == 1
    assert "suspend it before deleting" in refused.stderr
    await rag(settings, "tenant", "suspend", tenant_id)
    wrong = await rag(settings, "tenant", "delete", tenant_id, "--confirm", "nope")
    assert wrong.returncode == 1
    deleted = await rag(settings, "tenant", "delete", tenant_id, "--confirm", tenant_id)
    assert deleted.returncode == 0, deleted.stderr
    gone = await rag(settings, "tenant", "suspend", tenant_id)
    assert gone.returncode == 1
    assert "does not exist" in gone.stderr

    async with ledger_transaction(sessions) as session:
        found, _total = await entries(session, tenant_id=tenant_id, limit=10, offset=0)
    assert [e.action for e in reversed(found)] == [
        "tenant.create",
        "tenant.suspend",
        "tenant.activate",
        "tenant.suspend",
        "tenant.delete",
    ]
    assert {(e.actor_kind, e.actor_subject) for e in found} == {
        ("operator", f"cli:{getpass.getuser()}")
    }
    assert {(e.actor_tenant_id, e.actor_key_id) for e in found} == {(None, None)}


async def test_a_name_with_control_characters_is_refused_and_nothing_is_created(
    settings: Settings, app_engine: AsyncEngine
) -> None:
    sessions = async_sessionmaker(app_engine, expire_on_commit=False)
    tenant_id = f"t-cli-{uuid.uuid4().hex[:8]}"
    for name in ("Acme\u202eevil", "two\nlines"):
        refused = await rag(settings, "tenant", "create", tenant_id, "--name", name)
        assert refused.returncode == 1
        assert "control characters" in refused.stderr
    async with registry_transaction(sessions) as session:
        with pytest.raises(NotFound):
            await get_tenant(session, tenant_id)
