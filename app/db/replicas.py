"""Read replicas: which server answers a read, and what happens when a replica fails.

Reads that may be a little stale (searches, context, similar items, dedupe previews) go to a
healthy replica, the least busy one (ties in turn); everything else, and any read a caller asks
to be consistent with its own writes (`ReadConsistency.PRIMARY`), goes to the primary. A
background check reads each replica every `RAG_REPLICA_CHECK_SECONDS`: one that does not
answer, is not in recovery (promoted, or not a standby at all) or lags more than
`RAG_REPLICA_MAX_LAG_SECONDS` (app/db/lag.py) is skipped until a later check passes. A replica
that fails in the middle of a read (connection lost, shutting down, a recovery conflict) is
skipped from then on and the read runs once more on the primary, so a dying replica never
reaches the client. With no replica configured every read goes to the primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import async_url, create_engine, create_sessionmaker
from app.db.failures import is_replica_failure, is_shard_gone
from app.db.lag import Lag, PrimaryHistory, measure, primary_position, standby_state
from app.db.scoped import settled
from app.db.tenancy import SessionMaker
from app.errors import NotFound
from app.settings import Settings

_log = logging.getLogger(__name__)
T = TypeVar("T")
Work = Callable[[SessionMaker], Awaitable[T]]


class ReadConsistency(StrEnum):
    REPLICA = "replica"  # a healthy replica within the lag bound, else the primary
    PRIMARY = "primary"  # the primary: sees every write acknowledged before the read


@dataclass(slots=True)
class ReplicaState:
    """What the last check (or a failed read since) found; mutated by the checks only."""

    healthy: bool = False
    reason: str | None = "not checked yet"
    lag: Lag | None = None
    checked_at: float | None = None  # time.monotonic()


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """One replica as readiness reports it (no host names: /readyz is public)."""

    name: str
    healthy: bool
    reason: str | None
    lag_seconds: float | None
    lag_bytes: int | None
    in_flight: int
    served: int
    failed_reads: int


class Replica:
    """`engine` serves the reads; `probe`, a connection of its own, the checks (so a replica
    whose pool is busy with reads is not taken for one that does not answer)."""

    def __init__(self, name: str, location: str, engine: AsyncEngine, probe: AsyncEngine) -> None:
        self.name, self.location, self.engine, self.probe = name, location, engine, probe
        self.sessions = create_sessionmaker(engine)
        self.state = ReplicaState()
        self.in_flight = self.served = self.failed_reads = 0

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        self.in_flight += 1
        self.served += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    def status(self) -> ReplicaStatus:
        lag = self.state.lag
        return ReplicaStatus(
            name=self.name,
            healthy=self.state.healthy,
            reason=self.state.reason,
            lag_seconds=None if lag is None else round(lag.seconds, 3),
            lag_bytes=None if lag is None else lag.bytes,
            in_flight=self.in_flight,
            served=self.served,
            failed_reads=self.failed_reads,
        )


class ReplicaSet:
    """The replicas of one primary, their health, and the routing of reads among them."""

    def __init__(
        self,
        replicas: Sequence[Replica] = (),
        *,
        max_lag_seconds: float = 5.0,
        check_seconds: float = 1.0,
        check_timeout_seconds: float = 2.0,
    ) -> None:
        self.replicas = list(replicas)
        self.max_lag_seconds, self.check_seconds = max_lag_seconds, check_seconds
        self.check_timeout_seconds = check_timeout_seconds
        # A verdict older than this is no verdict (the checks stalled): the replica is skipped.
        self.verdict_seconds = 3 * check_seconds + check_timeout_seconds
        self.history = PrimaryHistory(keep_seconds=2 * max_lag_seconds + 10 * check_seconds)
        self.primary_reads = self.failovers = 0
        self.shard_retries = 0  # reads run again because Citus replaced their shard meanwhile
        self._turn = 0

    def pick(self) -> Replica | None:
        """A healthy replica with a recent verdict, the least busy (ties in turn); or None."""
        now = time.monotonic()
        usable = [
            r
            for r in self.replicas
            if r.state.healthy
            and r.state.checked_at is not None
            and now - r.state.checked_at <= self.verdict_seconds
        ]
        if not usable:
            return None
        self._turn += 1
        start = self._turn % len(usable)
        rotated = usable[start:] + usable[:start]
        return min(rotated, key=lambda r: r.in_flight)

    async def read(
        self,
        primary: SessionMaker,
        work: Work[T],
        *,
        consistency: ReadConsistency = ReadConsistency.REPLICA,
        recheck_missing: bool = False,
    ) -> T:
        """`work` on a replica when allowed and one is healthy, else on the primary. A replica
        failure runs it once more on the primary; with `recheck_missing`, so does NotFound
        (an id the client just got from a write may not have reached the replica yet). On the
        primary, a read whose Citus shard was replaced under it runs once more (failures.py)."""
        replica = self.pick() if consistency is ReadConsistency.REPLICA else None
        if replica is not None:
            try:
                with replica.serving():
                    return await work(replica.sessions)
            except NotFound:
                if not recheck_missing:
                    raise
            except Exception as error:
                if not is_replica_failure(error):
                    raise
                self._failed(replica, error)
        self.primary_reads += 1
        try:
            return await work(primary)
        except Exception as error:
            if not is_shard_gone(error):
                raise
            _log.info("a read's shard was replaced under it (%s); reading again", error)
        self.shard_retries += 1
        return await work(primary)

    def _failed(self, replica: Replica, error: Exception) -> None:
        replica.failed_reads += 1
        self.failovers += 1
        reason = f"failed a read ({type(error).__name__}); retried on the primary"
        self._judge(replica, healthy=False, reason=reason, lag=replica.state.lag)

    def statuses(self) -> list[ReplicaStatus]:
        return [r.status() for r in self.replicas]

    async def check(self, primary: AsyncEngine) -> None:
        """One round: the primary's WAL position, then every replica at once."""
        try:
            async with asyncio.timeout(self.check_timeout_seconds), primary.connect() as conn:
                self.history.add(await primary_position(conn), time.monotonic())
        except Exception as error:  # measured against its last known position meanwhile
            _log.debug("primary WAL position not read: %s", type(error).__name__)
        await asyncio.gather(*(self._check(r) for r in self.replicas))

    async def _check(self, replica: Replica) -> None:
        try:
            async with (
                asyncio.timeout(self.check_timeout_seconds),
                replica.probe.connect() as conn,
            ):
                state = await standby_state(conn)
        except Exception as error:  # any failure is a verdict: skip it until it answers
            self._judge(replica, healthy=False, reason=f"unreachable ({type(error).__name__})")
            return
        if not state.in_recovery:
            self._judge(replica, healthy=False, reason="not in recovery (not a standby)")
            return
        lag = measure(state, self.history, now=time.monotonic())
        if lag is None:
            self._judge(replica, healthy=False, reason="primary position not known yet")
        elif lag.seconds > self.max_lag_seconds:
            reason = f"{lag.seconds:.1f} s behind the primary (bound {self.max_lag_seconds} s)"
            self._judge(replica, healthy=False, reason=reason, lag=lag)
        else:
            self._judge(replica, healthy=True, reason=None, lag=lag)

    def _judge(
        self, replica: Replica, *, healthy: bool, reason: str | None, lag: Lag | None = None
    ) -> None:
        state = replica.state
        if healthy != state.healthy or (not healthy and reason != state.reason):
            log = _log.info if healthy else _log.warning
            log("replica %s (%s): %s", replica.name, replica.location, reason or "in use")
        state.healthy, state.reason, state.lag = healthy, reason, lag
        state.checked_at = time.monotonic()

    async def watch(self, primary: AsyncEngine) -> None:
        """Check every `check_seconds` until cancelled."""
        while True:
            await self.check(primary)
            await asyncio.sleep(self.check_seconds)

    async def aclose(self) -> None:
        for replica in self.replicas:
            await settled(replica.sessions)  # the read-only transactions still committing
            await replica.engine.dispose()
            await replica.probe.dispose()


