"""Searches per second at saturation, and where the CPU goes.

    python -m bench.saturation [--workload synthetic|abstracts] [--chunks 100000]
        [--documents 1500] [--seconds 10] [--clients 1,4,16,64] [--workers 1,2]
        [--series vector-new,vector-cached,keyword,hybrid-new,hybrid-cached[,healthz]]
        [--peers chroma,chroma-per-tenant] [--profile 15] [--redis-url URL | --redis-url '']

`rag serve --workers N`, one Redis for the rate limit (`--redis-url ''`: none, each worker
limits in memory), and wrk's closed-loop clients for `seconds` at each concurrency, on one of
two workloads. `synthetic`: `chunks` synthetic chunks (the 50%/10%/1%/0.1% tenant layout of
bench/kit/synthetic.py; the searched tenant holds half of them), query texts of about 12 words,
`max_results` 10. `abstracts`, a chat backend's traffic: one tenant of `documents` NFCorpus
abstracts ingested by the service's own pipeline (titles, chunks, keyword vectors), MEDLINE's
queries and runs of 20 words, `max_results` 5. The searched tenant is on the enterprise tier,
its limit far above the offered load. "new" series send a text no worker has seen (its
query embedding computed by the local model), "cached" ones cycle through 100 warmed texts,
keyword never embeds; `healthz` (asked for by name) is `GET /healthz`, the cost of the HTTP
stack and its middleware around a request that does nothing. Each run reports searches/s,
P50/P95/P99, errors and the CPU time per search of the service's processes, of PostgreSQL's,
of Redis and of wrk; `utilisation` is searches/s x CPU s per search / cores. Beside wrk's
latency, the P50 and P99 inside the service, from its access lines (inside.py): what wrk
sees beyond them is time a request waited before a worker's event loop took it up; and how
long the workers waited, ready to run, for a core (cpu.py: QueueWait); how the clients'
connections lay over the workers (cpu.py: ConnectionSplit). In the
same run, measured alone: the local model's CPU per query embedding, and the CPU per search
of the retrieval code and of PostgreSQL when the service's search runs in this process, one
at a time. `--peers` adds
Chroma's HTTP server (`chroma run`) on the same vectors, query vectors given, the same wrk
load: `chroma` with one collection and the tenant as a metadata filter, `chroma-per-tenant`
with a collection per tenant, each query sent to the tenant's own. `--profile S` samples
one worker for S seconds at 16 clients of each series (py-spy) and sums its stacks by part
of the hot path. Results: JSON in bench/results/, a
chart with --chart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import asyncpg
import redis

from bench.kit.database import BenchDatabase, bench_database, search_tokens
from bench.kit.paths import RESULTS
from bench.kit.report import log, print_table, write_json
from bench.kit.server import serve_process
from bench.kit.synthetic import Synthetic, load_size
from bench.saturation import alone, profile
from bench.saturation.cpu import (
    ConnectionSplit,
    Meter,
    ProcessTree,
    QueueWait,
    ReapedChildren,
    RedisServer,
    postmaster_pid,
    worker_pids,
)
from bench.saturation.inside import AccessLog, percentiles
from bench.saturation.report import chart, run_table
from bench.saturation.texts import TextSupply, distinct_texts
from bench.saturation.wrk import RunResult, Target, run

SERIES = ("vector-new", "vector-cached", "keyword", "hybrid-new", "hybrid-cached", "healthz")
DEFAULT_SERIES = SERIES[:-1]  # healthz: the cost of a request that does nothing, on request
WORKLOADS = {"synthetic": 10, "abstracts": 5}  # max_results of each
CACHED_TEXTS = 50  # half the service's query cache (RAG_QUERY_CACHE_SIZE, 100)
PEER_TEXTS = 2000  # the peers' query vectors, besides the cached texts
HEADROOM = 1.6  # new texts per cell: the last rate of the series x seconds x this
FIRST_RATE = 150.0  # searches/s assumed before a series has a rate
PEERS = {"chroma": "tenant filter", "chroma-per-tenant": "collection per tenant"}


@dataclass(frozen=True, slots=True)
class Plan:
    workload: str
    chunks: int
    documents: int
    seconds: float
    clients: list[int]
    workers: list[int]
    series: list[str]
    peers: list[str]
    profile_seconds: float
    redis_url: str | None
    chart: Path | None
    server_env: dict[str, str]
    variants: list[dict[str, str]]  # servers started in turn on the same data, compared


def body(text: str, series: str, plan: Plan) -> str:
    mode = series.split("-")[0]
    return json.dumps({"query": text, "mode": mode, "max_results": WORKLOADS[plan.workload]})


async def main(plan: Plan) -> None:
    texts = TextSupply(distinct_texts(long=plan.workload == "abstracts"))
    cached = texts.take(CACHED_TEXTS)
    # the peers' queries, the same for every peer, set aside before the service's new-text
    # cells use up the supply (a fast machine's do)
    peer_texts = cached + texts.take(PEER_TEXTS) if plan.peers else []
    async with bench_database(pool_size=4) as db:
        if plan.workload == "abstracts":
            local, loaded, tenant = await _load_abstracts(db, plan.documents)
        else:
            local, loaded, tenant = await _load(db, plan.chunks)
        results: dict[str, Any] = {
            "plan": {k: str(v) for k, v in asdict(plan).items()},
            "workload": plan.workload,
            "max_results": WORKLOADS[plan.workload],
            "chunks": plan.chunks if loaded is not None else tenant.stop,
            "tenant_chunks": tenant.stop - tenant.start,
            "cores": os.cpu_count(),
        }
        results["alone"] = await alone.measure(
            db,
            tenant.tenant_id,
            texts.take(300),
            threads=int(plan.server_env.get("RAG_EMBEDDING_THREADS", "0")),
        )
        _print_alone(results["alone"])
        token = search_tokens(db.settings, [tenant.tenant_id], ttl_seconds=6 * 3600)[
            tenant.tenant_id
        ]
        runs: list[dict[str, Any]] = []
        for workers in plan.workers:
            for variant in plan.variants or [{}]:
                runs += _service_runs(db, plan, workers, token, texts, cached, variant)
        peer_vectors = local.encode_blocking(peer_texts) if plan.peers else []
        for peer in plan.peers:
            runs += _peer_runs(peer, plan, loaded, tenant, peer_vectors)
        results["runs"] = runs
        run_table(runs, os.cpu_count() or 1)
        path = write_json("saturation", results)
        log(f"results in {path}")
        if plan.chart is not None:
            chart(runs, plan.chart)
            log(f"chart in {plan.chart}")


async def _load(db: BenchDatabase, chunks: int) -> tuple[Any, Any, Any]:
    from bench.kit.corpus import corpus_vectors

    local, _chunker, _embedder, corpus, base = await corpus_vectors(db.settings)
    log(f"loading {chunks} chunks")
    loaded = await load_size(db, chunks, corpus, base, spec=Synthetic(), model_id=local.model_id)
    tenant = next(t for t in loaded.tenants if t.size_class == "50%")
    await _as_superuser(db, tenant.tenant_id)
    return local, loaded, tenant


async def _as_superuser(db: BenchDatabase, tenant_id: str, *then: str) -> None:
    """The searched tenant on the enterprise tier (its limit far above the load), then the
    statements `then`."""
    conn = await asyncpg.connect(db.superuser_url)
    try:
        await conn.execute("UPDATE tenants SET tier = 'enterprise' WHERE id = $1", tenant_id)
        for statement in then:
            await conn.execute(statement)
    finally:
        await conn.close()


ABSTRACTS_TENANT = "abstracts"


async def _load_abstracts(db: BenchDatabase, documents: int) -> tuple[Any, None, Any]:
    """The first `documents` NFCorpus abstracts ingested into one tenant as `rag ingest` does
    (batches of 50), their vectors from the local model's disk cache; the tenant as a slice
    [0, its chunk count)."""
    from bench.kit.corpus import corpus_input, corpus_vectors
    from bench.kit.ingestion import ingest_stage
    from bench.kit.synthetic import TenantSlice

    local, chunker, embedder, corpus, _base = await corpus_vectors(db.settings)
    log(f"ingesting {documents} abstracts")
    inputs = [corpus_input(p.doc) for p in corpus[:documents]]
    stage = await ingest_stage(
        db, embedder, chunker, inputs, tenant_id=ABSTRACTS_TENANT, concurrency=1, batch=50
    )
    # every table the ingest wrote, vacuumed and analysed now and its pages written out: else
    # autovacuum and the checkpointer do it during the first measurements (the "alone" SQL of
    # a vector search measured 10 ms of PostgreSQL CPU then, 2 ms after)
    await _as_superuser(db, ABSTRACTS_TENANT, "VACUUM ANALYZE", "CHECKPOINT")
    await db.engine.dispose()
    log(f"  {stage['docs']} documents, {stage['chunks']} chunks")
    return local, None, TenantSlice(ABSTRACTS_TENANT, "abstracts", 0, stage["chunks"])


def _service_runs(
    db: BenchDatabase,
    plan: Plan,
    workers: int,
    token: str,
    texts: TextSupply,
    cached: list[str],
    variant: dict[str, str],
) -> list[dict[str, Any]]:
    if plan.redis_url:
        redis.Redis.from_url(plan.redis_url).flushdb()
    assert db.server is not None, "the CPU of PostgreSQL is read from the embedded server"
    log(f"rag serve --workers {workers}")
    rows: list[dict[str, Any]] = []
    environment = plan.server_env | variant
    with serve_process(db, redis_url=plan.redis_url, workers=workers, env=environment) as (
        url,
        process,
        log_path,
    ):
        access = AccessLog(log_path)
        _wait_for_workers(process.pid, workers)
        meter = Meter(
            {
                "service": ProcessTree(process.pid),
                "postgres": ProcessTree(postmaster_pid(db.server.pgdata)),
                **({"redis": RedisServer(plan.redis_url)} if plan.redis_url else {}),
                "wrk": ReapedChildren(),
            }
        )
        pids = _worker_pids(process.pid)
        workers_meter = Meter({f"worker {pid}": ProcessTree(pid) for pid in pids})
        waits = Meter({"workers": QueueWait(tuple(pids))})
        split = ConnectionSplit(tuple(pids), int(url.rsplit(":", 1)[1]), plan.seconds / 2)
        searches = Target(url, "/api/rag/search", token)
        _warm(searches, cached, meter, plan)
        for series in plan.series:
            target = Target(url, "/healthz", method="GET") if series == "healthz" else searches
            rate = FIRST_RATE
            if series.endswith("-cached"):
                _warm(searches, cached, meter, plan)
            for clients in plan.clients:
                if series.endswith("-new"):
                    bodies = [
                        body(t, series, plan)
                        for t in texts.take(int(rate * plan.seconds * HEADROOM))
                    ]
                else:
                    bodies = [body(t, series, plan) for t in cached]
                workers_meter.start()
                waits.start()
                split.start()
                since = access.mark()
                result = run(target, bodies, clients=clients, seconds=plan.seconds, meter=meter)
                per_worker, waited = workers_meter.stop(), waits.stop()["workers"]
                connections = split.stop()
                rate = max(rate, result.per_second)
                named = ", ".join(f"{k}={v}" for k, v in variant.items())
                engine = f"service, {workers} worker{'s' * (workers > 1)}"
                rows.append(_row(f"{engine}{', ' + named if named else ''}", series, result))
                rows[-1]["busiest_worker_share"] = round(
                    max(per_worker.values()) / (sum(per_worker.values()) or 1), 3
                )
                rows[-1]["connections_per_worker"] = connections
                rows[-1]["workers_waited_ms_per_request"] = round(
                    1000 * waited / (result.requests or 1), 2
                )
                rows[-1] |= percentiles(access.durations(since, target.path))
                _print_run(rows[-1])
        if plan.profile_seconds and workers == max(plan.workers):
            for series in plan.series:
                target = Target(url, "/healthz", method="GET") if series == "healthz" else searches
                if series.endswith("-new"):
                    texts_of = texts.take(int(400 * plan.profile_seconds))
                else:
                    texts_of = cached
                    _warm(searches, cached, meter, plan)
                shares = profile.sample(
                    process.pid,
                    target,
                    [body(t, series, plan) for t in texts_of],
                    clients=16,
                    seconds=plan.profile_seconds,
                    keep=RESULTS / f"saturation-stacks-{series}.txt",
                )
                rows.append({"engine": "profile", "series": series, "parts": shares})
                print_table(
                    f"Where a worker's CPU goes ({series}, 16 clients)",
                    ["part", "share"],
                    [(part, f"{share:.1%}") for part, share in shares.items()],
                )
    return rows


def _warm(target: Target, cached: list[str], meter: Meter, plan: Plan) -> None:
    """The cached texts in every worker's query cache (new texts since may have pushed them
    out), and the connections of 16 clients open."""
    run(target, [body(t, "vector", plan) for t in cached], clients=16, seconds=3, meter=meter)


def _worker_pids(pid: int) -> list[int]:
    """The worker processes; `rag serve` with one worker serves in its own process."""
    return worker_pids(pid) or [pid]


def _wait_for_workers(pid: int, workers: int, seconds: float = 120) -> None:
    """Until `workers` worker processes are up and idle (each loads the model on its own)."""
    import psutil

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        children = [psutil.Process(child) for child in worker_pids(pid)]
        if workers == 1 or len(children) >= workers:
            busy = sum(c.cpu_percent(interval=0.5) for c in children) if children else 0
            if busy < 10:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{workers} workers not idle after {seconds:.0f} s")


def _peer_runs(
    peer: str, plan: Plan, loaded: Any, tenant: Any, vectors: Any
) -> list[dict[str, Any]]:
    from bench.saturation.chroma import ChromaServer

    rows: list[dict[str, Any]] = []
    with ChromaServer(per_tenant=peer == "chroma-per-tenant") as chroma:
        log(f"loading {loaded.size} vectors into Chroma's server ({PEERS[peer]})")
        chroma.load(loaded)
        meter = Meter({"chroma": ProcessTree(chroma.pid), "wrk": ReapedChildren()})
        target = Target(chroma.base_url, chroma.query_path(tenant.tenant_id))
        bodies = [chroma.query_body(v, tenant) for v in vectors]
        run(target, bodies, clients=16, seconds=3, meter=meter)
        for clients in plan.clients:
            result = run(target, bodies, clients=clients, seconds=plan.seconds, meter=meter)
            rows.append(_row(f"Chroma server, {PEERS[peer]}", "vector-given", result))
            _print_run(rows[-1])
    return rows


def _row(engine: str, series: str, result: RunResult) -> dict[str, Any]:
    return {"engine": engine, "series": series, **result.as_dict()}


def _print_run(row: dict[str, Any]) -> None:
    cpu = row["cpu_ms_per_request"]
    parts = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    log(
        f"  {row['engine']:<22} {row['series']:<14} c={row['clients']:<3} "
        f"{row['per_second']:7.1f}/s  p50 {row['p50_ms']:.1f}  p99 {row['p99_ms']:.1f} ms  "
        f"errors {row['errors']}  cpu ms/req: {parts}"
        f"  busiest worker {row.get('busiest_worker_share', 1):.0%}"
        + (
            f" ({' / '.join(map(str, row['connections_per_worker']))} connections)"
            if row.get("connections_per_worker")
            else ""
        )
        + (
            f"  workers waited for a core {row['workers_waited_ms_per_request']:.2f} ms/req"
            if "workers_waited_ms_per_request" in row
            else ""
        )
        + (
            f"  inside the service: p50 {row['inside_p50_ms']:.1f}"
            f"  p99 {row['inside_p99_ms']:.1f} ms"
            if "inside_p99_ms" in row
            else ""
        )
    )


def _print_alone(measured: dict[str, Any]) -> None:
    print_table(
        "Measured alone, one at a time (CPU ms per query)",
        ["part", "CPU ms", "wall P50 ms"],
        [(name, v["cpu_ms"], v["wall_p50_ms"]) for name, v in measured.items()],
    )


def parse(argv: list[str]) -> Plan:
    parser = argparse.ArgumentParser(prog="python -m bench.saturation", description=__doc__)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="synthetic")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic workload")
    parser.add_argument("--documents", type=int, default=1500, help="abstracts workload")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--series", default=",".join(DEFAULT_SERIES))
    parser.add_argument(
        "--peers", default=",".join(PEERS), help=f"of {', '.join(PEERS)}; '' for none"
    )
    parser.add_argument("--profile", type=float, default=0, metavar="SECONDS")
    parser.add_argument(
        "--redis-url", default="redis://127.0.0.1:6379/13", help="'' for none (in memory)"
    )
    parser.add_argument("--chart", type=Path, default=None)
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for `rag serve`, e.g. RAG_EMBEDDING_THREADS=2 (repeatable)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="one server per variant, in turn on the same data, e.g. --variant"
        " RAG_EMBEDDING_THREADS=2 --variant RAG_EMBEDDING_THREADS=1 (repeat a pair to interleave)",
    )
    args = parser.parse_args(argv)
    series = [s for s in args.series.split(",") if s]
    if unknown := set(series) - set(SERIES):
        parser.error(f"unknown series {sorted(unknown)}; known: {', '.join(SERIES)}")
    peers = [p for p in args.peers.split(",") if p]
    if unknown := set(peers) - set(PEERS):
        parser.error(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")
    if peers and args.workload != "synthetic":
        parser.error("--peers run on the synthetic workload's vectors: add --peers ''")
    return Plan(
        workload=args.workload,
        chunks=args.chunks,
        documents=args.documents,
        seconds=args.seconds,
        clients=[int(c) for c in args.clients.split(",")],
        workers=[int(w) for w in args.workers.split(",")],
        series=series,
        peers=peers,
        profile_seconds=args.profile,
        redis_url=args.redis_url or None,
        chart=args.chart,
        server_env=dict(item.split("=", 1) for item in args.server_env),
        variants=[
            dict(pair.split("=", 1) for pair in variant.split(",")) for variant in args.variant
        ],
    )


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
