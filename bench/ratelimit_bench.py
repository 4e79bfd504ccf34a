"""Rate-limit decision latency: P50/P95/P99 of `hit` for the Redis and in-process limiters.

    python -m bench.ratelimit_bench [--redis-url redis://127.0.0.1:6379/15] [-n 5000]

Each scenario times N sequential hits (after a warm-up) with perf_counter_ns; the "concurrent"
rows run 16 hitters at once, so their latency includes queueing in one event loop. "redis PING"
is the floor: one bare round trip through redis-py; "redis+fallback" is what the app runs.
Target (DESIGN.md): a rate-limit check under 1 ms at P95. Keys live under a random prefix in the
given database and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.ratelimit import (
    Decision,
    MemoryRateLimiter,
    RateLimiter,
    build_rate_limiter,
)
from app.ratelimit.fallback import FallbackRateLimiter
from app.ratelimit.redis_limiter import RedisRateLimiter
from app.settings import Settings

WARMUP = 200
CONCURRENCY = 16
Hit = Callable[[int], Awaitable[Decision | None]]


@dataclass(frozen=True, slots=True)
class Row:
    backend: str
    scenario: str
    latencies_ns: list[int]
    elapsed_s: float
    denied: int

    def cells(self) -> list[str]:
        cuts = statistics.quantiles(self.latencies_ns, n=100, method="inclusive")
        ms = [value / 1e6 for value in (cuts[49], cuts[94], cuts[98], max(self.latencies_ns))]
        rate = len(self.latencies_ns) / self.elapsed_s
        return [
            self.backend,
            self.scenario,
            str(len(self.latencies_ns)),
            *(f"{value:.3f}" for value in ms),
            f"{rate:,.0f}",
            str(self.denied),
        ]


async def timed(backend: str, scenario: str, hit: Hit, *, n: int, concurrency: int = 1) -> Row:
    """Time n hits spread over `concurrency` concurrent hitters."""
    for i in range(WARMUP):
        await hit(i)
    latencies: list[int] = []
    denied = 0

    async def hitter(start: int) -> None:
        nonlocal denied
        for i in range(start, n, concurrency):
            began = time.perf_counter_ns()
            decision = await hit(i)
            latencies.append(time.perf_counter_ns() - began)
            denied += decision is not None and not decision.allowed

    began = time.perf_counter()
    await asyncio.gather(*(hitter(start) for start in range(concurrency)))
    return Row(backend, scenario, latencies, time.perf_counter() - began, denied)


async def scenarios(backend: str, limiter: RateLimiter, *, n: int) -> list[Row]:
    run = uuid.uuid4().hex[:8]
    saturated = f"{run}:saturated"
    for _ in range(100):
        await limiter.hit(saturated, limit=100, window_seconds=60)

    async def hot_key(_i: int) -> Decision:  # one tenant at a high tier: the log grows to n
        return await limiter.hit(f"{run}:hot", limit=1_000_000, window_seconds=60)

    async def many_tenants(i: int) -> Decision:  # 1000 tenants on the basic tier
        return await limiter.hit(f"{run}:tenant-{i % 1000}", limit=100, window_seconds=60)

    async def over_limit(_i: int) -> Decision:  # a tenant already out of budget
        return await limiter.hit(saturated, limit=100, window_seconds=60)

    async def spread(i: int) -> Decision:
        return await limiter.hit(f"{run}:spread-{i % 1000}", limit=100, window_seconds=60)

    return [
        await timed(backend, "1 key, log grows to N", hot_key, n=n),
        await timed(backend, "1000 keys, limit 100", many_tenants, n=n),
        await timed(backend, "1 key, over its limit", over_limit, n=n),
        await timed(backend, f"1000 keys, {CONCURRENCY} concurrent", spread, n=n, concurrency=16),
    ]


async def redis_rows(url: str, *, n: int) -> list[Row]:
    prefix = f"bench:{uuid.uuid4().hex[:8]}:"
    client = Redis.from_url(url)
    try:
        await client.ping()
    except RedisError as exc:
        sys.stderr.write(f"Redis at {url} unavailable ({exc}); Redis rows skipped\n")
        await client.aclose()
        return []

    async def ping(_i: int) -> None:  # the floor: one round trip through redis-py
        await client.ping()

    rows = [await timed("redis PING", "baseline round trip", ping, n=n)]
    rows += await scenarios("redis", RedisRateLimiter(client, prefix=prefix), n=n)
    wrapped = build_rate_limiter(Settings.model_validate({"redis_url": url}))
    assert isinstance(wrapped, FallbackRateLimiter)
    wrapped.primary = RedisRateLimiter(client, prefix=prefix)
    rows += (await scenarios("redis+fallback", wrapped, n=n))[1:2]
    if wrapped.fallback_count:
        sys.stderr.write(f"warning: {wrapped.fallback_count} hits fell back to memory\n")
    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        await client.delete(key)
    await client.aclose()
    return rows


def table(rows: list[Row]) -> str:
    header = [
        "backend",
        "scenario",
        "n",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "hits/s",
        "denied",
    ]
    lines = [header, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    default_url = os.environ.get("RAG_REDIS_URL", "redis://127.0.0.1:6379/15")
    parser.add_argument("--redis-url", default=default_url)
    parser.add_argument("-n", type=int, default=5000, help="timed hits per scenario")
    args = parser.parse_args()
    rows = await scenarios("memory", MemoryRateLimiter(), n=args.n)
    rows += await redis_rows(args.redis_url, n=args.n)
    sys.stdout.write(table(rows) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
