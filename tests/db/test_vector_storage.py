"""Vectors are stored in the row (migration 0010): a distance computed from the heap never
reads the TOAST table, even when the chunk's text makes the row larger than TOAST's
threshold. The text goes out of line instead."""

from __future__ import annotations

import random

from sqlalchemy import text

from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

# English words in a shuffled order (a repeated phrase would be compressed into a few bytes):
# each 200-token chunk is about 1 KB of text, so with its 1.5 KB vector the row passes TOAST's
# threshold (~2 KB).
VOCABULARY = [
    "river",
    "mountain",
    "lantern",
    "harvest",
    "glacier",
    "meadow",
    "copper",
    "window",
    "thunder",
    "orchard",
    "falcon",
    "biscuit",
    "quarry",
    "velvet",
    "harbor",
    "candle",
    "saddle",
    "pepper",
    "marble",
    "cactus",
    "violin",
    "blanket",
    "tractor",
    "pebble",
    "walrus",
    "kettle",
    "ribbon",
    "silver",
    "garden",
    "hammer",
    "bridge",
    "pillow",
    "forest",
]
WORDS = " ".join(random.Random(7).choice(VOCABULARY) for _ in range(1_500))

OUT_OF_LINE = (
    "select count(*) filter (where pg_column_toast_chunk_id(embedding) is not null),"
    " max(octet_length(content) + pg_column_size(embedding)), count(*) from chunks"
)


async def test_a_long_chunk_keeps_its_vector_in_the_row(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions, "storage")
    await ingest_documents(
        sessions,
        embedder,
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=[
            DocumentInput(
                content=WORDS, source_type=SourceType.TEXT, external_id="long", title="Long"
            )
        ],
    )
    async with tenant_transaction(sessions, tenant_id) as session:
        vectors_out, largest_row, chunks = (await session.execute(text(OUT_OF_LINE))).one()
        document_vector_out = await session.scalar(
            text("select pg_column_toast_chunk_id(embedding) from documents")
        )
    assert chunks > 1
    assert largest_row > 2_100  # rows past TOAST's threshold (~2 KB)
    assert vectors_out == 0
    assert document_vector_out is None
