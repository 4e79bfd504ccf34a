"""The legs of a keyword or hybrid search without filters, each in as few statements as they
can be: for the direct path (app/retrieval/search.py), on the driver connection of a scoped
transaction, every statement compiled once by SQLAlchemy with the tenant and the query as
parameters, or, for a tenant searched again and again, with the tenant written in
(`_tenant_legs`: a plan kept on one server, planning.py's `GENERIC_ON_ONE_SERVER`).

One statement works out the query's term statistics in the tenant (its lexemes' df, the
tenant's chunk and token counts, each lexeme's IDF) and ranks the chunks by BM25 with them.
For keyword search it also reads the best `top_k` as hits (hits.py's columns): the whole
search in one statement, as a vector search is. For hybrid it also finds the vector leg's
candidates and scores each leg's candidates by the other leg (the vector leg's chunks by BM25,
the keyword leg's by cosine), which weighted fusion needs; the fusion is Python's (legs.py,
fusion.py), then the hits are read as every search reads them. So a keyword search sends one
statement and a hybrid one two, where the session path sends four to six, each built per
request. The statistics and rankings come back as arrays: one row, or one per hit. The
statement also counts the tenant's chunks of the model up to `top_k`, from which a short answer
is explained (shortfall.py) without a transaction more.

The IDFs are computed in SQL for the ranking and again in Python from the same counts for
the ceiling of weighted fusion: the same IEEE operations in the same order (`ln` is C's `log`
on both sides), so the numbers agree, and tests/retrieval/test_direct_paths.py holds the
whole answer to the session path's.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy import (
    Float,
    Integer,
    Text,
    any_,
    bindparam,
    cast,
    func,
    literal,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID, aggregate_order_by

from app.db.models import Bm25Corpus, Bm25Posting, Bm25Term, Chunk
from app.db.statements import Compiled, compiled, with_constants
from app.retrieval.bm25 import (
    WINDOW_PER_RESULT,
    Bm25Ranking,
    QueryStats,
    best_passing,
    bounded_query,
    operators,
    scoring,
    stats_of,
    stats_statement,
)
from app.retrieval.hits import Hit, direct_scored_hits, hits_statement, in_order
from app.retrieval.nearest import candidates
from app.retrieval.requests import SearchMode, SearchRequest
from app.retrieval.shortfall import Shortfall, shortfall_of

Ranking = list[tuple[uuid.UUID, float]]


class DirectLegs:
    """`Legs` (legs.py) on the driver connection: everything comes from the first call."""

    def __init__(
        self,
        connection: asyncpg.Connection[Any],
        vector: list[float],
        request: SearchRequest,
        exact: bool,
        tenant_id: str,
        model: str,
        *,
        kept: bool = False,
    ) -> None:
        self.connection, self.vector, self.request = connection, vector, request
        self.exact, self.tenant_id, self.model = exact, tenant_id, model
        self.kept = kept  # the tenant's own statement (planning.py, `GENERIC_ON_ONE_SERVER`)
        self._read: dict[str, Any] = {}
        self._rows: list[dict[str, Any]] = []

    async def lexical(self) -> Bm25Ranking:
        request = self.request
        params = request.bm25
        query = bounded_query(request.query, params.max_terms)
        if operators(query):
            raise ValueError("a query with web-search operators goes the session's way")
        window = WINDOW_PER_RESULT * request.fetch
        values: dict[str, Any] = {
            "tenant": self.tenant_id,
            "model": self.model,
            "query": query,
            "fetch": request.fetch,
            "window": window,
            "top_k": request.top_k,
            "k1_plus_1": params.k1 + 1.0,
            "norm_base": params.k1 * (1.0 - params.b),
            "k1_b": params.k1 * params.b,
            "vector": self.vector,
            "threshold": request.threshold,
        }
        stats, ranked = await self._legs(self._statement(windowed=True), values)
        if len(ranked) < request.fetch and sum(t.df for t in stats.terms) > window:
            # too few of the best window passed (a filter on the model during a reindex, say)
            stats, ranked = await self._legs(self._statement(windowed=False), values)
        return Bm25Ranking(ranked, self.tenant_id, query, stats, params)

    def _statement(self, *, windowed: bool) -> Compiled:
        request = self.request
        shape = (request.mode is SearchMode.HYBRID, request.threshold is not None, self.exact)
        if not self.kept:
            return _compiled_legs(*shape, windowed=windowed)
        constants = (self.tenant_id, self.model, request.fetch, request.top_k)
        return _tenant_legs(*shape, windowed, *constants)

    async def nearest(self) -> Ranking:
        return _pairs(self._read, "nearest_ids", "similarities")

    async def cross(
        self,
        ranking: Bm25Ranking,
        bm25_of: Sequence[uuid.UUID],
        cosine_of: Sequence[uuid.UUID],
    ) -> tuple[dict[uuid.UUID, float], dict[uuid.UUID, float]]:
        bm25 = dict(_pairs(self._read, "bm25_ids", "bm25_scores"))
        cosine = dict(_pairs(self._read, "cosine_ids", "cosines"))
        return (
            {c: float(bm25.get(c, 0.0)) for c in bm25_of},
            {c: float(cosine[c]) for c in cosine_of if c in cosine},
        )

    def shortfall(self, returned: int) -> Shortfall | None:
        """Why fewer than `top_k` came back, from the count the legs statement made."""
        request = self.request
        if returned >= request.top_k:
            return None
        in_scope = int(self._read["in_scope"])
        return shortfall_of(
            in_scope > 0,
            in_scope,
            returned=returned,
            filtered=False,
            threshold=request.threshold,
            keyword=request.mode is SearchMode.KEYWORD,
            hybrid=request.mode is SearchMode.HYBRID,
        )

    async def hits(self, scored: Ranking) -> list[Hit]:
        """The hits of `scored` (the fused ranking's best): a keyword search's came with its
        ranking."""
        if self.request.mode is SearchMode.KEYWORD:
            rows = {row["id"]: row for row in self._rows if row["id"] is not None}
            return in_order(rows, scored, keep_order=False)
        return await direct_scored_hits(self.connection, self.vector, self.tenant_id, scored)

    async def _legs(
        self, statement: Compiled, values: dict[str, Any]
    ) -> tuple[QueryStats, Ranking]:
        records = await self.connection.fetch(statement.sql, *statement.arguments(values))
        # at least one row: the weights' (an aggregate without GROUP BY), hits beside it
        self._rows = statement.rows(records)
        self._read = self._rows[0]
        counts = [
            (lexeme, df, self._read["chunks"], self._read["tokens"])
            for lexeme, df in _pairs(self._read, "lexemes", "dfs")
        ]
        ranked = [(i, float(s)) for i, s in _pairs(self._read, "lexical_ids", "scores")]
        return stats_of(counts), ranked


def _pairs(row: dict[str, Any], first: str, second: str) -> list[tuple[Any, Any]]:
    return list(zip(row.get(first) or [], row.get(second) or [], strict=True))


@functools.cache
def _compiled_legs(hybrid: bool, with_threshold: bool, exact: bool, *, windowed: bool) -> Compiled:
    tenant = bindparam("tenant", type_=Text)
    scope = [Chunk.tenant_id == tenant, Chunk.embedding_model == bindparam("model", type_=Text)]
    weights = _weights(tenant, bindparam("query", type_=Text))
    scored = _scored(tenant, weights).subquery("scored")
    window = bindparam("window", type_=Integer) if windowed else None
    fetch = bindparam("fetch", type_=Integer)
    lexical = best_passing(scored, scope, fetch, window=window).cte("lexical")
    lexical = lexical.prefix_with("MATERIALIZED")
    best_first = (lexical.c.score.desc(), lexical.c.id)
    # the tenant's chunks of the model, counted up to top_k: why fewer came back, if they did
    scoped = select(Chunk.id).where(*scope).limit(bindparam("top_k", type_=Integer)).subquery()
    columns: list[Any] = [
        select(func.count()).select_from(scoped).scalar_subquery().label("in_scope"),
        weights.c.lexemes,
        weights.c.dfs,
        weights.c.chunks,
        weights.c.tokens,
        _array(lexical.c.id, best_first, "lexical_ids"),
        _array(lexical.c.score, best_first, "scores"),
    ]
    vector = bindparam("vector", type_=Chunk.embedding.type)
    if not hybrid:
        top = select(lexical).order_by(*best_first).limit(bindparam("top_k", type_=Integer))
        picking = [Chunk.tenant_id == tenant, Chunk.id.in_(select(top.subquery().c.id))]
        hits = hits_statement(vector, picking, tenant)
        found = hits.subquery("hits")
        return compiled(select(*columns, found).select_from(weights.outerjoin(found, true())))
    threshold = bindparam("threshold", type_=Float) if with_threshold else None
    near = candidates(vector, scope, fetch, threshold, exact).cte("nearest_leg")
    nearest_first = (near.c.distance, near.c.id)
    # each leg's candidates scored by the other (weighted fusion's cross scores), their ids
    # as one array: index conditions on the keys
    by_bm25 = _scored(tenant, weights).where(Bm25Posting.chunk_id == any_(_ids(near))).subquery()
    similarity = literal(1.0, Float) - Chunk.embedding.cosine_distance(vector)
    by_cosine = (
        select(Chunk.id, similarity.label("similarity"))
        .where(Chunk.tenant_id == tenant, Chunk.id == any_(_ids(lexical)))
        .subquery()
    )
    columns += [
        _array(near.c.id, nearest_first, "nearest_ids"),
        _array(near.c.similarity, nearest_first, "similarities"),
        _array(by_bm25.c.chunk_id, (by_bm25.c.chunk_id,), "bm25_ids"),
        _array(by_bm25.c.score, (by_bm25.c.chunk_id,), "bm25_scores"),
        _array(by_cosine.c.id, (by_cosine.c.id,), "cosine_ids"),
        _array(by_cosine.c.similarity, (by_cosine.c.id,), "cosines"),
    ]
    return compiled(select(*columns).select_from(weights))


@functools.lru_cache(maxsize=4096)
def _tenant_legs(
    hybrid: bool,
    with_threshold: bool,
    exact: bool,
    windowed: bool,
    tenant_id: str,
    model: str,
    fetch: int,
    top_k: int,
) -> Compiled:
    """The legs statement with the tenant, the model and the limits written in as constants: a
    statement of its own per tenant, whose generic plan sees them (planning.py); the query and
    its numbers stay parameters."""
    constants: dict[str, str | int] = {
        "tenant": tenant_id,
        "model": model,
        "fetch": fetch,
        "window": WINDOW_PER_RESULT * fetch,
        "top_k": top_k,
    }
    general = _compiled_legs(hybrid, with_threshold, exact, windowed=windowed)
    return with_constants(general, {k: v for k, v in constants.items() if k in general.names})


def _scored(tenant: Any, weights: Any) -> Any:
    """(chunk_id, score) by BM25 with the numbers the `weights` row worked out."""
    return scoring(
        tenant,
        {
            "lexemes": weights.c.lexemes,
            "idfs": weights.c.idfs,
            "k1_plus_1": bindparam("k1_plus_1", type_=Float),
            "norm_base": bindparam("norm_base", type_=Float),
            "norm_per_token": weights.c.norm_per_token,
        },
        joined=weights,
    )


def _weights(tenant: Any, query: Any) -> Any:
    """One row: the query's lexemes found in the tenant with their df and IDF, the tenant's
    chunk and token counts, and the per-token part of BM25's length norm (k1 b / avgdl)."""
    chunks, df = cast(Bm25Corpus.chunks, Float), cast(Bm25Term.df, Float)
    half = literal(0.5, Float)
    idf = func.ln(literal(1.0, Float) + (chunks - df + half) / (df + half))
    terms = (
        stats_statement(tenant, query)
        .add_columns(idf.label("idf"))
        .cte("terms")
        .prefix_with("MATERIALIZED")
    )
    n, tokens = func.max(terms.c.chunks), func.max(terms.c.tokens)
    avgdl = func.coalesce(
        func.nullif(cast(tokens, Float) / cast(func.greatest(n, 1), Float), literal(0.0, Float)),
        literal(1.0, Float),
    )
    return (
        select(
            func.array_agg(terms.c.lexeme).label("lexemes"),
            func.array_agg(terms.c.df).label("dfs"),
            func.array_agg(terms.c.idf).label("idfs"),
            n.label("chunks"),
            tokens.label("tokens"),
            (bindparam("k1_b", type_=Float) / avgdl).label("norm_per_token"),
        )
        .cte("weights")
        .prefix_with("MATERIALIZED")
    )


def _ids(leg: Any) -> Any:
    return cast(select(func.array_agg(leg.c.id)).scalar_subquery(), ARRAY(UUID))


def _array(column: Any, order: tuple[Any, ...], name: str) -> Any:
    return select(func.array_agg(aggregate_order_by(column, *order))).scalar_subquery().label(name)
