"""The nearest chunks to a vector, in one statement: the nearest candidates from an HNSW index
inside a MATERIALIZED CTE ordered by distance, then the threshold (in the WHERE clause it
would turn the search into a sequential scan), a window count of what passed, and the best
`top_k` joined to their documents and collections.

Which index answers is the planner's choice, made with the tenant as a constant: the btree on
`tenant_id` for small tenants (exact), the tenant's dedicated HNSW index (app/db/indexes.py),
else the shared HNSW index, where `hnsw.iterative_scan = relaxed_order` keeps scanning while
filters (tenant via RLS, collections, metadata) drop candidates (planning.py sets both).

Two ways to send it: built per request by SQLAlchemy in an ORM session (`nearest_hits`,
filters and access conditions of any shape), or compiled once for the driver's own
connection (`direct_query`, `direct_hits`: the commonest request, no filters but perhaps
collections, filters.py's `in_collections`), either the
statement every tenant shares (the tenant a parameter) or a tenant's own (the tenant, the
model and the limits written in as constants, planning.py says why).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Text,
    bindparam,
    func,
    literal,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Chunk
from app.db.settings_sql import scope_message
from app.db.statements import Compiled, compiled, with_constants
from app.db.tenancy import Setting
from app.retrieval.filters import in_collections, narrows
from app.retrieval.hits import SOURCE_COLUMNS, Hit, hit_of, ordered, with_sources
from app.retrieval.planning import COLLECTION_PLAN, EXACT_PLAN, direct_settings
from app.retrieval.requests import SearchRequest


async def nearest_scored(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    request: SearchRequest,
    exact: bool,
) -> list[tuple[uuid.UUID, float]]:
    """(chunk id, similarity) of every candidate that passed the threshold, nearest first; a
    walk `cut_short` is made again exactly."""
    scored, measured = await _scored(session, vector, where, request, exact)
    if cut_short(measured, request, exact):
        await session.execute(EXACT_PLAN)
        scored, _ = await _scored(session, vector, where, request, exact=True)
    return scored


async def _scored(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    request: SearchRequest,
    exact: bool,
) -> tuple[list[tuple[uuid.UUID, float]], int]:
    stmt = _scored_statement(vector, where, request.fetch, request.threshold, exact)
    rows = (await session.execute(stmt)).all()
    scored = [(row.id, float(row.similarity)) for row in rows if row.id is not None]
    return scored, rows[0].candidates


async def cosines(
    session: AsyncSession, vector: list[float], chunk_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, float]:
    """The cosine similarity to `vector` of each of the given chunks (those still there)."""
    similarity = literal(1.0) - Chunk.embedding.cosine_distance(vector)
    rows = await session.execute(select(Chunk.id, similarity).where(Chunk.id.in_(chunk_ids)))
    return {row[0]: float(row[1]) for row in rows}


async def exactly_after_cut(connection: asyncpg.Connection[Any]) -> None:
    """The rest of a direct search's transaction under the plan settings of an exact read of
    its collections (`COLLECTION_PLAN`), after a walk `cut_short`: one message, built as the
    transaction's own settings are (settings_sql.py)."""
    await connection.execute(scope_message(None, COLLECTION_PLAN))


def cut_short(measured: int, request: SearchRequest, exact: bool) -> bool:
    """Whether a filtered search's index walk measured fewer candidates than it asked for
    (`fetch`): the filters keep fewer chunks, or pgvector ended the iterative scan at
    `hnsw.max_scan_tuples` (20,000 tuples), as it does when a filter keeps a few chunks of a
    large tenant and the walk passes the rest; then those it did not reach may be the best,
    or all there are. Such a search is made again exactly, every chunk in scope measured:
    the direct path's through the collections' btree (`COLLECTION_PLAN`), the session's under
    `EXACT_PLAN`, through the indexes the planner picks for its filters.
    Without filters the scope is the tenant (and the caller's access), whose size the planner
    knows: a small one is read exactly in the first place (visibility.py)."""
    return not exact and narrows(request.filters) and measured < request.fetch


