"""Keyword ranking: Okapi BM25 with per-tenant statistics, computed in PostgreSQL.

    score(d, q) = sum over the query's lexemes t that d contains of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          (Lucene's, never negative)

N, avgdl and df(t) are the tenant's own (`bm25_corpus`, `bm25_terms`: kept exact by triggers
on `chunks`, under RLS; migration 0003): another tenant's vocabulary never changes a score.
tf(t, d) is the number of positions of t in the chunk's tsvector, |d| its `search_length` (all
positions). Documents and queries go through the same analyser, PostgreSQL's `english` text
search configuration (Snowball stemming, its stop words).

One statement: the query's lexemes with their IDF (a few primary-key lookups), the candidates
from the GIN index (`search_vector @@ tsquery`: the tenant's chunks containing any query term,
or what the user's operators ask for), and for each candidate tf of the query's lexemes only:
`setweight` marks them in the chunk's tsvector and `ts_filter` keeps them, two C functions
instead of unnesting every lexeme of every candidate.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Float, Select, Text, cast, func, literal, select, text
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Bm25Corpus, Bm25Term, Chunk

TEXT_SEARCH_CONFIG = "english"
# Quotes, OR in capitals, or a leading minus: the user wrote web-search syntax, so it is taken
# as written. A lowercase "or" is prose ("blood or cerebrospinal fluid"): taken as an operator
# it would AND every other word of a natural-language question and match nothing.
EXPLICIT_OPERATORS = re.compile(r'"|\bOR\b|(?:^|\s)-\w')
WORD = re.compile(r"\w+")
# MaxScore (see bm25_ranked): the first candidates come from the rarest terms, until their
# postings reach this many per wanted result; each widening doubles them.
CANDIDATES_PER_RESULT = 4


@dataclass(frozen=True, slots=True)
class Bm25Params:
    k1: float = 1.2
    b: float = 0.4
    max_terms: int = 32


def bounded_query(query: str, max_terms: int) -> str:
    """At most `max_terms` words: the text up to the end of the last word kept. Each term
    costs an index lookup and a posting list, so a pasted page must not become a query of
    thousands of them."""
    words = list(WORD.finditer(query))
    if len(words) <= max_terms:
        return query
    cut = query[: words[max_terms - 1].end()]
    return cut + '"' if cut.count('"') % 2 else cut  # an opened phrase is closed


def keyword_query(query: str) -> ColumnElement[Any]:
    """websearch_to_tsquery; a query without operators matches ANY of its words (BM25 ranks
    chunks with more and rarer of them first) instead of requiring all of them."""
    parsed = func.websearch_to_tsquery(TEXT_SEARCH_CONFIG, query)
    if EXPLICIT_OPERATORS.search(query):
        return parsed
    return cast(func.replace(cast(parsed, Text), " & ", " | "), TSQUERY)


def query_lexemes(query: str) -> ColumnElement[Any]:
    """The query's distinct lexemes, by the analyser the chunks went through."""
    return func.tsvector_to_array(func.to_tsvector(TEXT_SEARCH_CONFIG, query))


@dataclass(frozen=True, slots=True)
class QueryTerm:
    lexeme: str
    df: int
    idf: float


@dataclass(frozen=True, slots=True)
class QueryStats:
    terms: list[QueryTerm]  # rarest first; only lexemes the tenant's chunks contain
    avgdl: float


async def query_stats(session: AsyncSession, tenant_id: str, query: str) -> QueryStats:
    """The query's lexemes with their df and IDF in the tenant, and the tenant's avgdl: a
    few primary-key lookups."""
    rows = (
        await session.execute(
            select(Bm25Term.lexeme, Bm25Term.df, Bm25Corpus.chunks, Bm25Corpus.tokens)
            .join(Bm25Corpus, Bm25Corpus.tenant_id == Bm25Term.tenant_id)
            .where(
                Bm25Term.tenant_id == tenant_id,
                Bm25Term.lexeme == func.any(query_lexemes(query)),
                Bm25Term.df > 0,
            )
        )
    ).all()
    if not rows:
        return QueryStats([], 1.0)
    n, tokens = rows[0].chunks, rows[0].tokens
    terms = [
        QueryTerm(row.lexeme, row.df, math.log(1.0 + (n - row.df + 0.5) / (row.df + 0.5)))
        for row in rows
    ]
    terms.sort(key=lambda t: (t.df, t.lexeme))
    return QueryStats(terms, tokens / max(n, 1) or 1.0)


@dataclass(frozen=True, slots=True)
class Bm25Ranking:
    """The best chunks by BM25, best first, with what scored them."""

    ranked: list[tuple[uuid.UUID, float]]
    query: str  # as bounded
    stats: QueryStats
    params: Bm25Params

    @property
    def ceiling(self) -> float:
        """The largest score any chunk can reach for this query in this tenant."""
        return sum(t.idf for t in self.stats.terms) * (self.params.k1 + 1.0)


