"""`rag reindex`: re-embed for a new model, resumably, never mixing models in a search."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.embedded import OWNER_ROLE, bootstrap, drop_database, with_database, with_user
from app.db.engine import create_engine, create_sessionmaker, vector_column_dimensions
from app.db.migrate import migrate
from app.db.models import Chunk
from app.db.tenancy import SessionMaker, tenant_transaction
from app.embeddings import EmbeddingError
from app.ingest import reindex
from app.ingest.documents import ingest_document
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.retrieval import SearchRequest, search
from tests.conftest import (
    APP_PASSWORD,
    APP_ROLE,
    OWNER_PASSWORD,
    DatabaseUrls,
    registered_tenant,
    small_chunker,
)
from tests.fakes import WordHashEmbedder

TEXTS = [f"Document number {i} is about topic {i} and nothing else." for i in range(5)]


class FlakyEmbedder(WordHashEmbedder):
    """Embeds `allowed` document batches, then fails: a reindex cut off half way."""

    def __init__(self, dimensions: int, model_id: str, allowed: int) -> None:
        super().__init__(dimensions, model_id)
        self.allowed = allowed

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.allowed <= 0:
            raise EmbeddingError("cut off")
        self.allowed -= 1
        return await super().embed_documents(texts)


async def seed(sessions: SessionMaker, embedder: WordHashEmbedder) -> str:
    tenant_id = await registered_tenant(sessions, "rx")
    for i, body in enumerate(TEXTS):
        document = DocumentInput(content=body, source_type=SourceType.TEXT, external_id=str(i))
        await ingest_document(
            sessions, embedder, chunker=small_chunker(), tenant_id=tenant_id, document=document
        )
    return tenant_id


async def models_of(sessions: SessionMaker, tenant_id: str) -> dict[str, int]:
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = await session.execute(
            select(Chunk.embedding_model, func.count()).group_by(Chunk.embedding_model)
        )
        return {model: count for model, count in rows}


async def test_reindex_resumes_and_search_never_mixes_models(app_engine: AsyncEngine) -> None:
    sessions = create_sessionmaker(app_engine)
    tenant_id = await seed(sessions, WordHashEmbedder(384, "test:old"))
    cut_off = FlakyEmbedder(384, "test:new", allowed=1)
    with contextlib.suppress(EmbeddingError):
        await reindex.reembed(
            sessions, cut_off, batch_size=2, progress=lambda n: None, tenants=[tenant_id]
        )
    assert await models_of(sessions, tenant_id) == {"test:new": 2, "test:old": 3}
    outcome = await search(
        sessions,
        cut_off,
        tenant_id=tenant_id,
        request=SearchRequest(query="document topic", top_k=10),
    )
    assert len(outcome.hits) == 2  # only vectors of the new model are searched
    assert await reindex.pending(sessions, "test:new", tenants=[tenant_id]) == {tenant_id: 3}

    resumed = WordHashEmbedder(384, "test:new")
    done = await reindex.reembed(
        sessions, resumed, batch_size=2, progress=lambda n: None, tenants=[tenant_id]
    )
    assert done == 3
    assert await models_of(sessions, tenant_id) == {"test:new": 5}
    assert resumed.documents_embedded == 3  # the first two were not embedded again


async def test_reindex_to_another_dimension_rebuilds_the_column(database: DatabaseUrls) -> None:
    name = f"rag_reindex_{os.getpid()}"
    owner_url = with_user(with_database(database.superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(database.superuser_url, name), APP_ROLE, APP_PASSWORD)
    await drop_database(database.superuser_url, name)
    await bootstrap(
        database.superuser_url, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD
    )
    await migrate(owner_url, embedding_dimensions=8, app_role=APP_ROLE, app_url=app_url)
    engine = create_engine(app_url, pool_size=2)
    try:
        sessions = create_sessionmaker(engine)
        tenant_id = await seed(sessions, WordHashEmbedder(8, "test:small"))
        assert await reindex.prepare_column(owner_url, dimensions=16) is True
        assert await reindex.prepare_column(owner_url, dimensions=16) is False  # idempotent
        bigger = WordHashEmbedder(16, "test:bigger")
        await reindex.reembed(sessions, bigger, batch_size=3, progress=lambda n: None)
        await reindex.finish_column(owner_url)
        assert await models_of(sessions, tenant_id) == {"test:bigger": 5}
        async with engine.connect() as conn:
            assert await vector_column_dimensions(conn) == 16
            index = await conn.scalar(
                text("select indexdef from pg_indexes where indexname = 'ix_chunks_embedding_hnsw'")
            )
        assert "hnsw" in str(index)
        assert "vector_cosine_ops" in str(index)
        outcome = await search(
            sessions, bigger, tenant_id=tenant_id, request=SearchRequest(query="topic 3")
        )
        assert outcome.hits
        assert outcome.hits[0].content == TEXTS[3]
    finally:
        await engine.dispose()
        await drop_database(database.superuser_url, name)
