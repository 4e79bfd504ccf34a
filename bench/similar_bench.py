"""Similar items and dedupe: service time, recall of planted duplicates, exact baseline.

    python -m bench.similar_bench [--small-docs 2000] [--docs 10000] [--filler-docs 8000]
        [--chunks-per-doc 5] [--probes 300]

Synthetic 384-d vectors with topic structure (documents of one topic are 0.6-0.9 alike, so
the threshold has real neighbours to reject), loaded by binary COPY into a throwaway embedded
PostgreSQL (bench.kit.database), document vectors written by the service's own SQL
(`refresh_document_vectors`), then the HNSW indexes built. 2% of each dedupe tenant's documents
are planted copies of another document of the tenant: every chunk moved by a little noise,
a third of them with an extra (footer) chunk, a third re-chunked (adjacent chunks merged).

Dedupe (dry run, `find_duplicates`, the function POST /api/rag/dedupe calls) at `--small-docs`
and `--docs` documents: wall time, recall of the planted pairs (both ends in one group),
false groups (a group that is not exactly one planted original with its copies), and the same
on an exact all-pairs numpy comparison of the same stored document vectors. Then the real merge
(`dry_run` false: the duplicates deleted in one transaction, each group re-checked) and a
second merge that must remove nothing. Similar (chunk and
document, the functions GET …/similar call) P50/P95 service time on the `--docs` tenant, with
the table holding all tenants' chunks (100k at the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid
from typing import Any

import numpy as np
from sqlalchemy import select

from app.db.models import Chunk, Document
from app.db.tenancy import tenant_transaction
from app.ingest.store import refresh_document_vectors
from app.retrieval.dedupe import DedupeRequest, dedupe, find_duplicates
from app.retrieval.duplicates import components, exact_pairs
from app.retrieval.similar import (
    SearchScope,
    SimilarRequest,
    similar_to_chunk,
    similar_to_document,
)
from bench.kit.database import (
    HNSW_DEFINITION,
    HNSW_INDEX,
    BenchDatabase,
    bench_database,
    connect_loader,
    copy_rows,
    create_tenants,
)
from bench.kit.report import log, machine_note, print_table, write_json
from bench.kit.stats import latency_summary
from bench.kit.synthetic import unit

MODEL = "local:synthetic"
DIM = 384
TOPICS = 200
THRESHOLD = 0.95


def generate(
    rng: np.random.Generator, docs: int, per_doc: int, planted_share: float
) -> tuple[list[np.ndarray], dict[int, int]]:
    """Chunk vectors per document, and planted copy index -> original index."""
    topics = unit(rng.normal(size=(TOPICS, DIM)))
    originals = docs - int(docs * planted_share)
    out: list[np.ndarray] = []
    for _ in range(originals):
        center = unit(topics[rng.integers(TOPICS)] + 0.45 * unit(rng.normal(size=DIM)))
        out.append(unit(center + 0.5 * unit(rng.normal(size=(per_doc, DIM)))))
    planted: dict[int, int] = {}
    for i in range(docs - originals):
        source = int(rng.integers(originals))
        chunks = unit(out[source] + 0.08 * unit(rng.normal(size=out[source].shape)))
        if i % 3 == 1:  # a re-upload with a footer
            chunks = np.vstack([chunks, unit(rng.normal(size=(1, DIM)))])
        elif i % 3 == 2 and len(chunks) > 1:  # re-chunked: the first two chunks merged
            chunks = np.vstack([unit(chunks[0] + chunks[1])[None, :], chunks[2:]])
        planted[len(out)] = source
        out.append(chunks)
    return out, planted


async def load(db: BenchDatabase, tenants: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    """COPY everything (superuser), document vectors by the service's SQL, then the indexes."""
    await create_tenants(db.sessions, tenants)
    collections, documents, chunks = [], [], []
    ids: dict[str, list[uuid.UUID]] = {}
    for tenant_id, vectors in tenants.items():
        collection = uuid.uuid4()
        collections.append((collection, tenant_id, "default"))
        ids[tenant_id] = []
        for d, doc in enumerate(vectors):
            document_id = uuid.uuid4()
            ids[tenant_id].append(document_id)
            documents.append(
                (
                    document_id,
                    tenant_id,
                    collection,
                    f"d{d}",
                    f"doc {d}",
                    "text",
                    f"{d:064x}",
                    len(doc),
                )
            )
            for c, vector in enumerate(doc):
                chunks.append(
                    (
                        uuid.uuid4(),
                        tenant_id,
                        document_id,
                        collection,
                        c,
                        f"chunk {d}.{c}",
                        10,
                        vector,
                        MODEL,
                        f"{d:056x}{c:08x}",
                    )
                )
    timings: dict[str, Any] = {"chunks": len(chunks), "documents": len(documents)}
    conn = await connect_loader(db.superuser_url)
    try:
        await conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        await conn.execute("DROP INDEX IF EXISTS ix_documents_embedding_hnsw")
        began = time.perf_counter()
        await copy_rows(conn, collections=collections, documents=documents, chunks=chunks)
        timings["copy_s"] = round(time.perf_counter() - began, 2)
    finally:
        await conn.close()
    began = time.perf_counter()
    for tenant_id in tenants:
        async with tenant_transaction(db.sessions, tenant_id) as session:
            await refresh_document_vectors(session)
    timings["document_vectors_s"] = round(time.perf_counter() - began, 2)
    conn = await connect_loader(db.superuser_url)
    try:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        began = time.perf_counter()
        await conn.execute(HNSW_DEFINITION)
        await conn.execute(
            "CREATE INDEX ix_documents_embedding_hnsw ON documents USING hnsw"
            " (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        timings["hnsw_build_s"] = round(time.perf_counter() - began, 2)
        await conn.execute("VACUUM ANALYZE chunks")
        await conn.execute("VACUUM ANALYZE documents")
    finally:
        await conn.close()
    await db.engine.dispose()
    timings["ids"] = ids
    return timings


def judge(
    groups: list[set[uuid.UUID]], planted: dict[int, int], ids: list[uuid.UUID]
) -> dict[str, Any]:
    """Recall of the planted pairs; groups that are not one original with (some of) its copies."""
    group_of = {member: i for i, group in enumerate(groups) for member in group}
    pairs = [(ids[copy], ids[source]) for copy, source in planted.items()]
    found = sum(1 for a, b in pairs if a in group_of and group_of.get(a) == group_of.get(b))
    family: dict[uuid.UUID, uuid.UUID] = {}
    for copy, source in planted.items():
        family[ids[copy]] = ids[source]
        family[ids[source]] = ids[source]
    false_groups = sum(
        1 for group in groups if len({family.get(member, member) for member in group}) != 1
    )
    return {
        "planted_pairs": len(pairs),
        "recall": round(found / len(pairs), 4) if pairs else 1.0,
        "groups": len(groups),
        "false_groups": false_groups,
    }


async def dedupe_part(
    db: BenchDatabase, tenant_id: str, planted: dict[int, int], ids: list[uuid.UUID], ef: int
) -> dict[str, Any]:
    request = DedupeRequest(similarity_threshold=THRESHOLD, limit=50_000, ef_search=ef)
    began = time.perf_counter()
    outcome = await find_duplicates(
        db.sessions, tenant_id=tenant_id, model_id=MODEL, request=request
    )
    index_s = time.perf_counter() - began
    index_groups = [{g.primary.id, *(d.id for d in g.duplicates)} for g in outcome.groups]
    # The exact baseline on the same stored document vectors.
    async with tenant_transaction(db.sessions, tenant_id) as session:
        rows = (await session.execute(select(Document.id, Document.embedding))).all()
    began = time.perf_counter()
    order = [row[0] for row in rows]
    pairs = exact_pairs(order, np.asarray([row[1] for row in rows], dtype=np.float32), THRESHOLD)
    exact_groups = [set(members) for members, _ in components(pairs)]
    exact_s = time.perf_counter() - began
    return {
        "examined": outcome.examined,
        "index": {"wall_s": round(index_s, 3), **judge(index_groups, planted, ids)},
        "exact_numpy": {"wall_s": round(exact_s, 3), **judge(exact_groups, planted, ids)},
        "same_groups_as_exact": sorted(map(sorted, map(lambda g: map(str, g), index_groups)))
        == sorted(map(sorted, map(lambda g: map(str, g), exact_groups))),
        "previewed": outcome.total_duplicates,
    }


async def merge_part(db: BenchDatabase, tenant_id: str, previewed: int, ef: int) -> dict[str, Any]:
    """The real merge (POST /api/rag/dedupe with dry_run false), then a second one that must
    find nothing more to remove."""
    request = DedupeRequest(
        similarity_threshold=THRESHOLD, limit=50_000, dry_run=False, ef_search=ef
    )
    began = time.perf_counter()
    merged = await dedupe(db.sessions, tenant_id=tenant_id, model_id=MODEL, request=request)
    merge_s = time.perf_counter() - began
    again = await dedupe(db.sessions, tenant_id=tenant_id, model_id=MODEL, request=request)
    return {
        "wall_s": round(merge_s, 3),
        "removed": len(merged.removed),
        "previewed": previewed,
        "removed_by_second_run": len(again.removed),
    }


async def similar_part(
    db: BenchDatabase, tenant_id: str, ids: list[uuid.UUID], probes: int
) -> dict[str, Any]:
    rng = random.Random(7)
    async with tenant_transaction(db.sessions, tenant_id) as session:
        chunk_ids = list(await session.scalars(select(Chunk.id).limit(50_000)))
    out: dict[str, Any] = {}
    for label, min_similarity in (("default_0.85", 0.85), ("top10_any", 0.0)):
        request = SimilarRequest(top_k=10, min_similarity=min_similarity, scope=SearchScope.ALL)
        for kind in ("chunk", "document"):
            samples, counts = [], []
            pool = chunk_ids if kind == "chunk" else ids
            for item in rng.sample(pool, probes):
                began = time.perf_counter()
                if kind == "chunk":
                    found = await similar_to_chunk(
                        db.sessions, tenant_id=tenant_id, chunk_id=item, request=request
                    )
                else:
                    found = await similar_to_document(
                        db.sessions, tenant_id=tenant_id, document_id=item, request=request
                    )
                samples.append((time.perf_counter() - began) * 1000)
                counts.append(len(found.similar))
            out[f"{kind}_{label}"] = {
                **latency_summary(samples[10:]),  # the first few warm the caches
                "avg_results": round(sum(counts) / len(counts), 2),
            }
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    small, small_planted = generate(rng, args.small_docs, args.chunks_per_doc, 0.02)
    large, large_planted = generate(rng, args.docs, args.chunks_per_doc, 0.02)
    filler, _ = generate(rng, args.filler_docs, args.chunks_per_doc, 0.0)
    tenants = {"dedupe-small": small, "dedupe-large": large, "filler": filler}
    async with bench_database() as db:
        log("loading")
        loaded = await load(db, tenants)
        ids = loaded.pop("ids")
        log(f"loaded {loaded}")
        result: dict[str, Any] = {"load": loaded, "machine": machine_note()}
        for tenant_id, planted in (
            ("dedupe-small", small_planted),
            ("dedupe-large", large_planted),
        ):
            log(f"dedupe {tenant_id}")
            result[tenant_id] = await dedupe_part(
                db, tenant_id, planted, ids[tenant_id], args.ef_search
            )
            log(f"  {result[tenant_id]}")
        log("similar")
        result["similar"] = await similar_part(db, "dedupe-large", ids["dedupe-large"], args.probes)
        for tenant_id in ("dedupe-small", "dedupe-large"):
            log(f"merge {tenant_id}")
            previewed = result[tenant_id]["previewed"]
            result[tenant_id]["merge"] = await merge_part(db, tenant_id, previewed, args.ef_search)
    return result


def report(result: dict[str, Any]) -> None:
    rows = []
    for tenant_id in ("dedupe-small", "dedupe-large"):
        part = result[tenant_id]
        for method in ("index", "exact_numpy"):
            m = part[method]
            rows.append(
                [
                    tenant_id,
                    part["examined"],
                    method,
                    m["wall_s"],
                    m["planted_pairs"],
                    m["recall"],
                    m["groups"],
                    m["false_groups"],
                ]
            )
    print_table(
        "Dedupe (dry run) at threshold 0.95",
        ["tenant", "documents", "method", "wall s", "planted pairs", "recall", "groups", "false"],
        rows,
    )
    print_table(
        "Merge (dry_run false) after the preview, then a second merge",
        ["tenant", "wall s", "previewed", "removed", "removed by the second run"],
        [
            [t, m["wall_s"], m["previewed"], m["removed"], m["removed_by_second_run"]]
            for t in ("dedupe-small", "dedupe-large")
            for m in [result[t]["merge"]]
        ],
    )
    print_table(
        f"Similar, service time ({result['load']['chunks']} chunks in the table)",
        ["probe", "n", "P50 ms", "P95 ms", "P99 ms", "avg results"],
        [
            [k, v["n"], v["p50_ms"], v["p95_ms"], v["p99_ms"], v["avg_results"]]
            for k, v in result["similar"].items()
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small-docs", type=int, default=2_000)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--filler-docs", type=int, default=8_000)
    parser.add_argument("--chunks-per-doc", type=int, default=5)
    parser.add_argument("--probes", type=int, default=300)
    parser.add_argument("--ef-search", type=int, default=40)  # what the doors pass by default
    args = parser.parse_args()
    result = asyncio.run(run(args))
    report(result)
    path = write_json("similar_bench", {"args": vars(args), **result})
    log(f"written: {path}")


if __name__ == "__main__":
    main()
