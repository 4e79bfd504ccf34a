"""The direct vector path against what it replaced, interleaved in one run: kept plans,
vectors in the row, the threshold's shortfall from the statement's own count.

    .venv/bin/python bench/direct_bench.py [--chunks 100000] [--queries 100]
        [--database-url URL]

Data and tenants as search_bench.py (b): NFCorpus chunk vectors reused with noise shaped like
their covariance, tenants of 50%, 4 x 10%, 5 x 1% and 0.1% of the rows, dedicated HNSW
indexes as `rag index` makes them. Service-only: `app.retrieval.search` as the runtime role
under RLS, query vectors precomputed (no model time), the service's own ef_search rule.

1. plans: every search twice, the order alternating: as the service runs it (from a
   tenant's third direct search its own statement, whose generic plan is kept per
   connection) and as before (the statement every tenant shares, the tenant a parameter,
   planned at every run: `force_custom_plan`). The two must return the same hits. Queries
   go round robin over the tenants of a class: a 0.1% tenant is searched about twice per
   variant, so that row shows tenants searched rarely.
2. storage: each 1% tenant's exact scan (its 1,000 rows by the btree on tenant_id, ordered by
   distance, 40 rows, as the service's plan for such a tenant) on two copies of those rows:
   vectors in the row (storage MAIN, migration 0010) and out of line (EXTERNAL, pgvector's
   default and the layout before it).
3. shortfall: searches of 0.1% tenants at the API's default threshold (0.3), where most
   queries come back short: as the service runs it (the statement's own count tells the
   threshold's doing) and as before (a second transaction to work it out).
4. the graph walk alone, what is left of a large tenant's search: the 50% tenant's 40
   nearest by its dedicated index as superuser (no RLS, no joins, no transaction settings
   but ef_search, sorting off so the graph is walked), at several ef_search values, beside
   the same walk on a halfvec (half-precision) HNSW index of the same rows built for the
   comparison, with its recall@10 against exact search.
4b. the same 40 nearest by an IVFFlat index of the same rows (lists = sqrt(rows)), the other
   index pgvector offers, at several `ivfflat.probes`, with its recall@10.
5. cold and warm: on a fresh connection, the direct statement of 40 0.1% tenants, each run
   twice in a row (its first run, then a second), the tenant's own statement against the
   shared one: what the first run of a tenant's own statement costs (a prepare and a plan)
   and what each later run saves.
6. commit: every search twice, the order alternating: as the service runs it (a READ ONLY
   transaction whose COMMIT a task sends after the answer, then returns the connection to the
   pool) and as before (COMMIT awaited before the search returns).
7. first searches: each 0.1% tenant's first search (nothing remembered of any tenant), as the
   service runs it (one probe for access lists, remembered; none: the direct path) and as
   before (the session's path, where the probe and the caller's count were made).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from harness import (
    bench_database,
    connect_loader,
    latency_summary,
    log,
    print_table,
    write_json,
)
from search_bench import (
    CLASSES,
    Loaded,
    StubEmbedder,
    exact_tops,
    pick_tenant,
    synthetic_tenants,
)

from app.db.settings_sql import scope_message
from app.db.tenancy import SessionMaker, transaction_settings
from app.retrieval import SearchRequest, nearest, planning, search, visibility
from app.retrieval.visibility import ListedTenants, Remembered, VisibleCounts

SEARCH = importlib.import_module("app.retrieval.search")  # the module: `search` is its function
COPIES = {"in the row (MAIN)": "main", "out of line (EXTERNAL)": "external"}


@contextmanager
def replaced(name: str, value: Any) -> Iterator[None]:
    """`name` of the search module replaced by `value` for a while: the path as it was."""
    saved = getattr(SEARCH, name)
    setattr(SEARCH, name, value)
    try:
        yield
    finally:
        setattr(SEARCH, name, saved)


def previous_plans() -> AbstractContextManager[None]:
    """The direct path as it was: the statement every tenant shares, planned at each run."""
    return replaced("keeps_plan", lambda _tenant_id: False)


def shortfall_by_statement() -> AbstractContextManager[None]:
    """Every short answer explained by explain_shortfall's own transaction, as before."""
    return replaced("threshold_shortfall", lambda *_args: None)


