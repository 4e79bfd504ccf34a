"""What `neighbors` does to a context: answer-bearing text per token and latency, on a BEIR
dataset with relevance judgments (MEDLINE by default), neighbours 0 to 3 in the same run.

    python -m bench.neighbors_bench [--dataset medline] [--max-results 5] [--max-tokens 2000]

The dataset is ingested through the service's own pipeline (`ingest_documents`: parsing,
chunking, the local model's embeddings through the benches' disk cache). Each test query's
context is built by `retrieve_context` as POST /api/rag/context builds it (hybrid mode, the
given max_results and budget, whole chunks: max_chars_per_chunk 4,000), once per value of
`neighbors`, the values taking turns query by query. Per value: context tokens; the tokens of
chunks from documents judged relevant to the query (score > 0) and their share of the
context; the relevant documents cited; and the time to build the context (search included).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from app.citations import load_token_counter
from app.embeddings.local import LocalEmbedder
from app.errors import AppError
from app.ingest.documents import ingest_documents
from app.resources import build_chunker
from app.retrieval import SearchMode, SearchRequest
from app.retrieval.context import retrieve_context
from bench.kit.corpus import (
    CachingEmbedder,
    corpus_input,
    read_corpus,
    read_qrels,
    read_queries,
    vector_cache_path,
)
from bench.kit.database import bench_database, create_tenants
from bench.kit.paths import DATA
from bench.kit.report import log, print_table, write_json
from bench.kit.stats import quantile

TENANT = "neighbours"
VALUES = (0, 1, 2, 3)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    root = DATA / args.dataset
    documents = read_corpus(root=root)
    queries, qrels = read_queries(root), read_qrels("test", root)
    judged = {q: {d for d, score in rels.items() if score > 0} for q, rels in qrels.items()}
    judged = {q: docs for q, docs in judged.items() if docs and q in queries}
    counter = load_token_counter()
    per: dict[int, dict[str, list[float]]] = {n: {} for n in VALUES}
    async with bench_database() as db:
        local = LocalEmbedder.load(db.settings)
        embedder = CachingEmbedder(local, vector_cache_path(local.model_id))
        chunker = build_chunker(db.settings, local)
        await create_tenants(db.sessions, [TENANT])
        log(f"ingesting {len(documents)} {args.dataset} documents")
        chunks = 0
        for start in range(0, len(documents), 64):
            outcomes = await ingest_documents(
                db.sessions,
                embedder,
                chunker=chunker,
                tenant_id=TENANT,
                documents=[corpus_input(d) for d in documents[start : start + 64]],
            )
            for outcome in outcomes:
                if isinstance(outcome, AppError):
                    raise outcome
                chunks += outcome.chunks
        embedder.save()
        log(f"{chunks} chunks; {len(judged)} judged queries, neighbors {VALUES}")
        for i, (query_id, relevant) in enumerate(judged.items()):
            request = SearchRequest(
                query=queries[query_id], mode=SearchMode.HYBRID, top_k=args.max_results
            )
            order = VALUES if i % 2 else tuple(reversed(VALUES))
            for n in order:
                began = time.perf_counter()
                outcome = await retrieve_context(
                    db.sessions,
                    embedder,
                    counter,
                    tenant_id=TENANT,
                    request=request,
                    max_tokens=args.max_tokens,
                    max_chars=4000,
                    neighbors=n,
                )
                elapsed = (time.perf_counter() - began) * 1000
                built = outcome.built
                placed = [*built.used, *built.neighbours]
                tokens = counter.count(built.context)
                answering = sum(
                    counter.count(c.content) for c in placed if c.external_id in relevant
                )
                cited = {c.external_id for c in placed} & relevant
                found = per[n]
                found.setdefault("tokens", []).append(tokens)
                found.setdefault("relevant_tokens", []).append(answering)
                found.setdefault("relevant_share", []).append(answering / tokens if tokens else 0)
                found.setdefault("relevant_cited", []).append(len(cited))
                found.setdefault("ms", []).append(elapsed)
    rows = []
    for n in VALUES:
        found = per[n]
        rows.append(
            {
                "neighbors": n,
                "context_tokens": round(statistics.mean(found["tokens"]), 1),
                "relevant_tokens": round(statistics.mean(found["relevant_tokens"]), 1),
                "relevant_share": round(statistics.mean(found["relevant_share"]), 3),
                "relevant_docs_cited": round(statistics.mean(found["relevant_cited"]), 2),
                "p50_ms": round(quantile(found["ms"], 0.5), 2),
                "p95_ms": round(quantile(found["ms"], 0.95), 2),
            }
        )
    return {
        "dataset": args.dataset,
        "documents": len(documents),
        "chunks": chunks,
        "queries": len(judged),
        "max_results": args.max_results,
        "max_tokens": args.max_tokens,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dataset", default="medline")
    parser.add_argument("--max-results", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=2000)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    header = list(result["rows"][0])
    print_table(
        f"neighbors on {result['dataset']}: {result['documents']} documents, "
        f"{result['chunks']} chunks, {result['queries']} queries, max_results "
        f"{result['max_results']}, max_tokens {result['max_tokens']}",
        header,
        [[row[h] for h in header] for row in result["rows"]],
    )
    log(f"written {write_json('neighbors_bench', result)}")


if __name__ == "__main__":
    main()
