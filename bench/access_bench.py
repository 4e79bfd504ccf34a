"""Vector search under document permissions: P95 and recall@10 for callers who see 100%, 50%,
10% and 1% of a large tenant, beside the same searches in a tenant without access lists.

    python -m bench.access_bench [--chunks 100000] [--queries 200] [--ef N]
        [--no-dedicated] [--compare] [--database-url URL]

Data (synthetic, no model needed): 384-d vectors in two levels of clusters (topics of ~200
rows, clusters of ~50 within them: a row's 10th neighbour at similarity ~0.76, its 100th at
~0.43), 4 chunks per document. Two tenants hold two draws of the same distribution:
`restricted`, whose documents carry access lists, and `open`, without any. A document's list
is `group:all`, plus `group:p50` for a random half of the documents, `group:p10` for a tenth,
`group:p1` for a hundredth (nested: p1 within p10 within p50); the 100%, 50%, 10% and 1%
callers hold one of these groups. Loaded by binary COPY as superuser, then the HNSW index
built, VACUUM ANALYZE, and (unless --no-dedicated) each tenant its own HNSW index as
`rag index` gives large tenants. Queries are fresh points of the same distribution.

Each search is `app.retrieval.search` as the service runs it (vector mode, top_k 10, no
threshold, the service's own ef_search rule unless --ef), as the runtime role under RLS with
the caller's principals set transaction-locally; the query vector is precomputed (no model
time). Recall@10: against exact search (numpy) over the rows the caller may see. Rounds go
over the callers in turn, so load drift on a shared machine hits them alike. `--compare` also
runs every caller without app/retrieval/visibility.py (no copy of the access condition for the
planner, no exact plan for small visible sets), to show what row-level security alone with
iterative scans gives.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.db.indexes import (
    chunk_counts,
    create_dedicated_index,
    dedicated_indexes,
    index_connection,
    plan_indexes,
)
from app.db.tenancy import reading_as
from app.permissions import Readers
from app.retrieval import SearchMode, SearchRequest, search
from app.retrieval.visibility import Scope
from bench.kit.database import (
    HNSW_DEFINITION,
    HNSW_INDEX,
    BenchDatabase,
    bench_database,
    connect_loader,
    create_tenants,
    server_settings,
)
from bench.kit.report import log, print_table, write_json
from bench.kit.stats import latency_summary
from bench.kit.stubs import StubEmbedder
from bench.kit.synthetic import unit

# the module (app.retrieval re-exports its function under the same name)
search_module = importlib.import_module("app.retrieval.search")
DIMENSIONS = 384
MODEL = "bench-synthetic"
TOP_K = 10
CHUNKS_PER_DOCUMENT = 4
# Two levels of clusters, so neighbours thin out gradually (at 100k rows a row's 10th
# neighbour sits at similarity ~0.76, its 100th at ~0.43, its 1000th at ~0.1).
ROWS_PER_TOPIC, ROWS_PER_CLUSTER = 200, 50
TOPIC_SPREAD, CLUSTER_SPREAD = 0.045, 0.03  # per-dimension noise
OPEN, RESTRICTED = "open", "restricted"
SHARES = {"100%": ("group:all", 1.0), "50%": ("group:p50", 0.5), "10%": ("group:p10", 0.1)}
SHARES["1%"] = ("group:p1", 0.01)


@dataclass(frozen=True, slots=True)
class Caller:
    name: str
    tenant_id: str
    readers: Readers
    visible: np.ndarray  # row numbers the caller may see


@dataclass(frozen=True, slots=True)
class Data:
    vectors: dict[str, np.ndarray]  # by tenant: two draws of one distribution
    ids: dict[str, list[uuid.UUID]]  # chunk ids by tenant, row order
    groups: np.ndarray  # per row: the smallest share whose group it carries (1.0 .. 0.01)


def around(rng: np.random.Generator, centres: np.ndarray, n: int, spread: float) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), size=n)]
    return unit(picked + rng.normal(scale=spread, size=picked.shape))


def make_data(chunks: int, seed: int = 19) -> tuple[Data, np.ndarray]:
    rng = np.random.default_rng(seed)
    topics = unit(rng.normal(size=(max(chunks // ROWS_PER_TOPIC, 1), DIMENSIONS)))
    centres = around(rng, topics, max(chunks // ROWS_PER_CLUSTER, 1), TOPIC_SPREAD)
    # Not the same rows twice: duplicates across the two tenants would crowd the shared
    # HNSW graph with exact copies.
    vectors = {
        tenant: around(rng, centres, chunks, CLUSTER_SPREAD) for tenant in (OPEN, RESTRICTED)
    }
    documents = chunks // CHUNKS_PER_DOCUMENT
    draw = np.repeat(rng.random(documents), CHUNKS_PER_DOCUMENT)[:chunks]
    groups = np.ones(chunks)  # float64: the shares compare exactly
    for share in (0.5, 0.1, 0.01):
        groups[draw < share] = share
    ids = {tenant: [uuid.uuid4() for _ in range(chunks)] for tenant in (OPEN, RESTRICTED)}
    queries = around(rng, centres, 4_000, CLUSTER_SPREAD)
    return Data(vectors, ids, groups), queries


def access_of(smallest: float) -> list[str]:
    return [group for group, share in SHARES.values() if smallest <= share]


async def load(db: BenchDatabase, data: Data, *, dedicated: bool) -> dict[str, Any]:
    await create_tenants(db.sessions, [OPEN, RESTRICTED])
    collections, documents, chunks = [], [], []
    for tenant in (OPEN, RESTRICTED):
        collection = uuid.uuid4()
        collections.append((collection, tenant, "default"))
        ids = data.ids[tenant]
        for start in range(0, len(ids), CHUNKS_PER_DOCUMENT):
            rows = range(start, min(start + CHUNKS_PER_DOCUMENT, len(ids)))
            access = access_of(float(data.groups[start])) if tenant == RESTRICTED else []
            document_id = uuid.uuid4()
            documents.append(
                (
                    document_id,
                    tenant,
                    collection,
                    f"doc-{start}",
                    f"document {start}",
                    "text",
                    f"{start:064x}",
                    len(rows),
                    access,
                )
            )
            for index, row in enumerate(rows):
                chunks.append(
                    (
                        ids[row],
                        tenant,
                        document_id,
                        collection,
                        index,
                        f"chunk {row} of document {start}",
                        6,
                        data.vectors[tenant][row],
                        MODEL,
                        f"{row:064x}",
                        access,
                    )
                )
    conn = await connect_loader(db.superuser_url)
    timings: dict[str, Any] = {}
    try:
        await conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        began = time.perf_counter()
        async with conn.transaction():
            for table, columns, rows in (
                ("collections", ("id", "tenant_id", "name"), collections),
                ("documents", DOCUMENT_COLUMNS, documents),
                ("chunks", CHUNK_COLUMNS, chunks),
            ):
                await conn.copy_records_to_table(table, records=rows, columns=list(columns))
        timings["copy_s"] = round(time.perf_counter() - began, 1)
        log(f"COPY {len(chunks)} chunks: {timings['copy_s']} s; building the HNSW index")
        began = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(HNSW_DEFINITION)
        timings["hnsw_build_s"] = round(time.perf_counter() - began, 1)
        await conn.execute("VACUUM ANALYZE chunks")
        await conn.execute("VACUUM ANALYZE documents")
    finally:
        await conn.close()
    if dedicated:
        began = time.perf_counter()
        counts = await chunk_counts(reading_as(db.sessions, Readers(all_documents=True)))
        async with index_connection(db.owner_url, maintenance_work_mem="1GB") as owner:
            plan = plan_indexes(counts, await dedicated_indexes(owner), min_chunks=5_000)
            for tenant_id in plan.create:
                await create_dedicated_index(owner, tenant_id)
        timings["dedicated_indexes"] = len(plan.create)
        timings["dedicated_build_s"] = round(time.perf_counter() - began, 1)
        conn = await connect_loader(db.superuser_url)
        try:
            await conn.execute("ANALYZE chunks")
        finally:
            await conn.close()
    await db.engine.dispose()
    return timings


DOCUMENT_COLUMNS = (
    *("id", "tenant_id", "collection_id", "external_id", "title", "source_type"),
    *("content_hash", "chunk_count", "access"),
)
CHUNK_COLUMNS = (
    *("id", "tenant_id", "document_id", "collection_id", "chunk_index", "content"),
    *("token_count", "embedding", "embedding_model", "embedded_text_hash", "access"),
)


def callers(data: Data) -> list[Caller]:
    everyone = np.arange(len(data.groups))
    found = [
        Caller(
            "no access lists",
            OPEN,
            Readers.of(subject="bench", groups=[], all_documents=False),
            everyone,
        )
    ]
    for name, (group, share) in SHARES.items():
        readers = Readers(frozenset({"user:bench", group}))
        found.append(Caller(name, RESTRICTED, readers, np.flatnonzero(data.groups <= share)))
    return found


@contextmanager
def visibility_plan(enabled: bool) -> Iterator[None]:
    """Off: without app/retrieval/visibility.py (no access condition for the planner, no
    exact plan for small visible sets): every vector search walks the HNSW index on the
    direct path, RLS and iterative scans alone."""
    originals = search_module.visible_scope, search_module.direct_plan
    if not enabled:

        async def nothing(*args: object, **kwargs: object) -> Scope:
            return Scope([])

        async def graph(*args: object, **kwargs: object) -> bool:
            return False

        search_module.visible_scope, search_module.direct_plan = nothing, graph
    try:
        yield
    finally:
        search_module.visible_scope, search_module.direct_plan = originals


async def measure(
    db: BenchDatabase,
    data: Data,
    queries: np.ndarray,
    *,
    count: int,
    ef: int | None,
    variants: Sequence[bool],
) -> list[dict[str, Any]]:
    stub = StubEmbedder(MODEL, DIMENSIONS)
    everyone = callers(data)
    samples: dict[tuple[str, bool], list[float]] = {}
    recalls: dict[tuple[str, bool], list[float]] = {}
    request = SearchRequest(query="q", mode=SearchMode.VECTOR, top_k=TOP_K, ef_search=ef)
    for i in range(count + 20):
        warm = i < 20
        vector = queries[i]
        stub.current = vector.tolist()
        for with_hint in variants:
            for caller in everyone:
                sessions = reading_as(db.sessions, caller.readers)
                with visibility_plan(with_hint):
                    began = time.perf_counter()
                    outcome = await search(
                        sessions, stub, tenant_id=caller.tenant_id, request=request
                    )
                    elapsed = (time.perf_counter() - began) * 1000
                if warm:
                    continue
                key = (caller.name, with_hint)
                samples.setdefault(key, []).append(elapsed)
                scores = data.vectors[caller.tenant_id][caller.visible] @ vector
                best = caller.visible[np.argsort(-scores, kind="stable")[:TOP_K]]
                truth = {data.ids[caller.tenant_id][int(r)] for r in best}
                found = {hit.chunk_id for hit in outcome.hits}
                recalls.setdefault(key, []).append(len(truth & found) / len(truth))
    rows = []
    for caller in everyone:
        for with_hint in variants:
            key = (caller.name, with_hint)
            rows.append(
                {
                    "caller sees": caller.name,
                    "visible chunks": len(caller.visible),
                    "visibility plan": "on" if with_hint else "off",
                    **latency_summary(samples[key]),
                    "recall@10": round(float(np.mean(recalls[key])), 4),
                    "recall@10_min": round(float(np.min(recalls[key])), 2),
                }
            )
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data, queries = make_data(args.chunks)
    async with bench_database(superuser_url=args.database_url) as db:
        log(f"loading {args.chunks} chunks into each of two tenants")
        timings = await load(db, data, dedicated=not args.no_dedicated)
        variants = (True, False) if args.compare else (True,)
        rows = await measure(db, data, queries, count=args.queries, ef=args.ef, variants=variants)
        server = await server_settings(db.superuser_url)
    return {
        "chunks_per_tenant": args.chunks,
        "ef_search": args.ef,
        "load": timings,
        "server": server,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", type=int, default=None, help="default: the service's rule")
    parser.add_argument("--no-dedicated", action="store_true")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    header = [
        "caller sees",
        "visible chunks",
        "visibility plan",
        "p50_ms",
        "p95_ms",
        "recall@10",
        "recall@10_min",
    ]
    print_table(
        f"vector search, {args.chunks} chunks per tenant,"
        f" ef_search {args.ef or 'by the service rule'}",
        header,
        [[row.get(h) for h in header] for row in result["rows"]],
    )
    path = write_json("access_bench", result)
    log(f"written {path}")


if __name__ == "__main__":
    main()