def commit_before_answer() -> AbstractContextManager[None]:
    """The direct transaction as it was: committed before the search returns."""
    scoped = SEARCH.scoped_connection

    def inline(*args: Any, **kwargs: Any) -> Any:
        return scoped(*args, **{**kwargs, "read_only": False})

    return replaced("scoped_connection", inline)


def session_first() -> AbstractContextManager[None]:
    """A search as a tenant's first was before: its own session (the probe, the count)."""
    return replaced("_direct", lambda _request: False)


def forget_tenants() -> None:
    """Nothing remembered of any tenant: the next search of each is its first."""
    visibility.LISTED = ListedTenants()
    visibility.COUNTS = VisibleCounts()
    planning.RECENT_SEARCHES = Remembered()


async def first_searches(
    sessions: SessionMaker, stub: StubEmbedder, loaded: Loaded, queries: list[str]
) -> list[dict[str, Any]]:
    """Part 7: each 0.1% tenant's first search, as now (the access-list probe, then the
    direct path) and as before (the session's path), the order alternating."""
    samples: dict[str, list[float]] = {}
    for i, query in enumerate([*queries[:20], *queries]):
        tenant = pick_tenant(loaded, "0.1%", i)
        hits = {}
        for variant in ("now", "before") if i % 2 else ("before", "now"):
            forget_tenants()
            with session_first() if variant == "before" else nullcontext():
                elapsed, hits[variant] = await timed_search(
                    sessions, stub, tenant.tenant_id, query, None
                )
            if i >= 20:
                samples.setdefault(variant, []).append(elapsed)
        if hits["now"] != hits["before"]:
            raise AssertionError(f"different hits for {tenant.tenant_id}: {query!r}")
    return [{"tenant": "0.1%", **{k: latency_summary(v) for k, v in samples.items()}}]


async def timed_search(
    sessions: SessionMaker, stub: StubEmbedder, tenant_id: str, query: str, threshold: float | None
) -> tuple[float, list[Any]]:
    request = SearchRequest(query=query, top_k=10, threshold=threshold)
    began = time.perf_counter()
    outcome = await search(sessions, stub, tenant_id=tenant_id, request=request)
    return (time.perf_counter() - began) * 1000, [h.chunk_id for h in outcome.hits]


async def interleaved(
    sessions: SessionMaker,
    stub: StubEmbedder,
    loaded: Loaded,
    queries: list[str],
    classes: tuple[str, ...],
    before: Callable[[], Any],
    threshold: float | None = None,
) -> list[dict[str, Any]]:
    """Each (query, tenant) as the service runs it and under `before`, in alternating order;
    the first 20 queries warm up."""
    samples: dict[tuple[str, str], list[float]] = {}
    for i, query in enumerate([*queries[:20], *queries]):
        for size_class in classes:
            tenant = pick_tenant(loaded, size_class, i)
            hits = {}
            for variant in ("now", "before") if i % 2 else ("before", "now"):
                with before() if variant == "before" else nullcontext():
                    elapsed, hits[variant] = await timed_search(
                        sessions, stub, tenant.tenant_id, query, threshold
                    )
                if i >= 20:
                    samples.setdefault((size_class, variant), []).append(elapsed)
            if hits["now"] != hits["before"]:
                raise AssertionError(f"different hits for {tenant.tenant_id}: {query!r}")
    return [
        {
            "tenant": size_class,
            "now": latency_summary(samples[(size_class, "now")]),
            "before": latency_summary(samples[(size_class, "before")]),
        }
        for size_class in classes
    ]


