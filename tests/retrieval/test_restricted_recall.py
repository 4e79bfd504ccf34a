"""A caller who may see a small part of a large tenant gets the exact top-k of what it may see
(issue #19, point 4): its vector candidates come from the access lists' index, every visible
row measured, never from an HNSW walk filtered down to 1% (app/retrieval/visibility.py). On the
same tenant, whose every document is restricted: the admin list still counts them all."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.admin.tenants import TenantCounts, counts_of
from app.db.engine import create_sessionmaker
from app.db.indexes import (
    DedicatedIndex,
    create_dedicated_index,
    drop_dedicated_index,
    index_connection,
)
from app.db.models import Chunk, Collection, Document
from app.db.state import plans_of_sessions
from app.db.tenancy import SessionMaker, reading_as, registry_transaction, tenant_transaction
from app.permissions import EVERY_DOCUMENT, Readers
from app.retrieval import SearchMode, SearchRequest, search
from app.retrieval.similar import SimilarRequest, similar_to_chunk
from app.retrieval.visibility import SMALL_VISIBLE, known_plan
from app.tenants import create_tenant
from tests.conftest import DatabaseUrls
from tests.retrieval.test_recall import FixedEmbedder, Matrix, unit_rows

pytestmark = pytest.mark.on_citus

DOCUMENTS, CHUNKS_PER_DOCUMENT = 200, 20  # 4,000 chunks
FEW = 2  # documents of group:few: 1% of the tenant
FEW_READER = Readers(frozenset({"user:ann", "group:few"}))


async def _load(sessions: SessionMaker, tenant_id: str, vectors: Matrix) -> list[list[str]]:
    """Every document restricted: the first `FEW` to group:few, the rest to group:many."""
    async with registry_transaction(sessions) as session:
        await create_tenant(session, tenant_id)
    writer = reading_as(sessions, EVERY_DOCUMENT)
    collection_id = uuid.uuid4()
    access = [["group:few"] if d < FEW else ["group:many"] for d in range(DOCUMENTS)]
    async with tenant_transaction(writer, tenant_id) as session:
        session.add(Collection(id=collection_id, tenant_id=tenant_id, name="default"))
        await session.flush()
        rows = []
        for d in range(DOCUMENTS):
            document_id = uuid.uuid4()
            session.add(
                Document(
                    id=document_id,
                    tenant_id=tenant_id,
                    collection_id=collection_id,
                    external_id=f"doc-{d}",
                    title=f"Document {d}",
                    source_type="text",
                    content_hash=f"{d:064d}",
                    chunk_count=CHUNKS_PER_DOCUMENT,
                    access=access[d],
                )
            )
            for i in range(CHUNKS_PER_DOCUMENT):
                row = d * CHUNKS_PER_DOCUMENT + i
                rows.append(
                    {
                        "id": uuid.uuid4(),
                        "tenant_id": tenant_id,
                        "document_id": document_id,
                        "collection_id": collection_id,
                        "chunk_index": i,
                        "content": f"chunk {row}",
                        "token_count": 2,
                        "embedding": vectors[row].tolist(),
                        "embedding_model": FixedEmbedder.model_id,
                        "embedded_text_hash": "0" * 64,
                        "access": access[d],
                    }
                )
        await session.flush()
        for start in range(0, len(rows), 1000):
            await session.execute(insert(Chunk), rows[start : start + 1000])
    return [access[row // CHUNKS_PER_DOCUMENT] for row in range(len(vectors))]


@pytest.fixture(scope="module")
async def restricted(
    app_engine: object, database: DatabaseUrls
) -> tuple[SessionMaker, str, Matrix, list[uuid.UUID]]:
    assert isinstance(app_engine, AsyncEngine)
    sessions = create_sessionmaker(app_engine)
    tenant_id = f"restricted-{uuid.uuid4().hex[:8]}"
    vectors = unit_rows(np.random.default_rng(19), DOCUMENTS * CHUNKS_PER_DOCUMENT)
    await _load(sessions, tenant_id, vectors)
    async with tenant_transaction(reading_as(sessions, EVERY_DOCUMENT), tenant_id) as session:
        # row order = chunk order: documents in load order, then chunk_index
        ids = list(
            await session.scalars(
                text(
                    "select c.id from chunks c join documents d"
                    " on d.tenant_id = c.tenant_id and d.id = c.document_id"
                    " where c.tenant_id = :t order by d.content_hash, c.chunk_index"
                ),
                {"t": tenant_id},
            )
        )
    async with index_connection(database.owner_url, maintenance_work_mem="64MB") as owner:
        await owner.execute(text("analyze chunks, documents"))  # the planner sees 4,000 rows
    return sessions, tenant_id, vectors, ids


async def _recalls(
    sessions: SessionMaker, tenant_id: str, vectors: Matrix, ids: list[uuid.UUID], mode: SearchMode
) -> list[float]:
    visible = np.arange(FEW * CHUNKS_PER_DOCUMENT)  # the first documents' chunks
    embedder = FixedEmbedder()
    caller = reading_as(sessions, FEW_READER)
    recalls = []
    for query in unit_rows(np.random.default_rng(23), 30):
        embedder.next = query.tolist()
        request = SearchRequest(query="chunk", mode=mode, top_k=10)
        outcome = await search(caller, embedder, tenant_id=tenant_id, request=request)
        best = visible[np.argsort(-(vectors[visible] @ query), kind="stable")[:10]]
        truth = {ids[int(r)] for r in best}
        recalls.append(len(truth & {hit.chunk_id for hit in outcome.hits}) / 10)
    return recalls


async def test_a_caller_who_sees_one_percent_gets_the_exact_top_k(
    database: DatabaseUrls, restricted: tuple[SessionMaker, str, Matrix, list[uuid.UUID]]
) -> None:
    """On the tenant's own HNSW index, where the planner would walk the graph past the 99%
    the caller cannot see; and on the shared one."""
    sessions, tenant_id, vectors, ids = restricted
    assert await _recalls(sessions, tenant_id, vectors, ids, SearchMode.VECTOR) == [1.0] * 30
    # the first search counted what they see; the others took the direct path's exact plan
    plans = plans_of_sessions(sessions)
    assert known_plan(plans, FEW_READER, tenant_id=tenant_id, model=FixedEmbedder.model_id)
    async with index_connection(database.owner_url, maintenance_work_mem="64MB") as owner:
        name = await create_dedicated_index(owner, tenant_id)
        try:
            own = await _recalls(sessions, tenant_id, vectors, ids, SearchMode.VECTOR)
        finally:
            await drop_dedicated_index(owner, DedicatedIndex(name, tenant_id, valid=True))
    assert own == [1.0] * 30


@pytest.mark.single_node  # reads the plan of one server
async def test_the_exact_plan_never_walks_a_graph(
    restricted: tuple[SessionMaker, str, Matrix, list[uuid.UUID]],
) -> None:
    """Ordered by the distance itself, the query walks an HNSW graph; ordered by `distance +
    0` (the exact plan, nearest.py `_candidates`), never: every visible row is measured. Which
    index then reads the visible rows is the planner's choice by cost (at 100k chunks, the GIN
    index on `access` through the policy's arms, migration 0009: docs/BENCHMARKS.md)."""
    sessions, tenant_id, vectors, _ids = restricted
    plans = []
    for order in ("embedding <=> cast(:q as vector)", "(embedding <=> cast(:q as vector)) + 0"):
        async with tenant_transaction(reading_as(sessions, FEW_READER), tenant_id) as session:
            rows = await session.scalars(
                text(
                    "explain select id from chunks where tenant_id = :tenant"
                    f" and embedding_model = :model order by {order} limit 40"
                ),
                {"tenant": tenant_id, "model": FixedEmbedder.model_id, "q": vectors[0].tolist()},
            )
            plans.append("\n".join(rows))
    graph, exact = plans
    assert "hnsw" in graph, graph
    assert "hnsw" not in exact, exact


