"""Search latency and recall@10 by tenant size, in the service and over HTTP, at 10k, 100k and
1M chunks; keyword and hybrid modes too. (Retrieval quality is bench.quality_bench's.)

    python -m bench.search_bench [--sizes 10000,100000] [--queries 200]
        [--ef auto,40,100,200] [--skip-http] [--explain] [--worst-queries N]
        [--synthetic cov|noise] [--spread 1.0] [--noise 0.02] [--m 16] [--ef-construction 64]
        [--plan-cache-mode auto|force_custom_plan] [--modes vector,keyword,hybrid]
        [--database-url URL]

(a) latency, per size: the NFCorpus chunk vectors, each reused size/5481 times plus noise
    shaped like the corpus's own covariance (renormalized; see ``synthetic_vectors``), spread
    over tenants of 50%, 4 x 10%, 5 x 1% and 0.1% of the rows, loaded by binary COPY as superuser
    with the HNSW index dropped and rebuilt (same definition as the migration). Then, as the
    runtime role under RLS: service-only ``search`` with precomputed query vectors, and HTTP
    end to end against ``rag serve`` in a subprocess (query embedding by the local model;
    every query text new to the server; then repeated texts for the query cache).
(b) recall@10 of each service-only search against exact search (numpy over the tenant's rows),
    at each ``--ef`` value (default: auto, the service's own choice, then 40, 100 and 200), per
    tenant size.

Queries go round robin over the tenant sizes (and ef_search values) so load drift and the
pooled connections' prepared statements are shared alike.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import httpx
import numpy as np
from sqlalchemy import event, func, select, text

from app.db.models import Chunk
from app.db.tenancy import tenant_transaction
from app.retrieval import SearchMode, SearchRequest, search
from app.retrieval.bm25 import keyword_query
from app.settings import Settings
from bench.kit.corpus import (
    corpus_vectors,
    query_pool,
)
from bench.kit.database import (
    BenchDatabase,
    bench_database,
    connect_loader,
    search_tokens,
    server_settings,
)
from bench.kit.report import log, print_table, write_json
from bench.kit.server import ApiClient, serve
from bench.kit.stats import latency_summary
from bench.kit.stubs import StubEmbedder
from bench.kit.synthetic import CLASSES, TOP_K, Loaded, Synthetic, exact_top, load_size, pick_tenant

# --- (a) service-only latency and (b) recall ----------------------------------------------------


async def service_part(
    db: BenchDatabase,
    loaded: Loaded,
    stub: StubEmbedder,
    queries: list[str],
    *,
    mode: str,
    ef_values: Sequence[int | None],
) -> list[dict[str, Any]]:
    samples: dict[tuple[str, int], list[float]] = {}
    db_ms: dict[tuple[str, int], list[float]] = {}
    sql_ms: dict[tuple[str, int], list[float]] = {}
    recall: dict[tuple[str, int], list[float]] = {}
    clock = StatementClock(db)
    walked = [*queries[:20], *queries]
    truths = (  # before the searches, as exact_tops says why
        {
            (i, size_class): exact_top(
                loaded,
                pick_tenant(loaded, size_class, i),
                np.asarray(stub.vectors[query], dtype=np.float32),
            )
            for i, query in enumerate(walked)
            for size_class in CLASSES
            if i >= 20
        }
        if mode == "vector"
        else {}
    )
    for i, query in enumerate(walked):
        warm = i < 20
        for ef in ef_values:
            for size_class in CLASSES:
                tenant = pick_tenant(loaded, size_class, i)
                clock.reset()
                began = time.perf_counter()
                if mode == LEGACY_KEYWORD:
                    await legacy_keyword(db, tenant.tenant_id, query)
                    database_ms = (time.perf_counter() - began) * 1000
                else:
                    request = SearchRequest(
                        query=query,
                        mode=SearchMode(mode),
                        top_k=TOP_K,
                        threshold=None,
                        ef_search=ef,
                    )
                    outcome = await search(
                        db.sessions, stub, tenant_id=tenant.tenant_id, request=request
                    )
                    database_ms = outcome.timings_ms["database"]
                elapsed = (time.perf_counter() - began) * 1000
                if warm:
                    continue
                key = (size_class, ef)
                samples.setdefault(key, []).append(elapsed)
                sql_ms.setdefault(key, []).append(clock.total_ms)
                db_ms.setdefault(key, []).append(database_ms)
                if mode == "vector":
                    truth = truths[(i, size_class)]
                    found = {h.chunk_id for h in outcome.hits}
                    recall.setdefault(key, []).append(len(truth & found) / len(truth))
    clock.close()
    rows = []
    for (size_class, ef), values in samples.items():
        row = {
            "path": f"service, {mode}",
            "tenant": size_class,
            "ef_search": "auto" if ef is None else ef,
            **latency_summary(values),
            "db_p50_ms": round(float(np.percentile(db_ms[(size_class, ef)], 50)), 3),
            "db_p95_ms": round(float(np.percentile(db_ms[(size_class, ef)], 95)), 3),
            # statements SQLAlchemy sends: the direct vector path sends its own (none counted)
            "sql_p50_ms": round(float(np.percentile(sql_ms[(size_class, ef)], 50)), 3) or "",
            "statements": clock.statements,
        }
        if recall:
            row["recall@10"] = round(float(np.mean(recall[(size_class, ef)])), 4)
            row["recall@10_min"] = round(float(np.min(recall[(size_class, ef)])), 2)
        rows.append(row)
    return rows


async def worst_keyword_part(
    db: BenchDatabase, loaded: Loaded, stub: StubEmbedder, repeats: int
) -> list[dict[str, Any]]:
    """The costliest query a caller may send: as many terms as the service keeps
    (`search_keyword_max_terms`), each among the most frequent of the largest tenant (the
    bound caps the terms, so the worst query is the one whose terms have the most postings).
    Keyword and hybrid, ef_search 40, `repeats` times per tenant size."""
    conn = await connect_loader(db.superuser_url)
    try:
        largest = max(loaded.tenants, key=lambda t: t.stop - t.start)
        words = await conn.fetch(
            "select lexeme, df from bm25_terms where tenant_id = $1 order by df desc limit $2",
            largest.tenant_id,
            Settings().search_keyword_max_terms,
        )
    finally:
        await conn.close()
    query = " ".join(row["lexeme"] for row in words)  # no operators: any of the words
    log(f"worst keyword query ({sum(r['df'] for r in words)} postings in the 50% tenant): {query}")
    stub.vectors[query] = next(iter(stub.vectors.values()))
    rows = []
    for mode in ("keyword", "hybrid"):
        timed = await service_part(db, loaded, stub, [query] * repeats, mode=mode, ef_values=[40])
        for row in timed:
            rows.append({**row, "path": f"service, {mode}, worst allowed query"})
    return rows


LEGACY_KEYWORD = "keyword-tsrank"


async def legacy_keyword(db: BenchDatabase, tenant_id: str, query: str) -> list[Any]:
    """The keyword statement before BM25 (ts_rank_cd over the same tsquery, best 40), for
    before/after latency in one run (`--modes keyword,keyword-tsrank`)."""
    tsquery = keyword_query(query)
    rank = func.ts_rank_cd(Chunk.search_vector, tsquery).label("rank")
    async with tenant_transaction(db.sessions, tenant_id) as session:
        return list(
            (
                await session.execute(
                    select(Chunk.id, rank)
                    .where(Chunk.search_vector.op("@@")(tsquery), Chunk.tenant_id == tenant_id)
                    .order_by(rank.desc(), Chunk.id)
                    .limit(40)
                )
            ).all()
        )


class StatementClock:
    """Time spent inside SQL statements (cursor execute to result) on the runtime engine;
    the rest of a search is round trips outside statements (pool ping, BEGIN, COMMIT) and
    Python (SQLAlchemy, pgvector's text encoding of the query vector)."""

    def __init__(self, db: BenchDatabase) -> None:
        self.engine = db.engine.sync_engine
        self.total_ms = 0.0
        self.count = 0
        self.statements = 0
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, *_: Any) -> None:
        conn.info["bench_t0"] = time.perf_counter()

    def _after(self, conn: Any, *_: Any) -> None:
        self.total_ms += (time.perf_counter() - conn.info.pop("bench_t0")) * 1000
        self.count += 1

    def reset(self) -> None:
        if self.count:
            self.statements = self.count
        self.total_ms = 0.0
        self.count = 0

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)
        event.remove(self.engine, "after_cursor_execute", self._after)