async def storage_part(
    superuser_url: str, loaded: Loaded, vectors: list[np.ndarray]
) -> list[dict[str, Any]]:
    tenants = [t.tenant_id for t in loaded.tenants if t.size_class == "1%"]
    conn = await connect_loader(superuser_url)
    try:
        for suffix in COPIES.values():
            table = f"storage_{suffix}"
            await conn.execute(f"CREATE TABLE {table} (LIKE chunks)")
            await conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE {suffix}")
            await conn.execute(
                f"INSERT INTO {table} SELECT * FROM chunks WHERE tenant_id = ANY($1)", tenants
            )
            await conn.execute(f"CREATE INDEX ON {table} (tenant_id)")
            await conn.execute(f"VACUUM ANALYZE {table}")
        samples: dict[str, list[float]] = {}
        out_of_line: dict[str, int] = {}
        for i, vector in enumerate([*vectors[:20], *vectors]):
            tenant_id = tenants[i % len(tenants)]
            names = list(COPIES.items()) if i % 2 else list(reversed(COPIES.items()))
            for label, suffix in names:
                query = (
                    f"SELECT id FROM storage_{suffix} WHERE tenant_id = $1"
                    " ORDER BY embedding <=> $2 LIMIT 40"
                )
                began = time.perf_counter()
                await conn.fetch(query, tenant_id, vector)
                if i >= 20:
                    samples.setdefault(label, []).append((time.perf_counter() - began) * 1000)
        for label, suffix in COPIES.items():
            out_of_line[label] = await conn.fetchval(
                f"SELECT count(*) FROM storage_{suffix}"
                " WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL"
            )
    finally:
        for suffix in COPIES.values():
            await conn.execute(f"DROP TABLE IF EXISTS storage_{suffix}")
        await conn.close()
    return [
        {"vectors": label, "out_of_line": out_of_line[label], **latency_summary(values)}
        for label, values in samples.items()
    ]


EF_VALUES = (40, 100, 160, 300)


@dataclass
class WalkSamples:
    """Timings and recall@10 of index walks (parts 4 and 4b), by (index, knob value)."""

    ms: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    recall: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def add(self, key: tuple[str, int], elapsed_ms: float, rows: list[Any], truth: set[Any]):
        self.ms.setdefault(key, []).append(elapsed_ms)
        found = {r["id"] for r in rows[:10]}
        self.recall.setdefault(key, []).append(len(found & truth) / 10)

    def rows(self, knob: str) -> list[dict[str, Any]]:
        return [
            {
                "index": index,
                knob: value,
                "recall@10": round(float(np.mean(self.recall[(index, value)])), 3),
                **latency_summary(values),
            }
            for (index, value), values in sorted(self.ms.items())
        ]


WALKS = {
    "vector": "embedding <=> $2",
    "halfvec": "embedding::halfvec({d}) <=> $2::halfvec({d})",
}


async def walk_part(
    superuser_url: str, loaded: Loaded, vectors: list[np.ndarray]
) -> list[dict[str, Any]]:
    tenant = next(t for t in loaded.tenants if t.size_class == "50%")
    dimensions = vectors[0].shape[0]
    conn = await connect_loader(superuser_url)
    walks = WalkSamples()
    try:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(
            f"CREATE INDEX bench_halfvec ON chunks USING hnsw"
            f" ((embedding::halfvec({dimensions})) halfvec_cosine_ops)"
            f" WITH (m = 16, ef_construction = 64) WHERE tenant_id = '{tenant.tenant_id}'"
        )
        await conn.execute("ANALYZE chunks")
        walked = [*vectors[:20], *vectors]
        truths = exact_tops(loaded, tenant, walked)
        for i, vector in enumerate(walked):
            truth = truths[i]
            for ef in EF_VALUES:
                for kind, order in WALKS.items() if i % 2 else reversed(WALKS.items()):
                    query = (
                        "SELECT id FROM chunks WHERE tenant_id = $1"
                        f" ORDER BY {order.format(d=dimensions)} LIMIT 40"
                    )
                    async with conn.transaction():
                        await conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        await conn.execute("SET LOCAL enable_sort = off")  # walk the graph
                        # the tenant's own (partial) index, as the service's plans see it
                        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                        began = time.perf_counter()
                        rows = await conn.fetch(query, tenant.tenant_id, vector)
                        elapsed = (time.perf_counter() - began) * 1000
                    if i >= 20:
                        walks.add((kind, ef), elapsed, rows, truth)
    finally:
        await conn.execute("DROP INDEX IF EXISTS bench_halfvec")
        await conn.close()
    return walks.rows("ef_search")