async def bm25_ranked(
    session: AsyncSession,
    *,
    tenant_id: str,
    query: str,
    where: Sequence[ColumnElement[bool]],
    fetch: int,
    params: Bm25Params,
) -> Bm25Ranking:
    """The best `fetch` chunks matching `query` by BM25, best first.

    Exact top-`fetch` with MaxScore pruning: a term adds at most idf * (k1 + 1) to any
    chunk's score. The candidates are first only the chunks holding one of the rarest terms
    (the "essential" ones: at least one, until their postings reach 4 x `fetch`); every
    candidate is scored on all the query's terms. If the `fetch`-th score beats the sum of
    the other terms' bounds, no chunk without an essential term can enter the top: done.
    Otherwise more terms become essential (their postings at least doubled) and the statement
    runs again, at worst with all terms, i.e. every match.
    """
    query = bounded_query(query, params.max_terms)
    stats = await query_stats(session, tenant_id, query)
    if not stats.terms:
        return Bm25Ranking([], query, stats, params)
    bounds = [t.idf * (params.k1 + 1.0) for t in stats.terms]
    dfs = [t.df for t in stats.terms]
    essential = _widened(dfs, 0, CANDIDATES_PER_RESULT * fetch)
    while True:
        stmt = bm25_statement(query, stats, essential, where, fetch, params)
        rows = [(row.id, float(row.score)) for row in await session.execute(stmt)]
        rest = sum(bounds[essential:])
        if essential == len(stats.terms) or (len(rows) >= fetch and rows[-1][1] > rest):
            return Bm25Ranking(rows, query, stats, params)
        essential = _widened(dfs, essential, 2 * sum(dfs[:essential]))


async def bm25_scores(
    session: AsyncSession, ranking: Bm25Ranking, chunk_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, float]:
    """The BM25 scores of given chunks for the ranking's query (0 for a chunk holding none of
    its terms, or not matching its operators): hybrid search scores the vector leg's chunks
    that the keyword leg did not return."""
    if not chunk_ids or not ranking.stats.terms:
        return dict.fromkeys(chunk_ids, 0.0)
    terms = len(ranking.stats.terms)
    stmt = bm25_statement(
        ranking.query,
        ranking.stats,
        terms,
        [Chunk.id.in_(list(chunk_ids))],
        len(chunk_ids),
        ranking.params,
    )
    scored = {row.id: float(row.score) for row in await session.execute(stmt)}
    return {chunk_id: scored.get(chunk_id, 0.0) for chunk_id in chunk_ids}


def _widened(dfs: Sequence[int], essential: int, postings: int) -> int:
    """More essential terms (rarest first): at least one more, until their df sum reaches
    `postings`."""
    essential += 1
    while essential < len(dfs) and sum(dfs[:essential]) < postings:
        essential += 1
    return min(essential, len(dfs))


def bm25_statement(
    query: str,
    stats: QueryStats,
    essential: int,
    where: Sequence[ColumnElement[bool]],
    fetch: int,
    params: Bm25Params,
) -> Select[Any]:
    """Score the chunks holding one of the first `essential` terms (and matching the query's
    operators, if it has any) on all of `stats.terms`; the best `fetch`."""
    lexemes = [t.lexeme for t in stats.terms]
    terms = (
        func.unnest(
            literal(lexemes, ARRAY(Text)), literal([t.idf for t in stats.terms], ARRAY(Float))
        )
        .table_valued("lexeme", "idf")
        .render_derived(name="terms", with_types=False)
    )
    any_essential = " | ".join(_quoted(lexeme) for lexeme in lexemes[:essential])
    conditions = [Chunk.search_vector.op("@@")(cast(literal(any_essential), TSQUERY)), *where]
    if EXPLICIT_OPERATORS.search(query):
        conditions.append(Chunk.search_vector.op("@@")(keyword_query(query)))
    candidates = (
        select(Chunk.id, Chunk.search_vector, Chunk.search_length)
        .where(*conditions)
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    marked = func.setweight(
        candidates.c.search_vector, text("'A'::\"char\""), literal(lexemes, ARRAY(Text))
    )
    kept = func.ts_filter(marked, text("'{a}'::\"char\"[]"))
    matched = func.unnest(kept).table_valued("lexeme", "positions", "weights").lateral("matched")
    tf = cast(func.coalesce(func.array_length(matched.c.positions, 1), 1), Float)
    norm = params.k1 * (1.0 - params.b + params.b * candidates.c.search_length / stats.avgdl)
    score = func.sum(terms.c.idf * tf * (params.k1 + 1.0) / (tf + norm)).label("score")
    return (
        select(candidates.c.id, score)
        .select_from(candidates)
        .join(matched, literal(True))
        .join(terms, terms.c.lexeme == matched.c.lexeme)
        .group_by(candidates.c.id)
        .order_by(score.desc(), candidates.c.id)
        .limit(fetch)
    )


def _quoted(lexeme: str) -> str:
    """A lexeme as a tsquery operand, taken as is (already normalised by the analyser)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
