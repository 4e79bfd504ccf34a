"""Ingestion stages shared by the ingest benchmark and the suite beside the alternatives."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from typing import Any

import numpy as np

from app.errors import AppError
from app.ingest.chunking import Chunker
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput, PrecomputedChunk
from app.ingest.parsing import SourceType, parse_text
from bench.kit.corpus import CorpusDoc, PreparedDoc, corpus_input, document_text
from bench.kit.database import BenchDatabase, connect_loader, copy_rows, create_tenants
from bench.kit.stats import quantile
from bench.kit.stubs import LookupEmbedder


def parse_and_chunk(docs: list[CorpusDoc], chunker: Chunker) -> dict[str, Any]:
    parse_s = chunk_s = 0.0
    chunks = 0
    per_doc_ms: list[float] = []
    for doc in docs:
        started = time.perf_counter()
        parsed = parse_text(document_text(doc), SourceType.TEXT)
        parsed_at = time.perf_counter()
        drafts = chunker.split(parsed)
        done = time.perf_counter()
        parse_s += parsed_at - started
        chunk_s += done - parsed_at
        chunks += len(drafts)
        per_doc_ms.append((done - started) * 1000)
    total = parse_s + chunk_s
    return {
        "docs": len(docs),
        "chunks": chunks,
        "parse_s": round(parse_s, 3),
        "chunk_s": round(chunk_s, 3),
        "chunks_per_s": round(chunks / total, 1),
        "parse_chunks_per_s": round(chunks / parse_s, 1),
        "chunk_chunks_per_s": round(chunks / chunk_s, 1),
        "per_doc_ms_p50": round(quantile(per_doc_ms, 0.5), 3),
        "per_doc_ms_p95": round(quantile(per_doc_ms, 0.95), 3),
    }


async def ingest_stage(
    db: BenchDatabase,
    embedder: Any,
    chunker: Chunker,
    inputs: list[DocumentInput],
    *,
    tenant_id: str,
    concurrency: int,
    batch: int,
) -> dict[str, Any]:
    """`ingest_documents` on `batch` documents per call (what /documents/batch and `rag
    ingest` do), `concurrency` calls at once."""
    await create_tenants(db.sessions, [tenant_id])
    per_call_ms: list[float] = []
    chunks = 0
    queue = list(reversed(inputs))

    async def call() -> None:
        nonlocal chunks
        documents = [queue.pop() for _ in range(min(batch, len(queue)))]
        began = time.perf_counter()
        outcomes = await ingest_documents(
            db.sessions, embedder, chunker=chunker, tenant_id=tenant_id, documents=documents
        )
        per_call_ms.append((time.perf_counter() - began) * 1000)
        for outcome in outcomes:
            if isinstance(outcome, AppError):
                raise outcome
            chunks += outcome.chunks

    async def worker() -> None:
        while queue:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "docs": len(inputs),
        "chunks": chunks,
        "batch": batch,
        "concurrency": concurrency,
        "seconds": round(elapsed, 2),
        "chunks_per_s": round(chunks / elapsed, 1),
        "docs_per_s": round(len(inputs) / elapsed, 1),
        "per_call_ms_p50": round(quantile(per_call_ms, 0.5), 2),
        "per_call_ms_p95": round(quantile(per_call_ms, 0.95), 2),
    }


def precomputed_inputs(
    prepared: list[PreparedDoc], embedder: LookupEmbedder
) -> list[DocumentInput]:
    return [
        corpus_input(
            p.doc,
            chunks=[
                PrecomputedChunk(content=c, embedding=embedder.vectors[t])
                for c, t in zip(p.contents, p.texts, strict=True)
            ],
            embedding_model=embedder.model_id,
        )
        for p in prepared
    ]


async def copy_stage(
    db: BenchDatabase,
    prepared: list[PreparedDoc],
    lookup: LookupEmbedder,
    *,
    tenant_id: str,
    writers: int,
) -> dict[str, Any]:
    """Ceiling: the same kind of rows by binary COPY into the same tables (every index, HNSW
    included, the tsvector columns and foreign keys maintained as usual), `writers`
    connections at once, one transaction each. As superuser: every tenant table forces
    row-level security on its owner too, and COPY FROM is refused under it (the runtime
    role's and the owner's alike), so this is a bound, not an alternative path; it skips the
    policies' checks and keeps no BM25 statistics and no document vectors."""
    await create_tenants(db.sessions, [tenant_id])
    collection = uuid.uuid4()
    parts: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = [
        ([], []) for _ in range(writers)
    ]
    chunk_count = 0
    for number, p in enumerate(prepared):
        documents, chunks = parts[number % writers]
        document_id = uuid.uuid4()
        documents.append(
            (
                document_id,
                tenant_id,
                collection,
                p.doc.doc_id,
                p.doc.doc_id,
                "text",
                hashlib.sha256(p.doc.text.encode()).hexdigest(),
                len(p.texts),
            )
        )
        for index, (content, text) in enumerate(zip(p.contents, p.texts, strict=True)):
            chunk_count += 1
            chunks.append(
                (
                    uuid.uuid4(),
                    tenant_id,
                    document_id,
                    collection,
                    index,
                    content,
                    0,
                    np.asarray(lookup.vectors[text], dtype=np.float32),
                    lookup.model_id,
                    hashlib.sha256(text.encode()).hexdigest(),
                )
            )
    conns = [await connect_loader(db.superuser_url) for _ in range(writers)]
    try:
        await copy_rows(conns[0], collections=[(collection, tenant_id, "default")])
        started = time.perf_counter()
        await asyncio.gather(
            *(
                copy_rows(conn, documents=documents, chunks=chunks)
                for conn, (documents, chunks) in zip(conns, parts, strict=True)
            )
        )
        elapsed = time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()
    return {
        "docs": len(prepared),
        "chunks": chunk_count,
        "concurrency": writers,
        "seconds": round(elapsed, 2),
        "chunks_per_s": round(chunk_count / elapsed, 1),
        "docs_per_s": round(len(prepared) / elapsed, 1),
        "batch": len(prepared) // writers,
        "per_call_ms_p50": "",
        "per_call_ms_p95": "",
    }
