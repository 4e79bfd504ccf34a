"""Liveness, readiness and the OpenAPI pages."""

from __future__ import annotations

from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr

from app.api.deps import get_resources
from app.db.tenancy import SessionMaker
from app.main import create_app
from app.settings import Settings
from tests.conftest import app_client
from tests.fakes import WordHashEmbedder
from tests.processes import PrivateRedis


async def test_healthz_answers(client: AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_reports_the_database(client: AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"]["database"]["ok"] is True


async def test_openapi_pages_are_served(client: AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    spec = (await client.get("/openapi.json")).json()
    assert "/healthz" in spec["paths"]


async def test_readyz_is_503_when_the_database_is_unreachable(settings: Settings) -> None:
    dead = settings.model_copy(
        update={"database_url": SecretStr("postgresql://nobody@127.0.0.1:1/none")}
    )
    app = create_app(dead, embedder=WordHashEmbedder())
    async with app.router.lifespan_context(app) as state:
        assert state is not None
        resources = state["resources"]
        app.dependency_overrides[get_resources] = lambda: resources
        transport = ASGITransport(app=app)
        async with AsyncClient(transport=transport, base_url="http://test") as http:
            response = await http.get("/readyz")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["checks"]["database"]["ok"] is False


async def test_unknown_path_is_a_problem(client: AsyncClient) -> None:
    response = await client.get("/nope")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["status"] == 404


async def test_readyz_follows_redis_as_it_is_now(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    private_redis: PrivateRedis,
) -> None:
    """Redis stopped: 503 naming it, at once; started again: ready, without restarting the app."""
    with_redis = settings.model_copy(update={"redis_url": private_redis.url})
    async with app_client(with_redis, sessions, embedder) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"]["redis"]["ok"] is True
        await private_redis.stop()
        down = await http.get("/readyz")
        assert down.status_code == 503
        assert down.json()["checks"]["redis"]["ok"] is False
        assert down.json()["checks"]["database"]["ok"] is True
        await private_redis.start()
        again = await http.get("/readyz")
        assert again.status_code == 200, again.text
        assert again.json()["checks"]["redis"]["ok"] is True
