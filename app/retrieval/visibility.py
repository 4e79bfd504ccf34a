"""The access condition of row-level security, written again where the planner can use it,
and a wider index scan for callers who see only a small part of a large tenant.

The policies on chunks (migration 0008) read the caller's principals from a transaction-local
setting, which the planner cannot look into. Stated again as constants, like the tenant beside
RLS, the condition lets the planner estimate the visible rows. It cannot make the GIN index on
`chunks.access` drive the scan: `&&` is not leakproof, so under RLS a caller's own condition
is never an index condition (only the tenant's `=` is), and an exact plan for a small visible
set would read the whole tenant through its btree (over 100 ms at 100k chunks).

So vector search stays on the HNSW index, and for a caller who sees at most `SMALL_VISIBLE`
chunks of the tenant (a bounded count through the same policies, kept `COUNT_TTL_SECONDS` per
tenant, model and set of principals: a plan choice, never a result) the iterative scan is
widened: `hnsw.ef_search` at least `SCAN_EF_SEARCH`, `max_scan_tuples` `SCAN_TUPLES`, and
`SCAN_MEMORY` times work_mem, so that it neither stops at a bound nor settles for the first
rows it finds. Measured in bench/access_bench.py (docs/BENCHMARKS.md, "Search under document
permissions"); `strict_order` was measured too and was worse at 100k chunks.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from sqlalchemy import ColumnElement, Text, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk
from app.db.tenancy import readers_of
from app.permissions import Readers

SMALL_VISIBLE = 5_000  # chunks: up to this many visible, the wider scan below
SCAN_EF_SEARCH = 400  # hnsw.ef_search of that scan, at least (the service's default: 40)
SCAN_TUPLES = 200_000  # hnsw.max_scan_tuples of that scan (default 20,000)
SCAN_MEMORY = 8  # hnsw.scan_mem_multiplier of that scan (x work_mem; default 1)
COUNT_TTL_SECONDS = 300.0  # a plan choice: a stale count costs time or a little recall
MAX_COUNTS = 10_000  # remembered (tenant, model, principals) counts


def visible_chunks(readers: Readers) -> list[ColumnElement[bool]]:
    """Conditions on `Chunk` matching what `readers` may see (none for all documents)."""
    if readers.all_documents:
        return []
    unrestricted = Chunk.access == literal([], ARRAY(Text))
    if not readers.principals:
        return [unrestricted]
    listed = Chunk.access.overlap(literal(sorted(readers.principals), ARRAY(Text)))
    return [or_(unrestricted, listed)]


class VisibleCounts:
    """How many chunks a set of principals sees in a tenant (up to a bound), for a while: a
    plan choice, never a result, so a stale count costs time or a little recall, not access."""

    def __init__(self) -> None:
        self._counts: OrderedDict[tuple[str, str, frozenset[str]], tuple[int, float]] = (
            OrderedDict()
        )

    async def count(
        self, session: AsyncSession, *, tenant_id: str, model: str, readers: Readers
    ) -> int:
        key = (tenant_id, model, readers.principals)
        now = time.monotonic()
        if (found := self._counts.get(key)) is not None and found[1] > now:
            self._counts.move_to_end(key)
            return found[0]
        bounded = (
            select(literal(1))
            .where(Chunk.tenant_id == tenant_id, Chunk.embedding_model == model)
            .where(*visible_chunks(readers))
            .limit(SMALL_VISIBLE + 1)
            .subquery()
        )
        counted = int(await session.scalar(select(func.count()).select_from(bounded)) or 0)
        self._counts[key] = (counted, now + COUNT_TTL_SECONDS)
        self._counts.move_to_end(key)
        while len(self._counts) > MAX_COUNTS:
            self._counts.popitem(last=False)
        return counted


COUNTS = VisibleCounts()
WIDER_SCAN = text(
    "select set_config('hnsw.ef_search', greatest(current_setting('hnsw.ef_search')::int,"
    " :ef)::text, true), set_config('hnsw.max_scan_tuples', :tuples, true),"
    " set_config('hnsw.scan_mem_multiplier', :memory, true)"
)


async def visible_scope(
    session: AsyncSession, *, tenant_id: str, model: str, widen: bool
) -> list[ColumnElement[bool]]:
    """The access condition for the planner, in the session's tenant transaction; with
    `widen`, for a caller who sees at most `SMALL_VISIBLE` chunks, the HNSW scans of the rest
    of the transaction look wider and further. Callers who see every document are left as
    they were.

    When the tenant holds no unrestricted chunk (one probe of the partial index, never
    cached: a condition that left out rows the caller may see would lose results), the
    condition is the overlap with the caller's principals alone, which the planner estimates
    from the column's statistics instead of the table-wide share of `access = '{}'`."""
    readers = readers_of(session.info)
    if readers.all_documents:
        return []
    if widen:
        visible = await COUNTS.count(session, tenant_id=tenant_id, model=model, readers=readers)
        if visible <= SMALL_VISIBLE:
            await session.execute(
                WIDER_SCAN,
                {"ef": SCAN_EF_SEARCH, "tuples": str(SCAN_TUPLES), "memory": str(SCAN_MEMORY)},
            )
    unrestricted = select(Chunk.id).where(Chunk.tenant_id == tenant_id, Chunk.access == [])
    if readers.principals and not await session.scalar(select(unrestricted.exists())):
        return [Chunk.access.overlap(literal(sorted(readers.principals), ARRAY(Text)))]
    return visible_chunks(readers)
