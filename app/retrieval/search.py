"""Search over a tenant's chunks: vector (HNSW cosine), keyword (full text), hybrid.

Vector mode is one statement (nearest.py) under the settings of planning.py. A search without
diversity or filters other than collections, the commonest request, goes the direct way:
statements compiled once, on the driver's own connection (app/db/scoped.py), no ORM session;
for keyword and hybrid, their legs in one statement (direct_legs.py). Everything else goes
through a session, where the caller's access condition is worked out (visibility.py).

Keyword mode ranks by BM25 with the tenant's own statistics (bm25.py). Threshold by mode:
vector keeps candidates with cosine similarity >= threshold; keyword ignores it (BM25 scores
are not similarities; `similarity` is reported for information, floored at 0); hybrid applies
it to the vector candidates only, so an exact keyword match still counts. Hybrid fuses both
rankings, weighted or by reciprocal rank fusion (fusion.py). `diversity` re-ranks the
candidates by maximal marginal relevance (diversity.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk
from app.db.scoped import scoped_connection
from app.db.state import plans_of_sessions
from app.db.tenancy import SessionMaker, tenant_transaction
from app.embeddings import Embedder
from app.observability.metrics import observe_search
from app.retrieval.bm25 import EXPLICIT_OPERATORS
from app.retrieval.direct_legs import DirectLegs
from app.retrieval.diversity import mmr
from app.retrieval.filters import collections_only, conditions
from app.retrieval.hits import Hit, SearchOutcome, scored_hits
from app.retrieval.legs import SessionLegs, ranked
from app.retrieval.narrowed import small_collections
from app.retrieval.nearest import (
    cut_short,
    direct_hits,
    direct_query,
    exactly_after_cut,
    nearest_hits,
    nearest_scored,
)
from app.retrieval.planning import (
    COLLECTION_PLAN,
    GENERIC_ON_ONE_SERVER,
    direct_settings,
    keeps_plan,
    search_settings,
)
from app.retrieval.requests import SearchMode, SearchRequest
from app.retrieval.rerank import Reranker, RerankSkipped
from app.retrieval.returns import ReturnCounter
from app.retrieval.shortfall import Shortfall, explain_shortfall, threshold_shortfall
from app.retrieval.visibility import Scope, access_lists_matter, direct_plan, visible_scope


async def search(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    tenant_id: str,
    request: SearchRequest,
    returns: ReturnCounter | None = None,
    reranker: Reranker | None = None,
) -> SearchOutcome:
    """The tenant's best chunks for `request`; `returns` counts the documents returned. With
    `request.rerank` and a `reranker`, the first stage fetches `rerank_candidates` hits (at
    least top_k) and the reranker orders them; when it fails, the first stage's order stands
    and `rerank_note` says why."""
    if not (request.rerank and reranker is not None):
        return await _first_stage(
            sessions, embedder, tenant_id=tenant_id, request=request, returns=returns
        )
    wide = replace(request, top_k=max(request.top_k, request.rerank_candidates))
    found = await _first_stage(sessions, embedder, tenant_id=tenant_id, request=wide)
    started = time.perf_counter()
    note = None
    try:
        ranked = await reranker.rerank(request.query, [hit.content for hit in found.hits])
        scores = {r.index: round(r.score, 6) for r in ranked}  # in the reranker's order
        hits = [replace(found.hits[i], rerank_score=score) for i, score in scores.items()]
        hits += [hit for i, hit in enumerate(found.hits) if i not in scores]  # any it left out
    except RerankSkipped as skipped:
        note = f"reranking skipped: {skipped.note}; the first stage's order is kept"
        hits = list(found.hits)
    hits = hits[: request.top_k]
    rerank_ms = round((time.perf_counter() - started) * 1000, 3)
    timings = found.timings_ms | {
        "rerank": rerank_ms,
        "total": round(found.timings_ms["total"] + rerank_ms, 3),
    }
    if returns is not None:
        returns.record(tenant_id, [hit.document_id for hit in hits])
    return SearchOutcome(
        hits,
        found.total_found,
        found.model,
        timings,
        found.shortfall if len(hits) < request.top_k else None,
        reranked=note is None,
        rerank_note=note,
    )


async def _first_stage(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    tenant_id: str,
    request: SearchRequest,
    returns: ReturnCounter | None = None,
) -> SearchOutcome:
    """The tenant's best chunks for `request` by the search itself."""
    started = time.perf_counter()
    vector = await embedder.embed_query(request.query)
    embedded = time.perf_counter()
    exact = (
        await direct_plan(sessions, tenant_id=tenant_id, model=embedder.model_id)
        if _direct(request)
        else None
    )
    if exact is not None:
        # RLS filters by the caller's principals (set with the tenant); a caller who may see
        # only a few chunks of the tenant gets them exactly (visibility.py). A caller not
        # counted yet in a tenant with access lists goes the session's way once, where the
        # count is made. So do a few chunks of a collection (narrowed.py).
        narrow = (
            not exact
            and request.mode is not SearchMode.KEYWORD
            and request.filters.collections is not None
            and await small_collections(
                sessions,
                tenant_id=tenant_id,
                model=embedder.model_id,
                names=request.filters.collections,
            )
        )
        if request.mode is SearchMode.VECTOR:
            hits, total, shortfall = await _direct_nearest(
                sessions, vector, tenant_id, embedder.model_id, request, exact, narrow
            )
        else:
            hits, total, shortfall = await _direct_ranked(
                sessions, vector, tenant_id, embedder.model_id, request, exact, narrow
            )
    else:
        listed = await access_lists_matter(sessions, tenant_id)
        async with tenant_transaction(
            sessions, tenant_id, settings=search_settings(request, tenant_id)
        ) as session:
            # the access condition for the planner; the exact plan for a small visible set
            # (visibility.py)
            scope = await visible_scope(
                session,
                tenant_id=tenant_id,
                model=embedder.model_id,
                nearest=request.mode is not SearchMode.KEYWORD,
                listed=listed,
            )
            where = _where(tenant_id, embedder.model_id, request, scope.conditions)
            measured = None
            if request.diversity:
                hits, total = await _diverse_hits(session, vector, where, request, scope, tenant_id)
            elif request.mode is SearchMode.VECTOR:
                hits, total, measured = await nearest_hits(
                    session, vector, where, request, scope.exact
                )
            else:
                legs = SessionLegs(session, vector, where, request, scope.exact, tenant_id)
                scored = await ranked(legs, request)
                hits = await scored_hits(session, vector, scored[: request.top_k])
                total = len(scored)
            shortfall = threshold_shortfall(
                len(hits), measured, request.top_k, request.threshold
            ) or await _shortfall(
                session, tenant_id, embedder.model_id, request, hits, scope.conditions
            )
    done = time.perf_counter()
    observe_search(request.mode, embed_seconds=embedded - started, database_seconds=done - embedded)
    timings = {
        "embed": round((embedded - started) * 1000, 3),
        "database": round((done - embedded) * 1000, 3),
        "total": round((done - started) * 1000, 3),
    }
    if returns is not None:
        returns.record(tenant_id, [hit.document_id for hit in hits])
    return SearchOutcome(hits, total, embedder.model_id, timings, shortfall)