async def test_similar_chunks_of_a_small_visible_set_are_exact_too(
    restricted: tuple[SessionMaker, str, Matrix, list[uuid.UUID]],
) -> None:
    sessions, tenant_id, vectors, ids = restricted
    visible = np.arange(FEW * CHUNKS_PER_DOCUMENT)
    outcome = await similar_to_chunk(
        reading_as(sessions, FEW_READER),
        tenant_id=tenant_id,
        chunk_id=ids[0],
        request=SimilarRequest(top_k=10, min_similarity=-1.0, exclude_same_document=False),
    )
    others = visible[1:]
    best = others[np.argsort(-(vectors[others] @ vectors[0]), kind="stable")[:10]]
    assert [hit.chunk_id for hit in outcome.similar] == [ids[int(r)] for r in best]


def test_the_small_visible_bound_covers_one_percent_of_half_a_million_chunks() -> None:
    assert SMALL_VISIBLE >= 5_000


async def test_the_admin_counts_include_restricted_documents(
    restricted: tuple[SessionMaker, str, Matrix, list[uuid.UUID]],
) -> None:
    """The admin list counts every document of a tenant, in a registry transaction that names
    no readers (here on the engine's own connections, where nothing outlives a transaction)."""
    sessions, tenant_id, _vectors, _ids = restricted
    async with registry_transaction(sessions) as session:
        counts = await counts_of(session, [tenant_id])
        leftover = await session.scalar(text("select current_setting('app.all_documents', true)"))
    assert counts[tenant_id] == TenantCounts(DOCUMENTS, DOCUMENTS * CHUNKS_PER_DOCUMENT, 1)
    assert leftover == ""
