"""A filter that keeps a few chunks of a large tenant still finds every one of them.

A vector search walks the HNSW index (a large tenant's dedicated one) with iterative scans,
which pass the rows a filter refuses and walk on; pgvector ends the walk after
`hnsw.max_scan_tuples` (20,000) tuples. A search of one small collection of a 22,000-chunk
tenant found none of its chunks when they lay past that (and said "the index search found
only 0 chunks"). A walk cut short is now made again exactly (nearest.py, `cut_short`), and on
the direct path a small collection is read exactly in the first place (narrowed.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from sqlalchemy import text

from app.db.embedded import with_database
from app.db.engine import create_engine, create_sessionmaker
from app.db.indexes import create_dedicated_index, index_connection
from app.db.state import plans_of_sessions
from app.db.tenancy import SessionMaker, readers_of_sessions
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.retrieval import SearchMode, SearchRequest, search
from app.retrieval.filters import MetadataCondition, SearchFilters
from app.retrieval.narrowed import SMALL_COLLECTIONS
from app.retrieval.shortfall import ShortfallReason
from tests.conftest import (
    DatabaseUrls,
    drop_fresh_database,
    fresh_database_urls,
    registered_tenant,
    small_chunker,
)
from tests.fakes import WordHashEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.on_citus]

QUERY = "lynx wolf"
BULK = 22_000  # past the 20,000 tuples an iterative scan reads at most
FILTERS = {
    "collection": lambda small: SearchFilters(collections=["pond"]),
    "document": lambda small: SearchFilters(document_ids=[small]),
    "source type": lambda small: SearchFilters(source_types=["markdown"]),
    "metadata": lambda small: SearchFilters(metadata={"shelf": MetadataCondition(["pond"])}),
    "collection and source type": lambda small: SearchFilters(
        collections=["pond"], source_types=["markdown"]
    ),
}


@dataclass(frozen=True)
class LargeTenant:
    sessions: SessionMaker
    tenant_id: str
    small_id: uuid.UUID  # the small document's, its chunks the farthest from QUERY
    small_chunks: int


@pytest.fixture(scope="module")
async def large(database: DatabaseUrls) -> AsyncIterator[LargeTenant]:
    """A database of its own (its shared index holds the bulk): a tenant of BULK chunks of
    random vectors, with its dedicated index, beside one small markdown document in a
    collection of its own whose chunks point away from the query: the last a walk reaches."""
    name = f"rag_test_selective_{os.getpid()}"
    urls = await fresh_database_urls(database, name)
    engine = create_engine(urls.app_url, pool_size=2)
    try:
        sessions = create_sessionmaker(engine)
        tenant_id = await registered_tenant(sessions, "sel")
        embedder = WordHashEmbedder(384)
        small = DocumentInput(
            content="# Pond\n\nheron otter beaver\n\n## Reeds\n\nvole stoat marten",
            source_type=SourceType.MARKDOWN,
            external_id="small",
            collection="pond",
            metadata={"shelf": "pond"},
        )
        bulk = DocumentInput(content=QUERY, source_type=SourceType.TEXT, external_id="bulk")
        results = await ingest_documents(
            sessions,
            embedder,
            chunker=small_chunker(),
            tenant_id=tenant_id,
            documents=[small, bulk],
        )
        small_id, bulk_id = (result.document_id for result in results)  # type: ignore[union-attr]
        away = str([-x for x in await embedder.embed_query(QUERY)])
        # as the superuser: Citus copies an INSERT ... SELECT, which row-level security refuses
        admin = await asyncpg.connect(with_database(urls.superuser_url, name))
        try:
            await admin.execute(BULK_COPIES, tenant_id, bulk_id, BULK)
            await admin.execute(
                "update chunks set embedding = $1::text::vector"
                " where tenant_id = $2 and document_id = $3",
                away,
                tenant_id,
                small_id,
            )
            small_chunks = await admin.fetchval(
                "select count(*) from chunks where tenant_id = $1 and document_id = $2",
                tenant_id,
                small_id,
            )
        finally:
            await admin.close()
        async with index_connection(urls.owner_url, maintenance_work_mem="256MB") as owner:
            await owner.execute(text("analyze chunks"))
            await create_dedicated_index(owner, tenant_id)
        yield LargeTenant(sessions, tenant_id, small_id, int(small_chunks or 0))
    finally:
        await engine.dispose()
        await drop_fresh_database(database, name)


BULK_COPIES = """
    insert into chunks (tenant_id, id, document_id, collection_id, chunk_index, content,
                        page_number, section_path, token_count, embedding, embedding_model,
                        embedded_text_hash, metadata, access)
    select c.tenant_id, gen_random_uuid(), c.document_id, c.collection_id, c.chunk_index + g,
           c.content, c.page_number, c.section_path, c.token_count,
           array(select random() - 0.5 from generate_series(1, 384) where g > 0)::vector,
           c.embedding_model, c.embedded_text_hash, c.metadata, c.access
    from chunks c, generate_series(1, $3) g
    where c.tenant_id = $1 and c.document_id = $2
