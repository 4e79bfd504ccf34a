"""Similar and dedupe run with the real local model: similarity values matter here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient

from app.db.tenancy import SessionMaker
from app.embeddings.local import LocalEmbedder
from app.resources import Resources
from app.settings import Settings
from tests.conftest import TenantClient, _Unclosable, new_tenant, resources_of, running_app


@pytest.fixture
async def app(
    settings: Settings, sessions: SessionMaker, minilm: LocalEmbedder
) -> AsyncIterator[FastAPI]:
    async with running_app(settings, sessions, _Unclosable(minilm)) as running:
        yield running


@pytest.fixture
def resources(app: FastAPI) -> Resources:
    """The app's resources (its access counter among them), sessions in the test transaction."""
    found: Resources = resources_of(app)
    return found


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://test") as client:
        yield client


@pytest.fixture
async def tenant(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(http, settings, sessions)


@pytest.fixture
async def other(http: AsyncClient, settings: Settings, sessions: SessionMaker) -> TenantClient:
    return await new_tenant(http, settings, sessions)
