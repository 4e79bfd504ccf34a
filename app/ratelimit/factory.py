"""Choose the process's rate limiter from Settings: Redis when RAG_REDIS_URL is set, else in
this process. redis-py takes about 0.13 s of CPU to import, so it is imported only for the
first: the `rag` commands, which run without Redis, never load it."""

from __future__ import annotations

from app.ratelimit.memory_limiter import MemoryRateLimiter
from app.ratelimit.window import RateLimiter
from app.settings import Settings


def build_rate_limiter(settings: Settings) -> RateLimiter:
    """Redis (with the configured failure policy) when RAG_REDIS_URL is set, else in-process."""
    if not settings.redis_url:
        return MemoryRateLimiter(instances=settings.rate_limit_instances)
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    from app.ratelimit.fallback import FallbackRateLimiter, ShareLimiter
    from app.ratelimit.redis_limiter import RedisRateLimiter

    client = Redis.from_url(
        settings.redis_url,
        socket_timeout=0.25,
        socket_connect_timeout=0.25,
        retry=Retry(NoBackoff(), 1),  # one immediate retry: a pooled connection may be stale
    )
    redis = RedisRateLimiter(client, owns_client=True, instances=settings.rate_limit_instances)
    return FallbackRateLimiter(
        redis,
        ShareLimiter(redis),
        policy=settings.rate_limit_redis_failure,
    )
