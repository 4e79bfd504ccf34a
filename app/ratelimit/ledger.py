"""What this process admitted, per key, over the last window: so a Redis that lost its log
(restarted empty, or flushed) can be given it back, and so an outage is bounded by the
process's own admissions.

Times are microseconds on Redis' clock (`RedisClock` estimates it between replies), so an
entry written back into Redis falls where the original admission did. Memory is bounded like
the in-process limiter's: keys in least-recently-used order, idle ones dropped a few per call,
at most `max_keys` (the least recently used is forgotten beyond that). The keys holding
admissions Redis lacks are kept apart, so the check before every Redis call costs nothing
while there are none.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from app.ratelimit.memory_limiter import prune_idle


@dataclass(slots=True)
class Admission:
    member: str  # the sorted-set member naming it in Redis
    at_us: int
    in_redis: bool  # False: admitted while Redis was unreachable, not written there yet


class _KeyLog:
    __slots__ = ("entries", "window_us")

    def __init__(self, window_us: int) -> None:
        self.entries: deque[Admission] = deque()
        self.window_us = window_us

    def drop_before(self, horizon_us: int) -> None:
        while self.entries and self.entries[0].at_us <= horizon_us:
            self.entries.popleft()


class Ledger:
    def __init__(self, *, max_keys: int = 100_000) -> None:
        self._logs: OrderedDict[str, _KeyLog] = OrderedDict()
        self._max_keys = max_keys
        self._unwritten: set[str] = set()  # keys with admissions Redis does not hold

    def record(self, key: str, admission: Admission, *, window_us: int) -> None:
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _KeyLog(window_us)
        else:
            self._logs.move_to_end(key)
            log.window_us = window_us
        log.entries.append(admission)
        if not admission.in_redis:
            self._unwritten.add(key)
        now_us = admission.at_us
        prune_idle(
            self._logs,
            max_keys=self._max_keys,
            idle=lambda old: not old.entries or old.entries[-1].at_us <= now_us - old.window_us,
        )

    def count(self, key: str, *, now_us: int, window_us: int) -> tuple[int, int | None]:
        """This process's admissions of `key` in the window ending now, and the oldest's time."""
        log = self._logs.get(key)
        if log is None:
            return 0, None
        log.drop_before(now_us - window_us)
        return len(log.entries), log.entries[0].at_us if log.entries else None

    def unwritten(self, now_us: int) -> dict[str, tuple[int, list[Admission]]]:
        """Per key, its window and the admissions of it Redis does not hold yet (still in
        their window); `written` clears a key once they are in Redis."""
        out: dict[str, tuple[int, list[Admission]]] = {}
        for key in list(self._unwritten):
            log = self._logs.get(key)
            if log is not None:
                log.drop_before(now_us - log.window_us)
                missing = [a for a in log.entries if not a.in_redis]
                if missing:
                    out[key] = (log.window_us, missing)
                    continue
            self._unwritten.discard(key)  # forgotten, or nothing left in its window
        return out

    def written(self, key: str, admissions: list[Admission]) -> None:
        """`admissions` of `key` are in Redis now (others may have come meanwhile)."""
        for admission in admissions:
            admission.in_redis = True
        log = self._logs.get(key)
        if log is None or all(a.in_redis for a in log.entries):
            self._unwritten.discard(key)

    def forget_redis(self) -> None:
        """Redis lost its log: every admission still in its window must be written again."""
        for key, log in self._logs.items():
            for admission in log.entries:
                admission.in_redis = False
            if log.entries:
                self._unwritten.add(key)


class RedisClock:
    """Redis' clock in microseconds, estimated from the last reply and this host's clock."""

    def __init__(self) -> None:
        self._offset_us = 0

    def saw(self, redis_now_us: int) -> None:
        self._offset_us = redis_now_us - time.time_ns() // 1000

    def now_us(self) -> int:
        return time.time_ns() // 1000 + self._offset_us