async def plan_counts(db: BenchDatabase, tenant_id: str) -> list[dict[str, Any]]:
    """Generic vs custom plans of the search statements on one pooled connection."""
    async with tenant_transaction(db.sessions, tenant_id) as session:
        result = await session.execute(
            text(
                "select left(regexp_replace(statement, '\\s+', ' ', 'g'), 90) as statement,"
                " generic_plans, custom_plans from pg_prepared_statements"
                " where statement ilike '%chunks%' order by generic_plans + custom_plans desc"
            )
        )
        return [dict(r._mapping) for r in result]


async def explain_part(
    db: BenchDatabase, loaded: Loaded, stub: StubEmbedder, query: str
) -> dict[str, str]:
    """EXPLAIN ANALYZE of the statement a vector `search` sends (candidates, threshold and
    sources in one), per tenant size, as a custom plan (parameters known to the planner: what an
    EXPLAIN with literals shows) and as the generic plan PostgreSQL switches a prepared
    statement to after five executions when it looks no costlier."""
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM chunks" in statement and not statement.startswith("select set_config"):
            captured.append((statement, parameters))

    plans = {}
    for size_class in CLASSES:
        tenant = pick_tenant(loaded, size_class, 0)
        captured.clear()
        event.listen(db.engine.sync_engine, "before_cursor_execute", capture)
        try:
            await search(
                db.sessions,
                stub,
                tenant_id=tenant.tenant_id,
                request=SearchRequest(
                    query=query, mode=SearchMode.VECTOR, top_k=TOP_K, threshold=None, ef_search=40
                ),
            )
        finally:
            event.remove(db.engine.sync_engine, "before_cursor_execute", capture)
        conn = await connect_loader(db.app_url)
        try:
            for index, (statement, parameters) in enumerate(captured):
                name = f"statement {index + 1} of {len(captured)}"
                await conn.execute(f"PREPARE bench_{index} AS {statement}")
                literals = ", ".join(
                    [
                        await conn.fetchval("select quote_literal($1::text)", str(p))
                        for p in parameters
                    ]
                )
                for mode in ("force_custom_plan", "force_generic_plan"):
                    async with conn.transaction():
                        await conn.execute(
                            "select set_config('app.tenant_id', $1, true),"
                            " set_config('hnsw.ef_search', '40', true),"
                            " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                            " set_config('plan_cache_mode', $2, true)",
                            tenant.tenant_id,
                            mode,
                        )
                        explain = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)"
                        rows = await conn.fetch(f"{explain} EXECUTE bench_{index}({literals})")
                    plan = "\n".join(r[0] for r in rows)
                    plans[f"{name}, {size_class}, ef 40, {mode}"] = re.sub(
                        r"'\[[^']*\]'", "'[...]'", plan
                    )
        finally:
            await conn.close()
    for index, (statement, _) in enumerate(captured):
        plans[f"statement {index + 1} of {len(captured)}"] = statement
    return plans


