"""Ingestion throughput in chunks/s, stage by stage, on NFCorpus documents.

    python -m bench.ingest_bench [--docs 1000] [--embed-texts 512] [--e2e-docs 300]
                                           [--batch 100] [--concurrency 2]
                                           [--skip-embed] [--skip-e2e] [--database-url URL]

Stages, each on the first ``--docs`` NFCorpus documents (plain text, "title\\n\\ntext"):

(a) parse + chunk: ``parse_text`` then the service's ``Chunker`` (``build_chunker``: chunks of
    256 - 48 = 208 MiniLM tokens, overlap 50), timed separately per document.
(b) embed: the texts the pipeline embeds (contextual header + chunk) of the first
    ``--embed-texts`` chunks through ``LocalEmbedder.embed_documents`` against the raw
    ``SentenceTransformer.encode`` on the same texts, same batch size, interleaved in blocks of
    256 (order alternating) so machine load hits both alike; plus the share of padding in the
    model's batches either way (deterministic).
(c) store: ``ingest_documents`` with an embedder that only looks the chunks' real MiniLM vectors
    up (from the disk cache the search bench shares, filled before the clock starts), so it
    measures parse + chunk + DB write; then with the chunks pre-chunked and pre-embedded
    (``DocumentInput.chunks``), which leaves only the DB write. One document per call, then
    ``--batch`` per call (as /documents/batch and ``rag ingest`` send them), one call at a
    time and ``--concurrency`` at once; and, as a ceiling, the same rows in one binary COPY.
(d) end to end: ``ingest_documents`` with the real local model, ``--batch`` documents per
    call, on the first ``--e2e-docs`` documents.

Throughput figures are chunks/s; the database is a throwaway embedded PostgreSQL 18 +
pgvector with the migrations applied, written to as the runtime role (RLS on).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import numpy as np
from sqlalchemy import text as sql

from app.embeddings.local import LocalEmbedder
from app.resources import build_chunker
from bench.kit.corpus import (
    CachingEmbedder,
    corpus_input,
    prepare_corpus,
    read_corpus,
    vector_cache_path,
)
from bench.kit.database import (
    HNSW_DEFINITION,
    HNSW_INDEX,
    BenchDatabase,
    bench_database,
    connect_loader,
    copy_rows,
    create_tenants,
    server_settings,
)
from bench.kit.ingestion import copy_stage, ingest_stage, parse_and_chunk, precomputed_inputs
from bench.kit.report import log, print_table, write_json
from bench.kit.stubs import LookupEmbedder

EMBED_BLOCK = 256  # texts per interleaved block in (b)


# --- (a) parse + chunk ----------------------------------------------------------------------


# --- (b) embed ------------------------------------------------------------------------------


async def embed_stage(embedder: LocalEmbedder, texts: list[str]) -> dict[str, Any]:
    """Ours vs raw encode, interleaved per block (order alternating) to share the load."""
    ours_s = raw_s = 0.0
    ratios: list[float] = []
    for index, start in enumerate(range(0, len(texts), EMBED_BLOCK)):
        block = texts[start : start + EMBED_BLOCK]
        runs = ("ours", "raw") if index % 2 == 0 else ("raw", "ours")
        elapsed: dict[str, float] = {}
        for which in runs:
            began = time.perf_counter()
            if which == "ours":
                await embedder.embed_documents(block)
            else:
                raw_encode(embedder, block)
            elapsed[which] = time.perf_counter() - began
        ours_s += elapsed["ours"]
        raw_s += elapsed["raw"]
        ratios.append(elapsed["raw"] / elapsed["ours"])  # >1: ours faster
        log(
            f"  embed block {index}: ours {len(block) / elapsed['ours']:.1f}/s, "
            f"raw {len(block) / elapsed['raw']:.1f}/s"
        )
    return {
        "texts": len(texts),
        "batch_size": embedder.batch_size,
        "ours_chunks_per_s": round(len(texts) / ours_s, 1),
        "raw_chunks_per_s": round(len(texts) / raw_s, 1),
        "ours_over_raw_throughput": round(raw_s / ours_s, 3),
        "median_block_ratio": round(statistics.median(ratios), 3),
        "blocks": len(ratios),
        **padding_waste(embedder, texts),
    }


def padding_waste(embedder: LocalEmbedder, texts: list[str]) -> dict[str, float]:
    """Share of padded positions in the model's batches: in the order embed_documents cuts
    sub-batches (input order) vs sorted by length over each block (what encode does when
    given the whole block). Deterministic, unlike the timings on a shared machine."""
    tokenizer: Any = getattr(embedder.model, "tokenizer", None)
    if tokenizer is None:
        return {}
    limit = embedder.max_input_tokens or 512
    lengths = [min(len(ids), limit) for ids in tokenizer(texts)["input_ids"]]

    def waste(order: list[int]) -> float:
        padded = real = 0
        for start in range(0, len(order), embedder.batch_size):
            batch = [lengths[i] for i in order[start : start + embedder.batch_size]]
            padded += max(batch) * len(batch)
            real += sum(batch)
        return 1 - real / padded

    in_order = list(range(len(texts)))
    by_block = [
        i
        for start in range(0, len(texts), EMBED_BLOCK)
        for i in sorted(in_order[start : start + EMBED_BLOCK], key=lambda i: -lengths[i])
    ]
    return {
        "tokens_mean": round(statistics.fmean(lengths), 1),
        "padding_share_input_order": round(waste(in_order), 3),
        "padding_share_length_sorted": round(waste(by_block), 3),
    }


def raw_encode(embedder: LocalEmbedder, texts: list[str]) -> None:
    model: Any = embedder.model
    model.encode(
        texts,
        batch_size=embedder.batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


# --- (c), (d) ingest through ingest_document -------------------------------------------------


async def prefill(db: BenchDatabase, rows: int, lookup: LookupEmbedder) -> dict[str, Any]:
    """`rows` chunks of another tenant first (the corpus's vectors with noise, by COPY with the
    HNSW index rebuilt after): inserts into a bigger graph cost more, so the stages run
    against a table of a realistic size rather than an empty one."""
    texts = list(lookup.vectors)
    vectors = np.asarray([lookup.vectors[t] for t in texts], dtype=np.float32)
    rng = np.random.default_rng(7)
    tenant_id, collection = "ingest-prefill", uuid.uuid4()
    await create_tenants(db.sessions, [tenant_id])
    documents, chunks = [], []
    for row in range(rows):
        moved = vectors[row % len(texts)] + rng.normal(scale=0.05, size=vectors.shape[1])
        document_id = uuid.uuid4()
        documents.append(
            (document_id, tenant_id, collection, f"p{row}", f"p{row}", "text", f"{row:064x}", 1)
        )
        chunks.append(
            (
                uuid.uuid4(),
                tenant_id,
                document_id,
                collection,
                0,
                texts[row % len(texts)],
                0,
                (moved / np.linalg.norm(moved)).astype(np.float32),
                lookup.model_id,
                f"{row:064x}",
            )
        )
    conn = await connect_loader(db.superuser_url)
    started = time.perf_counter()
    try:
        await conn.execute(f"DROP INDEX {HNSW_INDEX}")
        await copy_rows(
            conn,
            collections=[(collection, tenant_id, "default")],
            documents=documents,
            chunks=chunks,
        )
        await conn.execute(HNSW_DEFINITION)
        await conn.execute("VACUUM ANALYZE chunks")
    finally:
        await conn.close()
    return {"rows": rows, "seconds": round(time.perf_counter() - started, 1)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    docs = read_corpus(args.docs)
    log("loading the local model")
    async with bench_database(superuser_url=args.database_url) as db:
        embedder = LocalEmbedder.load(db.settings)
        chunker = build_chunker(db.settings, embedder)
        results: dict[str, Any] = {
            "docs": len(docs),
            "model": embedder.model_id,
            "server": await server_settings(db.superuser_url),
        }
        log(f"(a) parse + chunk, {len(docs)} docs")
        results["parse_chunk"] = parse_and_chunk(docs, chunker)
        prepared = prepare_corpus(docs, chunker)
        texts = [t for p in prepared for t in p.texts]
        if not args.skip_embed:
            sample = texts[: args.embed_texts]
            log(f"(b) embed {len(sample)} chunks, ours vs raw encode")
            results["embed"] = await embed_stage(embedder, sample)
        log("(c) the chunks' real vectors (disk cache, the model fills what is missing)")
        lookup = LookupEmbedder(embedder.dimensions, embedder.model_id)
        await lookup.add(texts, CachingEmbedder(embedder, vector_cache_path(embedder.model_id)))
        if args.prefill:
            log(f"(c) prefilling the table with {args.prefill} chunks of another tenant")
            results["prefill"] = await prefill(db, args.prefill, lookup)
        stores: list[dict[str, Any]] = []
        shapes = sorted({(1, 1), (args.batch, 1), (args.batch, args.concurrency)})
        for batch, concurrency in shapes:
            for path in ("parse + chunk + DB write", "DB write only"):
                varied = lookup.varied(seed=len(stores))
                inputs = (
                    [corpus_input(d) for d in docs]
                    if path.startswith("parse")
                    else precomputed_inputs(prepared, varied)
                )
                log(f"(c) {path}: {batch} documents per call, {concurrency} at once")
                row = await ingest_stage(
                    db,
                    varied,
                    chunker,
                    inputs,
                    tenant_id=f"ingest-{len(stores)}",
                    concurrency=concurrency,
                    batch=batch,
                )
                stores.append({"path": path, **row})
        for writers in sorted({1, args.concurrency}):
            log(f"(c) ceiling: binary COPY of the same kind of rows, {writers} at once")
            row = await copy_stage(
                db,
                prepared,
                lookup.varied(seed=len(stores)),
                tenant_id=f"ingest-{len(stores)}",
                writers=writers,
            )
            stores.append({"path": "ceiling: binary COPY (superuser)", **row})
        async with db.engine.connect() as conn:
            results["table_rows_after"] = await conn.scalar(
                sql("select reltuples::bigint from pg_class where relname = 'chunks'")
            )
        results["store"] = stores
        if not args.skip_e2e:
            e2e_docs = docs[: args.e2e_docs]
            log(f"(d) end to end, local model, {len(e2e_docs)} docs")
            results["end_to_end"] = await ingest_stage(
                db,
                embedder,
                chunker,
                [corpus_input(d) for d in e2e_docs],
                tenant_id="ingest-e2e",
                concurrency=1,
                batch=args.batch,
            )
    return results


def report(results: dict[str, Any]) -> None:
    pc = results["parse_chunk"]
    rows: list[list[object]] = [
        ["(a) parse (parse_text)", pc["chunks"], pc["parse_chunks_per_s"], "", ""],
        ["(a) chunk (Chunker.split)", pc["chunks"], pc["chunk_chunks_per_s"], "", ""],
        [
            "(a) parse + chunk",
            pc["chunks"],
            pc["chunks_per_s"],
            pc["per_doc_ms_p50"],
            pc["per_doc_ms_p95"],
        ],
    ]
    if emb := results.get("embed"):
        rows += [
            [
                "(b) embed, LocalEmbedder.embed_documents",
                emb["texts"],
                emb["ours_chunks_per_s"],
                "",
                "",
            ],
            [
                "(b) embed, raw SentenceTransformer.encode",
                emb["texts"],
                emb["raw_chunks_per_s"],
                "",
                "",
            ],
        ]
    for store in results["store"]:
        rows.append(
            [
                f"(c) {store['path']}, {store['batch']}/call x{store['concurrency']}",
                store["chunks"],
                store["chunks_per_s"],
                store["per_call_ms_p50"],
                store["per_call_ms_p95"],
            ]
        )
    if e2e := results.get("end_to_end"):
        rows.append(
            [
                f"(d) end to end (local model), {e2e['batch']}/call",
                e2e["chunks"],
                e2e["chunks_per_s"],
                e2e["per_call_ms_p50"],
                e2e["per_call_ms_p95"],
            ]
        )
    print_table(
        f"ingestion, NFCorpus, {results['docs']} documents",
        ["stage", "chunks", "chunks/s", "call P50 ms", "call P95 ms"],
        rows,
    )
    print(  # noqa: T201
        f"store stages: {results.get('prefill', {}).get('rows', 0)} chunks in the table before "
        f"them, about {results.get('table_rows_after', '?')} after; every stage inserts new "
        "vectors (the corpus's with noise)"
    )
    if emb:
        print(  # noqa: T201
            f"embed: ours/raw throughput {emb['ours_over_raw_throughput']:.3f} "
            f"(median per-block {emb['median_block_ratio']:.3f}, 1.0 = same speed); padded "
            f"positions {emb.get('padding_share_length_sorted')} as embed_documents cuts "
            f"sub-batches (sorted by length) vs {emb.get('padding_share_input_order')} "
            "in input order\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--embed-texts", type=int, default=512, help="(b) on the first N chunks")
    parser.add_argument("--e2e-docs", type=int, default=300, help="(d) on the first N docs")
    parser.add_argument("--batch", type=int, default=100, help="(c), (d) documents per call")
    parser.add_argument(
        "--prefill", type=int, default=20_000, help="(c) chunks in the table before the stages"
    )
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    report(results)
    path = write_json("ingest_bench", {"args": vars(args), **results})
    print(f"JSON: {path}")  # noqa: T201


if __name__ == "__main__":
    main()