def _direct(request: SearchRequest) -> bool:
    """A search with no filters but collections, if any, and no diversity, the commonest
    request, skips the ORM session: statements compiled once, the collections a parameter, on
    the driver connection (`scoped_connection`: the settings, then the statements; its
    read-only transaction commits after the answer). Other filters, and the web-search
    operators of a keyword leg, are compiled per request by SQLAlchemy and go the session's
    way."""
    if request.diversity or not collections_only(request.filters):
        return False
    return request.mode is SearchMode.VECTOR or not EXPLICIT_OPERATORS.search(request.query)


async def _direct_nearest(
    sessions: SessionMaker,
    vector: list[float],
    tenant_id: str,
    model: str,
    request: SearchRequest,
    exact: bool,
    narrow: bool = False,
) -> tuple[list[Hit], int, Shortfall | None]:
    """A vector search in one statement; `narrow`: read exactly through the btree of its few
    collection chunks (narrowed.py)."""
    kept = keeps_plan(plans_of_sessions(sessions), tenant_id)
    exact = exact or narrow
    query = direct_query(vector, tenant_id, model, request, exact=exact, kept=kept)
    settings = query.settings | COLLECTION_PLAN if narrow else query.settings
    async with scoped_connection(
        sessions, tenant_id, settings=settings, read_only=True
    ) as connection:
        hits, total, measured = await direct_hits(connection, query)
        if cut_short(measured, request, exact):  # a filter kept few of a large tenant's chunks
            await exactly_after_cut(connection)
            exactly = direct_query(vector, tenant_id, model, request, exact=True, kept=kept)
            hits, total, measured = await direct_hits(connection, exactly)
    # Fewer than top_k: the threshold's doing when enough were measured; otherwise
    # explained in a transaction of its own (rare).
    shortfall = threshold_shortfall(len(hits), measured, request.top_k, request.threshold)
    if shortfall is None and len(hits) < request.top_k:
        shortfall = await _own_shortfall(sessions, tenant_id, model, request, hits)
    return hits, total, shortfall


