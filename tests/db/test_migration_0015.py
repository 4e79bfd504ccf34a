"""Migration 0015 (titles and headings in keyword search) builds the heading terms of existing
chunks in batches, starts again where a stopped run left off, keeps the BM25 statistics exact,
and downgrades to content-only terms."""

from __future__ import annotations

import importlib.util
import uuid
from types import ModuleType

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.bm25 import POSTINGS_DIFFER
from app.db.bm25_upkeep import ADD, LENGTH, TERMS
from app.db.migrate import MIGRATIONS_DIR
from tests.conftest import DIMENSIONS, DatabaseUrls
from tests.db.migrations import down_and_up

TENANT = "migrating"
CHUNKS = 30
SCOPE = text(
    "SELECT set_config('app.tenant_id', :tenant, true),"
    " set_config('app.all_documents', 'on', true), set_config('app.principals', '{}', true)"
)


def migration() -> ModuleType:
    path = MIGRATIONS_DIR / "versions" / "0015_keyword_headings.py"
    spec = importlib.util.spec_from_file_location("migration_0015", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def seed(conn: AsyncConnection) -> None:
    """One tenant, three documents whose titles are in no chunk's content, ten chunks each
    under a heading; the statistics counted as a writer of the previous version counted them
    (heading vectors not built)."""
    await conn.execute(
        text("INSERT INTO tenants (id, name) VALUES (:t, :n)"), {"t": TENANT, "n": TENANT}
    )
    await conn.execute(SCOPE, {"tenant": TENANT})
    collection = uuid.uuid4()
    await conn.execute(
        text("INSERT INTO collections (id, tenant_id, name) VALUES (:id, :t, 'default')"),
        {"id": collection, "t": TENANT},
    )
    documents = [uuid.uuid4() for _ in range(3)]
    for number, document in enumerate(documents):
        await conn.execute(
            text(
                "INSERT INTO documents (id, tenant_id, collection_id, external_id, title,"
                " source_type, content_hash, chunk_count) VALUES"
                " (:id, :t, :c, :e, :title, 'text', 'h', 10)"
            ),
            {
                "id": document,
                "t": TENANT,
                "c": collection,
                "e": f"d{number}",
                "title": f"Vorpalix manual {number}",
            },
        )
        await conn.execute(
            text(
                "INSERT INTO chunks (id, tenant_id, document_id, collection_id, chunk_index,"
                " content, section_path, token_count, embedding, embedding_model,"
                " embedded_text_hash)"
                " SELECT gen_random_uuid(), :t, :d, :c, i, 'the pump ' || i || ' turns',"
                " ARRAY['Glimmerfen pump part ' || i], 4,"
                f" array_fill(0.1, ARRAY[{DIMENSIONS}])::vector, 'm', 'h'"
                " FROM generate_series(0, 9) AS i"
            ),
            {"t": TENANT, "d": document, "c": collection},
        )
    for statement in ADD:
        await conn.execute(statement, {"tenant": TENANT, "documents": documents})
    await conn.commit()


async def exact(conn: AsyncConnection) -> dict[str, int]:
    """The stored statistics equal a recount by the current rule; the terms' df."""
    await conn.execute(SCOPE, {"tenant": TENANT})
    params = {"tenant": TENANT}
    assert await conn.scalar(POSTINGS_DIFFER, params) == 0
    counted = (
        await conn.execute(
            text(f"SELECT count(*), sum({LENGTH}) FROM chunks c WHERE c.tenant_id = :tenant"),
            params,
        )
    ).one()
    kept = (
        await conn.execute(
            text("SELECT chunks, tokens FROM bm25_corpus WHERE tenant_id = :tenant"), params
        )
    ).one()
    assert tuple(counted) == tuple(kept)
    recount = {
        str(lexeme): int(df)
        for lexeme, df in await conn.execute(
            text(
                f"SELECT l.lexeme, count(*) FROM chunks c, unnest(tsvector_to_array({TERMS}))"
                " AS l(lexeme) WHERE c.tenant_id = :tenant GROUP BY l.lexeme"
            ),
            params,
        )
    }
    stored = {
        str(lexeme): int(df)
        for lexeme, df in await conn.execute(
            text("SELECT lexeme, df FROM bm25_terms WHERE tenant_id = :tenant AND df <> 0"),
            params,
        )
    }
    assert stored == recount
    await conn.commit()
    return stored


@pytest.mark.slow
@pytest.mark.single_node  # a database of its own, migrated down and up
async def test_migration_0015_builds_heading_terms_in_batches_and_resumes(
    database: DatabaseUrls,
) -> None:
    module = migration()

    async def content_only(conn: AsyncConnection) -> None:
        assert await conn.scalar(text("select version_num from alembic_version")) == "0014"
        # a run stopped after its first batch: the column and function exist (no heading
        # vector yet: content-only terms, as 0014 counts them), then 7 chunks built
        await conn.execute(text(module.HEADING_TEXT))
        await conn.execute(text("ALTER TABLE chunks ADD COLUMN heading_vector tsvector"))
        await conn.commit()
        terms = await exact(conn)
        assert "vorpalix" not in terms
        assert "glimmerfen" not in terms
        await conn.execute(SCOPE, {"tenant": TENANT})
        batch = {"tenant": TENANT, "after": module.ZERO, "batch": 7}
        ids = [row[0] for row in await conn.execute(module.NEXT, batch)]
        for statement in (module.LOCK, module.BUILD, *module.ADD):
            await conn.execute(text(statement), {"tenant": TENANT, "ids": ids})
        await conn.commit()
        halfway = await exact(conn)
        assert halfway["vorpalix"] == 7

    async def with_headings(conn: AsyncConnection) -> None:
        await conn.execute(SCOPE, {"tenant": TENANT})
        left = await conn.scalar(text("SELECT count(*) FROM chunks WHERE heading_vector IS NULL"))
        assert left == 0
        await conn.commit()
        terms = await exact(conn)
        assert terms["vorpalix"] == CHUNKS  # every chunk's title, once
        assert terms["manual"] == CHUNKS
        assert terms["glimmerfen"] == CHUNKS
        assert terms["pump"] == CHUNKS  # in the content and in the heading: df counts it once

    await down_and_up(
        database, to="0014", before=seed, after_down=content_only, after_up=with_headings
    )
