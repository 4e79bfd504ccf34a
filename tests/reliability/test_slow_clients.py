"""Slow and idle connections against a real `rag serve`: a few hundred that
never send a byte, send a head a byte a second, a body at 10 bytes a second, or stay idle
after a request are each closed by the server at its deadline (408 for a request begun),
while another client is served throughout. The figures of a longer run, with the default
deadlines, are in docs/BENCHMARKS.md (bench/slow_clients_bench.py)."""

from __future__ import annotations

import anyio
import pytest

from bench.slow_clients_bench import SlowPlan, SlowResult, percentiles, run_slow_clients
from tests.processes import free_port, scratch_directory

pytestmark = pytest.mark.slow
PLAN = SlowPlan(
    each=75,
    head_seconds=2,
    body_seconds=3,
    keepalive_seconds=1,
    baseline_seconds=3,
    give_up_seconds=30,
)
LATE = 3.0  # seconds a close may come after its deadline on a busy machine


# alone: its idle and keep-alive timings are a few hundred milliseconds
@pytest.mark.serial
async def test_slow_and_idle_connections_are_closed_and_others_are_served() -> None:
    def attack() -> SlowResult:
        with scratch_directory("rag-slow-test-") as data:
            return run_slow_clients(PLAN, data_dir=data, port=free_port())

    result = await anyio.to_thread.run_sync(attack)
    assert all(c.opened for c in result.closed)
    assert result.most_held >= PLAN.each  # they were held at once before the deadlines
    assert result.held_to_the_end() == 0, [c for c in result.closed if c.seconds is None][:3]
    deadlines = {
        "idle": (PLAN.head_seconds, None),  # nothing was asked: closed without a reply
        "slow head": (PLAN.head_seconds, 408),
        "slow body": (PLAN.body_seconds, 408),
        "kept alive": (PLAN.keepalive_seconds, None),
    }
    for kind, (seconds, status) in deadlines.items():
        assert seconds is not None
        for closed in result.of(kind):
            assert closed.status == status, (kind, closed)
            assert closed.seconds is not None
            assert seconds - 0.5 <= closed.seconds <= seconds + LATE, (kind, closed)
    statuses = {status for status, _ in result.during}
    assert statuses == {200}, statuses
    assert len(result.during) >= 20
    _p50, p95, _p99 = percentiles(result.during)
    assert p95 < 1000, (percentiles(result.baseline), percentiles(result.during))