"""


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID])
@pytest.mark.parametrize("kind", FILTERS)
async def test_a_filter_keeping_a_few_chunks_of_a_large_tenant_finds_them_all(
    large: LargeTenant, kind: str, mode: SearchMode
) -> None:
    """Each way a search goes: the statement every tenant shares, then the tenant's own (from
    its third search); the direct path (no filter but collections) and the session's."""
    assert large.small_chunks >= 2
    embedder = WordHashEmbedder(384)
    filters = FILTERS[kind](large.small_id)
    for _ in range(4):
        request = SearchRequest(query=QUERY, top_k=10, mode=mode, filters=filters)
        found = await search(large.sessions, embedder, tenant_id=large.tenant_id, request=request)
        assert {hit.document_id for hit in found.hits} == {large.small_id}
        assert len(found.hits) == large.small_chunks
        assert found.shortfall is not None
        assert found.shortfall.reason is ShortfallReason.FILTERS


async def test_the_filters_of_a_large_tenant_still_walk_its_index(large: LargeTenant) -> None:
    """A filter keeping more than a walk's fill of chunks is answered by the walk: the same
    bulk document, its nearest chunks, 10 of them."""
    embedder = WordHashEmbedder(384)
    request = SearchRequest(query=QUERY, top_k=10, filters=SearchFilters(collections=["default"]))
    found = await search(large.sessions, embedder, tenant_id=large.tenant_id, request=request)
    assert len(found.hits) == 10
    assert found.shortfall is None
    assert large.small_id not in {hit.document_id for hit in found.hits}


async def test_what_a_collection_holds_is_counted_up_to_the_bound_and_remembered(
    large: LargeTenant,
) -> None:
    """The direct path's plan choice (narrowed.py): the small collection read exactly, the
    default one (all but 2 of 22,000 chunks) counted no further than the bound, both
    remembered for the next search."""
    embedder = WordHashEmbedder(384)
    principals = readers_of_sessions(large.sessions).principals
    memory = plans_of_sessions(large.sessions).collections
    for name, counted in (("pond", large.small_chunks), ("default", SMALL_COLLECTIONS + 1)):
        request = SearchRequest(query=QUERY, top_k=10, filters=SearchFilters(collections=[name]))
        await search(large.sessions, embedder, tenant_id=large.tenant_id, request=request)
        assert memory.get((large.tenant_id, embedder.model_id, principals, (name,))) == counted


@pytest.mark.parametrize("mode", [SearchMode.VECTOR, SearchMode.HYBRID])
async def test_a_stale_count_still_finds_the_small_collection(
    large: LargeTenant, mode: SearchMode
) -> None:
    """Remembered as large (the collection shrank within five minutes), the small collection is
    walked on the direct path, the walk is cut short, and the chunks are read again exactly."""
    embedder = WordHashEmbedder(384)
    principals = readers_of_sessions(large.sessions).principals
    memory = plans_of_sessions(large.sessions).collections
    key = (large.tenant_id, embedder.model_id, principals, ("pond",))
    memory.put(key, SMALL_COLLECTIONS + 1)
    request = SearchRequest(
        query=QUERY, top_k=10, mode=mode, filters=SearchFilters(collections=["pond"])
    )
    found = await search(large.sessions, embedder, tenant_id=large.tenant_id, request=request)
    assert {hit.document_id for hit in found.hits} == {large.small_id}
    assert len(found.hits) == large.small_chunks
    assert memory.get(key) == SMALL_COLLECTIONS + 1  # not counted again: walked
