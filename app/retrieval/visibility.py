"""The access condition of row-level security, written again where the planner can use it,
and the exact plan for callers who see only a small part of a large tenant.

The policies on chunks (migrations 0008, 0009) read the caller's principals from a
transaction-local setting, which the planner cannot look into. Stated again as constants, like
the tenant beside RLS, the condition lets the planner estimate the visible rows.

Every arm of the policy's access condition is an index condition (0009): `access = '{}'` on
the partial btree of a tenant's unrestricted chunks, `access && principals` on the GIN index.
So a small visible set can be read exactly, from the posting lists of the caller's
principals, in a few milliseconds: at 100k chunks a caller who sees 1% of a 100,000-chunk
tenant gets its exact top-k in ~3 ms, where the HNSW graph, walked past the other 99% by an
iterative scan, took ~80 ms for ~0.8 recall. In a tenant with access lists (one probe per five
minutes; in a tenant without, every member sees it all and nothing is counted), for a caller
who sees at most `SMALL_VISIBLE` chunks of the tenant (a bounded count through the same
policies, kept five minutes per tenant, model and set of principals: a plan choice, never a
result; both remembered by the sessions' state, app/db/state.py) the vector statements order
by an expression no index answers (nearest.py `nearest_rows`), which leaves the planner that
plan. Larger visible sets walk the HNSW index as every other search does. Measured in
bench/access_bench.py (docs/BENCHMARKS.md, "Search under document permissions").
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Text, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk
from app.db.state import PlanMemory, plans_of, plans_of_sessions
from app.db.tenancy import (
    SessionMaker,
    readers_of,
    readers_of_sessions,
    reading_as,
    tenant_transaction,
)
from app.permissions import EVERY_DOCUMENT, Readers
from app.retrieval.planning import EXACT_PLAN

# Chunks: up to this many visible, vector search is exact (~3 us a row: 3 ms for 1,000 rows,
# 15 ms for 5,000, where an HNSW walk filtered to 10% of a 100k-row graph takes ~18 ms).
SMALL_VISIBLE = 5_000


@dataclass(frozen=True, slots=True)
class Scope:
    """What a search adds for the caller's access: `conditions` on `Chunk` for the planner
    (RLS enforces them anyway), and whether its vector candidates are computed exactly."""

    conditions: list[ColumnElement[bool]]
    exact: bool = False


def visible_chunks(readers: Readers) -> list[ColumnElement[bool]]:
    """Conditions on `Chunk` matching what `readers` may see (none for all documents)."""
    if readers.all_documents:
        return []
    unrestricted = Chunk.access == literal([], ARRAY(Text))
    if not readers.principals:
        return [unrestricted]
    listed = Chunk.access.overlap(literal(sorted(readers.principals), ARRAY(Text)))
    return [or_(unrestricted, listed)]


async def visible_count(
    session: AsyncSession, *, tenant_id: str, model: str, readers: Readers
) -> int:
    """How many chunks of `model` `readers` see in the tenant, up to `SMALL_VISIBLE` + 1;
    remembered a while by the session's state: a plan choice, never a result, so a stale count
    costs time or a little recall, not access."""
    visible = plans_of(session.info).visible
    key = (tenant_id, model, readers.principals)
    if (known := visible.get(key)) is not None:
        return known
    bounded = (
        select(literal(1))
        .where(Chunk.tenant_id == tenant_id, Chunk.embedding_model == model)
        .where(*visible_chunks(readers))
        .limit(SMALL_VISIBLE + 1)
        .subquery()
    )
    counted = int(await session.scalar(select(func.count()).select_from(bounded)) or 0)
    return visible.put(key, counted)


LISTED_TENANT = text(
    "select exists (select 1 from documents where tenant_id = :tenant and access <> '{}')"
)


async def _listed(sessions: SessionMaker, plans: PlanMemory, tenant_id: str) -> bool:
    """Whether the tenant has any document with an access list, remembered a while: a plan
    choice. In a tenant without lists every member sees the whole tenant, and the planner's
    usual plans (the btree for a small tenant, else an HNSW index) need no count of anybody's
    chunks. One probe of a partial index, as the service itself (every document: the caller
    may not see the lists it asks about, and is never told)."""
    if (known := plans.listed.get(tenant_id)) is not None:
        return known
    async with tenant_transaction(reading_as(sessions, EVERY_DOCUMENT), tenant_id) as session:
        listed = bool(await session.scalar(LISTED_TENANT, {"tenant": tenant_id}))
    return plans.listed.put(tenant_id, listed)


async def access_lists_matter(sessions: SessionMaker, tenant_id: str) -> bool:
    """Whether the readers of `sessions` might see only part of the tenant: they do not see
    every document, and the tenant has documents with access lists."""
    if readers_of_sessions(sessions).all_documents:
        return False
    return await _listed(sessions, plans_of_sessions(sessions), tenant_id)


def known_plan(plans: PlanMemory, readers: Readers, *, tenant_id: str, model: str) -> bool | None:
    """Whether a vector search of `readers` is exact (True) or walks the HNSW index (False),
    when that is known without a query: they see every document, the tenant has no access
    lists, or a fresh count says how many chunks they see. None: a probe or a count is needed
    (`access_lists_matter`, `visible_scope`). Known plans take the vector search's direct path
    (no ORM session)."""
    if readers.all_documents:
        return False
    listed = plans.listed.get(tenant_id)
    if not listed:
        return listed
    visible = plans.visible.get((tenant_id, model, readers.principals))
    return None if visible is None else visible <= SMALL_VISIBLE


async def direct_plan(sessions: SessionMaker, *, tenant_id: str, model: str) -> bool | None:
    """`known_plan` for the readers of `sessions`, after the probe for access lists when the
    tenant's answer is not remembered (a tenant without lists needs no count, so its plan is
    then known). None: the caller must be counted first (`visible_scope`)."""
    readers, plans = readers_of_sessions(sessions), plans_of_sessions(sessions)
    plan = known_plan(plans, readers, tenant_id=tenant_id, model=model)
    if plan is None:
        await _listed(sessions, plans, tenant_id)  # remembered: a query at most
        plan = known_plan(plans, readers, tenant_id=tenant_id, model=model)
    return plan


async def visible_scope(
    session: AsyncSession, *, tenant_id: str, model: str, nearest: bool, listed: bool
) -> Scope:
    """The access condition for the planner, in the session's tenant transaction; with
    `nearest` (the search has a vector leg) in a tenant with access lists (`listed`, from
    `access_lists_matter`), exact vector candidates for a caller who sees at most
    `SMALL_VISIBLE` chunks. Callers who see every document are left as they were.

    When the tenant holds no unrestricted chunk (one probe of the partial index, never
    cached: a condition that left out rows the caller may see would lose results), the
    condition is the overlap with the caller's principals alone, which the planner estimates
    from the column's statistics instead of the table-wide share of `access = '{}'`."""
    readers = readers_of(session.info)
    if readers.all_documents:
        return Scope([])
    exact = False
    if nearest and listed:
        visible = await visible_count(session, tenant_id=tenant_id, model=model, readers=readers)
        exact = visible <= SMALL_VISIBLE
        if exact:  # as the direct path's exact plan (planning.py `search_settings`)
            await session.execute(EXACT_PLAN)
    unrestricted = select(Chunk.id).where(Chunk.tenant_id == tenant_id, Chunk.access == [])
    if readers.principals and not await session.scalar(select(unrestricted.exists())):
        overlap = Chunk.access.overlap(literal(sorted(readers.principals), ARRAY(Text)))
        return Scope([overlap], exact)
    return Scope(visible_chunks(readers), exact)
