"""Keyword ranking: Okapi BM25 with per-tenant statistics, computed in PostgreSQL.

    score(d, q) = sum over the query's lexemes t that d contains of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          (Lucene's, never negative)

N, avgdl and df(t) are the tenant's own (`bm25_corpus`, `bm25_terms`: kept exact by triggers
on `chunks`, under RLS; migration 0003): another tenant's vocabulary never changes a score.
tf(t, d) is the number of positions of t in the chunk's keyword terms, |d| their count: the
terms are those of its content and of its heading, the document's title and the chunk's section
path (migration 0015), as the embedded text has them. Documents and queries go through the
same analyser, PostgreSQL's `english` text search configuration (Snowball stemming, its stop
words).

Term at a time over postings (migration 0007: one row per tenant, lexeme and chunk with tf and
|d|, the primary key carrying both): one index-only range scan per query term, scores summed
per chunk in a hash aggregate, then the chunks in score order are checked against the search's
filters (and RLS) one by one until `fetch` of them pass, so a chunk that will not be returned
is never read. With narrowing filters (collections, source types, documents, metadata) the
chunks that pass come first instead, and only their postings count. Work is proportional to
the query terms' postings: no chunk's tsvector is read unless the query has operators.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Subquery,
    Text,
    any_,
    cast,
    func,
    literal,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import Grouping
from sqlalchemy.types import TypeEngine

from app.db.models import KEYWORD_TERMS, Bm25Corpus, Bm25Posting, Bm25Term, Chunk

TEXT_SEARCH_CONFIG = "english"
# Quotes, OR in capitals, or a leading minus: the user wrote web-search syntax, so it is taken
# as written. A lowercase "or" is prose ("blood or cerebrospinal fluid"): taken as an operator
# it would AND every other word of a natural-language question and match nothing.
EXPLICIT_OPERATORS = re.compile(r'"|\bOR\b|(?:^|\s)-\w')
WORD = re.compile(r"\w+")
# Unfiltered keyword search checks the best WINDOW_PER_RESULT x fetch chunks first.
WINDOW_PER_RESULT = 4


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


def query_lexemes(query: Any) -> ColumnElement[Any]:
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
    return stats_of((await session.execute(stats_statement(tenant_id, query))).all())


def stats_statement(tenant: Any, query: Any) -> Select[str, int, int, int]:
    return (
        select(Bm25Term.lexeme, Bm25Term.df, Bm25Corpus.chunks, Bm25Corpus.tokens)
        .join(Bm25Corpus, Bm25Corpus.tenant_id == Bm25Term.tenant_id)
        .where(
            Bm25Term.tenant_id == tenant,
            Bm25Term.lexeme == func.any(query_lexemes(query)),
            Bm25Term.df > 0,
        )
    )


def stats_of(rows: Sequence[Any]) -> QueryStats:
    """`QueryStats` from the rows of the statistics statement (lexeme, df, chunks, tokens)."""
    if not rows:
        return QueryStats([], 1.0)
    n, tokens = rows[0][2], rows[0][3]
    terms = [
        QueryTerm(lexeme, df, math.log(1.0 + (n - df + 0.5) / (df + 0.5)))
        for lexeme, df, _n, _tokens in rows
    ]
    terms.sort(key=lambda t: (t.df, t.lexeme))
    return QueryStats(terms, tokens / max(n, 1) or 1.0)


@dataclass(frozen=True, slots=True)
class Bm25Ranking:
    """The best chunks by BM25, best first, with what scored them."""

    ranked: list[tuple[uuid.UUID, float]]
    tenant_id: str
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
    narrowed: bool = False,
) -> Bm25Ranking:
    """The best `fetch` chunks matching `query` by BM25 (exact), best first; `where` are the
    search's conditions on chunks, `narrowed` says they filter beyond tenant and model."""
    query = bounded_query(query, params.max_terms)
    stats = await query_stats(session, tenant_id, query)
    if not stats.terms:
        return Bm25Ranking([], tenant_id, query, stats, params)
    conditions = [*where, *operators(query)]
    scored = _scored(tenant_id, stats, params)
    if narrowed:
        passing = select(Chunk.id).where(*conditions)
        scored = scored.where(Bm25Posting.chunk_id.in_(passing))
        stmt = _best(scored.subquery("scored"), fetch)
        rows = [(row.id, float(row.score)) for row in await session.execute(stmt)]
        return Bm25Ranking(rows, tenant_id, query, stats, params)

    async def best(window: int | None) -> list[tuple[uuid.UUID, float]]:
        stmt = best_passing(scored.subquery("scored"), conditions, fetch, window=window)
        return [(row.id, float(row.score)) for row in await session.execute(stmt)]

    return Bm25Ranking(await windowed(best, fetch, stats), tenant_id, query, stats, params)


