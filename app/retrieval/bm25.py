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

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Float, Text, cast, func, literal, select, text
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Bm25Corpus, Bm25Term, Chunk

TEXT_SEARCH_CONFIG = "english"
# Quotes, OR, or a leading minus: the user wrote web-search syntax, so it is taken as written.
EXPLICIT_OPERATORS = re.compile(r'"|\bor\b|(?:^|\s)-\w', re.IGNORECASE)
WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Bm25Params:
    k1: float = 0.9
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


async def bm25_ranked(
    session: AsyncSession,
    *,
    tenant_id: str,
    query: str,
    where: Sequence[ColumnElement[bool]],
    fetch: int,
    params: Bm25Params,
) -> list[tuple[uuid.UUID, float]]:
    """(chunk id, BM25 score) of the best `fetch` chunks matching `query`, best first."""
    query = bounded_query(query, params.max_terms)
    tsquery = keyword_query(query)
    corpus = (
        select(
            Bm25Corpus.chunks.label("n"),
            (cast(Bm25Corpus.tokens, Float) / func.greatest(Bm25Corpus.chunks, 1)).label("avgdl"),
        )
        .where(Bm25Corpus.tenant_id == tenant_id)
        .cte("corpus")
    )
    idf = func.ln(1.0 + (corpus.c.n - Bm25Term.df + 0.5) / (cast(Bm25Term.df, Float) + 0.5)).label(
        "idf"
    )
    terms = (
        select(Bm25Term.lexeme, idf)
        .join_from(Bm25Term, corpus, literal(True))
        .where(
            Bm25Term.tenant_id == tenant_id,
            Bm25Term.lexeme == func.any(query_lexemes(query)),
            Bm25Term.df > 0,
        )
        .cte("terms")
        .prefix_with("MATERIALIZED")
    )
    candidates = (
        select(Chunk.id, Chunk.search_vector, Chunk.search_length)
        .where(Chunk.search_vector.op("@@")(tsquery), *where)
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    marked = func.setweight(
        candidates.c.search_vector,
        text("'A'::\"char\""),
        select(func.array_agg(terms.c.lexeme)).scalar_subquery(),
    )
    kept = func.ts_filter(marked, text("'{a}'::\"char\"[]"))
    matched = func.unnest(kept).table_valued("lexeme", "positions", "weights").lateral("matched")
    tf = cast(func.coalesce(func.array_length(matched.c.positions, 1), 1), Float)
    norm = params.k1 * (1.0 - params.b + params.b * candidates.c.search_length / corpus.c.avgdl)
    score = func.sum(terms.c.idf * tf * (params.k1 + 1.0) / (tf + norm)).label("score")
    stmt = (
        select(candidates.c.id, score)
        .select_from(candidates)
        .join(matched, literal(True))
        .join(terms, terms.c.lexeme == matched.c.lexeme)
        .join(corpus, literal(True))
        .group_by(candidates.c.id)
        .order_by(score.desc(), candidates.c.id)
        .limit(fetch)
    )
    return [(row.id, float(row.score)) for row in await session.execute(stmt)]
