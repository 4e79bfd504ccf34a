"""The rate-limit part of the request gate over HTTP: budgets per tier, 429s, headers on every
gated reply, a budget shared by app instances, and Redis failing (open or closed)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import pytest
import redis
from httpx import Response

from app.db.tenancy import SessionMaker
from app.settings import RedisFailurePolicy, Settings
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder
from tests.processes import free_port

DOCUMENTS = "/api/rag/documents"
WINDOW = 2
TIERS = {"basic": 5, "pro": 8}
DEAD_REDIS = "redis://127.0.0.1:1/0"
EXEMPT = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs")
HEADER_NAMES = [f"{p}RateLimit-{n}" for p in ("", "X-") for n in ("Limit", "Remaining", "Reset")]


def limited(settings: Settings, **update: object) -> Settings:
    values = {"rate_limit_tiers": TIERS, "rate_limit_window_seconds": WINDOW, **update}
    return settings.model_copy(update=values)


@asynccontextmanager
async def tenant_on(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder, *, tier: str = "basic"
) -> AsyncIterator[TenantClient]:
    """A fresh tenant on a fresh app instance built from `settings`."""
    async with app_client(settings, sessions, embedder) as http:
        yield await new_tenant(http, settings, sessions, tier=tier)


async def call(tenant: TenantClient) -> Response:
    return await tenant.http.get(DOCUMENTS, headers=tenant.headers)


async def admitted(tenant: TenantClient, count: int) -> list[Response]:
    replies = [await call(tenant) for _ in range(count)]
    assert [r.status_code for r in replies] == [200] * count, replies[-1].text
    return replies


def header_int(response: Response, name: str) -> int:
    value = response.headers[name]
    assert value.isdigit(), f"{name}: {value!r}"
    return int(value)


def assert_limited(response: Response, *, limit: int) -> int:
    """A 429 problem with Retry-After and the budget headers; returns Retry-After."""
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == 429
    retry_after = header_int(response, "Retry-After")
    assert 1 <= retry_after <= WINDOW
    assert header_int(response, "RateLimit-Limit") == limit
    assert header_int(response, "RateLimit-Remaining") == 0
    return retry_after


def fallbacks_in(metrics_text: str) -> float:
    found = re.search(r"^rag_ratelimit_redis_fallback_total (\S+)$", metrics_text, re.MULTILINE)
    assert found is not None, "rag_ratelimit_redis_fallback_total is not exposed"
    return float(found.group(1))


@dataclass(frozen=True, slots=True)
class RedisServer:
    url: str
    process: subprocess.Popen[bytes] | None  # None: the shared test Redis, not ours to stop


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of our own on a free port, killed on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on PATH")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            if redis.Redis.from_url(url, socket_connect_timeout=0.2).ping():
                break
        except redis.RedisError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    try:
        yield RedisServer(url, process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(5)


@pytest.fixture(scope="module")
def limiter_redis(settings: Settings) -> Iterator[RedisServer]:
    """The Redis the budgets live in: our own server when redis-server is on PATH.

    Other test runs on this machine flush the shared test database (db 15) when they start;
    a flush in the middle of a test here would reset a budget and fail a count. Without the
    binary, the shared test Redis is used.
    """
    if shutil.which("redis-server") is None:
        assert settings.redis_url is not None
        yield RedisServer(settings.redis_url, None)
        return
    with redis_server() as server:
        yield server


@pytest.fixture
def small(settings: Settings, limiter_redis: RedisServer) -> Settings:
    """Settings with a tiny budget and window, so limits are reached quickly."""
    return limited(settings, redis_url=limiter_redis.url)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, so the test may kill it."""
    with redis_server() as server:
        yield server


# --- budgets, 429 and headers ---------------------------------------------------------------


async def test_basic_tier_admits_exactly_its_limit_then_429(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder) as tenant:
        replies = await admitted(tenant, 5)
        for name in HEADER_NAMES:
            assert all(name in r.headers for r in replies), name
        assert [header_int(r, "RateLimit-Remaining") for r in replies] == [4, 3, 2, 1, 0]
        assert [header_int(r, "X-RateLimit-Remaining") for r in replies] == [4, 3, 2, 1, 0]
        assert {header_int(r, "RateLimit-Limit") for r in replies} == {5}
        assert all(1 <= header_int(r, "RateLimit-Reset") <= WINDOW for r in replies)
        assert all("retry-after" not in r.headers for r in replies)

        assert_limited(await call(tenant), limit=5)
        assert_limited(await call(tenant), limit=5)  # denied requests do not reopen the budget


