"""Searches without filters, or filtered by collections only, take the direct path (statements
compiled once, on the driver connection, no ORM session); with other filters, the session's.
Both must give the same answer: the same chunks, in the same order, with the same scores, the
same totals and the same reason for a short answer."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from app.db.tenancy import SessionMaker, registry_transaction
from app.retrieval import FusionMethod, SearchMode, SearchRequest, search
from app.retrieval.filters import SearchFilters
from app.retrieval.hits import SearchOutcome
from app.retrieval.planning import KEEP_PLAN_FROM
from app.retrieval.shortfall import ShortfallReason
from tests.conftest import DatabaseUrls, registered_tenant
from tests.fakes import WordHashEmbedder
from tests.retrieval.test_bm25 import ingest

pytestmark = pytest.mark.on_citus

TEXTS = {
    **{
        f"zircon{i}": f"zircon crystal {'zircon ' * (i % 4)}{'quarry ' * i} mining"
        for i in range(25)
    },
    **{f"quartz{i}": f"quartz and crystal {'rock ' * i} in the sand" for i in range(15)},
    **{f"garden{i}": f"compost heaps and soil {'worms ' * i}" for i in range(10)},
}
# a second collection, some of whose words the first one's queries hold
OTHER_TEXTS = {f"other{i}": f"zircon sand {'crystal ' * i} shore" for i in range(6)}
QUERIES = ("zircon crystal mining", "crystal sand", "quarry worms soil", "nothing matches xyz")
# no filter; one collection; one of six chunks and a name the tenant has not
COLLECTIONS = (None, ["default"], ["other", "missing"])
# a filter the direct path does not take (source types), which keeps every chunk: the same
# search, the session's way
SESSION_WAY = ["text"]
REQUESTS: list[dict[str, Any]] = [
    {"mode": SearchMode.VECTOR},
    {"mode": SearchMode.VECTOR, "threshold": 0.3},
    {"mode": SearchMode.KEYWORD},
    {"mode": SearchMode.HYBRID, "fusion": FusionMethod.WEIGHTED},
    {"mode": SearchMode.HYBRID, "fusion": FusionMethod.RRF},
    {"mode": SearchMode.HYBRID, "fusion": FusionMethod.WEIGHTED, "threshold": 0.3},
    {"mode": SearchMode.KEYWORD, "top_k": 50},  # more than match: a shortfall
    {"mode": SearchMode.HYBRID, "top_k": 50},  # every candidate of both legs, fused
    {"mode": SearchMode.HYBRID, "fusion": FusionMethod.WEIGHTED, "vector_weight": 0.2},
    {"mode": SearchMode.HYBRID, "fusion": FusionMethod.RRF, "rrf_k": 5, "threshold": 0.3},
]


@contextmanager
def orm_transactions() -> Iterator[list[object]]:
    """The ORM sessions' transactions begun meanwhile."""
    begun: list[object] = []

    def count(session: Session, *_: object) -> None:
        begun.append(session)

    event.listen(Session, "after_begin", count)
    try:
        yield begun
    finally:
        event.remove(Session, "after_begin", count)


def answer(outcome: SearchOutcome) -> list[tuple[str, int, float, float]]:
    return [(h.external_id, h.chunk_index, h.score, h.similarity) for h in outcome.hits]


