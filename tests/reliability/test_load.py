"""Load on loopback, bounded: `rag serve --workers 2` sharing a Redis,
three tenants each sending twice what their limit admits. No 5xx, every request answered,
never more admitted than the limit in a window, memory flat. The figures of a longer run are
in docs/BENCHMARKS.md (bench/load_bench.py)."""

from __future__ import annotations

import anyio
import pytest

from bench.load_bench import NO_REPLY, LoadPlan, LoadResult, run_load
from tests.processes import PrivateRedis, free_port, scratch_directory

pytestmark = pytest.mark.slow
PLAN = LoadPlan(tenants=3, limit=20, window=5, windows=2, factor=2.0, workers=2)


async def test_two_workers_hold_every_tenant_to_its_limit(private_redis: PrivateRedis) -> None:
    def load() -> LoadResult:
        with scratch_directory("rag-load-test-") as data:
            return run_load(PLAN, redis_url=private_redis.url, data_dir=data, port=free_port())

    result = await anyio.to_thread.run_sync(load)
    statuses = result.statuses()
    assert len(result.sent) == PLAN.tenants * PLAN.factor * PLAN.limit * PLAN.windows
    assert set(statuses) <= {200, 429}, statuses  # no 5xx, no request left unanswered
    assert NO_REPLY not in statuses
    assert statuses[429] > 0  # the tenants did ask for more than their limit
    assert result.most_admitted_in_a_window() <= PLAN.limit
    per_tenant = PLAN.limit * (PLAN.windows + 1)  # windows slide: at most one more in the run
    for tenant in {s.tenant for s in result.sent}:
        admitted = sum(1 for s in result.sent if s.tenant == tenant and s.status == 200)
        assert admitted <= per_tenant, (tenant, admitted)
    assert len(result.rss_before_mb) == PLAN.workers
    for before, after in zip(result.rss_before_mb, result.rss_after_mb, strict=True):
        assert after - before < 64, (before, after)  # MB: flat, not growing with requests
