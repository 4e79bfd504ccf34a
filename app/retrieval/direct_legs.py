"""A keyword or hybrid search without filters, or filtered by collections only, in one
statement, for the direct path (app/retrieval/search.py), on the driver connection of a scoped
transaction: compiled once by SQLAlchemy with the tenant, the query and the collections as
parameters, or, for a tenant searched again and again, with the tenant written in
(`_tenant_legs`: a plan kept on one server, planning.py's `GENERIC_ON_ONE_SERVER`). The session
path sends four to six statements, each built per request, and fuses in Python (legs.py,
fusion.py).

The statement works out the query's term statistics in the tenant (its lexemes' df, the
tenant's chunk and token counts, each lexeme's IDF) and ranks the chunks by BM25 with them. For
hybrid it also finds the vector leg's candidates and fuses the two legs as fusion.py does:
weighted (each leg's candidates scored by the other leg too: the vector leg's chunks by BM25,
the keyword leg's by cosine; the BM25 ceiling from the IDFs) or by reciprocal rank. Then it
reads the best `top_k` as hits (hits.py's columns), one row each, or one row of NULLs beside
the counts: the tenant's chunks of the model up to `top_k` (why a short answer is short,
shortfall.py, without a transaction more), the candidates that passed (`total_found`) and the
query's dfs (whether the window of the best postings was too narrow).

The fused scores are the same IEEE operations in the same order as fusion.py's (the ceiling
summed over the terms in bm25.py's `stats_of` order, `ln` C's `log` as Python's), so the numbers
agree, and tests/retrieval/test_direct_paths.py holds the whole answer to the session path's.
"""

from __future__ import annotations

import functools
from typing import Any

import asyncpg
from sqlalchemy import (
    Float,
    Integer,
    Text,
    any_,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    select,
    true,
    union,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID, aggregate_order_by

from app.db.models import Bm25Corpus, Bm25Posting, Bm25Term, Chunk
from app.db.statements import Compiled, compiled, with_constants
from app.retrieval.bm25 import (
    WINDOW_PER_RESULT,
    best_passing,
    bounded_query,
    operators,
    scoring,
    stats_statement,
)
from app.retrieval.filters import in_collections
from app.retrieval.fusion import FusionMethod
from app.retrieval.hits import Hit, hit_of, hits_statement, ordered
from app.retrieval.nearest import above_threshold, cut_short, exactly_after_cut, nearest_rows
from app.retrieval.requests import SearchMode, SearchRequest
from app.retrieval.shortfall import Shortfall, shortfall_of


class DirectLegs:
    """A keyword or hybrid search on the driver connection: its one statement (run again over
    every posting when too few of the best window passed), its hits, its total."""

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

    async def best(self) -> tuple[list[Hit], int]:
        """The hits (the best `top_k`, best first) and how many candidates passed: the
        keyword leg's, or the hybrid candidates fused."""
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
            "rrf_k": request.rrf_k,
            "vector_weight": request.vector_weight,
            "lexical_weight": 1.0 - request.vector_weight,  # fusion.py's, computed alike
            "collections": list(request.filters.collections or ()),
        }
        await self._legs(values, window)
        if request.mode is SearchMode.HYBRID and cut_short(
            int(self._read["measured"]), request, self.exact
        ):
            # a filter kept few of a large tenant's chunks: the vector leg read exactly
            self.exact = True
            await exactly_after_cut(self.connection)
            await self._legs(values, window)
        hits = ordered(
            [hit_of(row, float(row["hit_score"])) for row in self._rows if row["id"] is not None]
        )
        passed = (
            self._read["lexical"] if request.mode is SearchMode.KEYWORD else self._read["fused"]
        )
        return hits, int(passed)

    async def _legs(self, values: dict[str, Any], window: int) -> None:
        await self._run(self._statement(windowed=True), values)
        if self._read["lexical"] < self.request.fetch and sum(self._read["dfs"] or ()) > window:
            # too few of the best window passed (a filter on the model during a reindex, say)
            await self._run(self._statement(windowed=False), values)

    def _statement(self, *, windowed: bool) -> Compiled:
        request = self.request
        fusion = request.fusion if request.mode is SearchMode.HYBRID else None
        shape = (fusion, request.threshold is not None, self.exact, self._filtered)
        if not self.kept:
            return _compiled_legs(*shape, windowed=windowed)
        constants = (self.tenant_id, self.model, request.fetch, request.top_k)
        return _tenant_legs(*shape, windowed, *constants)

    @property
    def _filtered(self) -> bool:
        return self.request.filters.collections is not None

    def shortfall(self, returned: int) -> Shortfall | None:
        """Why fewer than `top_k` came back, from the count the legs statement made."""
        request = self.request
        if returned >= request.top_k:
            return None
        in_scope = int(self._read["in_scope"])
        any_rows = int(self._read["in_tenant"]) > 0 if self._filtered else in_scope > 0
        return shortfall_of(
            any_rows,
            in_scope,
            returned=returned,
            filtered=self._filtered,
            threshold=request.threshold,
            keyword=request.mode is SearchMode.KEYWORD,
            hybrid=request.mode is SearchMode.HYBRID,
        )

    async def _run(self, statement: Compiled, values: dict[str, Any]) -> None:
        records = await self.connection.fetch(statement.sql, *statement.arguments(values))
        # at least one row: the weights' (an aggregate without GROUP BY), hits beside it
        self._rows = statement.rows(records)
        self._read = self._rows[0]


