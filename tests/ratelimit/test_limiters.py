"""Sliding-window limiters against a real Redis, the in-process one, and Redis failing."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.errors import RateLimited, ServiceUnavailable
from app.ratelimit import (
    Decision,
    MemoryRateLimiter,
    RateLimiter,
    build_rate_limiter,
    limit_for_tier,
    raise_if_denied,
    rate_limit_headers,
)
from app.ratelimit.fallback import FallbackRateLimiter, ShareLimiter
from app.ratelimit.redis_limiter import RedisRateLimiter
from app.settings import RedisFailurePolicy, Settings
from tests.processes import PrivateRedis, free_port


def new_key() -> str:
    return f"tenant-{uuid.uuid4().hex}"


def client_for(url: str, *, timeout: float = 0.25) -> Redis:
    return Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )


def fallbacks_counted() -> float:
    return REGISTRY.get_sample_value("rag_ratelimit_redis_fallback_total") or 0.0


@pytest.fixture(scope="module", autouse=True)
async def clean_redis(redis_url: str) -> AsyncIterator[None]:
    client = Redis.from_url(redis_url)
    await client.flushdb()
    yield
    await client.flushdb()
    await client.aclose()


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[RateLimiter]:
    chosen: RateLimiter = (
        MemoryRateLimiter()
        if request.param == "memory"
        else RedisRateLimiter(Redis.from_url(redis_url), owns_client=True)
    )
    yield chosen
    await chosen.aclose()


@pytest.fixture
async def redis_pair(redis_url: str) -> AsyncIterator[tuple[RedisRateLimiter, RedisRateLimiter]]:
    """Two limiters on two clients (two connection pools), as two app instances would have."""
    first = RedisRateLimiter(Redis.from_url(redis_url), owns_client=True)
    second = RedisRateLimiter(Redis.from_url(redis_url), owns_client=True)
    yield first, second
    await first.aclose()
    await second.aclose()


async def hits(
    limiter: RateLimiter, key: str, count: int, *, limit: int, window: int
) -> list[bool]:
    return [
        (await limiter.hit(key, limit=limit, window_seconds=window)).allowed for _ in range(count)
    ]


# -- the window ---------------------------------------------------------------------------------


async def test_admits_exactly_the_limit_then_denies(limiter: RateLimiter) -> None:
    key = new_key()
    decisions = [await limiter.hit(key, limit=5, window_seconds=2) for _ in range(7)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert [d.remaining for d in decisions] == [4, 3, 2, 1, 0, 0, 0]
    assert [d.retry_after_seconds for d in decisions[:5]] == [0] * 5
    denied = decisions[-1]
    assert denied.limit == 5
    assert 1.0 < denied.reset_seconds <= 2.0
    assert denied.retry_after_seconds == 2


async def test_the_budget_returns_when_retry_after_says(limiter: RateLimiter) -> None:
    key = new_key()
    assert await hits(limiter, key, 2, limit=2, window=1) == [True, True]
    # Denied requests are not recorded: hammering does not push the reset further away.
    assert await hits(limiter, key, 20, limit=2, window=1) == [False] * 20
    denied = await limiter.hit(key, limit=2, window_seconds=1)
    assert denied.retry_after_seconds == 1
    await asyncio.sleep(denied.reset_seconds + 0.05)
    assert await hits(limiter, key, 3, limit=2, window=1) == [True, True, False]


async def test_the_window_slides_rather_than_resets(limiter: RateLimiter) -> None:
    key = new_key()
    assert await hits(limiter, key, 1, limit=2, window=1) == [True]  # t = 0
    await asyncio.sleep(0.6)
    assert await hits(limiter, key, 2, limit=2, window=1) == [True, False]  # t = 0.6
    await asyncio.sleep(0.55)
    # t = 1.15: the first request has left the window, the one at 0.6 has not.
    assert await hits(limiter, key, 2, limit=2, window=1) == [True, False]


async def test_keys_have_independent_budgets(limiter: RateLimiter) -> None:
    first, second = new_key(), new_key()
    assert await hits(limiter, first, 3, limit=2, window=60) == [True, True, False]
    assert await hits(limiter, second, 3, limit=2, window=60) == [True, True, False]


async def test_concurrent_hits_admit_exactly_the_limit(limiter: RateLimiter) -> None:
    key = new_key()
    decisions = await asyncio.gather(
        *(limiter.hit(key, limit=25, window_seconds=60) for _ in range(80))
    )
    assert sum(d.allowed for d in decisions) == 25
    assert sorted(d.remaining for d in decisions if d.allowed) == list(range(25))


async def test_a_zero_limit_denies_everything(limiter: RateLimiter) -> None:
    decision = await limiter.hit(new_key(), limit=0, window_seconds=5)
    assert (decision.allowed, decision.remaining, decision.retry_after_seconds) == (False, 0, 5)


@pytest.mark.parametrize(("limit", "window"), [(-1, 60), (10, 0)])
async def test_nonsense_arguments_are_a_programming_error(
    limiter: RateLimiter, limit: int, window: int
) -> None:
    with pytest.raises(ValueError, match="must be"):
        await limiter.hit(new_key(), limit=limit, window_seconds=window)


async def test_two_redis_instances_share_one_budget(
    redis_pair: tuple[RedisRateLimiter, RedisRateLimiter],
) -> None:
    key = new_key()
    first, second = redis_pair
    outcomes = [
        (await (first if i % 2 else second).hit(key, limit=4, window_seconds=60)).allowed
        for i in range(6)
    ]
    assert outcomes == [True] * 4 + [False] * 2
    shared = new_key()
    together = await asyncio.gather(
        *(limiter.hit(shared, limit=10, window_seconds=60) for limiter in redis_pair * 15)
    )
    assert sum(d.allowed for d in together) == 10


async def test_redis_expires_the_key_after_the_window(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    limiter = RedisRateLimiter(client, prefix="expiry:")
    key = new_key()
    await limiter.hit(key, limit=3, window_seconds=2)
    ttl_ms = await client.pttl(f"expiry:{key}")
    assert 0 < ttl_ms <= 2000
    await client.aclose()


# -- the in-process limiter's memory ------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_memory_limiter_forgets_idle_keys() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(clock=clock)
    for i in range(50):
        await limiter.hit(f"k{i}", limit=5, window_seconds=10)
    assert limiter.key_count == 50
    clock.now += 10.5
    for _ in range(20):
        await limiter.hit("active", limit=5, window_seconds=10)
    assert limiter.key_count == 1


async def test_memory_limiter_holds_at_most_max_keys() -> None:
    limiter = MemoryRateLimiter(max_keys=10)
    for i in range(1000):
        await limiter.hit(f"k{i}", limit=5, window_seconds=60)
    assert limiter.key_count == 10
    assert (await limiter.hit("k999", limit=1, window_seconds=60)).allowed is False


# -- headers and the 429 ------------------------------------------------------------------------


def test_headers_carry_the_budget_and_retry_after_only_when_denied() -> None:
    allowed = Decision(
        allowed=True, limit=100, remaining=42, reset_seconds=12.2, retry_after_seconds=0
    )
    assert rate_limit_headers(allowed) == {
        "RateLimit-Limit": "100",
        "RateLimit-Remaining": "42",
        "RateLimit-Reset": "13",
        "X-RateLimit-Limit": "100",
        "X-RateLimit-Remaining": "42",
        "X-RateLimit-Reset": "13",
    }
    raise_if_denied(allowed)
    denied = Decision(
        allowed=False, limit=100, remaining=0, reset_seconds=0.3, retry_after_seconds=1
    )
    headers = rate_limit_headers(denied)
    assert (headers["Retry-After"], headers["RateLimit-Remaining"]) == ("1", "0")
    with pytest.raises(RateLimited) as caught:
        raise_if_denied(denied)
    assert caught.value.status == 429
    assert caught.value.headers == headers


def test_unknown_tiers_get_the_basic_limit() -> None:
    settings = Settings.model_validate({"rate_limit_tiers": {"basic": 7, "pro": 70}})
    assert limit_for_tier(settings, "pro") == 70
    assert limit_for_tier(settings, "basic") == 7
    assert limit_for_tier(settings, "platinum") == 7


# -- Redis failing ------------------------------------------------------------------------------


@pytest.fixture
def dead_redis() -> Redis:
    """A client for a port nothing listens on: connection refused."""
    return client_for(f"redis://127.0.0.1:{free_port()}/0")


@pytest.fixture
def silent_redis() -> Iterator[Redis]:
    """A client for a socket that accepts connections and never answers: timeouts."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield client_for(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", timeout=0.1)


