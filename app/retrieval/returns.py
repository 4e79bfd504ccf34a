"""How often each document is returned by search, context and similar: the evidence for
dedupe's `keep_most_accessed` (a wire name kept for clients: it means "most returned").

The search path never writes: `record` adds to a count in the process, and the lifespan's
`flushing` (app/db/counters.py) adds the counts to the documents every
`RAG_ACCESS_FLUSH_SECONDS`, and once at shutdown. The column keeps its first name,
`documents.access_count`, as the replies' `access_count` field does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.counters import Tally

ADD_COUNTS = text(
    "UPDATE documents d SET access_count = d.access_count + v.n"
    " FROM unnest(CAST(:ids AS uuid[]), CAST(:counts AS bigint[])) AS v(id, n)"
    " WHERE d.id = v.id AND d.tenant_id = :tenant"
)


class ReturnCounter(Tally[uuid.UUID]):
    """Per-process counts of the documents each tenant's replies returned."""

    what = "returned counts"

    def record(self, tenant_id: str, document_ids: Iterable[uuid.UUID]) -> None:
        """Each document once per reply, however many of its chunks the reply holds."""
        for document_id in set(document_ids):
            self.add(tenant_id, document_id)

    async def write(
        self, session: AsyncSession, tenant_id: str, counts: dict[uuid.UUID, int]
    ) -> None:
        ids = sorted(counts, key=str)  # one lock order: concurrent flushes never deadlock
        values = {"ids": ids, "counts": [counts[i] for i in ids], "tenant": tenant_id}
        await session.execute(ADD_COUNTS, values)