def _scored_statement(
    vector: Any, where: Sequence[ColumnElement[bool]], fetch: Any, threshold: Any, exact: bool
) -> Any:
    """Always one row at least: the candidates measured before the threshold beside each that
    passed, nearest first, or beside NULLs when none passed."""
    nearest = nearest_rows(vector, where, fetch, exact)
    passed = above_threshold(nearest, threshold).subquery()
    measured = _measured(nearest)
    return (
        select(measured.c.candidates, passed.c.id, passed.c.similarity)
        .select_from(measured.outerjoin(passed, true()))
        .order_by(passed.c.distance, passed.c.id)
    )


async def nearest_hits(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    request: SearchRequest,
    exact: bool = False,
) -> tuple[list[Hit], int, int]:
    """The best `request.top_k` chunks near `vector` passing `where` and the threshold (from
    the HNSW index, or `exact`ly: also when the walk was `cut_short`), how many candidates
    passed, and how many were measured before the threshold."""
    found = await _ranked(session, vector, where, request, exact)
    if cut_short(found[2], request, exact):
        await session.execute(EXACT_PLAN)
        found = await _ranked(session, vector, where, request, exact=True)
    return found


async def _ranked(
    session: AsyncSession,
    vector: list[float],
    where: Sequence[ColumnElement[bool]],
    request: SearchRequest,
    exact: bool,
) -> tuple[list[Hit], int, int]:
    stmt = _nearest_statement(vector, where, request.fetch, request.threshold, request.top_k, exact)
    return ranked_hits([row._mapping for row in await session.execute(stmt)])


@dataclass(frozen=True, slots=True)
class DirectQuery:
    """The direct path's statement, its arguments and its transaction settings, made from one
    choice: a tenant's own statement (`kept`) runs under a kept generic plan, the statement
    every tenant shares is planned at each run (planning.py)."""

    statement: Compiled
    arguments: list[Any]
    settings: dict[str, Setting]


def direct_query(
    vector: list[float],
    tenant_id: str,
    model: str,
    request: SearchRequest,
    *,
    exact: bool,
    kept: bool,
) -> DirectQuery:
    statement, arguments = direct_statement(vector, tenant_id, model, request, exact, kept)
    return DirectQuery(statement, arguments, direct_settings(request, tenant_id, exact, kept))


async def direct_hits(
    connection: asyncpg.Connection[Any], query: DirectQuery
) -> tuple[list[Hit], int, int]:
    """`nearest_hits` filtered by collections at most (`direct_query`), on the driver
    connection, the rows read as the driver returns them."""
    records = await connection.fetch(query.statement.sql, *query.arguments)
    return ranked_hits(query.statement.rows(records))


def direct_statement(
    vector: list[float],
    tenant_id: str,
    model: str,
    request: SearchRequest,
    exact: bool = False,
    kept: bool = True,
) -> tuple[Compiled, list[Any]]:
    """The direct path's SQL and its positional arguments (EXPLAIN in tests sends them too):
    the tenant's own statement (`kept`), or the one every tenant shares."""
    with_threshold = request.threshold is not None
    collections = request.filters.collections
    filtered = collections is not None
    values: dict[str, Any] = {
        "vector": vector,
        "threshold": request.threshold,
        "collections": list(collections or ()),
    }
    if kept:
        statement = _tenant_statement(
            with_threshold, exact, filtered, tenant_id, model, request.fetch, request.top_k
        )
    else:
        statement = _compiled_nearest(with_threshold, exact, filtered)
        values |= {
            "tenant": tenant_id,
            "model": model,
            "fetch": request.fetch,
            "top_k": request.top_k,
        }
    return statement, statement.arguments(values)


