"""A live service for the console's browser tests: its own database (what the browser does is
committed), one job worker (uploads become jobs that finish), no clock leeway on tokens (an
expired one is refused at once), and a tiny tier to meet the rate limit."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright
from pydantic import SecretStr

from app.auth import issue_token
from app.db.embedded import drop_database
from app.settings import Settings
from tests.api.live import LiveServer, in_thread, live_server
from tests.browser import chromium
from tests.conftest import DatabaseUrls, fresh_database

TINY_TIER = "tiny"
TINY_LIMIT = 6


@dataclass(frozen=True, slots=True)
class Console:
    """The live service; `admin` holds every scope on its own tenant."""

    admin: LiveServer
    settings: Settings

    @property
    def url(self) -> str:
        return self.admin.url

    def token(
        self, tenant_id: str, scopes: str = "rag:search rag:ingest", *, ttl: int = 900
    ) -> str:
        return issue_token(
            self.settings,
            tenant_id=tenant_id,
            subject=f"person-{tenant_id}",
            scopes=scopes.split(),
            ttl_seconds=ttl,
        )

    def new_tenant(self, prefix: str, *, tier: str = "enterprise", name: str | None = None) -> str:
        """A tenant created through the admin API; its id."""
        tenant_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
        body = {"id": tenant_id, "tier": tier, **({"name": name} if name else {})}
        reply = httpx.post(
            f"{self.url}/api/admin/tenants", json=body, headers=self.admin.headers, timeout=30
        )
        reply.raise_for_status()
        return tenant_id

    def ingest(self, tenant_id: str, **document: object) -> str:
        """A document ingested for `tenant_id`; its id."""
        headers = {"Authorization": f"Bearer {self.token(tenant_id)}"}
        reply = httpx.post(
            f"{self.url}/api/rag/documents", json=document, headers=headers, timeout=60
        )
        reply.raise_for_status()
        document_id: str = reply.json()["document_id"]
        return document_id


@pytest.fixture(scope="module")
def console(database: DatabaseUrls, settings: Settings) -> Iterator[Console]:
    name = f"rag_console_{os.getpid()}"
    made: list[str] = []

    async def prepare() -> None:
        made.append(await fresh_database(database, name))

    in_thread(prepare())  # Playwright may run an event loop in this thread
    [app_url] = made
    served = settings.model_copy(
        update={
            "database_url": SecretStr(app_url),
            "job_workers": 1,
            "jwt_leeway_seconds": 0,
            "tenant_cache_seconds": 0.0,
            "rate_limit_tiers": {**settings.rate_limit_tiers, TINY_TIER: TINY_LIMIT},
        }
    )
    try:
        with live_server(served) as admin:
            yield Console(admin=admin, settings=served)
    finally:
        in_thread(drop_database(database.superuser_url, name))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright, chromium(playwright) as launched:
        yield launched
