"""Per-key sliding-window rate limits: Redis when configured, in-process otherwise.

No FastAPI here: `api/` calls `limiter.hit(...)`, puts `rate_limit_headers(decision)` on the reply
and `raise_if_denied(decision)` turns a denial into a 429. The Redis limiters are imported from
their modules (redis_limiter.py, fallback.py): `build_rate_limiter` loads redis-py only when
RAG_REDIS_URL asks for it.
"""

from app.ratelimit.factory import build_rate_limiter
from app.ratelimit.memory_limiter import MemoryRateLimiter
from app.ratelimit.window import (
    Decision,
    RateLimiter,
    limit_for_tier,
    raise_if_denied,
    rate_limit_headers,
)

__all__ = [
    "Decision",
    "MemoryRateLimiter",
    "RateLimiter",
    "build_rate_limiter",
    "limit_for_tier",
    "raise_if_denied",
    "rate_limit_headers",
]
