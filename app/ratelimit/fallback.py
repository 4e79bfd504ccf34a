"""Redis first; when Redis fails, degrade as configured instead of failing the request.

FAIL_OPEN: this process admits while its own admissions of the window (through Redis before
the outage, or during it) are fewer than its share, ceil(limit / RAG_RATE_LIMIT_INSTANCES)
(`ShareLimiter`). So with the instance count set right, a window overlapping an outage admits
at most limit + limit x (N - 1) / N (what Redis admitted, plus each process topping up to its
share), and exactly `limit` with one process; when Redis answers again, the outage's
admissions are written into it (redis_limiter.py) and the limit is exact again. Fallbacks are
logged at most once per `log_interval_seconds` and counted (`fallback_count`, Prometheus
`rag_ratelimit_redis_fallback_total`).
FAIL_CLOSED: ServiceUnavailable (503) with Retry-After.
After a failure Redis is left alone for `cooldown_seconds` (no 250 ms connect timeout on every
request during an outage), then the next request tries it again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from redis.exceptions import RedisError

from app.errors import ServiceUnavailable
from app.observability.metrics import REDIS_FALLBACKS
from app.ratelimit.redis_limiter import RedisRateLimiter
from app.ratelimit.window import Decision, RateLimiter, check_arguments
from app.settings import RedisFailurePolicy

logger = logging.getLogger(__name__)

# redis-py wraps socket errors in its own; OSError also covers TimeoutError (asyncio's too).
_REDIS_FAILURES = (RedisError, OSError)


class FallbackRateLimiter:
    """A primary (Redis) limiter with a policy for when it fails; nothing else escapes `hit`."""

    def __init__(
        self,
        primary: RateLimiter,
        fallback: RateLimiter,
        *,
        policy: RedisFailurePolicy = RedisFailurePolicy.FAIL_OPEN,
        cooldown_seconds: float = 1.0,
        log_interval_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.primary, self.fallback, self.policy = primary, fallback, policy
        self.fallback_count = 0
        self._cooldown, self._log_interval, self._clock = (
            cooldown_seconds,
            log_interval_seconds,
            clock,
        )
        self._primary_down_until = -math.inf
        self._next_log_at = -math.inf
        self._unreported = 0
        self._failing = False

    async def hit(self, key: str, *, limit: int, window_seconds: int) -> Decision:
        if self._clock() >= self._primary_down_until:
            try:
                decision = await self.primary.hit(key, limit=limit, window_seconds=window_seconds)
            except _REDIS_FAILURES as exc:
                self._primary_failed(exc)
            else:
                if self._failing:
                    self._failing = False
                    logger.warning("Redis rate limiter recovered")
                return decision
        if self.policy is RedisFailurePolicy.FAIL_CLOSED:
            retry_after = max(1, math.ceil(self._primary_down_until - self._clock()))
            raise ServiceUnavailable(
                "the rate limiter is unavailable (Redis does not answer)",
                headers={"Retry-After": str(retry_after)},
            )
        self.fallback_count += 1
        REDIS_FALLBACKS.inc()
        return await self.fallback.hit(key, limit=limit, window_seconds=window_seconds)

    def _primary_failed(self, exc: BaseException) -> None:
        now = self._clock()
        self._primary_down_until = now + self._cooldown
        self._failing = True
        if now < self._next_log_at:
            self._unreported += 1
            return
        action = "using the in-process limiter" if self._open else "answering 503"
        logger.warning(
            "Redis rate limiter failed (%s: %s); %s; %d earlier failures not logged",
            type(exc).__name__,
            exc,
            action,
            self._unreported,
        )
        self._next_log_at, self._unreported = now + self._log_interval, 0

    @property
    def _open(self) -> bool:
        return self.policy is RedisFailurePolicy.FAIL_OPEN

    async def aclose(self) -> None:
        try:
            await self.primary.aclose()
        except _REDIS_FAILURES:
            logger.debug("closing the Redis rate limiter failed", exc_info=True)
        await self.fallback.aclose()


class ShareLimiter:
    """The fail-open fallback of one process: its own admissions of the window (the Redis
    limiter's ledger) against its share of the limit; admissions are recorded for writing
    back into Redis when it answers again."""

    def __init__(self, redis: RedisRateLimiter) -> None:
        self._redis = redis

    async def hit(self, key: str, *, limit: int, window_seconds: int) -> Decision:
        check_arguments(limit, window_seconds)
        return self._redis.own_share(key, limit=limit, window_seconds=window_seconds, admit=True)

    async def aclose(self) -> None:
        return None