PROBES = (8, 16, 32, 64)


async def ivfflat_part(
    superuser_url: str, loaded: Loaded, vectors: list[np.ndarray]
) -> list[dict[str, Any]]:
    """The 50% tenant's 40 nearest by an IVFFlat index of its rows (lists = sqrt(rows), as
    pgvector advises up to 1M rows) at several `ivfflat.probes`: the other index pgvector
    offers, beside the HNSW walk of part 4. The tenant's HNSW index is dropped inside each
    transaction (rolled back) so the planner takes the IVFFlat one."""
    tenant = next(t for t in loaded.tenants if t.size_class == "50%")
    lists = round(math.sqrt(tenant.stop - tenant.start))
    index = f"ivfflat, lists {lists}"
    conn = await connect_loader(superuser_url)
    walks = WalkSamples()
    try:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(
            "CREATE INDEX bench_ivfflat ON chunks USING ivfflat (embedding vector_cosine_ops)"
            f" WITH (lists = {lists}) WHERE tenant_id = '{tenant.tenant_id}'"
        )
        await conn.execute("ANALYZE chunks")
        hnsw = await conn.fetchval(
            "SELECT string_agg(c.relname, ', ') FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " WHERE i.indrelid = 'chunks'::regclass AND a.amname = 'hnsw'"
        )
        query = "SELECT id FROM chunks WHERE tenant_id = $1 ORDER BY embedding <=> $2 LIMIT 40"
        walked = [*vectors[:20], *vectors]
        truths = exact_tops(loaded, tenant, walked)
        for i, vector in enumerate(walked):
            truth = truths[i]
            for probes in PROBES:
                transaction = conn.transaction()
                await transaction.start()
                try:  # rolled back: the DROP INDEX never happens
                    await conn.execute(f"DROP INDEX {hnsw}")
                    await conn.execute(f"SET LOCAL ivfflat.probes = {probes}")
                    await conn.execute("SET LOCAL enable_sort = off")
                    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                    began = time.perf_counter()
                    rows = await conn.fetch(query, tenant.tenant_id, vector)
                    elapsed = (time.perf_counter() - began) * 1000
                finally:
                    await transaction.rollback()
                if i >= 20:
                    walks.add((index, probes), elapsed, rows, truth)
    finally:
        await conn.execute("DROP INDEX IF EXISTS bench_ivfflat")
        await conn.close()
    return walks.rows("probes")


async def cold_part(
    app_url: str, loaded: Loaded, vectors: list[np.ndarray], model: str
) -> list[dict[str, Any]]:
    tenants = [t.tenant_id for t in loaded.tenants if t.size_class == "0.1%"][:40]
    samples: dict[tuple[str, str], list[float]] = {}
    for kept in (True, False, True, False):
        conn = await connect_loader(app_url)
        try:
            for i, tenant_id in enumerate(tenants):
                request = SearchRequest(query="-", top_k=10, threshold=0.3)
                query = nearest.direct_query(
                    vectors[i % len(vectors)], tenant_id, model, request, exact=False, kept=kept
                )
                scope = scope_message(
                    "BEGIN",
                    transaction_settings({"tenant_id": tenant_id, "settings": query.settings}),
                )
                for run in ("first run", "second run"):
                    await conn.execute(scope)
                    began = time.perf_counter()
                    await conn.fetch(query.statement.sql, *query.arguments)
                    elapsed = (time.perf_counter() - began) * 1000
                    await conn.execute("COMMIT")
                    key = ("tenant's own" if kept else "shared", run)
                    samples.setdefault(key, []).append(elapsed)
        finally:
            await conn.close()
    return [
        {"statement": statement, "run": run, **latency_summary(values)}
        for (statement, run), values in samples.items()
    ]


