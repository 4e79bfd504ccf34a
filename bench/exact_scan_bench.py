"""Where PostgreSQL's CPU goes in a small tenant's exact vector search, part by part.

A small tenant's vector search reads every one of its chunks and measures each (the btree on
`tenant_id`, no HNSW walk). This bench loads a tenant of `--rows` chunks (2,404: the 1,500
abstracts of `bench.saturation --workload abstracts`) beside a larger one, then times one
aggregate over the tenant's rows per part, in turns, as EXPLAIN ANALYZE (TIMING OFF) reports
its execution: reading the rows; the same under row-level security (the runtime role, the
tenant's transaction settings); the policy's `access = '{}'` arm alone, beside
`cardinality(access) = 0`; the cosine distance, beside the inner product; and the search's
exact statement as the service sends it (`app.retrieval.nearest`, ordered by distance + 0).

Run: `.venv/bin/python -m bench.exact_scan_bench [--rows 2404] [--rounds 60]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import uuid
from typing import Any

import numpy as np
from pgvector import Vector

from app.db.scoped import scoped_connection
from app.retrieval import SearchRequest
from app.retrieval.nearest import direct_statement
from app.retrieval.planning import direct_settings
from bench.kit.database import (
    BenchDatabase,
    bench_database,
    connect_loader,
    copy_rows,
    create_tenants,
)
from bench.kit.report import log, print_table, write_json

MODEL = "local:all-MiniLM-L6-v2"
TENANT, NEIGHBOUR = "small", "neighbour"
WORDS = ["protein", "cell", "tumor", "vitamin", "diet", "study", "patients", "risk", "cancer"]
OVER_ROWS = "select {part} from chunks where tenant_id = '{tenant}' and embedding_model = $1"
# (label, aggregate over the tenant's rows, as the runtime role under RLS)
PARTS: tuple[tuple[str, str, bool], ...] = (
    ("read the rows", "count(*)", False),
    ("read the rows under row-level security", "count(*)", True),
    ("+ access = '{}' (the policy's first arm)", "count(*) filter (where access = '{}')", False),
    ("+ cardinality(access) = 0", "count(*) filter (where cardinality(access) = 0)", False),
    ("+ cosine distance", "sum(embedding <=> $2)", False),
    ("+ inner product", "sum(embedding <#> $2)", False),
)
SEARCH = "the exact search, as the service sends it"


async def load(db: BenchDatabase, rows: int, seed: int) -> None:
    """`rows` chunks of the tenant and four times as many of a neighbour, random unit vectors
    and 150 words of text each (rows as wide as real chunks: four to a page)."""
    rng = np.random.default_rng(seed)
    await create_tenants(db.sessions, [TENANT, NEIGHBOUR])
    conn = await connect_loader(db.superuser_url)
    try:
        for tenant, count in ((TENANT, rows), (NEIGHBOUR, 4 * rows)):
            collection = uuid.uuid4()
            vectors = rng.normal(size=(count, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            documents, chunks = [], []
            for i in range(count):
                if i % 2 == 0:
                    document = uuid.uuid4()
                    documents.append(
                        (document, tenant, collection, f"d{i}", f"doc {i}", "text", f"{i:064x}", 2)
                    )
                text = " ".join(rng.choice(WORDS, size=150))
                chunk = (uuid.uuid4(), tenant, document, collection, i % 2, text, 150)
                chunks.append((*chunk, vectors[i], MODEL, f"{i:064x}"))
            await copy_rows(
                conn,
                collections=[(collection, tenant, "default")],
                documents=documents,
                chunks=chunks,
            )
        await conn.execute("VACUUM ANALYZE chunks")
        await conn.execute("ANALYZE documents")
    finally:
        await conn.close()


async def measure(db: BenchDatabase, rounds: int, seed: int) -> dict[str, list[float]]:
    """Each part's execution times in ms, the parts run in turns (a rotating order)."""
    rng = np.random.default_rng(seed + 1)
    query = rng.normal(size=384).astype(np.float32)
    query = (query / np.linalg.norm(query)).tolist()
    request = SearchRequest(query="-", top_k=5)
    statement, arguments = direct_statement(query, TENANT, MODEL, request, exact=True, kept=True)
    settings = direct_settings(request, TENANT, True, True)
    superuser = await connect_loader(db.superuser_url)
    times: dict[str, list[float]] = {label: [] for label, _, _ in PARTS} | {SEARCH: []}

    async def run(label: str, sql: str, params: list[Any], as_app: bool) -> None:
        explain = f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {sql}"
        if as_app:
            async with scoped_connection(
                db.sessions, TENANT, settings=settings, read_only=True
            ) as connection:
                plan = await connection.fetchval(explain, *params)
        else:
            plan = await superuser.fetchval(explain, *params)
        plan = json.loads(plan) if isinstance(plan, str) else plan
        times[label].append(plan[0]["Execution Time"])

    kinds = [
        (label, OVER_ROWS.format(part=part, tenant=TENANT), as_app) for label, part, as_app in PARTS
    ]
    try:
        for round_ in range(rounds):
            order = kinds[round_ % len(kinds) :] + kinds[: round_ % len(kinds)]
            for label, sql, as_app in order:
                params: list[Any] = [MODEL, Vector(query)] if "$2" in sql else [MODEL]
                await run(label, sql, params, as_app)
            await run(SEARCH, statement.sql, arguments, True)
    finally:
        await superuser.close()
    return times


async def main_async(rows: int, rounds: int, seed: int) -> None:
    async with bench_database() as db:
        log(f"loading {rows} chunks of the tenant, {4 * rows} of a neighbour")
        await load(db, rows, seed)
        times = await measure(db, rounds, seed)
    medians = {label: statistics.median(values) for label, values in times.items()}
    table = [(label, f"{ms:.3f}", f"{ms * 1000 / rows:.2f}") for label, ms in medians.items()]
    print_table(
        f"A tenant's {rows} chunks, medians of {rounds} rounds in turns (EXPLAIN ANALYZE)",
        ["part", "ms", "µs a row"],
        table,
    )
    path = write_json(
        "exact_scan", {"rows": rows, "rounds": rounds, "median_ms": medians, "times_ms": times}
    )
    log(f"results in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=2404)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main_async(args.rows, args.rounds, args.seed))


if __name__ == "__main__":
    main()