# --- (a) HTTP end to end ----------------------------------------------------------------------


async def http_part(
    db: BenchDatabase,
    loaded: Loaded,
    queries: list[str],
    *,
    redis_url: str | None,
    mode: str,
) -> list[dict[str, Any]]:
    tokens = search_tokens(db.settings, [t.tenant_id for t in loaded.tenants], ttl_seconds=3600)
    samples: dict[str, list[float]] = {}
    server_ms: dict[str, list[tuple[float, float]]] = {}
    sent: list[tuple[str, str]] = []
    with serve(db, redis_url=redis_url) as url:
        async with (
            ApiClient(url, timeout_seconds=30) as client,
            httpx.AsyncClient(base_url=url, timeout=30) as other,
        ):

            async def post(tenant_id: str, query: str) -> tuple[float, dict[str, Any]]:
                body = {"query": query, "max_results": TOP_K, "mode": mode}
                began = time.perf_counter()
                reply = await client.post("/api/rag/search", body, token=tokens[tenant_id])
                return (time.perf_counter() - began) * 1000, reply

            async def post_httpx(tenant_id: str, query: str) -> tuple[float, dict[str, Any]]:
                """The same request from httpx: what the client itself costs."""
                began = time.perf_counter()
                reply = await other.post(
                    "/api/rag/search",
                    json={"query": query, "max_results": TOP_K, "mode": mode},
                    headers={"Authorization": f"Bearer {tokens[tenant_id]}"},
                )
                elapsed = (time.perf_counter() - began) * 1000
                reply.raise_for_status()
                return elapsed, reply.json()

            warm = queries[-10:]  # warm-up texts are never measured later
            for i, query in enumerate(warm):
                await post(pick_tenant(loaded, CLASSES[i % 3], i).tenant_id, query)
            texts = iter(queries[:-10])
            n = (len(queries) - 10) // len(CLASSES)
            for i in range(n):
                for size_class in CLASSES:
                    tenant = pick_tenant(loaded, size_class, i)
                    query = next(texts)
                    elapsed, body = await post(tenant.tenant_id, query)
                    key = f"{size_class}, new text"
                    samples.setdefault(key, []).append(elapsed)
                    server_ms.setdefault(key, []).append(
                        (body["timings"]["embed_ms"], body["timings"]["database_ms"])
                    )
                    sent.append((tenant.tenant_id, query))
            for i, (tenant_id, query) in enumerate(sent[-60:] * 2):  # in the LRU: cache hits
                size_class = next(t.size_class for t in loaded.tenants if t.tenant_id == tenant_id)
                clients = {"cached text": post, "cached text, httpx client": post_httpx}
                for cache, send in sorted(clients.items(), reverse=i % 2 == 1):  # alternating
                    elapsed, body = await send(tenant_id, query)
                    key = f"{size_class}, {cache}"
                    samples.setdefault(key, []).append(elapsed)
                    server_ms.setdefault(key, []).append(
                        (body["timings"]["embed_ms"], body["timings"]["database_ms"])
                    )
    rows = []
    for key, values in samples.items():
        size_class, cache = key.split(", ", 1)
        embeds = [e for e, _ in server_ms[key]]
        dbs = [d for _, d in server_ms[key]]
        rows.append(
            {
                "path": f"HTTP, {mode}, {cache}",
                "tenant": size_class,
                "ef_search": "auto",
                **latency_summary(values),
                "server_embed_p50_ms": round(float(np.percentile(embeds, 50)), 2),
                "server_embed_p95_ms": round(float(np.percentile(embeds, 95)), 2),
                "db_p50_ms": round(float(np.percentile(dbs, 50)), 3),
                "db_p95_ms": round(float(np.percentile(dbs, 95)), 3),
            }
        )
    return rows


