"""MCP overhead: `search_similar` over MCP against POST /api/rag/search, same queries, one run.

    python -m bench.mcp_bench [--queries 50] [--rounds 10] [--copies 2]
        [--data ../shared/data] [--database-url URL]

A throwaway embedded PostgreSQL 18 + pgvector (or --database-url, a superuser URL) with the
migrations applied; one tenant holding NFCorpus ingested `--copies` times into as many
collections through `ingest_documents` (2 copies: 10,828 chunks; MiniLM vectors from the disk
cache in bench/results/, computed once); `rag serve` in a subprocess as the runtime role with
the local model. Then, over keep-alive HTTP from one client, one request at a time:

- REST: POST /api/rag/search {query, max_results: 5};
- MCP, bare POST: the seed-style JSON-RPC tools/call of search_similar {query, limit: 5};
- MCP, SDK client: `Client.call_tool("search_similar", …)` at protocol 2026-07-28 (includes
  the SDK's own client-side work: JSON-RPC envelope, pydantic validation of the result).

The same `--queries` NFCorpus query texts, warmed once on every path (so the query embedding
comes from the server's LRU cache and the pages are hot: what is left is the door), then
`--rounds` rounds in which each query goes through the three paths back to back, the order
rotating per query, so machine load hits all alike. Reported: P50/P95 per path, and the median
of the per-query differences to REST (the overhead). Then the server's own CPU time per request
on each path (user + system of the `rag serve` process, from /proc, over `--rounds` blocks of
all queries per path, the order rotating per round): unlike latency, it hardly moves with the
machine's load. The first query's results are checked to be the same chunks through both doors.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.auth import issue_token
from app.embeddings.local import LocalEmbedder
from app.ingest.documents import ingest_documents
from app.ingest.versions import IngestResult
from app.resources import build_chunker
from bench.kit.corpus import (
    CachingEmbedder,
    corpus_input,
    read_corpus,
    read_queries,
    vector_cache_path,
)
from bench.kit.database import bench_database, create_tenants
from bench.kit.paths import NFCORPUS
from bench.kit.report import log, print_table, write_json
from bench.kit.server import serve
from bench.kit.stats import latency_summary

TENANT = "bench-mcp"
LIMIT = 5
BATCH = 100
PATHS = ("REST POST /api/rag/search", "MCP bare POST tools/call", "MCP SDK client call_tool")


async def load(db: Any, root: Path, copies: int) -> int:
    """NFCorpus `copies` times into the tenant, one collection per copy; the chunk count."""
    model = LocalEmbedder.load(db.settings)
    embedder = CachingEmbedder(model, vector_cache_path(model.model_id))
    chunker = build_chunker(db.settings, model)
    docs = read_corpus(root=root)
    chunks = 0
    for copy in range(copies):
        for start in range(0, len(docs), BATCH):
            batch = [
                corpus_input(d, collection=f"copy-{copy}") for d in docs[start : start + BATCH]
            ]
            outcomes = await ingest_documents(
                db.sessions, embedder, chunker=chunker, tenant_id=TENANT, documents=batch
            )
            chunks += sum(o.chunks for o in outcomes if isinstance(o, IngestResult))
        embedder.save()
        log(f"  copy {copy + 1}/{copies}: {chunks} chunks")
    await model.aclose()
    return chunks


class Paths:
    """The three ways to ask the same question; each returns the chunk ids it got."""

    def __init__(self, rest: httpx.AsyncClient, sdk: Client) -> None:
        self.rest, self.sdk = rest, sdk
        self.calls = {PATHS[0]: self.via_rest, PATHS[1]: self.via_bare_post, PATHS[2]: self.via_sdk}

    async def via_rest(self, query: str) -> list[str]:
        reply = await self.rest.post("/api/rag/search", json={"query": query, "max_results": LIMIT})
        reply.raise_for_status()
        return [chunk["chunk_id"] for chunk in reply.json()["chunks"]]

    async def via_bare_post(self, query: str) -> list[str]:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_similar", "arguments": {"query": query, "limit": LIMIT}},
        }
        reply = await self.rest.post("/mcp", json=body, headers={"Accept": "application/json"})
        reply.raise_for_status()
        result = reply.json()["result"]
        assert not result["isError"], result
        return [doc["id"] for doc in result["structuredContent"]["documents"]]

    async def via_sdk(self, query: str) -> list[str]:
        result = await self.sdk.call_tool("search_similar", {"query": query, "limit": LIMIT})
        assert not result.is_error, result
        assert result.structured_content is not None
        return [doc["id"] for doc in result.structured_content["documents"]]


async def measure(paths: Paths, queries: list[str], rounds: int) -> dict[str, list[float]]:
    first = [await paths.calls[name](queries[0]) for name in PATHS]
    assert first[0] == first[1] == first[2], "the doors disagree"
    for query in queries:  # warm: the server's query cache, connections, plans
        for name in PATHS:
            await paths.calls[name](query)
    samples: dict[str, list[float]] = {name: [] for name in PATHS}
    for round_ in range(rounds):
        for i, query in enumerate(queries):
            shift = (round_ + i) % len(PATHS)
            for name in PATHS[shift:] + PATHS[:shift]:
                began = time.perf_counter()
                await paths.calls[name](query)
                samples[name].append((time.perf_counter() - began) * 1000)
        log(f"  round {round_ + 1}/{rounds}")
    return samples


def server_cpu_seconds() -> float:
    """User + system CPU time so far of the `rag serve` child process (Linux /proc)."""
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            if b"serve" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue  # the embedded PostgreSQL is a child too
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def server_cpu(paths: Paths, queries: list[str], rounds: int) -> dict[str, float]:
    """The server's CPU milliseconds per request on each path."""
    spent = dict.fromkeys(PATHS, 0.0)
    for round_ in range(rounds):
        shift = round_ % len(PATHS)
        for name in PATHS[shift:] + PATHS[:shift]:
            before = server_cpu_seconds()
            for query in queries:
                await paths.calls[name](query)
            spent[name] += server_cpu_seconds() - before
    requests = rounds * len(queries)
    return {name: round(seconds * 1000 / requests, 3) for name, seconds in spent.items()}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with bench_database(superuser_url=args.database_url) as db:
        await create_tenants(db.sessions, [TENANT])
        chunks = await load(db, args.data / "nfcorpus", args.copies)
        texts = list(dict.fromkeys(read_queries(args.data / "nfcorpus").values()))
        queries = texts[: args.queries]
        token = issue_token(
            db.settings, tenant_id=TENANT, subject="bench", scopes=["rag:search"], ttl_seconds=7200
        )
        auth = {"Authorization": f"Bearer {token}"}
        with serve(db, redis_url=None) as url:
            async with (
                httpx.AsyncClient(base_url=url, headers=auth, timeout=30) as rest,
                httpx2.AsyncClient(headers=auth, timeout=30) as transport,
                Client(
                    streamable_http_client(f"{url}/mcp", http_client=transport), mode="2026-07-28"
                ) as sdk,
            ):
                paths = Paths(rest, sdk)
                samples = await measure(paths, queries, args.rounds)
                cpu = await server_cpu(paths, queries, args.rounds)
    rest = samples[PATHS[0]]
    rows = []
    for name, values in samples.items():
        paired = [v - r for v, r in zip(values, rest, strict=True)]
        rows.append(
            {
                "path": name,
                **latency_summary(values),
                "overhead_p50_ms": round(statistics.median(paired), 3),
                "server_cpu_ms": cpu[name],
            }
        )
    return {"chunks": chunks, "queries": len(queries), "rounds": args.rounds, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=50, help="distinct query texts (<= 100)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--copies", type=int, default=2, help="NFCorpus copies (2: 10,828 chunks)")
    parser.add_argument("--data", type=Path, default=NFCORPUS.parent, help="BEIR datasets")
    parser.add_argument("--database-url", default=None, help="a superuser URL (default: embedded)")
    args = parser.parse_args()
    if args.queries > 100:
        parser.error("--queries above the server's query cache (100) would measure the model")
    result = asyncio.run(run(args))
    print_table(
        f"search_similar over MCP vs POST /api/rag/search: {result['chunks']} chunks, "
        f"{result['queries']} queries x {result['rounds']} rounds, cached query embeddings",
        ["path", "n", "P50 ms", "P95 ms", "P99 ms", "median overhead ms", "server CPU ms/req"],
        [
            [
                r["path"],
                r["n"],
                r["p50_ms"],
                r["p95_ms"],
                r["p99_ms"],
                r["overhead_p50_ms"],
                r["server_cpu_ms"],
            ]
            for r in result["rows"]
        ],
    )
    write_json("mcp", result)


if __name__ == "__main__":
    main()
