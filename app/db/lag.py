"""How far a streaming replica is behind its primary.

Two readings, both upper bounds on how stale the replica's answers can be:

- `now() - pg_last_xact_replay_timestamp()` on the replica: the age of the last transaction it
  replayed. Right only while WAL is pending: after an idle hour the last commit is an hour old
  although the replica has everything, so it is read only when the replica is behind.
- the primary's WAL position at our recent checks: if the replica has replayed the position the
  primary had at time t, it misses nothing older than t, so it is at most `now - t` behind.

A replica whose replay position reaches the primary's latest is 0 s behind; otherwise its lag
is the smaller of the two bounds (the first can be hours after an idle spell, the second is
never worse than one check interval plus the real delay).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# pg_lsn minus pg_lsn is a byte count (numeric); from '0/0' it is the position as a number.
PRIMARY_POSITION = text("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")
STANDBY_STATE = text(
    "select pg_is_in_recovery() as in_recovery,"
    " (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint as replay_lsn,"
    " extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::float8"
    " as replay_age"
)
MAX_SAMPLES = 10_000


@dataclass(frozen=True, slots=True)
class StandbyState:
    in_recovery: bool
    replay_lsn: int | None
    replay_age: float | None  # seconds since the last replayed commit; None before the first


@dataclass(frozen=True, slots=True)
class Lag:
    seconds: float  # math.inf when nothing bounds it
    bytes: int


@dataclass(frozen=True, slots=True)
class Sample:
    lsn: int
    at: float  # time.monotonic() when the primary was there


class PrimaryHistory:
    """The primary's WAL position at recent checks, oldest first, kept for `keep_seconds`."""

    def __init__(self, keep_seconds: float) -> None:
        self.keep_seconds = keep_seconds
        self._samples: deque[Sample] = deque(maxlen=MAX_SAMPLES)

    def add(self, lsn: int, at: float) -> None:
        self._samples.append(Sample(lsn, at))
        while self._samples and self._samples[0].at < at - self.keep_seconds:
            self._samples.popleft()

    @property
    def latest(self) -> Sample | None:
        return self._samples[-1] if self._samples else None

    def caught_up_at(self, replay_lsn: int) -> float | None:
        """The last time the primary was at or before `replay_lsn`."""
        for sample in reversed(self._samples):
            if sample.lsn <= replay_lsn:
                return sample.at
        return None


def measure(state: StandbyState, history: PrimaryHistory, *, now: float) -> Lag | None:
    """The replica's lag, or None when the primary's position is not known yet."""
    latest = history.latest
    if latest is None or state.replay_lsn is None:
        return None
    behind = latest.lsn - state.replay_lsn
    if behind <= 0:
        return Lag(0.0, 0)
    bounds = [max(0.0, state.replay_age)] if state.replay_age is not None else []
    if (caught_up := history.caught_up_at(state.replay_lsn)) is not None:
        bounds.append(now - caught_up)
    return Lag(min(bounds, default=math.inf), behind)


async def primary_position(conn: AsyncConnection) -> int:
    return int(await conn.scalar(PRIMARY_POSITION) or 0)


async def standby_state(conn: AsyncConnection) -> StandbyState:
    row = (await conn.execute(STANDBY_STATE)).one()
    return StandbyState(
        in_recovery=bool(row.in_recovery),
        replay_lsn=None if row.replay_lsn is None else int(row.replay_lsn),
        replay_age=None if row.replay_age is None else float(row.replay_age),
    )
