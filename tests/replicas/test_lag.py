"""Lag arithmetic, failure kinds and the replica settings, without a server."""

from __future__ import annotations

import math

import asyncpg
import pytest
from pydantic import ValidationError
from sqlalchemy import exc as sa_exc

from app.db.failures import is_replica_failure, is_shard_gone, is_unreachable
from app.db.lag import PrimaryHistory, StandbyState, measure
from app.db.replicas import ReadConsistency, ReplicaSet, location
from app.settings import Settings


def history(*samples: tuple[int, float]) -> PrimaryHistory:
    kept = PrimaryHistory(keep_seconds=60)
    for lsn, at in samples:
        kept.add(lsn, at)
    return kept


def standby(replay_lsn: int, replay_age: float | None) -> StandbyState:
    return StandbyState(in_recovery=True, replay_lsn=replay_lsn, replay_age=replay_age)


def test_a_replica_with_everything_is_not_behind_however_old_its_last_commit() -> None:
    # an idle primary: nothing committed for an hour, the replica has replayed it all
    lag = measure(standby(500, replay_age=3600.0), history((500, 100.0)), now=101.0)
    assert lag is not None
    assert (lag.seconds, lag.bytes) == (0.0, 0)


def test_pending_wal_is_bounded_by_the_last_time_the_replica_had_the_primarys_position() -> None:
    # the first write after an idle hour: the last replayed commit is an hour old, but at the
    # previous check (1 s ago) the replica had everything
    samples = history((500, 100.0), (900, 101.0))
    lag = measure(standby(500, replay_age=3600.0), samples, now=101.2)
    assert lag is not None
    assert lag.seconds == pytest.approx(1.2)
    assert lag.bytes == 400


def test_pending_wal_is_bounded_by_the_last_replayed_commit_when_that_is_closer() -> None:
    samples = history((500, 100.0), (900, 110.0))
    lag = measure(standby(600, replay_age=0.3), samples, now=110.5)
    assert lag is not None
    assert lag.seconds == pytest.approx(0.3)


def test_a_replica_stuck_behind_every_known_position_has_an_unbounded_lag() -> None:
    lag = measure(standby(100, replay_age=None), history((500, 100.0)), now=130.0)
    assert lag is not None
    assert math.isinf(lag.seconds)


def test_no_lag_can_be_told_before_the_primary_was_read() -> None:
    assert measure(standby(100, replay_age=0.0), history(), now=1.0) is None


def test_the_history_forgets_positions_older_than_it_keeps() -> None:
    kept = PrimaryHistory(keep_seconds=10)
    for second in range(30):
        kept.add(second * 10, float(second))
    assert kept.caught_up_at(100) is None  # position 100 was at t=10, more than 10 s ago
    assert kept.caught_up_at(250) == 25.0


class AdaptedError(Exception):
    """What SQLAlchemy's asyncpg adapter raises: the driver's error as its cause."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.sqlstate: str | None = getattr(error, "sqlstate", None)
        self.__cause__ = error


def wrapped(error: Exception) -> sa_exc.DBAPIError:
    return sa_exc.DBAPIError("select 1", None, AdaptedError(error))


@pytest.mark.parametrize(
    ("error", "replica_failure", "unreachable"),
    [
        (ConnectionRefusedError(), True, True),
        (wrapped(asyncpg.CannotConnectNowError("the database system is starting up")), True, True),
        (wrapped(asyncpg.ConnectionDoesNotExistError("connection was closed")), True, True),
        # a server shutting down is unreachable: 503 on the primary, the primary on a replica
        (wrapped(asyncpg.AdminShutdownError("terminating connection")), True, True),
        (asyncpg.AdminShutdownError("terminating connection"), True, True),  # direct path
        (asyncpg.ConnectionDoesNotExistError("connection was closed"), True, True),
        # the standby's FATAL read between two messages of a direct search
        (asyncpg.InternalClientError("another operation (2) is in progress"), True, False),
        (wrapped(asyncpg.SerializationError("conflict with recovery")), True, False),
        (wrapped(asyncpg.UndefinedTableError("no such table")), False, False),
        (ValueError("a bug"), False, False),
    ],
)
def test_failures_a_replica_may_end_a_read_with(
    error: Exception, replica_failure: bool, unreachable: bool
) -> None:
    assert is_replica_failure(error) is replica_failure
    assert is_unreachable(error) is unreachable


async def test_without_replicas_every_read_goes_to_the_primary() -> None:
    replicas = ReplicaSet()

    async def work(sessions: object) -> object:
        return sessions

    primary = object()
    for consistency in ReadConsistency:
        assert await replicas.read(primary, work, consistency=consistency) is primary  # type: ignore[arg-type]
    assert replicas.primary_reads == 2


SHARD_GONE = asyncpg.InternalServerError("could not find valid entry for shard 102045")


@pytest.mark.parametrize(
    ("error", "gone"),
    [
        (SHARD_GONE, True),  # the direct path
        (wrapped(SHARD_GONE), True),  # the ORM path
        (asyncpg.InternalServerError("cache lookup failed for relation 16384"), False),
        (wrapped(asyncpg.UndefinedTableError("could not find valid entry for shard 1")), False),
        (ValueError("could not find valid entry for shard 1"), False),
    ],
)
def test_a_shard_replaced_under_a_read_is_told_from_other_errors(
    error: Exception, gone: bool
) -> None:
    assert is_shard_gone(error) is gone


async def test_a_read_whose_shard_was_replaced_runs_once_more_on_the_primary() -> None:
    """Citus planned it on a shard that a tenant isolation replaced before it ran: planned again
    it reads the new shard. Once: a second such error, or any other, is the caller's."""
    replicas = ReplicaSet()
    failures: list[Exception] = [wrapped(SHARD_GONE)]

    async def work(sessions: object) -> object:
        if failures:
            raise failures.pop()
        return sessions

    primary = object()
    assert await replicas.read(primary, work) is primary  # type: ignore[arg-type]
    assert replicas.shard_retries == 1
    failures[:] = [SHARD_GONE, SHARD_GONE]
    with pytest.raises(asyncpg.InternalServerError):
        await replicas.read(primary, work)  # type: ignore[arg-type]
    failures[:] = [ValueError("a bug")]
    with pytest.raises(ValueError, match="a bug"):
        await replicas.read(primary, work)  # type: ignore[arg-type]
    assert replicas.shard_retries == 2


def test_replica_urls_are_read_from_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    urls = "postgresql://app:hunter2pw@r1:5432/rag, postgresql://app@r2,r3/rag?sslmode=require"
    monkeypatch.setenv("RAG_DATABASE_REPLICA_URLS", urls)
    found = [url.get_secret_value() for url in Settings(_env_file=None).database_replica_urls]
    assert found == [
        "postgresql://app:hunter2pw@r1:5432/rag",
        "postgresql://app@r2,r3/rag?sslmode=require",
    ]
    assert location(found[0]) == "r1:5432/rag"
    assert "hunter2pw" not in repr(Settings(_env_file=None))
    monkeypatch.setenv("RAG_REPLICA_MAX_LAG_SECONDS", "0")
    with pytest.raises(ValidationError, match="replica_max_lag_seconds"):
        Settings(_env_file=None)
