"""One round trip against two: the direct vector search as the service sends it (asyncpg: the
settings message, then the statement) against the same transaction pipelined by psycopg (BEGIN,
settings, statement and COMMIT in one flush), interleaved in one run.

    .venv/bin/python bench/roundtrip_bench.py [--chunks 10000] [--queries 200]
        [--database-url URL]

Data and tenants as search_bench.py (b). Query vectors precomputed (no model time); each
search's settings and statement are the service's own (planning.py, nearest.py), so the
three ways below differ only in how they reach the server, and must return the same hits:

- service: `app.retrieval.search`'s direct path: a connection from the pool, the settings
  message, the statement; COMMIT after the answer (two round trips before it).
- asyncpg, one connection: the same two messages on one connection held open (no pool), COMMIT
  after the timer: the service's round trips without its pool.
- psycopg pipeline, one connection: BEGIN READ ONLY, the settings (the same DO block and
  set_config statement), the statement (prepared, as asyncpg prepares it) and COMMIT sent in
  one flush: one round trip.

Also a bare `SELECT 1` on each driver: what one round trip costs here.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import psycopg
from harness import BenchDatabase, bench_database, latency_summary, print_table, write_json
from pgvector.psycopg import register_vector_async
from search_bench import (
    CLASSES,
    Loaded,
    synthetic_tenants,
)

from app.db.scoped import scoped_connection, settled, tenant_scope
from app.db.settings_sql import Computed, scope_message
from app.retrieval import SearchRequest
from app.retrieval.nearest import DirectQuery, direct_hits, direct_query, ranked_hits
from app.retrieval.planning import keeps_plan
from app.retrieval.visibility import direct_plan

PLACEHOLDER = re.compile(r"\$(\d+)")
Search = Callable[[str, list[float]], Awaitable[list[Any]]]


def psycopg_query(sql: str, arguments: list[Any]) -> tuple[str, list[Any]]:
    """asyncpg's `$n` placeholders as psycopg's `%s`, the arguments in their order; vectors as
    float32 arrays (pgvector's binary dumper)."""
    order: list[int] = []

    def placeholder(match: re.Match[str]) -> str:
        order.append(int(match.group(1)) - 1)
        return "%s"

    text = PLACEHOLDER.sub(placeholder, sql.replace("%", "%%"))
    values = [arguments[i] for i in order]
    return text, [np.asarray(v, np.float32) if isinstance(v, list) else v for v in values]


class Ways:
    """The three ways, each a search of one tenant by one precomputed vector."""

    def __init__(self, db: BenchDatabase, model: str, pipelined: psycopg.AsyncConnection[Any]):
        self.db, self.model, self.pipelined = db, model, pipelined
        self.request = SearchRequest(query="", top_k=10)

    async def _query(self, tenant_id: str, vector: list[float]) -> DirectQuery:
        """As the service makes it for this search (plan, kept statement, settings)."""
        exact = await direct_plan(self.db.sessions, tenant_id=tenant_id, model=self.model)
        assert exact is not None
        return direct_query(
            vector, tenant_id, self.model, self.request, exact=exact, kept=keeps_plan(tenant_id)
        )

    async def service(self, tenant_id: str, vector: list[float]) -> list[Any]:
        query = await self._query(tenant_id, vector)
        async with scoped_connection(
            self.db.sessions, tenant_id, settings=query.settings, read_only=True
        ) as connection:
            hits, _passed, _measured = await direct_hits(connection, query)
        return [hit.chunk_id for hit in hits]

    async def one_asyncpg(self, tenant_id: str, vector: list[float], held: Any) -> list[Any]:
        query = await self._query(tenant_id, vector)
        scope = tenant_scope(self.db.sessions, tenant_id, query.settings)
        await held.execute(scope_message("BEGIN READ ONLY", scope))
        hits, _passed, _measured = await direct_hits(held, query)
        return [hit.chunk_id for hit in hits]

    async def pipeline(self, tenant_id: str, vector: list[float]) -> list[Any]:
        query = await self._query(tenant_id, vector)
        scope = tenant_scope(self.db.sessions, tenant_id, query.settings)
        plain = {k: v for k, v in scope.items() if not isinstance(v, Computed)}
        computed = {k: v for k, v in scope.items() if isinstance(v, Computed)}
        sql, values = psycopg_query(query.statement.sql, query.arguments)
        conn = self.pipelined
        async with conn.pipeline():
            await conn.execute("BEGIN READ ONLY")
            for part in (plain, computed):
                if part:
                    await conn.execute(scope_message(None, part))
            cursor = await conn.execute(sql, values, prepare=True, binary=True)
            await conn.execute("COMMIT")
            rows = await cursor.fetchall()
        records = [dict(zip(query.statement.columns, row, strict=True)) for row in rows]
        hits, _passed, _measured = ranked_hits(records)
        return [hit.chunk_id for hit in hits]


async def compare(
    db: BenchDatabase, ways: Ways, loaded: Loaded, vectors: list[list[float]]
) -> list[dict[str, Any]]:
    rows = []
    async with db.engine.connect() as held_conn:
        held = (await held_conn.get_raw_connection()).driver_connection

        async def commit_held() -> None:
            await held.execute("COMMIT")

        async def nothing() -> None:
            return None

        # each way, and what is left to do once its answer is in (off the timer)
        searches: dict[str, tuple[Search, Callable[[], Awaitable[None]]]] = {
            "service": (ways.service, settled),
            "asyncpg, one connection": (lambda t, v: ways.one_asyncpg(t, v, held), commit_held),
            "psycopg pipeline": (ways.pipeline, nothing),
        }
        for size_class in CLASSES:
            tenants = [t.tenant_id for t in loaded.tenants if t.size_class == size_class]
            samples: dict[str, list[float]] = {name: [] for name in searches}
            for i, vector in enumerate(vectors):
                tenant_id = tenants[i % len(tenants)]
                names = list(searches)
                names = names[i % 3 :] + names[: i % 3]  # each way first in turn
                found = {}
                for name in names:
                    search, after = searches[name]
                    started = time.perf_counter()
                    found[name] = await search(tenant_id, vector)
                    samples[name].append((time.perf_counter() - started) * 1000)
                    await after()
                assert len({tuple(f) for f in found.values()}) == 1, (size_class, i)
            for name, ms in samples.items():
                rows.append({"tenant": size_class, "way": name, **latency_summary(ms[10:])})
        rows += await bare_round_trips(held, ways.pipelined)
    return rows


async def bare_round_trips(held: Any, pipelined: psycopg.AsyncConnection[Any]) -> list[Any]:
    samples: dict[str, list[float]] = {"asyncpg": [], "psycopg": []}
    for _ in range(500):
        started = time.perf_counter()
        await held.fetchval("SELECT 1")
        samples["asyncpg"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await (await pipelined.execute("SELECT 1")).fetchone()
        samples["psycopg"].append((time.perf_counter() - started) * 1000)
    return [
        {"tenant": "SELECT 1", "way": name, **latency_summary(ms)} for name, ms in samples.items()
    ]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_database(superuser_url=args.database_url) as db:
        stub, loaded = await synthetic_tenants(db, args.chunks, args.queries)
        url = db.app_url.replace("postgresql+asyncpg://", "postgresql://")
        pipelined = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            await pipelined.execute("SET standard_conforming_strings = on")
            await register_vector_async(pipelined)
            ways = Ways(db, stub.model_id, pipelined)
            rows = await compare(db, ways, loaded, list(stub.vectors.values()))
        finally:
            await pipelined.close()
            await settled()
        print_table(
            f"the direct search by way of reaching the server, {args.chunks:,} chunks, ms",
            ["tenant", "way", "P50", "P95", "P99"],
            [[r["tenant"], r["way"], r["p50_ms"], r["p95_ms"], r["p99_ms"]] for r in rows],
        )
        return {"rows": rows, "load": loaded.timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    print(f"JSON: {write_json('roundtrip_bench', {'args': vars(args), **results})}")  # noqa: T201


if __name__ == "__main__":
    main()