def walk_table(title: str, rows: list[dict[str, Any]]) -> None:
    """Parts 4 and 4b: an index, its knob (ef_search or probes), recall and latency."""
    knob = "ef_search" if "ef_search" in rows[0] else "probes"
    print_table(
        title,
        ["index", knob, "recall@10", "P50", "P95"],
        [[r["index"], r[knob], r["recall@10"], r["p50_ms"], r["p95_ms"]] for r in rows],
    )


def report(title: str, rows: list[dict[str, Any]]) -> None:
    print_table(
        title,
        ["tenant", "now P50", "P95", "before P50", "P95", "P50 ratio"],
        [
            [
                r["tenant"],
                r["now"]["p50_ms"],
                r["now"]["p95_ms"],
                r["before"]["p50_ms"],
                r["before"]["p95_ms"],
                round(r["now"]["p50_ms"] / r["before"]["p50_ms"], 2),
            ]
            for r in rows
        ],
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_database(superuser_url=args.database_url) as db:
        stub, loaded = await synthetic_tenants(db, args.chunks, args.queries)
        queries, vectors = list(stub.vectors), stub.vectors
        log("1. plans kept per tenant / planned at every run")
        plans = await interleaved(db.sessions, stub, loaded, queries, CLASSES, previous_plans)
        report("1. plans: kept per tenant (now) / planned every run (before), ms", plans)
        log("2. exact scans of 1% tenants, vectors in the row / out of line")
        arrays = [np.asarray(v, dtype=np.float32) for v in vectors.values()]
        storage = await storage_part(db.superuser_url, loaded, arrays)
        print_table(
            f"2. exact scan of a 1% tenant ({args.chunks // 100:,} rows), ms",
            ["vectors", "out of line", "P50", "P95"],
            [[r["vectors"], r["out_of_line"], r["p50_ms"], r["p95_ms"]] for r in storage],
        )
        log("3. short answers at the default threshold 0.3")
        short = await interleaved(
            db.sessions, stub, loaded, queries, ("0.1%",), shortfall_by_statement, threshold=0.3
        )
        report("3. threshold 0.3: shortfall from the count (now) / by statement (before)", short)
        log("4. the 50% tenant's graph walk alone, vector and halfvec indexes")
        walks = await walk_part(db.superuser_url, loaded, arrays)
        walk_table("4. the graph walk alone: 40 nearest of the 50% tenant, superuser, ms", walks)
        log("4b. the same rows by an IVFFlat index")
        ivfflat = await ivfflat_part(db.superuser_url, loaded, arrays)
        walk_table("4b. IVFFlat: 40 nearest of the 50% tenant, superuser, ms", ivfflat)
        log("5. a tenant's own statement cold and warm, against the shared one")
        cold = await cold_part(db.app_url, loaded, arrays, stub.model_id)
        print_table(
            "5. the direct statement of 40 0.1% tenants on a fresh connection, ms",
            ["statement", "run", "P50", "P95"],
            [[r["statement"], r["run"], r["p50_ms"], r["p95_ms"]] for r in cold],
        )
        log("6. COMMIT after the answer / before it")
        commit = await interleaved(
            db.sessions, stub, loaded, queries, CLASSES, commit_before_answer
        )
        report("6. COMMIT after the answer (now) / before it (before), ms", commit)
        log("7. a tenant's first search: probe and direct / the session's path")
        first = await first_searches(db.sessions, stub, loaded, queries)
        report("7. a tenant's first search: probe, then direct (now) / session (before)", first)
        return {
            "commit": commit,
            "first": first,
            "cold": cold,
            "ivfflat": ivfflat,
            "load": loaded.timings,
            "plans": plans,
            "storage": storage,
            "shortfall": short,
            "walks": walks,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(f"JSON: {write_json('direct_bench', {'args': vars(args), **results})}")  # noqa: T201


if __name__ == "__main__":
    main()
