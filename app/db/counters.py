"""Counts kept in memory and added to the database in the background, per tenant.

Counting must not slow the request it counts, so `Tally.add` is a dict update, no I/O. `flush`
takes what accumulated and hands each tenant's counts to `write` in a transaction of that tenant
(its row-level security applies), tenants in one order so concurrent flushes never deadlock. A
tenant whose transaction fails gets its counts back for the next flush; the others are written.
`flushing` runs a flush every few seconds while the service runs, and a last one at shutdown:
a crash loses at most one interval's counts. Counts are evidence (popularity, traffic), never
billing. Used by the returned counts (app/retrieval/returns.py) and the traffic counters
(app/usage.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Hashable
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tenancy import SessionMaker, tenant_transaction

_log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)


class Tally(ABC, Generic[K]):
    """Counts of (tenant, key) in this process; `write` adds one tenant's to the database."""

    what = "counts"  # for the log: whose counts were not flushed

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, K]] = Counter()
        self._flushing = asyncio.Lock()

    def add(self, tenant_id: str, key: K, n: int = 1) -> None:
        self._counts[(tenant_id, key)] += n

    def pending(self) -> int:
        """How many (tenant, key) pairs wait for the next flush."""
        return len(self._counts)

    @abstractmethod
    async def write(self, session: AsyncSession, tenant_id: str, counts: dict[K, int]) -> None:
        """Add `counts` to the database, in a transaction of `tenant_id`."""

    async def flush(self, sessions: SessionMaker) -> int:
        """Write the counts so far, one transaction per tenant; how many keys were written."""
        async with self._flushing:
            taken, self._counts = self._counts, Counter()
            by_tenant: dict[str, dict[K, int]] = {}
            for (tenant_id, key), n in taken.items():
                by_tenant.setdefault(tenant_id, {})[key] = n
            written = 0
            for tenant_id, counts in sorted(by_tenant.items()):
                try:
                    async with tenant_transaction(sessions, tenant_id) as session:
                        await self.write(session, tenant_id, counts)
                except Exception:  # keep counting; the next flush tries again
                    _log.warning("%s of tenant %s not flushed; retried later", self.what, tenant_id)
                    for key, n in counts.items():
                        self._counts[(tenant_id, key)] += n
                    continue
                written += len(counts)
            return written


@contextlib.asynccontextmanager
async def flushing(
    tally: Tally[K], sessions: SessionMaker, *, every_seconds: float
) -> AsyncIterator[None]:
    """Flush `tally` every `every_seconds` while the block runs, and once more at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_seconds)
            try:
                await tally.flush(sessions)
            except Exception:  # the next round retries; counting must never stop the service
                _log.warning("%s not flushed; retrying later", tally.what, exc_info=True)

    task = asyncio.create_task(loop(), name=f"flush {tally.what}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            await tally.flush(sessions)
        except Exception:
            _log.warning("%s lost at shutdown", tally.what, exc_info=True)
