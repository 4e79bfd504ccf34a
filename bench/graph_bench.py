"""Other graphs for the largest tenant, and what its index build needs, measured in one run.

    .venv/bin/python bench/graph_bench.py [--chunks 100000] [--queries 100] [--parts 1,2,3]
        [--graphs 16:64,12:128,...] [--ef 60,80,...] [--buffers 512MB,6GB] [--database-url URL]

Data and tenants as search_bench.py (b) and direct_bench.py. Everything is about the 50%
tenant, whose graph walk is what is left of its search (direct_bench.py, part 4):

1. graph parameters: the tenant's 40 nearest through partial HNSW indexes of its rows built
   with other m and ef_construction (the service's: m 16, ef_construction 64), every query
   through every graph in turn at each ef_search (each walk in a transaction that drops the
   other graphs and is rolled back, so the planner takes the one measured), with recall@10
   against exact search. The dropped indexes cost each walk a little planning, the same for
   every graph: compare the rows with each other, not with direct_bench's part 4.
2. a binary-quantised graph (`binary_quantize(embedding)::bit(n)`, Hamming distance, 1 bit a
   dimension) whose first `ef_search` candidates are re-ranked by exact cosine distance.
3. builds: the tenant's dedicated index built CONCURRENTLY as the service builds it, with the
   maintenance_work_mem the service gives it (app/db/indexes.py: build_memory_mb), and with a
   half and a quarter of what the graph needs (that figure without its 64 MB floor), each
   with PostgreSQL's default 2 parallel workers and with none; pgvector's notice tells where
   the graph stopped fitting.
4. shared buffers: the service's own searches (`search`, ef_search by its rule) of every
   tenant size once the service's dedicated indexes are built, with the embedded server
   restarted at each `--buffers` value in turn. Every query is searched once to warm the
   caches, then again measured, with recall@10 against exact search and the share of the
   chunks' table and index pages that came from outside shared buffers (pg_statio_user_tables).
   The 50% tenant's three slowest searches of each round are then EXPLAINed (ANALYZE,
   BUFFERS) again on a fresh connection. `--slow-ms N` also has the server log the plan, row
   counts and buffers of every statement slower than N ms as it ran (auto_explain), and
   prints them after each round: the plan the pooled connection kept, not one made again.
   A `--buffers` value such as `6GB+churn` measures that setting with the client writing
   `--churn-mb` of fresh memory between searches, as a memory-hungry neighbour would (recall
   is computed before the searches, in float32, so that the bench itself is no such neighbour).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import time
from typing import Any

import asyncpg
import numpy as np
from direct_bench import CLASSES, WalkSamples, timed_search, walk_table
from harness import (
    BenchDatabase,
    bench_database,
    connect_loader,
    latency_summary,
    log,
    print_table,
    restart_with,
    write_json,
)
from search_bench import (
    Loaded,
    StubEmbedder,
    Synthetic,
    TenantSlice,
    dedicated_indexes_for,
    exact_top,
    exact_tops,
    pick_tenant,
    synthetic_tenants,
)

from app.db.indexes import build_memory_bytes, build_memory_mb
from app.db.settings_sql import scope_message
from app.db.tenancy import transaction_settings
from app.retrieval import SearchRequest, nearest

GRAPHS = "16:64,12:128,12:200,16:200,10:200"  # m:ef_construction
EF_VALUES = "60,80,100,130,160"
BIT_EF_VALUES = (100, 200, 400)
WARMUP = 10


async def parameters_part(
    conn: asyncpg.Connection,
    loaded: Loaded,
    tenant: TenantSlice,
    vectors: list[np.ndarray],
    graphs: list[tuple[int, int]],
    ef_values: list[int],
    ceiling_mb: int,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    builds: dict[str, float] = {}
    names = []
    memory_mb = build_memory_mb(
        tenant.stop - tenant.start, vectors[0].shape[0], ceiling_mb=ceiling_mb
    )
    await conn.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
    for m, ef_construction in graphs:
        name = f"bench_m{m}_efc{ef_construction}"
        began = time.perf_counter()
        await conn.execute(
            f"CREATE INDEX {name} ON chunks USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef_construction})"
            f" WHERE tenant_id = '{tenant.tenant_id}'"
        )
        builds[name] = round(time.perf_counter() - began, 1)
        names.append(name)
    await conn.execute("ANALYZE chunks")
    query = "SELECT id FROM chunks WHERE tenant_id = $1 ORDER BY embedding <=> $2 LIMIT 40"
    walks = WalkSamples()
    try:
        walked = [*vectors[:WARMUP], *vectors]
        truths = exact_tops(loaded, tenant, walked)
        for i, vector in enumerate(walked):
            truth = truths[i]
            for ef in ef_values:
                for name in names if i % 2 else names[::-1]:
                    transaction = conn.transaction()
                    await transaction.start()
                    try:  # rolled back: the DROP INDEX never happens
                        for other in names:
                            if other != name:
                                await conn.execute(f"DROP INDEX {other}")
                        await conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        await conn.execute("SET LOCAL enable_sort = off")  # walk the graph
                        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                        began = time.perf_counter()
                        rows = await conn.fetch(query, tenant.tenant_id, vector)
                        elapsed = (time.perf_counter() - began) * 1000
                    finally:
                        await transaction.rollback()
                    if i >= WARMUP:
                        walks.add((name.removeprefix("bench_"), ef), elapsed, rows, truth)
    finally:
        for name in names:
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
    return walks.rows("ef_search"), builds


async def binary_part(
    conn: asyncpg.Connection, loaded: Loaded, tenant: TenantSlice, vectors: list[np.ndarray]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    bits = vectors[0].shape[0]
    quantised = f"binary_quantize(embedding)::bit({bits})"
    began = time.perf_counter()
    await conn.execute(
        f"CREATE INDEX bench_bit ON chunks USING hnsw (({quantised}) bit_hamming_ops)"
        f" WITH (m = 16, ef_construction = 64) WHERE tenant_id = '{tenant.tenant_id}'"
    )
    build = {
        "build_s": round(time.perf_counter() - began, 1),
        "mb": round(await conn.fetchval("SELECT pg_relation_size('bench_bit')") / 2**20, 1),
    }
    await conn.execute("ANALYZE chunks")
    walks = WalkSamples()
    try:
        walked = [*vectors[:WARMUP], *vectors]
        truths = exact_tops(loaded, tenant, walked)
        for i, vector in enumerate(walked):
            truth = truths[i]
            for ef in BIT_EF_VALUES:
                query = (
                    "SELECT id FROM (SELECT id, embedding FROM chunks WHERE tenant_id = $1"
                    f" ORDER BY {quantised} <~> binary_quantize($2::vector)::bit({bits})"
                    f" LIMIT {ef}) candidates ORDER BY embedding <=> $2 LIMIT 40"
                )
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                    began = time.perf_counter()
                    rows = await conn.fetch(query, tenant.tenant_id, vector)
                    elapsed = (time.perf_counter() - began) * 1000
                if i >= WARMUP:
                    walks.add(("bit, re-ranked", ef), elapsed, rows, truth)
    finally:
        await conn.execute("DROP INDEX IF EXISTS bench_bit")
    return walks.rows("ef_search"), build


SPILLED = re.compile(r"no longer fits into maintenance_work_mem after (\d+) tuples")


async def builds_part(
    conn: asyncpg.Connection, tenant: TenantSlice, dimensions: int, ceiling_mb: int
) -> list[dict[str, Any]]:
    rows_in_graph = tenant.stop - tenant.start
    sized = build_memory_mb(rows_in_graph, dimensions, ceiling_mb=ceiling_mb)
    needed = build_memory_bytes(rows_in_graph, dimensions) / 2**20
    notices: list[str] = []
    conn.add_log_listener(lambda _conn, message: notices.append(message.message))
    rows = []
    shares = (("sized", sized), ("1/2 of it", needed / 2), ("1/4 of it", needed / 4))
    for share, memory in shares:
        memory_mb = math.ceil(memory)
        for workers in (2, 0):
            notices.clear()
            await conn.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
            await conn.execute(f"SET max_parallel_maintenance_workers = {workers}")
            began = time.perf_counter()
            await conn.execute(
                "CREATE INDEX CONCURRENTLY bench_build ON chunks"
                " USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
                f" WHERE tenant_id = '{tenant.tenant_id}'"
            )
            elapsed = time.perf_counter() - began
            await asyncio.sleep(0)  # notices arrive through the event loop
            spilled = [int(m.group(1)) for n in notices if (m := SPILLED.search(n))]
            await conn.execute("DROP INDEX bench_build")
            rows.append(
                {
                    "memory": f"{share} ({memory_mb} MB)",
                    "workers": workers,
                    "build_s": round(elapsed, 1),
                    "in_memory_rows": spilled[0] if spilled else rows_in_graph,
                }
            )
            log(f"  build with {memory_mb} MB, {workers} workers: {elapsed:.1f} s")
    await conn.execute("RESET maintenance_work_mem")
    await conn.execute("RESET max_parallel_maintenance_workers")
    return rows


async def block_reads(db: BenchDatabase) -> tuple[int, int]:
    await asyncio.sleep(11)  # an idle backend reports its counts within 10 s (PostgreSQL 15+)
    conn = await asyncpg.connect(db.superuser_url)
    try:
        row = await conn.fetchrow(
            "SELECT heap_blks_hit + idx_blks_hit AS hit, heap_blks_read + idx_blks_read AS read"
            " FROM pg_statio_user_tables WHERE relname = 'chunks'"
        )
    finally:
        await conn.close()
    return int(row["hit"]), int(row["read"])


SLOWEST = 3


async def explained(db: BenchDatabase, stub: StubEmbedder, tenant_id: str, query: str) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the tenant's own direct statement for `query`."""
    request = SearchRequest(query=query, top_k=10, threshold=None)
    statement = nearest.direct_query(
        stub.vectors[query], tenant_id, stub.model_id, request, exact=False, kept=True
    )
    scope = scope_message(
        "BEGIN", transaction_settings({"tenant_id": tenant_id, "settings": statement.settings})
    )
    conn = await connect_loader(db.app_url)
    try:
        await conn.execute(scope)
        rows = await conn.fetch(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement.statement.sql}",
            *statement.arguments,
        )
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()
    return elided("\n".join(row[0] for row in rows))


