"""Storage per chunk, measured: how much disk (and, to stay fast, memory) a deployment needs.

    python -m bench.sizing_bench [--sizes 20000,100000] [--tenants 100]

For each size: a fresh migrated database (embedded PostgreSQL, as the other benchmarks), then
`size` chunks of NFCorpus text (chunked as the service chunks it: 208 MiniLM tokens, overlap
50) in documents of 4 chunks over `tenants` tenants, loaded by binary COPY as superuser. The
migrations' triggers run as they do on ingest, so the keyword statistics and postings are
filled. Vectors are random unit vectors of 384 dimensions: the size of an HNSW graph depends
on the dimension and on m, not on where the points lie. The HNSW index is dropped before the
load and rebuilt after it (as bench.kit.synthetic does); then VACUUM ANALYZE, which also
moves the GIN index's pending list into the index.

Reported per relation: bytes (pg_relation_size of the heap with its TOAST, each index), and
bytes per chunk, and the same extrapolated linearly to one million chunks. Two sizes show
whether the linear extrapolation holds.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from typing import Any

import numpy as np

from app.embeddings.local import default_tokenizer_path
from app.ingest.chunking import Chunker, load_tokenizer
from bench.kit.corpus import prepare_corpus, read_corpus
from bench.kit.database import (
    HNSW_DEFINITION,
    HNSW_INDEX,
    bench_database,
    connect_loader,
    copy_rows,
    create_tenants,
    server_settings,
)
from bench.kit.report import log, print_table, write_json

MODEL_ID = "local:all-MiniLM-L6-v2"
CHUNK_TOKENS, OVERLAP_TOKENS = 208, 50  # what the service uses with MiniLM (ARCHITECTURE.md)
DIMENSIONS = 384

# (label, SQL giving the bytes) for each part worth sizing
PARTS: list[tuple[str, str]] = [
    ("chunks heap (incl. TOAST)", "pg_table_size('chunks')"),
    (
        "chunks HNSW index (embedding)",
        f"pg_relation_size('{HNSW_INDEX}')",
    ),
    ("chunks GIN index (search_vector)", "pg_relation_size('ix_chunks_search_vector')"),
    ("chunks GIN index (metadata)", "pg_relation_size('ix_chunks_metadata')"),
    (
        "chunks btree indexes",
        "(select coalesce(sum(pg_relation_size(indexrelid)), 0) from pg_index i"
        " join pg_class c on c.oid = i.indexrelid join pg_am a on a.oid = c.relam"
        " where i.indrelid = 'chunks'::regclass and a.amname = 'btree')",
    ),
    ("bm25_postings heap", "pg_table_size('bm25_postings')"),
    ("bm25_postings indexes", "pg_indexes_size('bm25_postings')"),
    ("bm25_terms (heap + indexes)", "pg_total_relation_size('bm25_terms')"),
    ("documents (heap + indexes)", "pg_total_relation_size('documents')"),
    ("database", "pg_database_size(current_database())"),
]


def chunk_rows(
    texts: list[tuple[str, int]], size: int, tenants: list[str]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Collections, documents of 4 chunks and chunks, spread evenly over the tenants."""
    rng = np.random.default_rng(size)
    vectors = rng.normal(size=(size, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    collections = {t: uuid.uuid4() for t in tenants}
    documents: list[tuple[Any, ...]] = []
    chunks: list[tuple[Any, ...]] = []
    for start in range(0, size, 4):
        tenant = tenants[(start // 4) % len(tenants)]
        document_id = uuid.uuid4()
        rows = range(start, min(start + 4, size))
        documents.append(
            (
                document_id,
                tenant,
                collections[tenant],
                f"doc-{start}",
                f"document {start}",
                "text",
                f"{start:064x}",
                len(rows),
            )
        )
        for index, row in enumerate(rows):
            content, tokens = texts[row % len(texts)]
            chunks.append(
                (
                    uuid.uuid4(),
                    tenant,
                    document_id,
                    collections[tenant],
                    index,
                    content,
                    tokens,
                    vectors[row],
                    MODEL_ID,
                    f"{row:064x}",
                )
            )
    return [(c, t, "default") for t, c in collections.items()], documents, chunks


async def measure(size: int, tenant_count: int, texts: list[tuple[str, int]]) -> dict[str, Any]:
    async with bench_database() as db:
        tenants = [f"size-{n:04d}" for n in range(tenant_count)]
        await create_tenants(db.sessions, tenants)
        collections, documents, chunks = chunk_rows(texts, size, tenants)
        conn = await connect_loader(db.superuser_url)
        try:
            await conn.execute(f"DROP INDEX {HNSW_INDEX}")
            log(f"{size}: COPY (the triggers fill the keyword postings)")
            await copy_rows(conn, collections=collections, documents=documents, chunks=chunks)
            log(f"{size}: building the HNSW index")
            await conn.execute("SET maintenance_work_mem = '1GB'")
            await conn.execute(HNSW_DEFINITION)
            await conn.execute("VACUUM ANALYZE")
            counted = await conn.fetchval("select count(*) from chunks")
            postings = await conn.fetchval("select count(*) from bm25_postings")
            parts = {label: int(await conn.fetchval(f"select {sql}")) for label, sql in PARTS}
            server = await server_settings(db.superuser_url)
        finally:
            await conn.close()
    assert counted == size, (counted, size)
    return {"chunks": size, "postings": postings, "bytes": parts, "server": server}


def report(results: list[dict[str, Any]]) -> None:
    header = ["part", *[f"{r['chunks']:,} chunks MB" for r in results]]
    header += ["bytes / chunk", "per 1M chunks GB"]
    rows = []
    largest = results[-1]
    for label, _ in PARTS:
        per_chunk = largest["bytes"][label] / largest["chunks"]
        rows.append(
            [
                label,
                *[f"{r['bytes'][label] / 2**20:,.1f}" for r in results],
                f"{per_chunk:,.0f}",
                f"{per_chunk * 1_000_000 / 2**30:,.2f}",
            ]
        )
    print_table("storage by part (linear extrapolation from the largest size)", header, rows)
    for r in results:
        per_chunk = r["postings"] / r["chunks"]
        log(f"{r['chunks']:,} chunks: {r['postings']:,} postings ({per_chunk:.1f} per chunk)")


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    tokenizer = load_tokenizer(default_tokenizer_path())
    chunker = Chunker(tokenizer, chunk_tokens=CHUNK_TOKENS, overlap_tokens=OVERLAP_TOKENS)
    log("chunking NFCorpus")
    prepared = prepare_corpus(read_corpus(), chunker)
    texts = [(c, n) for p in prepared for c, n in zip(p.contents, p.token_counts, strict=True)]
    log(f"{len(texts)} distinct chunk texts")
    return [await measure(size, args.tenants, texts) for size in args.sizes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[20_000, 100_000]
    )
    parser.add_argument("--tenants", type=int, default=100)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    report(results)
    path = write_json("sizing", {"runs": results})
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
