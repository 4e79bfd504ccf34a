"""An exact sliding-log limiter in this process: the default without Redis, and its fallback.

Per key a deque of admission times (monotonic clock). `hit` never awaits, so on one event loop
each call is atomic (it is not meant to be shared between threads). Memory stays bounded: keys
are kept in least-recently-used order, each hit drops a few idle keys from the old end (a key is
idle once its newest admission has left its window), and beyond `max_keys` the least recently
used key is evicted (which forgets its budget: the price of the bound).

With `instances` > 1 (`rag serve --workers N` without Redis) each process admits its share,
ceil(limit / instances), so the processes together never admit more than the limit (a
tenant whose requests all land on one process gets only that process's share).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeVar

from app.ratelimit.window import Decision, check_arguments, decide_share, share_of

_PRUNE_PER_HIT = 4
L = TypeVar("L")


def prune_idle(logs: OrderedDict[str, L], *, max_keys: int, idle: Callable[[L], bool]) -> None:
    """Drop a few least recently used logs that are idle, or beyond `max_keys`: each call
    does a little, so memory stays bounded without a sweep."""
    for _ in range(_PRUNE_PER_HIT):
        if not logs:
            return
        oldest_key, oldest = next(iter(logs.items()))
        if len(logs) <= max_keys and not idle(oldest):
            return
        del logs[oldest_key]


class _Log:
    __slots__ = ("times", "window")

    def __init__(self, window: float) -> None:
        self.times: deque[float] = deque()
        self.window = window

    def idle(self, now: float) -> bool:
        return not self.times or self.times[-1] <= now - self.window


class MemoryRateLimiter:
    """Sliding-window limiter for one process (state is lost on restart, not shared)."""

    def __init__(
        self,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        instances: int = 1,
    ) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self._logs: OrderedDict[str, _Log] = OrderedDict()
        self._max_keys, self._clock, self._instances = max_keys, clock, instances

    @property
    def key_count(self) -> int:
        return len(self._logs)

    async def hit(self, key: str, *, limit: int, window_seconds: int) -> Decision:
        check_arguments(limit, window_seconds)
        now = self._clock()
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _Log(window_seconds)
        else:
            self._logs.move_to_end(key)
            log.window = window_seconds
        times, horizon = log.times, now - window_seconds
        while times and times[0] <= horizon:
            times.popleft()
        share = share_of(limit, self._instances)
        allowed = len(times) < share
        if allowed:
            times.append(now)
        reset = times[0] + window_seconds - now if times else float(window_seconds)
        prune_idle(self._logs, max_keys=self._max_keys, idle=lambda log: log.idle(now))
        return decide_share(
            allowed=allowed, limit=limit, share=share, counted=len(times), reset_seconds=reset
        )

    async def aclose(self) -> None:
        self._logs.clear()
