"""Every statement of a request runs under `RAG_DB_STATEMENT_TIMEOUT_SECONDS`: one that
waits or works past it is cancelled by PostgreSQL and the client gets a 503 problem with
Retry-After, never a 500 or a request held open; the next request is served as usual."""

from __future__ import annotations

import asyncpg
from httpx import ASGITransport, AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.deps import get_resources
from app.db.engine import create_sessionmaker
from app.main import create_app
from app.settings import Settings
from tests.api.calls import assert_problem
from tests.conftest import DatabaseUrls, registered_tenant, token_for
from tests.fakes import WordHashEmbedder


async def test_a_statement_past_the_limit_is_a_503_and_the_next_request_is_served(
    settings: Settings,
    database: DatabaseUrls,
    app_engine: AsyncEngine,
    embedder: WordHashEmbedder,
) -> None:
    tenant_id = await registered_tenant(create_sessionmaker(app_engine))
    headers = {"Authorization": f"Bearer {token_for(settings, tenant_id)}"}
    bounded = settings.model_copy(update={"db_statement_timeout_seconds": 0.3})
    app = create_app(bounded, embedder=embedder)
    query = {"query": "lighthouse", "mode": "vector"}
    async with (
        app.router.lifespan_context(app) as state,
        AsyncClient(transport=ASGITransport(app=app), base_url="http://test") as http,
    ):
        assert state is not None
        app.dependency_overrides[get_resources] = lambda: state["resources"]  # its own engine
        assert (await http.post("/api/rag/search", headers=headers, json=query)).status_code == 200
        blocker = await asyncpg.connect(database.owner_url)
        try:
            async with blocker.transaction():
                await blocker.execute("lock table chunks in access exclusive mode")
                held = await http.post("/api/rag/search", headers=headers, json=query)
        finally:
            await blocker.close()
        assert_problem(held, 503)
        assert held.json()["type"].endswith("/statement-timeout")
        assert held.headers["retry-after"].isdigit()
        after = await http.post("/api/rag/search", headers=headers, json=query)
        assert after.status_code == 200, after.text
