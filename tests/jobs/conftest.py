"""Jobs run in other transactions (and processes) than the request that submitted them, so
these tests commit: each uses fresh tenants, and a worker started explicitly when needed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_sessionmaker
from app.db.tenancy import SessionMaker
from app.embeddings import Embedder
from app.ingest.parsing import Parser
from app.jobs.queue import background_workers
from app.jobs.runner import JobServices
from app.settings import Settings
from tests.conftest import TenantClient, app_client, new_tenant, small_chunker
from tests.fakes import WordHashEmbedder

WAIT_SECONDS = 120.0  # generous: the machine is shared


@pytest.fixture
def committed(app_engine: AsyncEngine) -> SessionMaker:
    return create_sessionmaker(app_engine)


@pytest.fixture
async def jobs_client(
    settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> AsyncIterator[AsyncClient]:
    async with app_client(settings, committed, embedder) as http:
        yield http


@pytest.fixture
async def owner_a(
    jobs_client: AsyncClient, settings: Settings, committed: SessionMaker
) -> TenantClient:
    return await new_tenant(jobs_client, settings, committed, tier="enterprise")


@pytest.fixture
async def owner_b(
    jobs_client: AsyncClient, settings: Settings, committed: SessionMaker
) -> TenantClient:
    return await new_tenant(jobs_client, settings, committed, tier="enterprise")


@asynccontextmanager
async def workers(
    settings: Settings,
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    concurrency: int = 1,
    turn_documents: int = 2,
) -> AsyncIterator[None]:
    services = JobServices(sessions, embedder, small_chunker(), Parser(), turn_documents, settings)
    async with background_workers(settings, services, concurrency=concurrency):
        yield


async def wait_for(
    check: Callable[[], Awaitable[dict[str, Any] | None]], *, seconds: float = WAIT_SECONDS
) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (found := await check()) is not None:
            return found
        await asyncio.sleep(0.25)
    raise AssertionError(f"not reached within {seconds} s")


async def job_state(tenant: TenantClient, job_id: str) -> dict[str, Any]:
    reply = await tenant.http.get(f"/api/rag/jobs/{job_id}", headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    state: dict[str, Any] = reply.json()
    return state


async def finished(tenant: TenantClient, job_id: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        state = await job_state(tenant, job_id)
        return state if state["status"] not in ("queued", "running") else None

    return await wait_for(check)
