"""A sliding-window limiter shared by every app instance: an exact sliding log in Redis.

Algorithm: per key a sorted set of admitted requests scored by their time (microseconds). One Lua
script, atomic on the server, drops the entries older than the window, counts the rest, and adds
this request only when the count is below the limit (denied requests are not recorded). The clock
is Redis' own `TIME`, so all app instances agree on time whatever their clocks say.

Why a sliding log and not the two-bucket sliding-window counter: the log is exact (never more than
`limit` admissions in any window of `window_seconds`, and a denied client learns exactly when the
next slot frees up), while the counter assumes requests were spread evenly over the previous
bucket and can over- or under-admit by up to the previous bucket's count times the fraction of
the window still overlapping it (a burst at the end of one bucket followed by a burst at the start
of the next admits up to ~2x `limit` in the worst window). The log's costs: O(log n) per hit,
measured at well under 1 ms P95 (bench/ratelimit_bench.py), and memory of about 130 bytes per
admitted request still in the window (measured: a key holding 10,000 admissions uses 1.3 MB),
released by the key's expiry one window after its last admission.

Redis restarted empty (or flushed) forgets the log: a window's admissions would be admitted
again. So every process keeps its own admissions of the window (ledger.py), and an epoch key
beside the logs tells it when Redis lost them: the script refuses to decide for a caller
expecting another epoch, the caller writes its admissions back (at their original times) and
asks again. Admissions made while Redis was unreachable (fallback.py) are written back on the
next call that reaches it. Each process gives back its own on its first call after a restart,
but cannot know that the others have: so for one window after it noticed the loss, a process
admits only while its own admissions of the window are also under its share of the limit
(ceil(limit / instances)), as during an outage (fallback.py).
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from app.ratelimit.ledger import Admission, Ledger, RedisClock
from app.ratelimit.window import Decision, check_arguments, decide, decide_share, share_of

# KEYS[1] the key's sorted set, KEYS[2] the epoch; ARGV: limit, window in microseconds, a
# unique member name, an epoch to create if there is none, the epoch the caller expects ('' at
# first). Replies {allowed, count, reset µs, epoch, now µs}; allowed -1: another epoch.
_SLIDING_LOG = """
if redis.replicate_commands then redis.replicate_commands() end
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = ARGV[4]
  redis.call('SET', KEYS[2], epoch)
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
if ARGV[5] ~= '' and ARGV[5] ~= epoch then
  return {-1, 0, 0, epoch, now}
end
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  count = count + 1
  allowed = 1
end
local reset = window
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] then reset = tonumber(oldest[2]) + window - now end
return {allowed, count, reset, epoch, now}
"""

# Admissions written back: KEYS[1] the key's sorted set; ARGV: window µs, then member, time
# pairs; those still in the window are added (again: ZADD of a known member changes nothing).
_WRITE_BACK = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local window = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local at = tonumber(ARGV[i + 1])
  if at > now - window then redis.call('ZADD', KEYS[1], at, ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return now
"""
EPOCH_KEY = "@epoch"  # no tenant id contains '@' (app/storable.py)


@dataclass(frozen=True, slots=True)
class _Reply:
    allowed: int
    counted: int
    reset_us: int
    epoch: str
    now_us: int


class RedisRateLimiter:
    """Sliding-log limiter in Redis; atomic across processes (EVALSHA, reloaded on NOSCRIPT),
    its log given back by each process when Redis lost it."""

    def __init__(
        self,
        client: Redis,
        *,
        prefix: str = "rag:ratelimit:",
        owns_client: bool = False,
        instances: int = 1,
    ) -> None:
        self._client, self._prefix, self._owns_client = client, prefix, owns_client
        self._script = client.register_script(_SLIDING_LOG)
        self._write_back_script = client.register_script(_WRITE_BACK)
        self._instance = secrets.token_hex(6)
        self._sequence = itertools.count()
        self._epoch = ""  # the epoch of the log this process last spoke to
        self._lost_at_us: int | None = None  # when this process found the log lost
        self.instances = instances
        self.ledger = Ledger()
        self.clock = RedisClock()

    def own_share(self, key: str, *, limit: int, window_seconds: int, admit: bool) -> Decision:
        """A decision on this process's own admissions of the window against its share of
        `limit` (how it decides while Redis is down, and for a window after Redis lost its
        log); with `admit`, an admission it makes is recorded for writing back into Redis."""
        window_us, now_us = window_seconds * 1_000_000, self.clock.now_us()
        counted, oldest = self.ledger.count(key, now_us=now_us, window_us=window_us)
        share = share_of(limit, self.instances)
        allowed = counted < share
        if allowed and admit:
            self.ledger.record(key, Admission(self.member(), now_us, False), window_us=window_us)
            counted, oldest = counted + 1, now_us if oldest is None else oldest
        reset_us = window_us if oldest is None else oldest + window_us - now_us
        return decide_share(
            allowed=allowed, limit=limit, share=share, counted=counted, reset_seconds=reset_us / 1e6
        )

    def member(self) -> str:
        """A name for one admission, unique across processes."""
        return f"{self._instance}:{next(self._sequence)}"

    async def hit(self, key: str, *, limit: int, window_seconds: int) -> Decision:
        check_arguments(limit, window_seconds)
        window_us = window_seconds * 1_000_000
        await self.write_back()
        if self._lost_at_us is not None and self.clock.now_us() - self._lost_at_us < window_us:
            # the others may not have given their admissions back yet: hold to the share
            own = self.own_share(key, limit=limit, window_seconds=window_seconds, admit=False)
            if not own.allowed:
                return own
        member = self.member()
        reply = await self._admit(key, limit, window_us, member)
        if reply.allowed == -1:  # Redis lost its log since this process last spoke to it
            self._epoch, self._lost_at_us = reply.epoch, reply.now_us
            self.clock.saw(reply.now_us)
            self.ledger.forget_redis()
            await self.write_back()
            return await self.hit(key, limit=limit, window_seconds=window_seconds)
        self._epoch = reply.epoch
        self.clock.saw(reply.now_us)
        if reply.allowed == 1:
            self.ledger.record(key, Admission(member, reply.now_us, True), window_us=window_us)
        return decide(
            allowed=reply.allowed == 1,
            limit=limit,
            counted=reply.counted,
            reset_seconds=reply.reset_us / 1e6,
        )

    async def write_back(self) -> None:
        """Give Redis the admissions of this process it does not hold."""
        for key, (window_us, missing) in self.ledger.unwritten(self.clock.now_us()).items():
            args: list[int | str] = [window_us]
            for admission in missing:
                args += [admission.member, admission.at_us]
            await self._write_back_script(keys=[self._prefix + key], args=args)
            self.ledger.written(key, missing)

    async def _admit(self, key: str, limit: int, window_us: int, member: str) -> _Reply:
        reply = await self._script(
            keys=[self._prefix + key, self._prefix + EPOCH_KEY],
            args=[limit, window_us, member, secrets.token_hex(8), self._epoch],
        )
        if not (isinstance(reply, list) and len(reply) == 5):
            raise ResponseError("unexpected reply from the rate-limit script")
        epoch = reply[3].decode() if isinstance(reply[3], bytes) else str(reply[3])
        return _Reply(int(reply[0]), int(reply[1]), int(reply[2]), epoch, int(reply[4]))

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