def elided(plan: str) -> str:
    """`plan` with its vector literals shortened to '[...]'."""
    return re.sub(r"'\[[^']*\]'", "'[...]'", plan)


def churned(megabytes: int) -> None:
    """What a memory-hungry neighbour does between two searches: `megabytes` of fresh memory
    written and given back (as `float32 matrix @ float64 vector` does when numpy copies the
    matrix to float64 first)."""
    block = np.ones(megabytes * 2**20 // 8)
    del block


SLOW_LOG_DIRECTORY, SLOW_LOG_FILE = "slow_plans", "slow.log"  # in the data directory


def slow_plan_settings(slow_ms: int | None) -> dict[str, str]:
    """auto_explain in every new session, writing to the slow-plan log."""
    if slow_ms is None:
        return {}
    return {
        "session_preload_libraries": "auto_explain",
        "auto_explain.log_min_duration": f"{slow_ms}ms",
        "auto_explain.log_analyze": "on",
        "auto_explain.log_buffers": "on",
        "auto_explain.log_timing": "off",
        "logging_collector": "on",
        "log_directory": SLOW_LOG_DIRECTORY,
        "log_filename": SLOW_LOG_FILE,
    }


def slow_plans(db: BenchDatabase, seen: int) -> tuple[list[str], int]:
    """The plans auto_explain logged since byte `seen` of its log, and where the log ends."""
    if db.server is None:
        return [], seen
    path = db.server.pgdata / SLOW_LOG_DIRECTORY / SLOW_LOG_FILE
    if not path.exists():
        return [], seen
    text = path.read_text(errors="replace")
    entries = re.split(r"\n(?=\d{4}-\d\d-\d\d )", text[seen:])
    plans = [
        elided(re.sub(r"Query Text:.*?(?=Query Parameters)", "", e, flags=re.S))
        for e in entries
        if "duration:" in e
    ]
    return plans, len(text)


async def buffers_part(
    db: BenchDatabase,
    loaded: Loaded,
    stub: StubEmbedder,
    buffers: list[str],
    ceiling_mb: int,
    slow_ms: int | None = None,
    churn_mb: int = 1536,
) -> list[dict[str, Any]]:
    built = await dedicated_indexes_for(
        db, Synthetic().dedicated_min_chunks or 0, ceiling_mb=ceiling_mb
    )
    log(f"  {len(built)} dedicated indexes built")
    queries = list(stub.vectors)
    rows = []
    seen = 0
    for entry in buffers:
        setting, _, churn = entry.partition("+")
        await restart_with(db, {"shared_buffers": setting, **slow_plan_settings(slow_ms)})
        for size_class in CLASSES:
            samples: list[float] = []
            recall: list[float] = []
            slowest: list[tuple[float, str]] = []
            truths = [
                exact_top(loaded, pick_tenant(loaded, size_class, i), np.asarray(stub.vectors[q]))
                for i, q in enumerate(queries)
            ]  # before the searches: nothing of the client's own work between them
            for measured in (False, True):
                if measured:
                    hit, read = await block_reads(db)
                    _warm, seen = slow_plans(db, seen)  # the measured pass's own, below
                for i, query in enumerate(queries):
                    tenant = pick_tenant(loaded, size_class, i)
                    elapsed, hits = await timed_search(
                        db.sessions, stub, tenant.tenant_id, query, None
                    )
                    if measured:
                        samples.append(elapsed)
                        slowest.append((elapsed, query))
                        recall.append(len(set(hits) & truths[i]) / 10)
                    if churn:
                        churned(churn_mb)
            hit_after, read_after = await block_reads(db)
            reads = read_after - read
            plans, seen = slow_plans(db, seen)
            if slow_ms is not None:
                slow = sum(1 for elapsed in samples if elapsed > slow_ms)
                log(f"  {slow} searches over {slow_ms} ms; the server logged {len(plans)}")
            for plan in plans:
                log(f"  logged:\n{plan}")
            if size_class == "50%":
                tenant = pick_tenant(loaded, size_class, 0)
                for elapsed, query in sorted(slowest, reverse=True)[:SLOWEST]:
                    plan = await explained(db, stub, tenant.tenant_id, query)
                    log(f"  slow: {elapsed:.1f} ms, {query!r}; again:\n{plan}")
            rows.append(
                {
                    "shared_buffers": entry,
                    "tenant": size_class,
                    "recall@10": round(float(np.mean(recall)), 3),
                    "from_outside": round(reads / max(1, reads + hit_after - hit), 3),
                    **latency_summary(samples),
                }
            )
            log(f"  {entry} {size_class}: {rows[-1]}")
    return rows


async def run(args: argparse.Namespace) -> dict[str, Any]:
    graphs = [(int(m), int(efc)) for m, efc in (g.split(":") for g in args.graphs.split(","))]
    ef_values = [int(ef) for ef in args.ef.split(",")]
    results: dict[str, Any] = {}
    async with bench_database(superuser_url=args.database_url) as db:
        # no dedicated indexes: each part builds the ones it measures
        spec = Synthetic(dedicated_min_chunks=None)
        stub, loaded = await synthetic_tenants(db, args.chunks, args.queries, spec)
        vectors = [np.asarray(v, dtype=np.float32) for v in stub.vectors.values()]
        tenant = next(t for t in loaded.tenants if t.size_class == "50%")
        conn = await connect_loader(db.superuser_url)
        try:
            await conn.execute("SET maintenance_work_mem = '1GB'")
            results["load"] = loaded.timings
            if "1" in args.parts:
                log("1. graph parameters, walked interleaved")
                walks, builds = await parameters_part(
                    conn, loaded, tenant, vectors, graphs, ef_values, args.ceiling_mb
                )
                walk_table("1. the 50% tenant's 40 nearest by graph parameters, ms", walks)
                print(f"builds, s: {builds}")  # noqa: T201
                results |= {"graphs": walks, "graph_builds_s": builds}
            if "2" in args.parts:
                log("2. a binary-quantised graph, re-ranked by exact distance")
                walks, build = await binary_part(conn, loaded, tenant, vectors)
                walk_table("2. binary-quantised graph, exact re-rank of the candidates", walks)
                print(f"build: {build}")  # noqa: T201
                results |= {"binary": walks, "binary_build": build}
            if "3" in args.parts:
                log("3. the dedicated index's build by memory and parallel workers")
                rows = await builds_part(conn, tenant, vectors[0].shape[0], args.ceiling_mb)
                print_table(
                    f"3. building the 50% tenant's graph ({tenant.stop - tenant.start:,} rows)",
                    ["maintenance_work_mem", "workers", "build s", "rows built in memory"],
                    [[r["memory"], r["workers"], r["build_s"], r["in_memory_rows"]] for r in rows],
                )
                results["builds"] = rows
        finally:
            await conn.close()
        if "4" in args.parts:
            log("4. the service's searches by shared_buffers")
            rows = await buffers_part(
                db,
                loaded,
                stub,
                args.buffers.split(","),
                args.ceiling_mb,
                args.slow_ms,
                args.churn_mb,
            )
            print_table(
                "4. service searches (ef_search by the rule) by shared_buffers, ms",
                ["shared_buffers", "tenant", "recall@10", "from outside", "P50", "P95"],
                [
                    [
                        r["shared_buffers"],
                        r["tenant"],
                        r["recall@10"],
                        r["from_outside"],
                        r["p50_ms"],
                        r["p95_ms"],
                    ]
                    for r in rows
                ],
            )
            results["buffers"] = rows
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--parts", default="1,2,3", help="4 also: shared buffers")
    parser.add_argument("--graphs", default=GRAPHS, help="part 1: m:ef_construction,...")
    parser.add_argument("--ef", default=EF_VALUES, help="part 1: ef_search values")
    parser.add_argument(
        "--buffers",
        default="512MB,4GB",
        help="part 4: shared_buffers values, in turn; 6GB+churn: with --churn-mb between searches",
    )
    parser.add_argument("--ceiling-mb", type=int, default=2048, help="as the service's default")
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    parser.add_argument(
        "--churn-mb", type=int, default=1536, help="part 4: memory a '+churn' round writes"
    )
    parser.add_argument(
        "--slow-ms", type=int, help="part 4: the server logs the plans of statements this slow"
    )
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(f"JSON: {write_json('graph_bench', {'args': vars(args), **results})}")  # noqa: T201


if __name__ == "__main__":
    main()
