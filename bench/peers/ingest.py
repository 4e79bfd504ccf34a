"""Ingestion split into parse, embed and store, and index builds (vector and halfvec HNSW).

Parse and chunk are ingest_bench's stage (a); embed is the local model on the texts the
pipeline embeds; store is ingest_bench's `ingest_stage` with pre-chunked, pre-embedded
documents (the service's write path as the runtime role, 100 documents per call), beside the
same vectors by binary COPY (superuser, PostgreSQL's own ceiling) and by Chroma's `add`, each
into the table or collection of the size just measured.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np

from app.embeddings.local import LocalEmbedder
from app.ingest.chunking import Chunker
from bench.kit.corpus import CorpusDoc, PreparedDoc
from bench.kit.database import HNSW_DEFINITION, BenchDatabase, connect_loader
from bench.kit.ingestion import copy_stage, ingest_stage, parse_and_chunk
from bench.kit.ingestion import precomputed_inputs as precomputed
from bench.kit.report import log
from bench.kit.stubs import LookupEmbedder
from bench.kit.synthetic import Loaded

from .chroma import ChromaShared
from .workload import Workload

HALFVEC_INDEX = "bench_chunks_embedding_halfvec_hnsw"


async def parse_and_embed(
    local: LocalEmbedder, chunker: Chunker, docs: list[CorpusDoc], texts: list[str]
) -> dict[str, Any]:
    """Parse + chunk of `docs` (ingest_bench's stage a) and the model on `texts`."""
    parsed = parse_and_chunk(docs, chunker)
    began = time.perf_counter()
    await local.embed_documents(texts)
    embed_s = time.perf_counter() - began
    return {
        "parse": {"chunks": parsed["chunks"], "chunks_per_s": parsed["parse_chunks_per_s"]},
        "chunk": {"chunks": parsed["chunks"], "chunks_per_s": parsed["chunk_chunks_per_s"]},
        "parse_and_chunk": {"chunks": parsed["chunks"], "chunks_per_s": parsed["chunks_per_s"]},
        "embed": {"chunks": len(texts), "chunks_per_s": round(len(texts) / embed_s, 1)},
    }


async def store_rows(
    db: BenchDatabase,
    chunker: Chunker,
    workload: Workload,
    prepared: list[PreparedDoc],
    chroma: ChromaShared,
    *,
    size: int,
) -> list[dict[str, Any]]:
    """The same new chunks (the corpus's vectors moved by a little noise, so no index has
    seen them) through the service's write path, binary COPY and Chroma, into a table or
    collection holding `size` rows."""
    lookup = LookupEmbedder(workload.stub.dimensions, workload.stub.model_id)
    await lookup.add([t for p in prepared for t in p.texts], workload.embedder)
    rows = []
    log(f"  {size} store: service write path")
    service = await ingest_stage(
        db,
        lookup.varied(seed=1),
        chunker,
        precomputed(prepared, lookup.varied(seed=1)),
        tenant_id=f"ingest-{size}",
        concurrency=1,
        batch=100,
    )
    rows.append(store_row(size, "service: ingest_documents, 100 per call", service))
    log(f"  {size} store: binary COPY")
    copied = await copy_stage(
        db, prepared, lookup.varied(seed=2), tenant_id=f"copy-{size}", writers=1
    )
    rows.append(store_row(size, "PostgreSQL binary COPY (superuser, ceiling)", copied))
    varied = lookup.varied(seed=3)
    texts = [t for p in prepared for t in p.texts]
    vectors = np.asarray([varied.vectors[t] for t in texts], dtype=np.float32)
    began = time.perf_counter()
    chroma.add([str(uuid.uuid4()) for _ in texts], vectors, [f"chroma-{size}"] * len(texts))
    elapsed = time.perf_counter() - began
    rows.append(
        store_row(
            size,
            "Chroma add",
            {"chunks": len(texts), "chunks_per_s": round(len(texts) / elapsed, 1)},
        )
    )
    return rows


def store_row(size: int, path: str, measured: dict[str, Any]) -> dict[str, Any]:
    return {
        "size": size,
        "path": path,
        "chunks": measured["chunks"],
        "chunks_per_s": measured["chunks_per_s"],
    }


async def index_builds(
    db: BenchDatabase, loaded: Loaded, peer_builds: list[tuple[str, dict[str, float]]]
) -> list[dict[str, Any]]:
    """HNSW over `vector` (the migration's index, built by bench.kit.synthetic's load) and over
    `halfvec` (an expression index with the same m and ef_construction, built here and
    dropped), both with maintenance_work_mem 1GB; each peer store's load beside them.
    Per million chunks: scaled linearly from the measured size (HNSW builds grow a little
    faster than linearly, so read it as a lower bound past the measured size)."""
    conn = await connect_loader(db.superuser_url)
    try:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        definition = HNSW_DEFINITION.replace("ix_chunks_embedding_hnsw", HALFVEC_INDEX).replace(
            "(embedding vector_cosine_ops)",
            f"((embedding::halfvec({loaded.vectors.shape[1]})) halfvec_cosine_ops)",
        )
        began = time.perf_counter()
        await conn.execute(definition)
        halfvec_s = time.perf_counter() - began
        halfvec_mb = await conn.fetchval(f"select pg_relation_size('{HALFVEC_INDEX}')") / 2**20
        await conn.execute(f"DROP INDEX {HALFVEC_INDEX}")
    finally:
        await conn.close()
    scale = 1_000_000 / loaded.size
    measured = [
        ("pgvector HNSW, vector", loaded.timings["hnsw_build_s"], loaded.timings["hnsw_mb"]),
        ("pgvector HNSW, halfvec", halfvec_s, halfvec_mb),
        *[(name, built["build_s"], built["disk_mb"]) for name, built in peer_builds],
    ]
    return [
        {
            "size": loaded.size,
            "index": name,
            "build_s": round(seconds, 2),
            "size_mb": round(megabytes, 1),
            "build_s_per_million": round(seconds * scale, 1),
            "mb_per_million": round(megabytes * scale, 1),
        }
        for name, seconds, megabytes in measured
    ]