@functools.cache
def _compiled_legs(
    fusion: FusionMethod | None,
    with_threshold: bool,
    exact: bool,
    filtered: bool = False,
    *,
    windowed: bool,
) -> Compiled:
    """The statement of a keyword search (`fusion` None) or of a hybrid one fused by `fusion`;
    `filtered`: in the collections named by the parameter `collections`."""
    tenant = bindparam("tenant", type_=Text)
    in_tenant = [Chunk.tenant_id == tenant, Chunk.embedding_model == bindparam("model", type_=Text)]
    scope = list(in_tenant)
    if filtered:
        scope.append(in_collections(tenant, bindparam("collections", type_=ARRAY(Text))))
    weights = _weights(tenant, bindparam("query", type_=Text))
    scored = _scored(tenant, weights).subquery("scored")
    window = bindparam("window", type_=Integer) if windowed else None
    fetch = bindparam("fetch", type_=Integer)
    top_k = bindparam("top_k", type_=Integer)
    lexical = best_passing(scored, scope, fetch, window=window).cte("lexical")
    lexical = lexical.prefix_with("MATERIALIZED")
    best_first = (lexical.c.score.desc(), lexical.c.id)
    # the chunks in scope counted up to top_k, and with a filter whether the tenant has any of
    # the model: why fewer came back, if they did
    scoped = select(Chunk.id).where(*scope).limit(top_k).subquery()
    columns: list[Any] = [
        _count(scoped, "in_scope"),
        weights.c.dfs,  # the query's postings: whether a window too narrow hid some
        _count(lexical, "lexical"),  # the keyword leg's candidates
    ]
    if filtered:
        columns.append(_count(select(Chunk.id).where(*in_tenant).limit(1).subquery(), "in_tenant"))
    vector = bindparam("vector", type_=Chunk.embedding.type)
    if fusion is None:
        best = select(lexical).order_by(*best_first).limit(top_k).cte("best")
    else:
        threshold = bindparam("threshold", type_=Float) if with_threshold else None
        measured = nearest_rows(vector, scope, fetch, exact)
        near = above_threshold(measured, threshold).cte("nearest_leg")
        columns.append(_count(measured, "measured"))  # whether the walk was cut short
        if fusion is FusionMethod.RRF:
            fused = _rrf(near, lexical).cte("fused")
        else:
            fused = _weighted(near, lexical, weights, tenant, vector).cte("fused")
        columns.append(_count(fused, "fused"))
        best = select(fused).order_by(fused.c.score.desc(), fused.c.id).limit(top_k).cte("best")
    picking = [Chunk.tenant_id == tenant, Chunk.id.in_(select(best.c.id))]
    found = hits_statement(vector, picking, tenant).subquery("hits")
    scored_hits = found.join(best, best.c.id == found.c.id)
    return compiled(
        select(*columns, found, best.c.score.label("hit_score")).select_from(
            weights.outerjoin(scored_hits, true())
        )
    )


