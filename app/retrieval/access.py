"""How often each document is returned (search, context, similar): the evidence for dedupe's
`keep_most_accessed`.

The search path never writes: `record` adds to a counter in the process (a dict update, no I/O),
and `flush` (run every `RAG_ACCESS_FLUSH_SECONDS` by the lifespan's background task, and once
at shutdown) adds the counts to `documents.access_count`, one UPDATE per tenant under its RLS.
A crash loses at most the counts of the last interval (default 5 s); a failed flush (database
down) puts its counts back for the next one. Counts are popularity evidence, not billing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable

from sqlalchemy import text

from app.db.tenancy import SessionMaker, tenant_transaction

_log = logging.getLogger(__name__)

ADD_COUNTS = text(
    "UPDATE documents d SET access_count = d.access_count + v.n"
    " FROM unnest(CAST(:ids AS uuid[]), CAST(:counts AS bigint[])) AS v(id, n)"
    " WHERE d.id = v.id AND d.tenant_id = :tenant"
)


class AccessCounter:
    """Per-process counts of (tenant, document) returns, flushed in the background."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, uuid.UUID]] = Counter()

    def record(self, tenant_id: str, document_ids: Iterable[uuid.UUID]) -> None:
        """Each document once per reply, however many of its chunks the reply holds."""
        for document_id in set(document_ids):
            self._counts[(tenant_id, document_id)] += 1

    def pending(self) -> int:
        return len(self._counts)

    async def flush(self, sessions: SessionMaker) -> int:
        """Add the counts so far to the documents; how many documents were updated."""
        counts, self._counts = self._counts, Counter()
        by_tenant: dict[str, dict[uuid.UUID, int]] = {}
        for (tenant_id, document_id), n in counts.items():
            by_tenant.setdefault(tenant_id, {})[document_id] = n
        written = 0
        for tenant_id, documents in sorted(by_tenant.items()):
            ids = sorted(documents, key=str)  # one lock order: concurrent flushes never deadlock
            try:
                async with tenant_transaction(sessions, tenant_id) as session:
                    await session.execute(
                        ADD_COUNTS,
                        {"ids": ids, "counts": [documents[i] for i in ids], "tenant": tenant_id},
                    )
            except Exception:  # keep counting; the next flush tries again
                _log.warning("access counts of tenant %s not flushed; retried later", tenant_id)
                for document_id in ids:
                    self._counts[(tenant_id, document_id)] += documents[document_id]
                continue
            written += len(ids)
        return written


@contextlib.asynccontextmanager
async def flushing(
    counter: AccessCounter, sessions: SessionMaker, *, every_seconds: float
) -> AsyncIterator[AccessCounter]:
    """Flush `counter` every `every_seconds` while the block runs, and once at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_seconds)
            await counter.flush(sessions)

    task = asyncio.create_task(loop())
    try:
        yield counter
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await counter.flush(sessions)