async def windowed(
    best: Callable[[int | None], Awaitable[list[tuple[uuid.UUID, float]]]],
    fetch: int,
    stats: QueryStats,
) -> list[tuple[uuid.UUID, float]]:
    """The best WINDOW_PER_RESULT x fetch by a top-N sort first; the whole order only when too
    few of those pass (a filter on the model during a reindex, say) and there are more."""
    window = WINDOW_PER_RESULT * fetch
    postings = sum(t.df for t in stats.terms)  # at least as many as the chunks scored
    rows = await best(window)
    if len(rows) < fetch and postings > window:
        rows = await best(None)
    return rows


async def bm25_scores(
    session: AsyncSession, ranking: Bm25Ranking, chunk_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, float]:
    """The BM25 scores of given chunks for the ranking's query (0 for a chunk holding none of
    its terms, or not matching its operators): hybrid search scores the vector leg's chunks
    that the keyword leg did not return."""
    if not chunk_ids or not ranking.stats.terms:
        return dict.fromkeys(chunk_ids, 0.0)
    scored = _scored(ranking.tenant_id, ranking.stats, ranking.params).where(
        Bm25Posting.chunk_id.in_(list(chunk_ids))
    )
    if matching := operators(ranking.query):
        scored = scored.where(Bm25Posting.chunk_id.in_(select(Chunk.id).where(*matching)))
    found = {row.chunk_id: float(row.score) for row in await session.execute(scored)}
    return {chunk_id: found.get(chunk_id, 0.0) for chunk_id in chunk_ids}


def operators(query: str) -> list[ColumnElement[bool]]:
    """A query with web-search operators must also match them (phrases, exclusions, OR)."""
    if EXPLICIT_OPERATORS.search(query):
        return [KEYWORD_TERMS.op("@@")(keyword_query(query))]
    return []


# The numbers a BM25 statement is sent (float8: numeric arithmetic would cost more than the
# scan), by name and type.
WEIGHTS: dict[str, TypeEngine[Any]] = {
    "lexemes": ARRAY(Text),
    "idfs": ARRAY(Float),
    "k1_plus_1": Float(),
    "norm_base": Float(),
    "norm_per_token": Float(),
}


def weights_of(stats: QueryStats, params: Bm25Params) -> dict[str, Any]:
    """The query's lexemes with their IDFs and the constants of the BM25 formula."""
    return {
        "lexemes": [t.lexeme for t in stats.terms],
        "idfs": [t.idf for t in stats.terms],
        "k1_plus_1": params.k1 + 1.0,
        "norm_base": params.k1 * (1.0 - params.b),
        "norm_per_token": params.k1 * params.b / stats.avgdl,
    }


def _scored(tenant_id: str, stats: QueryStats, params: Bm25Params) -> Select[Any]:
    """`scoring` with this query's numbers."""
    values = weights_of(stats, params)
    return scoring(tenant_id, {name: literal(values[name], kind) for name, kind in WEIGHTS.items()})


def scoring(tenant: Any, weights: dict[str, Any], joined: Any | None = None) -> Select[Any]:
    """(chunk_id, score) of every chunk holding a query term, from the postings alone;
    `weights` are SQL values named as in WEIGHTS, from parameters or from the columns of the
    one-row `joined` (a statement that works them out itself)."""
    lexemes = weights["lexemes"]
    idf = Grouping(weights["idfs"])[func.array_position(lexemes, Bm25Posting.lexeme)]
    tf = cast(Bm25Posting.tf, Float)
    norm = weights["norm_base"] + weights["norm_per_token"] * cast(Bm25Posting.dl, Float)
    score: ColumnElement[Any] = func.sum(idf * tf * weights["k1_plus_1"] / (tf + norm), type_=Float)
    stmt = select(Bm25Posting.chunk_id, score.label("score"))
    if joined is not None:
        stmt = stmt.select_from(Bm25Posting).join(joined, true())
    return stmt.where(
        Bm25Posting.tenant_id == tenant, Bm25Posting.lexeme == any_(lexemes)
    ).group_by(Bm25Posting.chunk_id)


def _best(scored: Subquery, fetch: Any) -> Select[Any]:
    return (
        select(scored.c.chunk_id.label("id"), scored.c.score)
        .order_by(scored.c.score.desc(), scored.c.chunk_id)
        .limit(fetch)
    )


def best_passing(
    scored: Subquery, conditions: Sequence[ColumnElement[bool]], fetch: Any, *, window: Any | None
) -> Select[Any]:
    """The chunks in score order (the best `window` of them, or all), each checked by its
    primary key against `conditions` (a LATERAL probe: the executor stops once `fetch` have
    passed)."""
    ordered = (
        select(scored.c.chunk_id, scored.c.score)
        .order_by(scored.c.score.desc(), scored.c.chunk_id)
        .limit(window)
        .subquery("ordered")
    )
    passes = select(literal(1)).where(Chunk.id == ordered.c.chunk_id, *conditions).lateral()
    return (
        select(ordered.c.chunk_id.label("id"), ordered.c.score)
        .join(passes, true())
        .order_by(ordered.c.score.desc(), ordered.c.chunk_id)
        .limit(fetch)
    )
