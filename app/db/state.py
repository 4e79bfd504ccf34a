"""What the transactions of one sessionmaker share: the plan choices remembered per tenant
(app/retrieval/planning.py, visibility.py) and the read-only transactions still committing
(scoped.py).

`create_sessionmaker` (engine.py) puts one `SessionsState` into the sessionmaker's info, so the
makers derived from it (`reading_as`, ...) and every session they open share it, and it lives
as long as its owner: the service's lifespan (`Resources.sessions`), a command, a test. Nothing
of it is kept per process. A sessionmaker made without one remembers no plan choice and commits
its read-only transactions before returning (`sessions_state` is None).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

STATE = "state"  # the sessionmaker info key
REMEMBER_SECONDS = 300.0  # a plan choice: a stale value costs time or a little recall
REMEMBER_MAX = 10_000  # values kept per memory, the most recently used

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Remembered(Generic[K, V]):
    """Values kept `REMEMBER_SECONDS`, the `REMEMBER_MAX` most recently used: plan choices."""

    def __init__(self) -> None:
        self._values: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value, if it is still fresh."""
        if (found := self._values.get(key)) is not None and found[1] > time.monotonic():
            self._values.move_to_end(key)
            return found[0]
        return None

    def put(self, key: K, value: V) -> V:
        self._values[key] = (value, time.monotonic() + REMEMBER_SECONDS)
        self._values.move_to_end(key)
        while len(self._values) > REMEMBER_MAX:
            self._values.popitem(last=False)
        return value


@dataclass(frozen=True, slots=True)
class PlanMemory:
    """What search plans remember per tenant: whether it has access lists (`listed`), how many
    chunks a set of principals sees of a model's (`visible`, bounded) and of some collections
    (`collections`, bounded), and how often it was searched lately (`searches`)."""

    listed: Remembered[str, bool] = field(default_factory=Remembered)
    visible: Remembered[tuple[str, str, frozenset[str]], int] = field(default_factory=Remembered)
    collections: Remembered[tuple[str, str, frozenset[str], tuple[str, ...]], int] = field(
        default_factory=Remembered
    )
    searches: Remembered[str, int] = field(default_factory=Remembered)


class PendingCommits:
    """The read-only transactions whose COMMIT runs off the caller's path (a strong reference:
    asyncio keeps only weak ones to its tasks)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settled(self) -> None:
        """Wait for those still under way (before the pool is closed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class SessionsState:
    plans: PlanMemory = field(default_factory=PlanMemory)
    commits: PendingCommits = field(default_factory=PendingCommits)


def state_of(info: Mapping[str, Any]) -> SessionsState | None:
    """The state in a sessionmaker's or a session's info."""
    state = info.get(STATE)
    return state if isinstance(state, SessionsState) else None


def sessions_state(sessions: async_sessionmaker[AsyncSession]) -> SessionsState | None:
    return state_of(sessions.kw.get("info") or {})


def plans_of(info: Mapping[str, Any]) -> PlanMemory:
    """The plan memory of a sessionmaker's or a session's info; without state, one that
    starts empty (nothing is remembered beyond the caller's own use of it)."""
    state = state_of(info)
    return state.plans if state is not None else PlanMemory()


def plans_of_sessions(sessions: async_sessionmaker[AsyncSession]) -> PlanMemory:
    return plans_of(sessions.kw.get("info") or {})