def location(url: str) -> str:
    """host:port/database of a URL, for logs: no user, no password."""
    parsed = make_url(async_url(url))
    host = parsed.host or parsed.query.get("host") or "local"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{host}{port}/{parsed.database or ''}"


def build_replicas(settings: Settings) -> ReplicaSet:
    timeout = settings.replica_connect_timeout_seconds
    replicas = []
    for number, secret in enumerate(settings.database_replica_urls, start=1):
        url = secret.get_secret_value()
        engine = create_engine(
            url,
            pool_size=settings.db_pool_size,
            statement_timeout_seconds=settings.db_statement_timeout_seconds,
            connect_timeout_seconds=timeout,
        )
        probe = create_engine(
            url, pool_size=1, statement_timeout_seconds=timeout, connect_timeout_seconds=timeout
        )
        replicas.append(Replica(f"replica-{number}", location(url), engine, probe))
    return ReplicaSet(
        replicas,
        max_lag_seconds=settings.replica_max_lag_seconds,
        check_seconds=settings.replica_check_seconds,
        check_timeout_seconds=settings.replica_connect_timeout_seconds,
    )


@contextlib.asynccontextmanager
async def watched_replicas(settings: Settings, primary: AsyncEngine) -> AsyncIterator[ReplicaSet]:
    """The configured replicas, checked in the background while the block runs."""
    replicas = build_replicas(settings)
    if not replicas.replicas:
        yield replicas
        return
    task = asyncio.create_task(replicas.watch(primary), name="replica-checks")
    try:
        yield replicas
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await replicas.aclose()
