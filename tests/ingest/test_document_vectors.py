"""A document's vector is the normalised mean of its chunks' vectors: the writer computes it
from the vectors in hand, and it equals what PostgreSQL computes from the stored chunks
(`l2_normalize(avg(embedding))`, as `refresh_document_vectors` does), for new and replaced
versions alike."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.store import refresh_document_vectors
from app.ingest.vectors import document_vector
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus

SQL_MEANS = text(
    "SELECT d.external_id, d.embedding_model, d.embedding::real[] AS stored,"
    " (SELECT l2_normalize(avg(c.embedding))::real[] FROM chunks c"
    "  WHERE c.tenant_id = :tenant AND c.document_id = d.id) AS computed"
    " FROM documents d WHERE d.tenant_id = :tenant"
)


def long_text(topic: str, paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} on {topic}: the {topic} of season {i % 7} and the river {i % 5}."
        for i in range(paragraphs)
    )


async def assert_means_match(sessions: SessionMaker, tenant_id: str, model: str) -> set[str]:
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = (await session.execute(SQL_MEANS, {"tenant": tenant_id})).all()
    for external_id, stored_model, stored, computed in rows:
        assert stored_model == model, external_id
        assert np.allclose(stored, computed, rtol=0, atol=1e-6), external_id
    return {row.external_id for row in rows}


async def test_the_written_vector_is_the_mean_postgres_computes(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions, "docvec")
    docs = [
        DocumentInput(content=long_text(topic, n), source_type=SourceType.TEXT, external_id=topic)
        for topic, n in (("herons", 60), ("otters", 1), ("willows", 25))
    ]

    async def ingest(batch: list[DocumentInput]) -> None:
        await ingest_documents(
            sessions, embedder, chunker=small_chunker(), tenant_id=tenant_id, documents=batch
        )

    await ingest(docs)
    assert await assert_means_match(sessions, tenant_id, embedder.model_id) == {
        "herons",
        "otters",
        "willows",
    }
    replaced = DocumentInput(
        content=long_text("kingfishers", 40), source_type=SourceType.TEXT, external_id="herons"
    )
    await ingest([replaced])
    await assert_means_match(sessions, tenant_id, embedder.model_id)
    # the SQL refresh (reindex's path) leaves every written vector as it was, within float4
    async with tenant_transaction(sessions, tenant_id) as session:
        before = (await session.execute(SQL_MEANS, {"tenant": tenant_id})).all()
        await refresh_document_vectors(session, tenant_id)
        after = (await session.execute(SQL_MEANS, {"tenant": tenant_id})).all()
    for old, new in zip(sorted(before), sorted(after), strict=True):
        assert np.allclose(old.stored, new.stored, rtol=0, atol=1e-6)


def test_no_chunks_or_mixed_models_give_no_vector() -> None:
    assert document_vector([]) is None
    mixed = [
        {"embedding": [1.0, 0.0], "embedding_model": "a"},
        {"embedding": [0.0, 1.0], "embedding_model": "b"},
    ]
    assert document_vector(mixed) is None
    zero = document_vector([{"embedding": [0.0, 0.0], "embedding_model": "a"}])
    assert zero is not None
    assert zero.tolist() == [0.0, 0.0]
