"""How long migration 0015 (titles and headings in keyword search) takes on existing chunks.

    python -m bench.keyword_migration_bench [--chunks 100000] [--tenants 10] [--database-url URL]

A migrated database is filled by SQL (as superuser) with `--chunks` chunks spread evenly over
`--tenants` tenants, ten chunks a document: NFCorpus texts as contents and titles, a two-level
section path, random unit vectors, every index of the service in place (HNSW included). It is
then migrated down to 0014 (content-only statistics, recounted) and the upgrade to the head is
timed as `rag migrate` runs it: the batches that build each chunk's heading terms and move its
terms in the statistics, then the GIN index on the keyword terms. The statistics of every
tenant are verified after.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from alembic import command
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.db import bm25
from app.db.engine import async_url
from app.db.migrate import alembic_config, migrate
from app.evaluation.beir import read_beir
from bench.kit.database import (
    APP_ROLE,
    DIMENSIONS,
    HNSW_DEFINITION,
    HNSW_INDEX,
    bench_database,
    connect_loader,
)
from bench.kit.paths import NFCORPUS
from bench.kit.report import log, print_table, write_json

DOCUMENT_CHUNKS = 10

FILL = [
    "CREATE TEMP TABLE texts (n int PRIMARY KEY, title text, body text)",
    # documents: tenant t holds documents [t * per, (t + 1) * per)
    """
    INSERT INTO collections (id, tenant_id, name)
    SELECT gen_random_uuid(), 'mig' || t, 'default' FROM generate_series(0, $1 - 1) AS t
    """,
    """
    INSERT INTO documents (id, tenant_id, collection_id, external_id, title, source_type,
                           content_hash, chunk_count)
    SELECT gen_random_uuid(), 'mig' || (d / $2::int), c.id, 'doc' || d, x.title, 'text', 'h',
           $3::int
    FROM generate_series(0, $1::int * $2::int - 1) AS d
    JOIN collections c ON c.tenant_id = 'mig' || (d / $2::int)
    JOIN texts x ON x.n = d % (SELECT count(*) FROM texts)
    """,
    """
    INSERT INTO chunks (id, tenant_id, document_id, collection_id, chunk_index, content,
                        section_path, token_count, embedding, embedding_model,
                        embedded_text_hash)
    SELECT gen_random_uuid(), d.tenant_id, d.id, d.collection_id, i, x.body,
           ARRAY[d.title, 'Part ' || (i / 4), 'Results ' || i], 200,
           l2_normalize(ARRAY(SELECT random() - 0.5 + 0 * i
                              FROM generate_series(1, $1::int))::vector),
           'random', 'h'
    FROM documents d, generate_series(0, $2::int - 1) AS i,
         texts x WHERE x.n = (hashtext(d.id::text || i) & 2147483647) % (SELECT count(*) FROM texts)
    """,
]


async def fill(superuser_url: str, *, chunks: int, tenants: int) -> dict[str, float]:
    corpus = read_beir(NFCORPUS).corpus or []
    documents = chunks // DOCUMENT_CHUNKS
    per_tenant = documents // tenants
    conn = await connect_loader(superuser_url)
    started = time.perf_counter()
    try:
        await conn.execute(
            "INSERT INTO tenants (id, name) SELECT 'mig' || t, 'mig' || t"
            " FROM generate_series(0, $1 - 1) AS t",
            tenants,
        )
        await conn.execute(FILL[0])
        await conn.copy_records_to_table(
            "texts",
            records=[(n, d.title, d.text) for n, d in enumerate(corpus)],
            columns=["n", "title", "body"],
        )
        await conn.execute(FILL[1], tenants)
        await conn.execute(FILL[2], tenants, per_tenant, DOCUMENT_CHUNKS)
        await conn.execute(f"DROP INDEX {HNSW_INDEX}")  # built once after: faster
        await conn.execute(FILL[3], DIMENSIONS, DOCUMENT_CHUNKS)
        await conn.execute(HNSW_DEFINITION)
        await conn.execute("VACUUM ANALYZE chunks")
        count = await conn.fetchval("SELECT count(*) FROM chunks")
    finally:
        await conn.close()
    return {"chunks": float(count), "fill_s": time.perf_counter() - started}


def downgrade(conn: Connection) -> None:
    config = alembic_config(embedding_dimensions=DIMENSIONS, app_role=APP_ROLE)
    config.attributes["connection"] = conn
    command.downgrade(config, "0014")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_database(superuser_url=args.database_url) as db:
        loaded = await fill(db.superuser_url, chunks=args.chunks, tenants=args.tenants)
        log(f"filled: {loaded}")
        engine = create_async_engine(async_url(db.owner_url))
        try:
            began = time.perf_counter()
            async with engine.connect() as conn:
                await conn.run_sync(downgrade)
                await conn.commit()
            down = time.perf_counter() - began
        finally:
            await engine.dispose()
        log(f"at 0014 (content-only statistics recounted) in {down:.1f} s")
        began = time.perf_counter()
        await migrate(
            db.owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=db.app_url
        )
        up = time.perf_counter() - began
        log(f"0014 -> head in {up:.1f} s")
        checks = [await bm25.verify(db.sessions, f"mig{t}") for t in range(args.tenants)]
    ok = all(check.ok for check in checks)
    chunks = int(loaded["chunks"])
    rows = [
        ["chunks", chunks],
        ["tenants", args.tenants],
        ["upgrade 0014 -> 0015, s", round(up, 1)],
        ["per 1,000 chunks, s", round(up / chunks * 1000, 2)],
        ["downgrade (recount), s", round(down, 1)],
        ["statistics exact after", ok],
    ]
    print_table("migration 0015", ["", "value"], rows)
    return {"loaded": loaded, "upgrade_s": up, "downgrade_s": down, "exact": ok}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    print(f"JSON: {write_json('keyword_migration_bench', asyncio.run(run(args)))}")  # noqa: T201


if __name__ == "__main__":
    main()