async def test_rate_limit_headers_are_on_a_gated_404(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder) as tenant:
        missing = f"{DOCUMENTS}/{uuid.uuid4()}"
        response = await tenant.http.get(missing, headers=tenant.headers)
        assert response.status_code == 404, response.text
        for name in HEADER_NAMES:
            assert name in response.headers, name
        assert header_int(response, "RateLimit-Remaining") == 4


async def test_window_slides_and_admits_again_after_retry_after(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder) as tenant:
        await admitted(tenant, 5)
        retry_after = assert_limited(await call(tenant), limit=5)
        await asyncio.sleep(retry_after)
        again = await call(tenant)
        assert again.status_code == 200, again.text
        assert header_int(again, "RateLimit-Limit") == 5


async def test_limited_tenant_does_not_limit_another_tenant(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder) as tenant:
        other = await new_tenant(tenant.http, small, sessions)
        await admitted(tenant, 5)
        assert_limited(await call(tenant), limit=5)
        [reply] = await admitted(other, 1)
        assert header_int(reply, "RateLimit-Remaining") == 4


async def test_pro_tier_gets_its_own_budget(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder, tier="pro") as tenant:
        replies = await admitted(tenant, 8)
        assert {header_int(r, "RateLimit-Limit") for r in replies} == {8}
        assert header_int(replies[-1], "RateLimit-Remaining") == 0
        assert_limited(await call(tenant), limit=8)


async def test_two_app_instances_share_one_tenant_budget(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with (
        app_client(small, sessions, embedder) as first,
        app_client(small, sessions, embedder) as second,
    ):
        on_first = await new_tenant(first, small, sessions)
        on_second = TenantClient(second, on_first.tenant_id, on_first.headers)
        await admitted(on_first, 3)
        replies = await admitted(on_second, 2)
        assert header_int(replies[-1], "RateLimit-Remaining") == 0
        assert_limited(await call(on_second), limit=5)
        assert_limited(await call(on_first), limit=5)


async def test_exempt_endpoints_never_429_nor_carry_rate_limit_headers(
    small: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with tenant_on(small, sessions, embedder) as tenant:
        await admitted(tenant, 5)
        assert_limited(await call(tenant), limit=5)
        for path in EXEMPT:
            for _ in range(TIERS["basic"] + 2):
                response = await tenant.http.get(path, headers=tenant.headers)
                assert response.status_code == 200, (path, response.text)
                assert not any(name in response.headers for name in HEADER_NAMES), path
                assert "retry-after" not in response.headers, path


# --- Redis failing --------------------------------------------------------------------------


async def test_redis_down_fail_open_falls_back_to_the_in_process_limit(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    dead = limited(settings, redis_url=DEAD_REDIS)
    async with tenant_on(dead, sessions, embedder) as tenant:
        replies = await admitted(tenant, 5)
        assert [header_int(r, "RateLimit-Remaining") for r in replies] == [4, 3, 2, 1, 0]
        assert_limited(await call(tenant), limit=5)


async def test_redis_down_fail_closed_is_503_with_retry_after(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    dead = limited(
        settings, redis_url=DEAD_REDIS, rate_limit_redis_failure=RedisFailurePolicy.FAIL_CLOSED
    )
    async with tenant_on(dead, sessions, embedder) as tenant:
        for _ in range(3):
            response = await call(tenant)
            assert response.status_code == 503, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            body = response.json()
            assert {"type", "title", "status", "detail"} <= body.keys()
            assert body["status"] == 503
            assert header_int(response, "Retry-After") >= 1
        assert (await tenant.http.get("/healthz")).status_code == 200


async def test_metrics_count_redis_fallbacks(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    dead = limited(settings, redis_url=DEAD_REDIS)
    async with tenant_on(dead, sessions, embedder) as tenant:
        before = fallbacks_in((await tenant.http.get("/metrics")).text)
        await admitted(tenant, 2)
        after = fallbacks_in((await tenant.http.get("/metrics")).text)
        assert after >= before + 2


async def test_redis_killed_mid_test_requests_still_answer_under_fail_open(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder, own_redis: RedisServer
) -> None:
    configured = limited(settings, redis_url=own_redis.url)
    async with tenant_on(configured, sessions, embedder) as tenant:
        replies = await admitted(tenant, 2)
        assert header_int(replies[-1], "RateLimit-Remaining") == 3
        key = f"rag:ratelimit:tenant:{tenant.tenant_id}"
        assert redis.Redis.from_url(own_redis.url).zcard(key) == 2  # counted in this Redis

        before = fallbacks_in((await tenant.http.get("/metrics")).text)
        assert own_redis.process is not None
        own_redis.process.kill()
        own_redis.process.wait(5)

        for response in await admitted(tenant, 3):
            for name in HEADER_NAMES:
                assert name in response.headers, name
        assert fallbacks_in((await tenant.http.get("/metrics")).text) >= before + 3
