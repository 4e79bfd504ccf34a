"""What 100 results cost beside 10: search latency per tenant size and mode, and the vector
leg's recall@k against exact search, at max_results 10 and 100 in the same run.

    python -m bench.results_bench [--chunks 100000] [--queries 100]

Data: the service-only benches' synthetic tenants (bench.kit.synthetic: NFCorpus chunk texts
with synthetic vectors shaped like the corpus's, one tenant of 50% of the rows, four of 10%,
five of 1%, the rest of 0.1%; dedicated HNSW indexes as `rag index` gives large tenants).
Queries: NFCorpus query texts, their vectors from the local model (no model time in the
figures). Each search is `app.retrieval.search` as the runtime role under RLS, with the
service's own ef_search rule and candidates; the two values of max_results and the three modes
take turns query by query, so load drift hits them alike. No threshold (every mode fills k).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import numpy as np

from app.retrieval import SearchMode, SearchRequest, search
from bench.kit.database import bench_database, server_settings
from bench.kit.report import log, print_table, write_json
from bench.kit.stats import latency_summary
from bench.kit.synthetic import CLASSES, Loaded, TenantSlice, pick_tenant, synthetic_tenants

KS = (10, 100)
MODES = (SearchMode.VECTOR, SearchMode.KEYWORD, SearchMode.HYBRID)


def exact(loaded: Loaded, tenant: TenantSlice, vector: np.ndarray, k: int) -> set[Any]:
    scores = loaded.vectors[tenant.start : tenant.stop] @ vector.astype(np.float32, copy=False)
    best = np.argsort(-scores, kind="stable")[:k]
    return {loaded.ids[tenant.start + int(i)] for i in best}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    samples: dict[tuple[str, str, int], list[float]] = {}
    recalls: dict[tuple[str, int], list[float]] = {}
    async with bench_database() as db:
        stub, loaded = await synthetic_tenants(db, args.chunks, args.queries)
        texts = list(stub.vectors)
        log(f"{len(texts)} queries x {len(CLASSES)} sizes x {len(MODES)} modes x {len(KS)} k")
        for i, text in enumerate(texts):
            vector = np.asarray(stub.vectors[text], dtype=np.float32)
            for size_class in CLASSES:
                tenant = pick_tenant(loaded, size_class, i)
                truths = {k: exact(loaded, tenant, vector, k) for k in KS}  # before the clock
                for mode in MODES:
                    for k in KS if i % 2 else reversed(KS):
                        request = SearchRequest(query=text, mode=mode, top_k=k, threshold=None)
                        began = time.perf_counter()
                        outcome = await search(
                            db.sessions, stub, tenant_id=tenant.tenant_id, request=request
                        )
                        elapsed = (time.perf_counter() - began) * 1000
                        samples.setdefault((size_class, mode.value, k), []).append(elapsed)
                        if mode is SearchMode.VECTOR:
                            found = {hit.chunk_id for hit in outcome.hits}
                            truth = truths[k]
                            recalls.setdefault((size_class, k), []).append(
                                len(found & truth) / len(truth)
                            )
        server = await server_settings(db.superuser_url)
    rows = []
    for size_class in CLASSES:
        for mode in MODES:
            row: dict[str, Any] = {"tenant": size_class, "mode": mode.value}
            for k in KS:
                summary = latency_summary(samples[(size_class, mode.value, k)])
                row[f"p50_ms@{k}"] = summary["p50_ms"]
                row[f"p95_ms@{k}"] = summary["p95_ms"]
                if mode is SearchMode.VECTOR:
                    row[f"recall@{k}"] = round(float(np.mean(recalls[(size_class, k)])), 3)
            rows.append(row)
    return {"chunks": args.chunks, "queries": len(texts), "rows": rows, "server": server}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    header = ["tenant", "mode", *(f"{m}@{k}" for k in KS for m in ("p50_ms", "p95_ms"))]
    header += [f"recall@{k}" for k in KS]
    print_table(
        f"max_results 10 against 100, {result['chunks']} chunks, {result['queries']} queries",
        header,
        [[row.get(h, "") for h in header] for row in result["rows"]],
    )
    log(f"written {write_json('results_bench', result)}")


if __name__ == "__main__":
    main()
