"""This service beside its alternatives, in one run: the same vectors and queries through

- the service in process (`app.retrieval.search` with its settings' defaults, as the runtime
  role under RLS) and over HTTP (a live `rag serve`);
- embedded Chroma, in one collection with a tenant metadata filter and with a collection per
  tenant; LanceDB with a table per tenant; Milvus Lite with the tenant as a partition key
  (bench/peers/chroma.py, lance.py, milvus.py: each store's layout and index);
- numpy brute force in memory;
- pgvector exact scan (no index: the tenant's rows sorted by distance);
- the naive approach: load the tenant's embeddings from the database, cosine in numpy;

latency P50/P95/P99 and searches/s with 1, 4 and 16 clients and recall@10 per tenant size
(50%, 10%, 1%, 0.1% of the rows) against exact search, at each size; recall against
ef_search; ingestion split into parse, embed and store; HNSW build time and size (vector and
halfvec), each store's load time and size. Writes report.md (tables, each figure beside its
ratio to the service), results.json and PNG charts.

    python -m bench --quick                      # CI: one small size, about a minute
    python -m bench                              # 10k and 100k chunks, into docs/bench/
    python -m bench --sizes 10000,100000,1000000 --out docs/bench
    python -m bench --stores lancedb              # of the stores, only those named ('' none)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from app.embeddings.local import LocalEmbedder
from app.resources import build_chunker
from bench.kit.database import BenchDatabase, bench_database, search_tokens, server_settings
from bench.kit.paths import ROOT
from bench.kit.report import git_commit, log, write_json
from bench.kit.server import ApiClient, serve
from bench.kit.stats import latency_summary, quantile
from bench.kit.synthetic import CLASSES, Synthetic, load_size
from bench.peers import engines as peers
from bench.peers.chroma import ChromaPerTenant, ChromaShared
from bench.peers.ingest import index_builds, parse_and_embed, store_rows
from bench.peers.measure import Budget, latency_rows, run_cell, sweep_rows, warm_up
from bench.peers.report import write_report
from bench.peers.store import PeerStore
from bench.peers.workload import Job, Workload, build_workload, jobs_for


@dataclass(frozen=True, slots=True)
class Plan:
    sizes: list[int]
    queries: int  # distinct query texts (at most the server's query cache, 100)
    jobs: int  # searches per cell (engine x tenant size x clients)
    clients: list[int]
    ef: list[int]
    docs: int | None  # corpus documents (None: all of NFCorpus)
    embed_texts: int
    store_docs: int
    budget: Budget
    http: bool
    stores: list[str]  # of STORES, beside the shared Chroma collection (always measured)
    out: Path


def open_store(name: str) -> PeerStore:
    """A peer store by its option name; each module imported only when asked for."""
    if name == "chroma-per-tenant":
        return ChromaPerTenant()
    if name == "lancedb":
        from bench.peers.lance import LanceDbPerTenant

        return LanceDbPerTenant()
    if name == "milvus-lite":
        from bench.peers.milvus import MilvusLitePartitionKey

        return MilvusLitePartitionKey()
    raise ValueError(f"unknown store {name!r}: {', '.join(STORES)}")


STORES = ("chroma-per-tenant", "lancedb", "milvus-lite")


def plan_of(args: argparse.Namespace) -> Plan:
    quick = args.quick
    out = args.out or (
        Path(tempfile.mkdtemp(prefix="rag-bench-quick-")) if quick else ROOT / "docs" / "bench"
    )
    return Plan(
        sizes=args.sizes or ([2_000] if quick else [10_000, 100_000]),
        queries=args.queries or (12 if quick else 60),
        jobs=args.jobs or (12 if quick else 100),
        clients=args.clients,
        ef=args.ef or ([10, 40, 100] if quick else [10, 20, 40, 80, 150, 300]),
        docs=(args.docs or 80) if quick else args.docs,
        embed_texts=args.embed_texts or (32 if quick else 512),
        store_docs=args.store_docs or (30 if quick else 300),
        budget=Budget(seconds=args.cell_seconds or (1.0 if quick else 20.0), min_jobs=10),
        http=not args.skip_http,
        stores=[s for s in args.stores.split(",") if s],
        out=out,
    )


async def run(plan: Plan, command: str) -> dict[str, Any]:
    load_start = [round(x, 2) for x in os.getloadavg()]
    async with bench_database(
        superuser_url=os.environ.get("RAG_BENCH_DATABASE_URL"), pool_size=max(plan.clients)
    ) as db:
        with ExitStack() as stack:
            # `rag serve` loads its model while this process loads its own and the corpus
            starting = (
                asyncio.create_task(
                    asyncio.to_thread(stack.enter_context, serve(db, redis_url=None))
                )
                if plan.http
                else None
            )
            try:
                results, workload, chunker = await prepare(db, plan, command)
            except BaseException:
                if starting is not None:
                    await asyncio.gather(starting, return_exceptions=True)
                raise
            url = await starting if starting is not None else None
            await measure_sizes(db, plan, workload, chunker, results, url)
    results["machine"] = machine(load_start)
    return results


async def prepare(
    db: BenchDatabase, plan: Plan, command: str
) -> tuple[dict[str, Any], Workload, Any]:
    """The model, the corpus and its vectors, the query vectors, the size-free stages."""
    log("loading the local model")
    local = LocalEmbedder.load(db.settings)
    chunker = build_chunker(db.settings, local)
    workload = await build_workload(db, local, chunker, docs=plan.docs, queries=plan.queries)
    log(f"{len(workload.corpus)} documents, {len(workload.base)} chunk vectors")
    texts = [t for p in workload.corpus for t in p.texts][: plan.embed_texts]
    log("parse, chunk and embed stages")
    stages = await parse_and_embed(
        local, chunker, [p.doc for p in workload.corpus[: plan.store_docs]], texts
    )
    results: dict[str, Any] = {
        "command": command,
        "server": await server_settings(db.superuser_url),
        "versions": await versions(db),
        "service_settings": {
            "search_ef_search_default": db.settings.search_ef_search_default,
            "search_candidates": db.settings.search_candidates,
            "dedicated_index_min_chunks": db.settings.dedicated_index_min_chunks,
            "db_pool_size (bench)": max(plan.clients),
        },
        "classes": list(CLASSES),
        "data": (
            f"{len(workload.base):,} NFCorpus chunk vectors (all-MiniLM-L6-v2, 384-d) "
            "reused with noise shaped like their covariance (bench.kit.synthetic's generator), "
            "binary COPY; tenants of 50%, 4 x 10%, 5 x 1%, the rest 0.1% of the rows; "
            "HNSW m 16, ef_construction 64, dedicated indexes as `rag index` makes them"
        ),
        "queries_note": (
            f"{len(workload.queries)} NFCorpus query texts embedded by the same model, "
            f"{plan.jobs} searches per cell (at least {plan.budget.min_jobs}; a cell stops "
            f"taking new ones after {plan.budget.seconds:g} s), round robin over the "
            "tenants of a size; 10 results, no threshold (HTTP: the API's lowest, 0.1)"
        ),
        "stages": stages,
        "latency": [],
        "sweep": [],
        "store": [],
        "index_builds": [],
        "exact_plans": {},
    }
    return results, workload, chunker


async def measure_sizes(
    db: BenchDatabase,
    plan: Plan,
    workload: Workload,
    chunker: Any,
    results: dict[str, Any],
    url: str | None,
) -> None:
    chroma = ChromaShared()
    stores: list[PeerStore] = []
    clients = max(plan.clients)
    exact_pool = await peers.open_pool(db.superuser_url, clients, enable_indexscan="off")
    naive_pool = await peers.open_pool(db.superuser_url, clients)
    try:
        stores += [open_store(name) for name in plan.stores]
        async with ApiClient(url or "http://127.0.0.1") as client:
            for size in plan.sizes:
                await measure_size(
                    db,
                    plan,
                    workload,
                    chunker,
                    size,
                    [chroma, *stores],
                    (exact_pool, naive_pool),
                    client if url else None,
                    results,
                )
                plan.out.mkdir(parents=True, exist_ok=True)
                partial = plan.out / "results.partial.json"
                partial.write_text(json.dumps(results, indent=2, default=str))
        results["chroma_hnsw"] = chroma.describe()
        results["peer_stores"] = {store.name: store.describe() for store in stores}
    finally:
        await exact_pool.close()
        await naive_pool.close()
        for store in [chroma, *stores]:
            store.close()


async def measure_size(
    db: BenchDatabase,
    plan: Plan,
    workload: Workload,
    chunker: Any,
    size: int,
    stores: list[PeerStore],
    pools: tuple[Any, Any],
    client: ApiClient | None,
    results: dict[str, Any],
) -> None:
    log(f"size {size}: generating and loading (bench.kit.synthetic.load_size)")
    spec = Synthetic(dedicated_min_chunks=db.settings.dedicated_index_min_chunks)
    loaded = await load_size(
        db, size, workload.corpus, workload.base, spec=spec, model_id=workload.stub.model_id
    )
    builds = []
    for store in stores:
        log(f"size {size}: loading {store.name}")
        builds.append((store.name, store.load(loaded)))
    log(f"size {size}: the halfvec index")
    results["index_builds"] += await index_builds(db, loaded, builds)
    results.setdefault("load", {})[str(size)] = loaded.timings
    exact = peers.PgExactEngine(pools[0])
    engines: list[peers.Engine] = [peers.ServiceEngine(db, workload.stub)]
    if client is not None:
        tokens = search_tokens(db.settings, [t.tenant_id for t in loaded.tenants], ttl_seconds=7200)
        engines.append(peers.HttpEngine(client, tokens))
    engines += [
        *stores,
        peers.NumpyEngine(loaded),
        exact,
        peers.NaiveEngine(pools[1]),
    ]
    jobs = {c: jobs_for(loaded, workload.queries, c, plan.jobs) for c in CLASSES}
    largest = jobs[CLASSES[0]][0]
    plan_text = await exact.plan(largest.tenant, largest.query)
    if "hnsw" in plan_text.lower():
        raise RuntimeError(f"the exact scan used an HNSW index:\n{plan_text}")
    results["exact_plans"][str(size)] = plan_text
    if client is not None and size == plan.sizes[0]:
        results["http_new_text"] = await http_new_text(engines[1], largest.tenant, workload)
    log(f"size {size}: warming up")
    await warm_up(engines, [j for c in CLASSES for j in jobs[c][:3]])
    results["latency"] += await latency_rows(engines, jobs, plan.clients, plan.budget, size=size)
    sweep_budget = Budget(seconds=plan.budget.seconds, min_jobs=plan.budget.min_jobs)
    service_sweep: list[tuple[int, peers.Engine]] = [
        (ef, peers.ServiceEngine(db, workload.stub, ef_search=ef)) for ef in plan.ef
    ]
    results["sweep"] += await sweep_rows(
        service_sweep, jobs, sweep_budget, size=size, label="service"
    )
    prepared = workload.corpus[: plan.store_docs]
    chroma = stores[0]
    assert isinstance(chroma, ChromaShared)
    results["store"] += await store_rows(db, chunker, workload, prepared, chroma, size=size)


async def http_new_text(engine: peers.Engine, tenant: Any, workload: Workload) -> dict[str, Any]:
    """Every query text once to the server, new to it: the latency with the server's own
    query embedding (afterwards its query cache holds them all, as for the other cells)."""
    assert isinstance(engine, peers.HttpEngine)
    jobs = [Job(tenant, query, frozenset(), {}) for query in workload.queries]
    cell = await run_cell(engine, jobs, 1, Budget(seconds=600.0, min_jobs=len(jobs)))
    embeds = engine.embed_ms[-len(jobs) :]
    return {
        **latency_summary(cell.latencies_ms),
        "server_embed_p50_ms": round(quantile(embeds, 0.5), 2),
        "server_embed_p95_ms": round(quantile(embeds, 0.95), 2),
    }


async def versions(db: BenchDatabase) -> dict[str, str]:
    conn = await peers.open_pool(db.superuser_url, 1)
    try:
        server = await conn.fetchval("show server_version")
        pgvector = await conn.fetchval(
            "select extversion from pg_extension where extname = 'vector'"
        )
    finally:
        await conn.close()
    return {
        "python": platform.python_version(),
        "PostgreSQL": str(server),
        "pgvector": str(pgvector),
        **{name: version(name) for name in ("chromadb", "lancedb", "pymilvus", "milvus-lite")},
        "numpy": version("numpy"),
        "torch": version("torch"),
        "sentence-transformers": version("sentence-transformers"),
    }


def machine(load_start: list[float]) -> dict[str, Any]:
    with open("/proc/meminfo") as info:
        total_kb = next(int(line.split()[1]) for line in info if line.startswith("MemTotal"))
    return {
        "cpus": os.cpu_count(),
        "ram_gb": round(total_kb / 2**20, 1),
        "platform": platform.platform(terse=True),
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "commit": git_commit(),
    }


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size (CI)")
    parser.add_argument("--sizes", type=ints, help="chunks in the table (default 10000,100000)")
    parser.add_argument("--queries", type=int, help="distinct query texts (<= 100)")
    parser.add_argument("--jobs", type=int, help="searches per cell")
    parser.add_argument("--clients", type=ints, default=[1, 4, 16])
    parser.add_argument("--ef", type=ints, help="ef_search values of the recall sweep")
    parser.add_argument("--docs", type=int, help="corpus documents (default: all of NFCorpus)")
    parser.add_argument("--embed-texts", type=int, help="texts timed through the model")
    parser.add_argument("--store-docs", type=int, help="documents written per store path")
    parser.add_argument("--cell-seconds", type=float, help="a cell stops taking jobs after this")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument(
        "--stores",
        default=",".join(STORES),
        help=f"peer stores beside the shared Chroma collection (default {','.join(STORES)})",
    )
    parser.add_argument("--out", type=Path, help="report directory (default docs/bench)")
    parser.add_argument(
        "--report-from", type=Path, help="only rewrite report and charts from a results.json"
    )
    args = parser.parse_args()
    if args.report_from:
        results = json.loads(args.report_from.read_text())
        print(f"report: {write_report(results, args.out or args.report_from.parent)}")  # noqa: T201
        return
    if 1 not in args.clients:
        parser.error("--clients must include 1 (recall and the ratios are read there)")
    plan = plan_of(args)
    command = " ".join(["python -m bench", *sys.argv[1:]])
    results = asyncio.run(run(plan, command))
    report = write_report(results, plan.out)
    # the sizes' results as they came, kept only while a run is under way (or died)
    (plan.out / "results.partial.json").unlink(missing_ok=True)
    if not args.quick:
        write_json("peers_bench", results)
    print(f"report: {report}")  # noqa: T201


if __name__ == "__main__":
    main()
