"""Ingestion through the pipeline against the speed of its parts, measured in one run.

    python -m bench.pipeline_bench [--docs 300] [--repeats 3] [--slice 32] [--database-url URL]

On the first ``--docs`` NFCorpus documents (plain text), each repeat runs back to back:

(a) the local model alone (``RAG_EMBEDDING_RUNTIME`` default, ONNX): ``embed_documents`` on
    every chunk text the pipeline embeds, in one call (sub-batches sorted by length), texts/s;
(b) ``ingest_documents`` end to end with that model, ``--slice`` documents a slice, chunks/s;
    and with the whole batch as one slice (no overlap: the batch path before the pipeline);
(c) the same with an OpenAI-compatible embeddings server on loopback (bench/kit/fake_openai.py,
    its own process, deterministic vectors) through the service's ``OpenAIEmbedder``;
(d) the ceiling of storing those chunks: the same rows (the fake server's vectors) by binary
    COPY, ``copy_records_to_table`` into documents and chunks, every index (HNSW included)
    maintained, as superuser (row-level security is forced on the owner too, and refuses COPY);
(e) the write stage alone: the pipeline's write of each slice as the runtime role, its
    documents prepared and embedded beforehand (untimed): what (d) bounds;
(p) parsing and chunking alone, slice by slice as the prepare stage does: (c) cannot beat it.

Every ingest goes into a new tenant (every chunk is new). Medians of the repeats. Memory: the
highest RSS of this process while the pipeline ingests ``--docs`` documents, then twice as many
(from a generator, fake server), then twice as many as one slice.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import SecretStr

from app.db.tenancy import readers_of_sessions
from app.embeddings import Embedder
from app.embeddings.local import LocalEmbedder
from app.embeddings.openai_provider import OpenAIEmbedder
from app.errors import AppError
from app.ingest import steps
from app.ingest.chunking import Chunker
from app.ingest.documents import INLINE, Limits, ingest_documents, ingest_stream
from app.ingest.inputs import DocumentInput
from app.ingest.versions import Pending, new_version
from app.ingest.writing import write
from app.resources import build_chunker
from app.settings import EmbeddingProvider
from bench.kit.corpus import CorpusDoc, corpus_input, prepare_corpus, read_corpus
from bench.kit.database import BenchDatabase, bench_database, create_tenants, server_settings
from bench.kit.fake_openai import fake_openai, fake_vector
from bench.kit.ingestion import copy_stage
from bench.kit.memory import sampled_rss
from bench.kit.report import log, print_table, write_json
from bench.kit.stubs import LookupEmbedder

ONE_SLICE = Limits(slice_documents=10**9, slice_bytes=2**62)


async def embed_only(embedder: LocalEmbedder, texts: list[str]) -> float:
    """(a): texts/s of the model on these texts."""
    started = time.perf_counter()
    await embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


async def end_to_end(
    db: BenchDatabase,
    embedder: Embedder,
    chunker: Chunker,
    docs: Sequence[CorpusDoc],
    *,
    tenant_id: str,
    limits: Limits,
) -> float:
    """(b), (c): chunks/s of one ingest_documents call over every document."""
    await create_tenants(db.sessions, [tenant_id])
    inputs = [corpus_input(d) for d in docs]
    started = time.perf_counter()
    outcomes = await ingest_documents(
        db.sessions, embedder, chunker=chunker, tenant_id=tenant_id, documents=inputs, limits=limits
    )
    elapsed = time.perf_counter() - started
    chunks = 0
    for outcome in outcomes:
        if isinstance(outcome, AppError):
            raise outcome
        chunks += outcome.chunks
    return chunks / elapsed


def prepared_slices(
    db: BenchDatabase,
    embedder: LookupEmbedder,
    chunker: Chunker,
    docs: Sequence[CorpusDoc],
    *,
    slice_documents: int,
) -> tuple[list[list[Pending]], float]:
    """The documents parsed and chunked in slices as the prepare stage does, and chunks/s."""
    readers = readers_of_sessions(db.sessions)
    inputs = [corpus_input(d) for d in docs]
    slices: list[list[Pending]] = []
    started = time.perf_counter()
    for start in range(0, len(inputs), slice_documents):
        prepared = steps.prepare_slice(
            inputs[start : start + slice_documents],
            start=start,
            chunker=chunker,
            embedder=embedder,
            parser=INLINE,
            readers=readers,
        )
        slices.append([p for p in prepared if isinstance(p, Pending)])
    elapsed = time.perf_counter() - started
    return slices, sum(len(p.prepared.drafts) for s in slices for p in s) / elapsed


async def write_only(
    db: BenchDatabase, embedder: LookupEmbedder, slices: list[list[Pending]], *, tenant_id: str
) -> float:
    """(e): chunks/s of the write stage alone, slice after slice (vectors looked up, untimed)."""
    await create_tenants(db.sessions, [tenant_id])
    vectors = {
        h: embedder.vectors[t]
        for s in slices
        for p in s
        for h, t in zip(p.prepared.hashes, p.prepared.texts, strict=True)
    }
    versions = [[new_version(p, vectors, embedder.model_id) for p in s] for s in slices]
    chunks = 0
    started = time.perf_counter()
    for items, new in zip(slices, versions, strict=True):
        for _item, outcome in await write(db.sessions, tenant_id, items, new):
            if isinstance(outcome, AppError):
                raise outcome
        chunks += sum(len(v.chunks) for v in new)
    return chunks / (time.perf_counter() - started)


async def streamed_peak_rss(
    db: BenchDatabase,
    embedder: Embedder,
    chunker: Chunker,
    docs: Sequence[CorpusDoc],
    *,
    tenant_id: str,
    limits: Limits,
) -> dict[str, float]:
    """Peak RSS while the documents stream through (read from a generator, not held)."""
    await create_tenants(db.sessions, [tenant_id])

    async def source() -> AsyncIterator[DocumentInput]:
        for doc in docs:
            yield corpus_input(doc)

    async def ignore(_index: int, outcome: object) -> None:
        if isinstance(outcome, AppError):
            raise outcome

    with sampled_rss() as rss:
        await ingest_stream(
            db.sessions,
            embedder,
            chunker=chunker,
            tenant_id=tenant_id,
            documents=source(),
            deliver=ignore,
            parser=INLINE,
            limits=limits,
        )
    return {"docs": len(docs), "before_mb": rss.before_mb, "peak_mb": rss.peak_mb}


def openai_embedder(db: BenchDatabase, url: str, dimensions: int) -> OpenAIEmbedder:
    settings = db.settings.model_copy(
        update={
            "embedding_provider": EmbeddingProvider.OPENAI,
            "embedding_model": "bench-embed",
            "openai_base_url": url,
            "openai_api_key": SecretStr("bench"),
        }
    )
    return OpenAIEmbedder.from_settings(settings)


def median(samples: list[float]) -> float:
    return round(statistics.median(samples), 1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    docs = read_corpus(args.docs * 2)
    first = docs[: args.docs]
    pipeline = Limits(slice_documents=args.slice)
    async with bench_database(superuser_url=args.database_url) as db:
        log("loading the local model")
        local = LocalEmbedder.load(db.settings)
        chunker = build_chunker(db.settings, local)
        prepared = prepare_corpus(first, chunker)
        texts = [t for p in prepared for t in p.texts]
        log(f"{len(first)} documents, {len(texts)} chunks")
        samples: dict[str, list[float]] = {}

        def keep(name: str, value: float) -> None:
            samples.setdefault(name, []).append(value)
            log(f"  {name}: {value:.1f}/s")

        with fake_openai(local.dimensions) as url:
            remote = openai_embedder(db, url, local.dimensions)
            fake = LookupEmbedder(local.dimensions, remote.model_id)
            fake.vectors = {t: fake_vector(t, local.dimensions) for t in texts}
            for repeat in range(args.repeats):
                log(f"repeat {repeat + 1}/{args.repeats}")
                await measure_repeat(
                    db,
                    local,
                    remote,
                    fake,
                    chunker,
                    first,
                    prepared,
                    texts,
                    repeat=repeat,
                    pipeline=pipeline,
                    keep=keep,
                )
            memory = await measure_memory(db, remote, chunker, docs, args.docs, pipeline)
        return {
            "docs": len(first),
            "chunks": len(texts),
            "slice_documents": args.slice,
            "model": local.model_id,
            "server": await server_settings(db.superuser_url),
            "samples": samples,
            "medians": {name: median(values) for name, values in samples.items()},
            "memory": memory,
        }


async def measure_repeat(
    db: BenchDatabase,
    local: LocalEmbedder,
    remote: OpenAIEmbedder,
    fake: LookupEmbedder,
    chunker: Chunker,
    docs: list[CorpusDoc],
    prepared: Any,
    texts: list[str],
    *,
    repeat: int,
    pipeline: Limits,
    keep: Callable[[str, float], None],
) -> None:
    keep("a", await embed_only(local, texts))
    for name, embedder, limits in (
        ("b", local, pipeline),
        ("b_one_slice", local, ONE_SLICE),
        ("c", remote, pipeline),
        ("c_one_slice", remote, ONE_SLICE),
    ):
        tenant_id = f"pipe-{name}-{repeat}".replace("_", "-")
        keep(
            name, await end_to_end(db, embedder, chunker, docs, tenant_id=tenant_id, limits=limits)
        )
    copied = await copy_stage(db, prepared, fake, tenant_id=f"pipe-copy-{repeat}", writers=1)
    keep("d", copied["chunks_per_s"])
    slices, prepare_rate = prepared_slices(
        db, fake, chunker, docs, slice_documents=pipeline.slice_documents
    )
    keep("p", prepare_rate)
    keep("e", await write_only(db, fake, slices, tenant_id=f"pipe-write-{repeat}"))


async def measure_memory(
    db: BenchDatabase,
    remote: OpenAIEmbedder,
    chunker: Chunker,
    docs: list[CorpusDoc],
    size: int,
    pipeline: Limits,
) -> list[dict[str, Any]]:
    rows = []
    for label, part, limits in (
        ("pipeline", docs[:size], pipeline),
        ("pipeline", docs, pipeline),
        ("one slice", docs, ONE_SLICE),
    ):
        log(f"memory: {label}, {len(part)} documents")
        tenant_id = f"pipe-rss-{len(rows)}"
        peak = await streamed_peak_rss(
            db, remote, chunker, part, tenant_id=tenant_id, limits=limits
        )
        rows.append({"path": label, **peak})
    return rows


def report(results: dict[str, Any]) -> None:
    m = results["medians"]
    rows: list[list[object]] = [
        ["(a) local model alone, embed_documents", "texts/s", m["a"], ""],
        [
            "(b) end to end, local model, pipeline",
            "chunks/s",
            m["b"],
            f"{m['b'] / m['a']:.2f}x (a)",
        ],
        [
            "(b') end to end, local model, one slice",
            "chunks/s",
            m["b_one_slice"],
            f"{m['b_one_slice'] / m['a']:.2f}x (a)",
        ],
        [
            "(c) end to end, loopback OpenAI server, pipeline",
            "chunks/s",
            m["c"],
            f"{m['c'] / m['d']:.2f}x (d)",
        ],
        [
            "(c') end to end, loopback OpenAI server, one slice",
            "chunks/s",
            m["c_one_slice"],
            f"{m['c_one_slice'] / m['d']:.2f}x (d)",
        ],
        ["(d) binary COPY of the same rows", "chunks/s", m["d"], ""],
        ["(e) the write stage alone", "chunks/s", m["e"], f"{m['e'] / m['d']:.2f}x (d)"],
        ["(p) parsing and chunking alone", "chunks/s", m["p"], f"{m['p'] / m['d']:.2f}x (d)"],
    ]
    title = (
        f"ingestion pipeline, NFCorpus, {results['docs']} documents, {results['chunks']} chunks, "
        f"{results['slice_documents']} documents a slice; medians of "
        f"{len(results['samples']['a'])} repeats"
    )
    print_table(title, ["path", "unit", "rate", "ratio"], rows)
    print_table(
        "peak RSS while streaming documents through (loopback OpenAI server)",
        ["path", "documents", "RSS before MB", "peak MB", "growth MB"],
        [
            [
                r["path"],
                r["docs"],
                round(r["before_mb"], 1),
                round(r["peak_mb"], 1),
                round(r["peak_mb"] - r["before_mb"], 1),
            ]
            for r in results["memory"]
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slice", type=int, default=Limits().slice_documents)
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    report(results)
    path = write_json("pipeline_bench", {"args": vars(args), **results})
    print(f"JSON: {path}")  # noqa: T201


if __name__ == "__main__":
    main()
