"""BM25 statistics maintenance: recount a tenant's statistics and postings from its chunks,
compare them with the stored ones (`rag bm25 verify`), or replace them (`rag bm25 rebuild`).

Every write of chunks keeps `bm25_corpus`, `bm25_terms` and `bm25_postings` exact in its own
transaction (bm25_upkeep.py); this is the check, and the repair should anything (a restore of
one table, a manual edit, a write path that forgot) ever break them. Runs as the runtime role,
one tenant per transaction, under RLS. A rebuild first locks the tenant's `bm25_corpus` row,
the row every writer of that tenant locks first, so writers wait for it and then add their own
changes to the recount.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, insert, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.bm25_upkeep import LENGTH, TERMS
from app.db.models import Bm25Corpus, Bm25Posting, Bm25Term
from app.db.tenancy import SessionMaker, tenant_of, tenant_transaction


@dataclass(frozen=True, slots=True)
class Bm25Stats:
    chunks: int
    tokens: int
    terms: dict[str, int]  # lexeme -> df, df > 0 only


@dataclass(frozen=True, slots=True)
class Bm25Check:
    tenant_id: str
    chunks: int
    terms: int
    corpus_ok: bool
    wrong_terms: int  # lexemes whose stored df differs from the recount (missing ones too)
    wrong_postings: int = 0  # postings missing, extra or with another tf / dl

    @property
    def ok(self) -> bool:
        return self.corpus_ok and self.wrong_terms == 0 and self.wrong_postings == 0


async def recount(session: AsyncSession) -> Bm25Stats:
    """The statistics of the session tenant's chunks (those it can see), counted afresh."""
    chunks, tokens = (
        await session.execute(
            text(
                f"SELECT count(*), coalesce(sum({LENGTH}), 0) FROM chunks c"
                " WHERE c.tenant_id = :tenant"
            ),
            {"tenant": tenant_of(session)},
        )
    ).one()
    rows = await session.execute(
        text(
            f"SELECT l.lexeme, count(*) FROM chunks c, unnest(tsvector_to_array({TERMS}))"
            " AS l(lexeme) WHERE c.tenant_id = :tenant GROUP BY l.lexeme"
        ),
        {"tenant": tenant_of(session)},
    )
    return Bm25Stats(int(chunks), int(tokens), {lexeme: int(df) for lexeme, df in rows})


async def stored(session: AsyncSession) -> Bm25Stats:
    """The statistics kept for the session's tenant."""
    corpus = (await session.execute(select(Bm25Corpus.chunks, Bm25Corpus.tokens))).first()
    rows = await session.execute(select(Bm25Term.lexeme, Bm25Term.df).where(Bm25Term.df != 0))
    chunks, tokens = corpus if corpus is not None else (0, 0)
    return Bm25Stats(int(chunks), int(tokens), {lexeme: int(df) for lexeme, df in rows})


# The postings the tenant's chunks have (migration 0015's rule), and the count of rows on
# which they and the stored ones differ, both ways.
COUNTED_POSTINGS = f"""
  SELECT c.tenant_id, l.lexeme, c.id AS chunk_id,
         coalesce(array_length(l.positions, 1), 1)::smallint AS tf, {LENGTH} AS dl
  FROM chunks c, unnest({TERMS}) AS l WHERE c.tenant_id = :tenant
"""
POSTINGS_DIFFER = text(
    f"""
    WITH counted AS MATERIALIZED ({COUNTED_POSTINGS}),
    kept AS MATERIALIZED (
      SELECT tenant_id, lexeme, chunk_id, tf, dl FROM bm25_postings WHERE tenant_id = :tenant
    )
    SELECT (SELECT count(*) FROM (SELECT * FROM counted EXCEPT SELECT * FROM kept) a)
         + (SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM counted) b)
    """
)

REBUILD_POSTINGS = text(
    f"INSERT INTO bm25_postings (tenant_id, lexeme, chunk_id, tf, dl) {COUNTED_POSTINGS}"
)


async def verify(sessions: SessionMaker, tenant_id: str) -> Bm25Check:
    async with tenant_transaction(sessions, tenant_id) as session:
        counted, kept = await recount(session), await stored(session)
        wrong_postings = int(await session.scalar(POSTINGS_DIFFER, {"tenant": tenant_id}) or 0)
    wrong = sum(
        1
        for lexeme in counted.terms.keys() | kept.terms.keys()
        if counted.terms.get(lexeme) != kept.terms.get(lexeme)
    )
    return Bm25Check(
        tenant_id=tenant_id,
        chunks=counted.chunks,
        terms=len(counted.terms),
        corpus_ok=(counted.chunks, counted.tokens) == (kept.chunks, kept.tokens),
        wrong_terms=wrong,
        wrong_postings=wrong_postings,
    )


async def rebuild(sessions: SessionMaker, tenant_id: str) -> Bm25Check:
    """Replace the tenant's statistics by a recount (zero-df rows go too)."""
    async with tenant_transaction(sessions, tenant_id) as session:
        await session.execute(
            select(Bm25Corpus.tenant_id).where(Bm25Corpus.tenant_id == tenant_id).with_for_update()
        )
        counted = await recount(session)
        await session.execute(delete(Bm25Term).where(Bm25Term.tenant_id == tenant_id))
        corpus = pg_insert(Bm25Corpus).values(
            tenant_id=tenant_id, chunks=counted.chunks, tokens=counted.tokens
        )
        await session.execute(
            corpus.on_conflict_do_update(
                index_elements=[Bm25Corpus.tenant_id],
                set_={"chunks": counted.chunks, "tokens": counted.tokens},
            )
        )
        if counted.terms:
            await session.execute(
                insert(Bm25Term),
                [
                    {"tenant_id": tenant_id, "lexeme": lexeme, "df": df}
                    for lexeme, df in sorted(counted.terms.items())
                ],
            )
        await session.execute(delete(Bm25Posting).where(Bm25Posting.tenant_id == tenant_id))
        await session.execute(REBUILD_POSTINGS, {"tenant": tenant_id})
    return await verify(sessions, tenant_id)