# --- driver -----------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with bench_database(
        superuser_url=args.database_url, shared_buffers=args.shared_buffers
    ) as db:
        results["server"] = await server_settings(db.superuser_url)
        log(f"server: {results['server']}")
        local, _chunker, embedder, corpus, base = await corpus_vectors(db.settings)
        results["corpus"] = {"documents": len(corpus), "chunks": len(base)}
        if args.plan_cache_mode != "auto":
            await set_plan_cache_mode(db, args.plan_cache_mode)
        pool = query_pool(set())
        needed = args.queries * len(CLASSES) + 10 + args.queries
        stub_texts = pool[: args.queries]
        http_texts = pool[args.queries : needed]
        vectors = {t: await embedder.embed_query(t) for t in stub_texts}
        embedder.save()
        stub = StubEmbedder(local.model_id, local.dimensions, vectors)
        results["sizes"] = {}
        for size in args.sizes:
            log(f"size {size}: generating and loading")
            spec = Synthetic(
                kind=args.synthetic,
                scale=args.spread,
                noise=args.noise,
                m=args.m,
                ef_construction=args.ef_construction,
                dedicated_min_chunks=None if args.no_dedicated else args.dedicated_min_chunks,
                build_memory_max_mb=args.build_memory_max_mb,
            )
            loaded = await load_size(db, size, corpus, base, spec=spec, model_id=local.model_id)
            entry: dict[str, Any] = {
                "load": loaded.timings,
                "synthetic": asdict(spec),
                "tenants": {
                    c: sum(1 for t in loaded.tenants if t.size_class == c) for c in CLASSES
                },
                "rows_per_tenant": {
                    c: next(t.stop - t.start for t in loaded.tenants if t.size_class == c)
                    for c in CLASSES
                },
            }
            rows = []
            for mode in args.modes:
                log(
                    f"(b) size {size}: service-only, {mode}, {len(stub_texts)} queries"
                    f" x {len(CLASSES)} sizes x ef {args.ef}"
                )
                rows += await service_part(
                    db, loaded, stub, stub_texts, mode=mode, ef_values=args.ef
                )
            if args.worst_queries:
                rows += await worst_keyword_part(db, loaded, stub, args.worst_queries)
            entry["plans"] = await plan_counts(db, loaded.tenants[0].tenant_id)
            if args.explain:
                entry["explain"] = await explain_part(db, loaded, stub, stub_texts[0])
            if not args.skip_http:
                log(f"size {size}: HTTP end to end via rag serve")
                for mode in args.modes:
                    rows += await http_part(
                        db,
                        loaded,
                        http_texts
                        if mode == args.modes[0]
                        else pool[needed : needed + len(http_texts)],
                        redis_url=args.redis_url,
                        mode=mode,
                    )
            entry["latency"] = rows
            results["sizes"][str(size)] = entry
            report_size(size, entry)
    return results


