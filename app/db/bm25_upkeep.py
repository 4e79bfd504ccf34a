"""Keeping a tenant's BM25 statistics and postings in step with its chunks, in the writer's
own transaction: every path that adds or removes chunks calls `add_documents` after writing
them or `remove_documents` before deleting them (directly or by a cascade from documents).

Each call is three set-based statements, the tenant named in every WHERE, so on Citus each
runs on the tenant's shard as one statement (chunks and the `bm25_*` tables are co-located):
1. `bm25_corpus` (N and the total length) first: its row of the tenant is locked until the
   transaction ends, so concurrent writers of one tenant queue there instead of deadlocking
   on term rows;
2. `bm25_terms` (df per lexeme), in lexeme order;
3. `bm25_postings` (tf and the chunk's length per lexeme and chunk).
A lexeme whose df falls to 0 keeps its row (df 0 never scores); `rag bm25 rebuild` drops them.
`rag bm25 verify` recounts everything and compares (app/db/bm25.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

# Chunk c's keyword terms and its length in tokens: its content's and those of its heading
# (its document's title and section path, migration 0015); a chunk without a heading vector
# counts its content alone. Every count below and in bm25.py uses these two.
TERMS = "(c.search_vector || coalesce(c.heading_vector, ''::tsvector))"
LENGTH = "(c.search_length + coalesce(rag_tsvector_tokens(c.heading_vector), 0))"

# The chunks of some of the tenant's documents, and their lexemes.
CHUNKS_OF = "chunks c WHERE c.tenant_id = :tenant AND c.document_id = ANY(:documents)"
LEXEMES_OF = (
    f"chunks c, unnest(tsvector_to_array({TERMS})) AS l(lexeme)"
    " WHERE c.tenant_id = :tenant AND c.document_id = ANY(:documents)"
)

ADD = (
    text(
        "INSERT INTO bm25_corpus AS b (tenant_id, chunks, tokens)"
        f" SELECT c.tenant_id, count(*), sum({LENGTH}) FROM {CHUNKS_OF}"
        " GROUP BY c.tenant_id"
        " ON CONFLICT (tenant_id) DO UPDATE"
        " SET chunks = b.chunks + excluded.chunks, tokens = b.tokens + excluded.tokens"
    ),
    text(
        "INSERT INTO bm25_terms AS t (tenant_id, lexeme, df)"
        f" SELECT c.tenant_id, l.lexeme, count(*) FROM {LEXEMES_OF}"
        " GROUP BY c.tenant_id, l.lexeme ORDER BY c.tenant_id, l.lexeme"
        " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = t.df + excluded.df"
    ),
    text(
        "INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl)"
        " SELECT c.tenant_id, l.lexeme, c.id, coalesce(array_length(l.positions, 1), 1),"
        f" {LENGTH} FROM chunks c, unnest({TERMS}) AS l"
        " WHERE c.tenant_id = :tenant AND c.document_id = ANY(:documents)"
    ),
)

REMOVE = (
    text(
        "UPDATE bm25_corpus b SET chunks = b.chunks - d.chunks, tokens = b.tokens - d.tokens"
        f" FROM (SELECT c.tenant_id, count(*) AS chunks, sum({LENGTH}) AS tokens"
        f" FROM {CHUNKS_OF} GROUP BY c.tenant_id) d"
        " WHERE b.tenant_id = :tenant AND b.tenant_id = d.tenant_id"
    ),
    text(
        "UPDATE bm25_terms t SET df = t.df - d.df"
        f" FROM (SELECT c.tenant_id, l.lexeme, count(*) AS df FROM {LEXEMES_OF}"
        " GROUP BY c.tenant_id, l.lexeme) d"
        " WHERE t.tenant_id = :tenant AND t.tenant_id = d.tenant_id AND t.lexeme = d.lexeme"
    ),
    text(
        "DELETE FROM bm25_postings p"
        f" USING (SELECT c.tenant_id, l.lexeme, c.id FROM {LEXEMES_OF}) d"
        " WHERE p.tenant_id = :tenant AND p.tenant_id = d.tenant_id"
        " AND p.lexeme = d.lexeme AND p.chunk_id = d.id"
    ),
)

FORGET_TENANT = (
    text("DELETE FROM bm25_postings WHERE tenant_id = :tenant"),
    text("DELETE FROM bm25_terms WHERE tenant_id = :tenant"),
    text("DELETE FROM bm25_corpus WHERE tenant_id = :tenant"),
)


async def add_documents(
    session: AsyncSession, tenant_id: str, document_ids: Sequence[uuid.UUID]
) -> None:
    """Count the chunks these documents hold now (just written) into the tenant's BM25
    statistics and postings."""
    await _run(session, ADD, tenant_id, document_ids)


async def remove_documents(
    session: AsyncSession, tenant_id: str, document_ids: Sequence[uuid.UUID]
) -> None:
    """Take the chunks these documents hold now (about to be deleted) out of them."""
    await _run(session, REMOVE, tenant_id, document_ids)


async def forget_tenant(session: AsyncSession, tenant_id: str) -> None:
    """Delete the tenant's statistics and postings (the tenant is being deleted)."""
    for statement in FORGET_TENANT:
        await session.execute(statement, {"tenant": tenant_id})


async def _run(
    session: AsyncSession,
    statements: Sequence[TextClause],
    tenant_id: str,
    document_ids: Sequence[uuid.UUID],
) -> None:
    if not document_ids:
        return
    params = {"tenant": tenant_id, "documents": list(document_ids)}
    for statement in statements:
        await session.execute(statement, params)
