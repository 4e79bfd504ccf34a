"""Background ingestion jobs: throughput against the synchronous path, search latency while a
job runs, and the time from submit to the first searchable chunk. One run, bounded.

    python -m bench.jobs_bench [--docs 600] [--queries 60] [--extra-workers 1]
        [--database-url URL]

A throwaway embedded PostgreSQL 18 + pgvector (or --database-url, a superuser URL) with the
migrations applied; `rag serve` in a subprocess with the local model and its default one
in-process job worker (RAG_JOB_WORKERS=1). The first `--docs` NFCorpus documents (plain text),
over HTTP:

1. search P50/P95 idle: `--queries` distinct NFCorpus queries, one at a time (each query
   embedded by the model: the query cache never hits);
2. a job of all the documents (POST /api/rag/jobs, JSON), tenant J: time from the 202 to the
   first document listed (its chunks are searchable from that commit on), and search P50/P95
   with other distinct queries while the job runs; the job's chunks/s from its own timings;
3. the synchronous path on the same documents, tenant S: POST /api/rag/documents/batch of 100
   documents per call, one call at a time: chunks/s;
4. 1 + `--extra-workers` workers: the same documents as a job of tenant W with `rag worker`
   processes started beside the server (each loads its own model): chunks/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.auth import issue_token
from bench.kit.corpus import document_text, read_corpus, read_queries
from bench.kit.database import bench_database, create_tenants
from bench.kit.report import log, print_table, write_json
from bench.kit.server import serve
from bench.kit.stats import latency_summary

ROOT = Path(__file__).resolve().parent.parent


def token(settings: Any, tenant: str) -> dict[str, str]:
    jwt = issue_token(
        settings,
        tenant_id=tenant,
        subject="bench",
        scopes=["rag:search", "rag:ingest"],
        ttl_seconds=7200,
    )
    return {"Authorization": f"Bearer {jwt}"}


def searches(http: httpx.Client, headers: dict[str, str], queries: list[str]) -> list[float]:
    took = []
    for query in queries:
        start = time.perf_counter()
        reply = http.post("/api/rag/search", headers=headers, json={"query": query})
        reply.raise_for_status()
        took.append((time.perf_counter() - start) * 1000)
    return took


def documents_json(docs: list[Any]) -> list[dict[str, Any]]:
    return [{"content": document_text(d), "external_id": d.doc_id} for d in docs]


def run_job(
    http: httpx.Client, headers: dict[str, str], docs: list[Any], queries: list[str]
) -> dict[str, Any]:
    """Submit, time the first searchable document, search while it runs, wait for the end."""
    start = time.perf_counter()
    reply = http.post("/api/rag/jobs", headers=headers, json={"documents": documents_json(docs)})
    reply.raise_for_status()
    location = reply.headers["location"]
    first = None
    while first is None:
        listed = http.get("/api/rag/documents?limit=1", headers=headers).json()
        if listed["total"] > 0:
            first = time.perf_counter() - start
        else:
            time.sleep(0.05)
    during: list[float] = []
    remaining = list(queries)
    while True:
        state = http.get(location, headers=headers).json()
        if state["status"] not in ("queued", "running"):
            break
        if remaining:
            during += searches(http, headers, [remaining.pop()])
        else:
            time.sleep(0.5)
    chunks = state["progress"]["chunks_done"]
    run = state["timings"]["run_seconds"]
    return {
        "status": state["status"],
        "chunks": chunks,
        "run_seconds": run,
        "chunks_per_second": round(chunks / run, 1),
        "submit_to_first_searchable_seconds": round(first, 2),
        "search_during_ms": latency_summary(during) if during else None,
        "searches_during": len(during),
    }


def sync_ingest(http: httpx.Client, headers: dict[str, str], docs: list[Any]) -> dict[str, Any]:
    start = time.perf_counter()
    chunks = 0
    body = documents_json(docs)
    for i in range(0, len(body), 100):
        reply = http.post(
            "/api/rag/documents/batch", headers=headers, json={"documents": body[i : i + 100]}
        )
        reply.raise_for_status()
        chunks += sum(item["result"]["chunks"] for item in reply.json()["results"])
    took = time.perf_counter() - start
    return {
        "chunks": chunks,
        "seconds": round(took, 1),
        "chunks_per_second": round(chunks / took, 1),
    }


def start_workers(app_url: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "RAG_DATABASE_URL": app_url,
        "RAG_EMBEDDING_PROVIDER": "local",
        "HF_HUB_OFFLINE": "1",
    }
    return [
        subprocess.Popen(
            [str(ROOT / ".venv/bin/rag"), "worker"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--extra-workers", type=int, default=1)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    docs = read_corpus(args.docs)
    texts = list(read_queries().values())
    idle_q, busy_q = texts[: args.queries], texts[args.queries : 2 * args.queries]
    async with bench_database(superuser_url=args.database_url) as db:
        await create_tenants(db.sessions, ["job", "sync", "workers"])
        with serve(db, redis_url=None) as url, httpx.Client(base_url=url, timeout=600) as http:
            job_h, sync_h, w_h = (token(db.settings, t) for t in ("job", "sync", "workers"))
            searches(http, job_h, texts[-5:])  # warm up
            log("search, idle")
            idle = latency_summary(searches(http, job_h, idle_q))
            log(f"job of {len(docs)} documents, searching while it runs")
            job = run_job(http, job_h, docs, busy_q)
            log("synchronous batches")
            sync = sync_ingest(http, sync_h, docs)
            log(f"job with {args.extra_workers} more worker processes")
            extra = start_workers(db.app_url, args.extra_workers)
            try:
                await asyncio.sleep(30)  # let them load the model before the clock starts
                more = run_job(http, w_h, docs, [])
            finally:
                for process in extra:
                    process.terminate()
                    process.wait(60)
    during = job["search_during_ms"] or {}
    print_table(
        "Search while a job runs (ms, one client)",
        ["", "P50", "P95", "searches"],
        [
            ["idle", idle["p50_ms"], idle["p95_ms"], len(idle_q)],
            ["job running", during.get("p50_ms"), during.get("p95_ms"), job["searches_during"]],
        ],
    )
    print_table(
        "Ingest throughput (chunks/s)",
        ["path", "chunks", "chunks/s"],
        [
            ["synchronous batches of 100", sync["chunks"], sync["chunks_per_second"]],
            ["job, 1 worker (in rag serve)", job["chunks"], job["chunks_per_second"]],
            [f"job, {1 + args.extra_workers} workers", more["chunks"], more["chunks_per_second"]],
        ],
    )
    ratio = round(during["p95_ms"] / idle["p95_ms"], 2) if during else None
    log(f"search P95 while a job runs / idle: {ratio}")
    log(f"submit -> first searchable: {job['submit_to_first_searchable_seconds']} s")
    write_json(
        "jobs",
        {
            "docs": len(docs),
            "idle_ms": idle,
            "job": job,
            "sync": sync,
            "more_workers": more,
            "extra_workers": args.extra_workers,
        },
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