async def set_plan_cache_mode(db: BenchDatabase, mode: str) -> None:
    """A database setting, not app code: what the runtime role's new connections plan with."""
    conn = await connect_loader(db.superuser_url)
    try:
        name = await conn.fetchval("select current_database()")
        await conn.execute(f'ALTER ROLE rag_app IN DATABASE "{name}" SET plan_cache_mode = {mode}')
    finally:
        await conn.close()
    await db.engine.dispose()
    log(f"plan_cache_mode = {mode} for the runtime role")


def report_size(size: int, entry: dict[str, Any]) -> None:
    load = entry["load"]
    print_table(f"load, {size} chunks", ["step", "value"], [[k, v] for k, v in load.items()])
    rows = [
        [
            r["path"],
            r["tenant"],
            r["ef_search"],
            r["n"],
            r["p50_ms"],
            r["p95_ms"],
            r["db_p50_ms"],
            r["db_p95_ms"],
            r.get("sql_p50_ms", ""),
            r.get("server_embed_p50_ms", ""),
            r.get("recall@10", ""),
            r.get("recall@10_min", ""),
        ]
        for r in entry["latency"]
    ]
    print_table(
        f"search latency (ms) and recall@10, {size} chunks",
        [
            "path",
            "tenant",
            "ef",
            "n",
            "P50",
            "P95",
            "db P50",
            "db P95",
            "SQL P50",
            "embed P50",
            "recall@10",
            "min",
        ],
        rows,
    )
    for key, plan in entry.get("explain", {}).items():
        print(f"--- EXPLAIN {key}\n{plan}\n")  # noqa: T201
    for plan in entry["plans"]:
        counts = f"generic {plan['generic_plans']}, custom {plan['custom_plans']}"
        print(f"plans: {counts}: {plan['statement']}")  # noqa: T201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--queries", type=int, default=200, help="per tenant size and ef_search")
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["vector"])
    parser.add_argument(
        "--ef",
        type=lambda s: [None if x == "auto" else int(x) for x in s.split(",")],
        default=[None, 40, 100, 200],
        help="ef_search values for the service-only runs; auto: the service's default (chosen"
        " by the size of the index a search uses)",
    )
    parser.add_argument(
        "--synthetic",
        choices=["cov", "noise"],
        default="cov",
        help="how rows beyond the corpus differ from it (see synthetic_vectors)",
    )
    parser.add_argument("--spread", type=float, default=1.0, help="cov: noise scale")
    parser.add_argument("--noise", type=float, default=0.02, help="noise: sd per dimension")
    parser.add_argument("--m", type=int, default=16, help="HNSW m (migration: 16)")
    parser.add_argument(
        "--ef-construction", type=int, default=64, help="HNSW ef_construction (migration: 64)"
    )
    parser.add_argument(
        "--dedicated-min-chunks",
        type=int,
        default=5_000,
        help="after loading, `rag index --min-chunks N` (the service's default: 5000)",
    )
    parser.add_argument("--no-dedicated", action="store_true", help="no dedicated indexes")
    parser.add_argument(
        "--build-memory-max-mb",
        type=int,
        default=4096,
        help="index builds get the memory their graph needs, up to this",
    )
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--worst-queries",
        type=int,
        default=0,
        help="also time the costliest allowed keyword/hybrid query this many times per size",
    )
    parser.add_argument(
        "--plan-cache-mode",
        default="auto",
        choices=["auto", "force_custom_plan", "force_generic_plan"],
        help="the runtime role's default (diagnostic: the service itself sets"
        " force_custom_plan per transaction since 5bcada0, which wins)",
    )
    parser.add_argument("--shared-buffers", help="restart the embedded server with this (e.g. 1GB)")
    parser.add_argument("--redis-url", help="rate limit in this Redis (default: in-process)")
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    path = write_json("search_bench", {"args": vars(args), **results})
    print(f"JSON: {path}")  # noqa: T201


if __name__ == "__main__":
    main()