def _rrf(near: Any, lexical: Any) -> Any:
    """(id, score): reciprocal rank fusion of the two legs, as fusion.py's `fuse` (ranks from 1,
    the vector leg's part first)."""
    k = bindparam("rrf_k", type_=Integer)
    one, zero = literal(1.0, Float), literal(0.0, Float)

    def parts(leg: Any, *order: Any) -> Any:
        rank = func.row_number().over(order_by=order)
        return select(leg.c.id, (one / cast(k + rank, Float)).label("part")).subquery()

    by_near = parts(near, near.c.distance, near.c.id)
    by_lexical = parts(lexical, lexical.c.score.desc(), lexical.c.id)
    score = func.coalesce(by_near.c.part, zero) + func.coalesce(by_lexical.c.part, zero)
    return select(
        func.coalesce(by_near.c.id, by_lexical.c.id).label("id"), score.label("score")
    ).select_from(by_near.outerjoin(by_lexical, by_near.c.id == by_lexical.c.id, full=True))


def _weighted(near: Any, lexical: Any, weights: Any, tenant: Any, vector: Any) -> Any:
    """(id, score): weighted fusion of the two legs, as fusion.py's `weighted_fuse`, each leg's
    candidates scored by the other leg (the vector leg's chunks by BM25, 0 without a query
    term; the keyword leg's by cosine), their ids as one array: index conditions on the keys."""
    zero = literal(0.0, Float)
    by_bm25 = _scored(tenant, weights).where(Bm25Posting.chunk_id == any_(_ids(near))).subquery()
    similarity = literal(1.0, Float) - Chunk.embedding.cosine_distance(vector)
    by_cosine = (
        select(Chunk.id, similarity.label("similarity"))
        .where(Chunk.tenant_id == tenant, Chunk.id == any_(_ids(lexical)))
        .subquery()
    )
    pool = union(select(near.c.id), select(lexical.c.id)).subquery("pool")
    cosine = func.coalesce(near.c.similarity, by_cosine.c.similarity, zero)
    bm25 = func.coalesce(lexical.c.score, by_bm25.c.score, zero)
    share = _lexical_share(weights)
    score = bindparam("vector_weight", type_=Float) * func.greatest(cosine, zero)
    score = score + share.c.share * bm25
    return (
        select(pool.c.id, score.label("score"))
        .select_from(pool)
        .join(share, true())
        .outerjoin(near, near.c.id == pool.c.id)
        .outerjoin(lexical, lexical.c.id == pool.c.id)
        .outerjoin(by_bm25, by_bm25.c.chunk_id == pool.c.id)
        .outerjoin(by_cosine, by_cosine.c.id == pool.c.id)
    )


def _lexical_share(weights: Any) -> Any:
    """One row: (1 - w) / ceiling, or 0 when the query can score nothing. The ceiling is the sum
    of the IDFs in `stats_of`'s order (df, then lexeme by code point), times k1 + 1 (bm25.py)."""
    terms = func.unnest(weights.c.lexemes, weights.c.dfs, weights.c.idfs).table_valued(
        column("lexeme", Text), column("df", Integer), column("idf", Float)
    )
    terms = terms.render_derived(name="term")
    order = aggregate_order_by(terms.c.idf, terms.c.df, terms.c.lexeme.collate("C"))
    ceiling = func.sum(order, type_=Float) * bindparam("k1_plus_1", type_=Float)
    zero = literal(0.0, Float)
    share = case((ceiling > zero, bindparam("lexical_weight", type_=Float) / ceiling), else_=zero)
    return select(share.label("share")).select_from(weights).join(terms, true()).cte("share")


@functools.lru_cache(maxsize=4096)
def _tenant_legs(
    fusion: FusionMethod | None,
    with_threshold: bool,
    exact: bool,
    filtered: bool,
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
    general = _compiled_legs(fusion, with_threshold, exact, filtered, windowed=windowed)
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


def _count(rows: Any, name: str) -> Any:
    return select(func.count()).select_from(rows).scalar_subquery().label(name)


def _ids(leg: Any) -> Any:
    return cast(select(func.array_agg(leg.c.id)).scalar_subquery(), ARRAY(UUID))
