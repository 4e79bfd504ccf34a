"""The callback retry schedule with the default settings: doubling delays, capped, for at
least 24 hours after the job's end, the last attempt at the window's end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from app.jobs.callbacks import CallbackPolicy
from app.settings import Settings


def test_the_default_schedule_retries_for_24_hours_with_doubling_delays() -> None:
    policy = CallbackPolicy.of(Settings(_env_file=None))
    ended = now = datetime(2026, 11, 27, tzinfo=UTC)
    attempts = [now]
    while (later := policy.next_attempt(attempts=len(attempts), now=now, ended=ended)) is not None:
        attempts.append(later)
        now = later
    delays = [(b - a).total_seconds() for a, b in pairwise(attempts)]
    assert delays[:5] == [5, 10, 20, 40, 80]
    assert max(delays) == 3600
    assert attempts[-1] - ended == timedelta(hours=24)
    assert 30 <= len(attempts) <= 40