def nearest_rows(vector: Any, where: Sequence[ColumnElement[bool]], fetch: Any, exact: bool) -> Any:
    """The nearest `fetch` rows by the HNSW index, materialized (`above_threshold` then keeps
    those passing a threshold: in the index scan's own WHERE it would make the planner give
    up the index). The values may be bound parameters (the direct path compiles the statement
    once). `exact`: ordered by `distance + 0`, which no index answers, so every row passing
    `where` is measured (a small visible set, read from its access lists' index:
    visibility.py; a walk `cut_short`)."""
    distance = Chunk.embedding.cosine_distance(vector)
    return (
        select(Chunk.id.label("id"), distance.label("distance"))
        .where(*where)
        .order_by(distance + 0 if exact else distance)
        .limit(fetch)
        .cte("nearest")
        .prefix_with("MATERIALIZED")
    )


def above_threshold(nearest: Any, threshold: Any | None) -> Any:
    similarity = (literal(1.0) - nearest.c.distance).label("similarity")
    passed = select(nearest.c.id, nearest.c.distance, similarity)
    if threshold is not None:
        passed = passed.where(similarity >= threshold)
    return passed


def _nearest_statement(
    vector: Any,
    where: Sequence[ColumnElement[bool]],
    fetch: Any,
    threshold: Any,
    top_k: Any,
    exact: bool = False,
    tenant: Any | None = None,
) -> Any:
    """Always one row at least: `candidates` (the rows measured before the threshold) beside
    the best `top_k` with their sources, or beside NULLs when none passed. `tenant`: named
    where the best are read back too (an ORM session names it itself)."""
    nearest = nearest_rows(vector, where, fetch, exact)
    passed = above_threshold(nearest, threshold).subquery()
    best = (
        select(passed.c.id, passed.c.similarity, func.count().over().label("passed"))
        .order_by(passed.c.distance, passed.c.id)
        .limit(top_k)
        .cte("best")
        .prefix_with("MATERIALIZED")
    )
    same = Chunk.id == best.c.id
    hits = with_sources(
        select(best.c.passed, best.c.similarity, *SOURCE_COLUMNS).join_from(
            best, Chunk, same if tenant is None else (Chunk.tenant_id == tenant) & same
        )
    ).subquery("hits")
    measured = _measured(nearest)
    return select(measured.c.candidates, hits).select_from(measured.outerjoin(hits, true()))


def _measured(nearest: Any) -> Any:
    """One row: how many candidates the walk (or the exact scan) measured."""
    return select(func.count().label("candidates")).select_from(nearest).subquery("measured")


def ranked_hits(rows: Sequence[Mapping[Any, Any]]) -> tuple[list[Hit], int, int]:
    """The hits, how many candidates passed the threshold, how many were measured."""
    found = [row for row in rows if row["id"] is not None]
    hits = [hit_of(row, score=float(row["similarity"])) for row in found]
    return ordered(hits), (found[0]["passed"] if found else 0), rows[0]["candidates"]


@functools.cache
def _compiled_nearest(with_threshold: bool, exact: bool, filtered: bool = False) -> Compiled:
    """The vector statement with named parameters, compiled once for asyncpg; `filtered`: in
    the collections named by the parameter `collections`."""
    tenant: Any = bindparam("tenant")
    where = [Chunk.tenant_id == tenant, Chunk.embedding_model == bindparam("model")]
    if filtered:
        where.append(in_collections(tenant, bindparam("collections", type_=ARRAY(Text))))
    return compiled(
        _nearest_statement(
            bindparam("vector", type_=Chunk.embedding.type),
            where,
            bindparam("fetch", type_=Integer),
            bindparam("threshold", type_=Float) if with_threshold else None,
            bindparam("top_k", type_=Integer),
            exact,
            tenant=tenant,
        )
    )


@functools.lru_cache(maxsize=4096)
def _tenant_statement(
    with_threshold: bool,
    exact: bool,
    filtered: bool,
    tenant_id: str,
    model: str,
    fetch: int,
    top_k: int,
) -> Compiled:
    """The vector statement with the tenant, the model and the limits written in as constants
    (a statement of its own per tenant, whose generic plan sees them), the vector, the
    threshold and the collections left as parameters."""
    constants: dict[str, str | int] = {
        "tenant": tenant_id,
        "model": model,
        "fetch": fetch,
        "top_k": top_k,
    }
    return with_constants(_compiled_nearest(with_threshold, exact, filtered), constants)
