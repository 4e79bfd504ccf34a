"""What every limiter returns and how a decision becomes HTTP headers or a 429.

Both limiters keep an exact sliding log: a request is admitted when fewer than `limit` admitted
requests fall in the last `window_seconds`. Denied requests are not recorded, so hammering while
limited does not push the reset further away.

`reset_seconds` is the time until the oldest admitted request leaves the window, i.e. until
`remaining` next goes up (for a denied request: until one more request would be admitted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from app.errors import RateLimited
from app.settings import Settings

DEFAULT_TIER = "basic"


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one hit: admitted or not, and the budget left after it."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: float
    retry_after_seconds: int  # whole seconds >= 1 when denied, 0 when allowed


class RateLimiter(Protocol):
    async def hit(self, key: str, *, limit: int, window_seconds: int) -> Decision:
        """Count one request against `key`'s budget of `limit` per `window_seconds`."""
        ...

    async def aclose(self) -> None: ...


def decide(*, allowed: bool, limit: int, counted: int, reset_seconds: float) -> Decision:
    """A Decision from a limiter's raw result; `counted` includes this request when admitted."""
    reset = max(0.0, reset_seconds)
    return Decision(
        allowed=allowed,
        limit=limit,
        remaining=max(0, limit - counted),
        reset_seconds=reset,
        retry_after_seconds=0 if allowed else max(1, math.ceil(reset)),
    )


def share_of(limit: int, instances: int) -> int:
    """What one of `instances` processes may admit of a limit they share without Redis."""
    return math.ceil(limit / instances)


def decide_share(
    *, allowed: bool, limit: int, share: int, counted: int, reset_seconds: float
) -> Decision:
    """A decision against one process's `share` of `limit` (`counted`: its own admissions,
    this one included): `remaining` is what this process may still admit."""
    return decide(
        allowed=allowed, limit=limit, counted=limit - share + counted, reset_seconds=reset_seconds
    )


def check_arguments(limit: int, window_seconds: int) -> None:
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if window_seconds < 1:
        raise ValueError(f"window_seconds must be >= 1, got {window_seconds}")


def limit_for_tier(settings: Settings, tier: str) -> int:
    """Requests per window for a tenant tier; an unknown tier gets the basic budget."""
    tiers = settings.rate_limit_tiers
    return tiers.get(tier, tiers[DEFAULT_TIER])


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """`RateLimit-*` and `X-RateLimit-*` headers for every reply, plus `Retry-After` on a 429."""
    values = {
        "Limit": str(decision.limit),
        "Remaining": str(decision.remaining),
        "Reset": str(math.ceil(decision.reset_seconds)),
    }
    headers = {
        f"{prefix}RateLimit-{name}": v for prefix in ("", "X-") for name, v in values.items()
    }
    if not decision.allowed:
        headers["Retry-After"] = str(decision.retry_after_seconds)
    return headers


def raise_if_denied(decision: Decision) -> None:
    """Raise RateLimited (429) carrying the rate-limit headers when the decision denies."""
    if decision.allowed:
        return
    raise RateLimited(
        f"rate limit of {decision.limit} requests exceeded; "
        f"retry after {decision.retry_after_seconds} s",
        headers=rate_limit_headers(decision),
        extra={"retry_after": decision.retry_after_seconds},
    )