async def test_the_direct_and_the_session_path_agree(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    await ingest(sessions, embedder, tenant_id, TEXTS)
    await ingest(sessions, embedder, tenant_id, OTHER_TEXTS, collection="other")
    # the tenant's first search probes it for access lists (remembered after)
    await search(sessions, embedder, tenant_id=tenant_id, request=SearchRequest(query="warm"))
    for collections, query, fields in itertools.product(COLLECTIONS, QUERIES, REQUESTS):
        filters = SearchFilters(collections=collections)
        direct = SearchRequest(query=query, **{"top_k": 8, "filters": filters, **fields})
        with orm_transactions() as begun:
            fast = await search(sessions, embedder, tenant_id=tenant_id, request=direct)
        if len(fast.hits) == direct.top_k:
            assert begun == [], "a full answer took an ORM session"
        session_way = replace(direct, filters=replace(filters, source_types=SESSION_WAY))
        with orm_transactions() as begun:
            slow = await search(sessions, embedder, tenant_id=tenant_id, request=session_way)
        assert begun, "a search filtered by source type went without an ORM session"
        label = f"{collections} {query!r} {fields}"
        assert answer(fast) == answer(slow), label
        if collections == ["other", "missing"]:
            assert {h.external_id[:5] for h in fast.hits} <= {"other"}, label
        assert fast.total_found == slow.total_found, label
        assert (fast.shortfall is None) == (slow.shortfall is None), label
        if fast.shortfall is not None and slow.shortfall is not None:
            # the same reason; without collections, the session's filter kept every chunk,
            # which the direct path calls the tenant's size
            reason = slow.shortfall.reason
            if collections is None and reason is ShortfallReason.FILTERS:
                reason = ShortfallReason.SCOPE
            assert fast.shortfall.reason is reason, label
            assert fast.shortfall.in_scope == slow.shortfall.in_scope, label
    crystal = SearchRequest(query="zircon crystal mining", mode=SearchMode.KEYWORD, top_k=3)
    best = await search(sessions, embedder, tenant_id=tenant_id, request=crystal)
    assert best.hits[0].external_id.startswith("zircon")


async def test_the_direct_path_sees_only_its_tenant(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """Another tenant's chunks with the very words of the query never come back, and never
    change a score (its statistics are its own)."""
    mine = await registered_tenant(sessions)
    theirs = await registered_tenant(sessions)
    await ingest(sessions, embedder, mine, {"a": "zircon crystal", "b": "garden soil"})
    # no filter, their collection's name and mine, a name only they have
    ways = [None, ["default"], ["default", "theirs"], ["theirs"]]
    requests = [
        SearchRequest(
            query="zircon crystal", mode=mode, top_k=10, filters=SearchFilters(collections=names)
        )
        for mode, names in itertools.product(SearchMode, ways)
    ]
    before = [
        answer(await search(sessions, embedder, tenant_id=mine, request=request))
        for request in requests
    ]
    their_texts = {f"z{i}": "zircon crystal zircon" for i in range(30)}
    await ingest(sessions, embedder, theirs, their_texts)
    await ingest(sessions, embedder, theirs, their_texts, collection="theirs")
    for request, earlier in zip(requests, before, strict=True):
        outcome = await search(sessions, embedder, tenant_id=mine, request=request)
        assert answer(outcome) == earlier, request
        found = {h.external_id for h in outcome.hits}
        if request.filters.collections == ["theirs"]:
            assert found == set(), request
        else:
            assert "a" in found, request
            assert found <= {"a", "b"}, request


async def test_a_tenant_searched_again_keeps_its_plan_on_one_server(
    sessions: SessionMaker, embedder: WordHashEmbedder, database: DatabaseUrls
) -> None:
    """From a tenant's KEEP_PLAN_FROM-th direct search on, keyword and hybrid searches run a
    legs statement of the tenant's own: its plan made once per connection and kept on one
    server, made at every run on Citus (planning.py, `GENERIC_ON_ONE_SERVER`)."""
    tenant_id = await registered_tenant(sessions)
    await ingest(sessions, embedder, tenant_id, TEXTS)
    runs = KEEP_PLAN_FROM + 2
    for mode in (SearchMode.KEYWORD, SearchMode.HYBRID):
        request = SearchRequest(query="zircon crystal mining", mode=mode, top_k=5)
        answers = {
            tuple(answer(await search(sessions, embedder, tenant_id=tenant_id, request=request)))
            for _ in range(runs)
        }
        assert len(answers) == 1, f"{mode}: a kept plan changed the answer"
    async with registry_transaction(sessions) as session:
        prepared = (
            await session.execute(
                text(
                    "select generic_plans, custom_plans from pg_prepared_statements"
                    " where statement like '%bm25_postings%' and statement like :tenant"
                ),
                {"tenant": f"%'{tenant_id}'%"},
            )
        ).all()
    assert len(prepared) == 2, prepared  # keyword's and hybrid's
    # executions under each plan: keyword's from the tenant's KEEP_PLAN_FROM-th search on (the
    # first ones ran the statement every tenant shares, the tenant a parameter), all of
    # hybrid's (the tenant's searches are counted whatever their mode)
    own_runs = runs - KEEP_PLAN_FROM + 1
    planned = sorted((row.generic_plans, row.custom_plans) for row in prepared)
    if database.cluster is None:
        assert planned == [(own_runs, 0), (runs, 0)], planned  # generic: made once, kept
    else:
        assert planned == [(0, own_runs), (0, runs)], planned
