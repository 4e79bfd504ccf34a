"""The chunks around a search's hits, for a context that widens each hit to its surroundings.

A hit at chunk index i with `reach` n asks for the chunks i-n .. i+n of its document; the
chunks are read in one statement, in the caller's own transaction settings (row-level
security and the caller's readers apply, as they did to the hits: a neighbour of a visible
chunk is in the same document, so it is visible too). Neighbours carry no score.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import literal, select, tuple_

from app.db.models import Chunk
from app.db.tenancy import SessionMaker, tenant_transaction
from app.retrieval.hits import SOURCE_COLUMNS, Hit, hit_of, with_sources

MAX_REACH = 3


async def neighbours_of(
    sessions: SessionMaker, *, tenant_id: str, hits: Sequence[Hit], reach: int
) -> list[Hit]:
    """The chunks within `reach` of each hit in its document, the hits themselves left out;
    ordered by document and chunk index."""
    if reach < 1 or not hits:
        return []
    reach = min(reach, MAX_REACH)
    have = {(hit.document_id, hit.chunk_index) for hit in hits}
    wanted: set[tuple[uuid.UUID, int]] = set()
    for hit in hits:
        last = max(hit.total_chunks - 1, hit.chunk_index)
        for index in range(max(0, hit.chunk_index - reach), min(last, hit.chunk_index + reach) + 1):
            if (hit.document_id, index) not in have:
                wanted.add((hit.document_id, index))
    if not wanted:
        return []
    stmt = (
        with_sources(select(literal(0.0).label("similarity"), *SOURCE_COLUMNS))
        .where(Chunk.tenant_id == tenant_id)
        .where(tuple_(Chunk.document_id, Chunk.chunk_index).in_(sorted(wanted)))
        .order_by(Chunk.document_id, Chunk.chunk_index)
    )
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = (await session.execute(stmt)).all()
    return [hit_of(row._mapping, 0.0) for row in rows]