async def _direct_ranked(
    sessions: SessionMaker,
    vector: list[float],
    tenant_id: str,
    model: str,
    request: SearchRequest,
    exact: bool,
    narrow: bool = False,
) -> tuple[list[Hit], int, Shortfall | None]:
    """A keyword or hybrid search in one statement on the driver connection: its legs, their
    fusion and the hits (direct_legs.py). A tenant searched again and again runs a statement of
    its own, as vector search does, whose plan is kept on one server (planning.py,
    `GENERIC_ON_ONE_SERVER`). `narrow`: the vector leg read exactly, as `_direct_nearest`'s."""
    kept = keeps_plan(plans_of_sessions(sessions), tenant_id)
    exact = exact or narrow
    settings = direct_settings(request, tenant_id, exact, kept, keep=GENERIC_ON_ONE_SERVER)
    async with scoped_connection(
        sessions,
        tenant_id,
        settings=settings | COLLECTION_PLAN if narrow else settings,
        read_only=True,
    ) as connection:
        legs = DirectLegs(connection, vector, request, exact, tenant_id, model, kept=kept)
        hits, total = await legs.best()
    return hits, total, legs.shortfall(len(hits))


async def _own_shortfall(
    sessions: SessionMaker, tenant_id: str, model: str, request: SearchRequest, hits: list[Hit]
) -> Shortfall | None:
    """Why a direct search returned fewer than asked, in a transaction of its own; its counts
    read a collection's chunks through the collections' btree (`COLLECTION_PLAN`)."""
    async with tenant_transaction(sessions, tenant_id, settings=COLLECTION_PLAN) as session:
        return await _shortfall(session, tenant_id, model, request, hits)


async def _shortfall(
    session: AsyncSession,
    tenant_id: str,
    model: str,
    request: SearchRequest,
    hits: list[Hit],
    visible: Sequence[ColumnElement[bool]] = (),
) -> Shortfall | None:
    return await explain_shortfall(
        session,
        tenant_scope=_tenant_scope(tenant_id, model, visible),
        filters=conditions(request.filters),
        returned=len(hits),
        top_k=request.top_k,
        threshold=request.threshold,
        keyword=request.mode is SearchMode.KEYWORD,
        hybrid=request.mode is SearchMode.HYBRID,
    )


async def _diverse_hits(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    request: SearchRequest,
    scope: Scope,
    tenant_id: str,
) -> tuple[list[Hit], int]:
    """Every candidate of the mode, then `top_k` of them by maximal marginal relevance on
    their stored vectors (app/retrieval/diversity.py), in that order."""
    if request.mode is SearchMode.VECTOR:
        scored = await nearest_scored(session, vector, where, request, scope.exact)
    else:
        scored = await ranked(
            SessionLegs(session, vector, where, request, scope.exact, tenant_id), request
        )
    rows = await session.execute(
        select(Chunk.id, Chunk.embedding).where(Chunk.id.in_([c for c, _ in scored]))
    )
    vectors = {row.id: row.embedding for row in rows}
    picked = mmr(scored, vectors, diversity=request.diversity or 0.0, top_k=request.top_k)
    return await scored_hits(session, vector, picked, keep_order=True), len(scored)


def _tenant_scope(
    tenant_id: str, model: str, visible: Sequence[ColumnElement[bool]]
) -> list[ColumnElement[bool]]:
    # The tenant again, beside RLS: the planner sees it as a constant, so it can estimate the
    # tenant's rows and use a tenant's dedicated HNSW index (a partial index on tenant_id).
    # So is the caller's access condition (`visible`, visibility.py).
    return [Chunk.tenant_id == tenant_id, Chunk.embedding_model == model, *visible]


def _where(
    tenant_id: str, model: str, request: SearchRequest, visible: Sequence[ColumnElement[bool]]
) -> list[ColumnElement[bool]]:
    return [*_tenant_scope(tenant_id, model, visible), *conditions(request.filters)]
