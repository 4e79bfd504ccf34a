"""The exact plan for a collection filter that keeps a small part of a large tenant, on the
direct path.

A vector search walks the HNSW index and passes the chunks its filters refuse (iterative
scans): to find 40 candidates in a collection of a tenant's chunks it passes about 40 / share
of them, and pgvector ends the walk after 20,000 tuples (`hnsw.max_scan_tuples`; a walk cut
short is read again exactly, nearest.py `cut_short`). The planner cannot tell how few chunks a
collection holds (its subquery is estimated by default), so the direct path counts the chunks
the collections keep of what the caller sees, up to `SMALL_COLLECTIONS` + 1 (one bounded read
of the collections' btree in a transaction of its own, remembered five minutes per tenant,
model, set of principals and collections: a plan choice, never a result), and reads at most
`SMALL_COLLECTIONS` of them exactly through that btree (`COLLECTION_PLAN`): measuring 1,000
chunks costs about what a walk passing 20 times as many to find 40 costs.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Integer, Text, bindparam, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY

from app.db.models import Chunk
from app.db.scoped import scoped_connection
from app.db.state import plans_of_sessions
from app.db.statements import compiled
from app.db.tenancy import SessionMaker, readers_of_sessions
from app.retrieval.filters import in_collections
from app.retrieval.planning import COLLECTION_PLAN

SMALL_COLLECTIONS = 1_000

_tenant = bindparam("tenant", type_=Text)
_COUNT = compiled(
    select(func.count()).select_from(
        select(literal(1))
        .where(
            Chunk.tenant_id == _tenant,
            Chunk.embedding_model == bindparam("model", type_=Text),
            in_collections(_tenant, bindparam("collections", type_=ARRAY(Text))),
        )
        .limit(bindparam("bound", type_=Integer))
        .subquery()
    )
)


async def small_collections(
    sessions: SessionMaker, *, tenant_id: str, model: str, names: Sequence[str]
) -> bool:
    """Whether the collections `names` hold at most `SMALL_COLLECTIONS` chunks of `model` that
    the readers of `sessions` see: remembered, or counted."""
    plans = plans_of_sessions(sessions)
    key = (tenant_id, model, readers_of_sessions(sessions).principals, tuple(names))
    if (counted := plans.collections.get(key)) is None:
        values = {
            "tenant": tenant_id,
            "model": model,
            "collections": list(names),
            "bound": SMALL_COLLECTIONS + 1,
        }
        async with scoped_connection(
            sessions, tenant_id, settings=COLLECTION_PLAN, read_only=True
        ) as connection:
            found = await connection.fetchval(_COUNT.sql, *_COUNT.arguments(values))
        counted = plans.collections.put(key, int(found or 0))
    return counted <= SMALL_COLLECTIONS