async def test_fail_open_falls_back_to_memory_and_counts(
    dead_redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    limiter = FallbackRateLimiter(
        RedisRateLimiter(dead_redis, owns_client=True), MemoryRateLimiter(), cooldown_seconds=0
    )
    before = fallbacks_counted()
    with caplog.at_level(logging.WARNING, logger="app.ratelimit.fallback"):
        assert await hits(limiter, new_key(), 5, limit=3, window=60) == [True] * 3 + [False] * 2
    assert limiter.fallback_count == 5
    assert fallbacks_counted() - before == 5
    warnings = [r for r in caplog.records if r.name == "app.ratelimit.fallback"]
    assert len(warnings) == 1  # five failures, one log line
    assert "ConnectionError" in warnings[0].getMessage()
    await limiter.aclose()


async def test_fail_open_survives_a_redis_that_never_answers(silent_redis: Redis) -> None:
    limiter = FallbackRateLimiter(RedisRateLimiter(silent_redis), MemoryRateLimiter())
    started = time.perf_counter()
    assert await hits(limiter, new_key(), 3, limit=2, window=60) == [True, True, False]
    assert time.perf_counter() - started < 1.0  # one timeout, then the cooldown skips Redis
    assert limiter.fallback_count == 3
    await silent_redis.aclose()


@pytest.mark.parametrize("redis_fixture", ["dead_redis", "silent_redis"])
async def test_fail_closed_answers_503_with_retry_after(
    request: pytest.FixtureRequest, redis_fixture: str
) -> None:
    client: Redis = request.getfixturevalue(redis_fixture)
    limiter = FallbackRateLimiter(
        RedisRateLimiter(client, owns_client=True),
        MemoryRateLimiter(),
        policy=RedisFailurePolicy.FAIL_CLOSED,
        cooldown_seconds=2,
    )
    for _ in range(5):
        with pytest.raises(ServiceUnavailable) as caught:
            await limiter.hit(new_key(), limit=3, window_seconds=60)
        assert caught.value.status == 503
        assert caught.value.headers["Retry-After"] in {"1", "2"}
    assert limiter.fallback_count == 0
    await limiter.aclose()


def process(url: str, *, instances: int) -> FallbackRateLimiter:
    """What one app process builds: a Redis limiter with its share limiter as fallback."""
    redis = RedisRateLimiter(client_for(url), owns_client=True, instances=instances)
    return FallbackRateLimiter(redis, ShareLimiter(redis), cooldown_seconds=0.2)


async def admitted(limiter: RateLimiter, key: str, n: int) -> int:
    return sum(await hits(limiter, key, n, limit=10, window=60))


async def test_redis_going_down_and_coming_back(private_redis: PrivateRedis) -> None:
    """One process: its share is the whole limit, which holds through the outage and after
    Redis comes back empty (the outage's admissions and the earlier ones are written back)."""
    limiter, key = process(private_redis.url, instances=1), new_key()
    assert await hits(limiter, key, 2, limit=5, window=60) == [True, True]
    assert limiter.fallback_count == 0

    await private_redis.stop()
    assert await hits(limiter, key, 5, limit=5, window=60) == [True] * 3 + [False] * 2
    assert limiter.fallback_count == 5

    await private_redis.start()  # empty: this redis-server keeps nothing
    await asyncio.sleep(0.25)  # past the cooldown: the next hit tries Redis again
    decision = await limiter.hit(key, limit=5, window_seconds=60)
    assert (decision.allowed, decision.remaining) == (False, 0)
    assert limiter.fallback_count == 5
    raw = client_for(private_redis.url)
    assert await raw.zcard(f"rag:ratelimit:{key}") == 5  # every admission, written back
    await raw.aclose()
    await limiter.aclose()


async def test_two_processes_never_admit_more_than_the_bound_around_a_restart(
    private_redis: PrivateRedis,
) -> None:
    """A Redis restart must not open the limit (per-process fallback counters, then an empty
    Redis could admit several times the limit). Two processes, limit 10: never more than 10 in
    the window, before, during and after the restart."""
    first, second = (process(private_redis.url, instances=2) for _ in range(2))
    key = new_key()
    assert (await admitted(first, key, 4), await admitted(second, key, 2)) == (4, 2)

    await private_redis.stop()  # each tops up to its share of 5, counting its own
    assert (await admitted(first, key, 10), await admitted(second, key, 10)) == (1, 3)

    await private_redis.start()
    await asyncio.sleep(0.25)
    for _ in range(3):  # interleaved: each writes its admissions back on its first call
        assert (await admitted(first, key, 5), await admitted(second, key, 5)) == (0, 0)
    raw = client_for(private_redis.url)
    assert await raw.zcard(f"rag:ratelimit:{key}") == 10
    await raw.aclose()

    # a third process started after the restart, with nothing of its own, is held by the
    # log that the other two gave back
    late = process(private_redis.url, instances=2)
    assert await admitted(late, key, 5) == 0
    for limiter in (first, second, late):
        await limiter.aclose()


async def test_build_rate_limiter_uses_redis_when_configured(redis_url: str) -> None:
    limiter = build_rate_limiter(Settings.model_validate({"redis_url": redis_url}))
    assert isinstance(limiter, FallbackRateLimiter)
    assert await hits(limiter, new_key(), 3, limit=2, window=60) == [True, True, False]
    assert limiter.fallback_count == 0
    await limiter.aclose()


async def test_build_rate_limiter_without_redis_is_in_process() -> None:
    limiter = build_rate_limiter(Settings.model_validate({"redis_url": None}))
    assert isinstance(limiter, MemoryRateLimiter)
