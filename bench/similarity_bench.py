"""What similarity a relevant passage gets from the configured local model: the evidence for
default thresholds (app/embeddings/thresholds.py) and the advice in the MCP tool descriptions.

    python -m bench.similarity_bench [--dataset nfcorpus|medline] [--queries 200]
        [--data ../shared/data]

Every document of a BEIR dataset in ../shared/data is chunked and embedded as the service does
it (the service's Chunker and ingest texts; vectors cached on disk in bench/results/), then each
test query is compared with every chunk, a document taking its best chunk's similarity (what a
search reports). Reported: similarity quantiles of judged-relevant documents, of all other
documents and of each query's 1st and 5th best; and per threshold, the share of relevant
documents at or above it, the share of other documents at or above it, how many of a query's
top 5 results pass it and how many of those are judged relevant.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import numpy as np

from app.embeddings.local import LocalEmbedder
from app.evaluation.metrics import ndcg_at_10
from app.resources import build_chunker
from app.settings import EmbeddingProvider, Settings
from bench.kit.corpus import (
    CachingEmbedder,
    read_corpus,
    read_qrels,
    read_queries,
    vector_cache_path,
)
from bench.kit.corpus import prepare_corpus as chunked
from bench.kit.paths import NFCORPUS
from bench.kit.report import print_table, write_json
from bench.kit.stats import quantile

THRESHOLDS = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8)
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="nfcorpus", choices=("nfcorpus", "medline"))
    parser.add_argument("--queries", type=int, default=200, help="test queries sampled")
    parser.add_argument("--data", type=Path, default=NFCORPUS.parent, help="BEIR datasets")
    args = parser.parse_args()
    root = args.data / args.dataset
    settings = Settings(_env_file=None, embedding_provider=EmbeddingProvider.LOCAL)
    model = LocalEmbedder.load(settings)
    embedder = CachingEmbedder(model, vector_cache_path(model.model_id))
    docs = chunked(read_corpus(root=root), build_chunker(settings, model))
    vectors = await embedder.embed_documents([text for doc in docs for text in doc.texts])
    embedder.save()
    owners = np.array([i for i, doc in enumerate(docs) for _ in doc.texts])
    matrix = np.asarray(vectors, dtype=np.float32)
    queries, qrels = read_queries(root), read_qrels("test", root)
    picked = random.Random(7).sample(sorted(qrels), min(args.queries, len(qrels)))
    relevant, other, firsts, fifths = [], [], [], []
    passing: dict[float, list[int]] = {t: [] for t in THRESHOLDS}
    hits: dict[float, list[int]] = {t: [] for t in THRESHOLDS}
    ndcg: dict[float, list[float]] = {t: [] for t in THRESHOLDS}
    ids = [doc.doc.doc_id for doc in docs]
    index = {doc.doc.doc_id: i for i, doc in enumerate(docs)}
    for query_id in picked:
        query = np.asarray(await embedder.embed_query(queries[query_id]), dtype=np.float32)
        best = np.full(len(docs), -1.0, dtype=np.float32)
        np.maximum.at(best, owners, matrix @ query)
        judged = {index[d] for d, grade in qrels[query_id].items() if grade > 0 and d in index}
        relevant.extend(float(best[i]) for i in judged)
        mask = np.ones(len(docs), dtype=bool)
        mask[list(judged)] = False
        other.extend(best[mask].tolist())
        order = np.argsort(-best)[:5]
        top = best[order]
        firsts.append(float(top[0]))
        fifths.append(float(top[-1]))
        ten = np.argsort(-best)[:10]
        for t in THRESHOLDS:
            passed = [int(i) for i, value in zip(order, top, strict=True) if value >= t]
            passing[t].append(len(passed))
            hits[t].extend(int(i in judged) for i in passed)
            kept = [ids[int(i)] for i in ten if best[i] >= t]
            ndcg[t].append(ndcg_at_10(kept, qrels[query_id]))
    embedder.save()
    groups = {
        "relevant documents": relevant,
        "other documents": other,
        "best result": firsts,
        "5th result": fifths,
    }
    report(args.dataset, model.model_id, len(picked), groups, passing, hits, ndcg)


def report(
    dataset: str,
    model_id: str,
    queries: int,
    groups: dict[str, list[float]],
    passing: dict[float, list[int]],
    hits: dict[float, list[int]],
    ndcg: dict[float, list[float]],
) -> None:
    relevant = np.asarray(groups["relevant documents"])
    other = np.asarray(groups["other documents"])
    rows = [[name, *(f"{quantile(v, q):.3f}" for q in QUANTILES)] for name, v in groups.items()]
    print_table(
        f"{dataset}, {model_id}, {queries} queries: similarity quantiles",
        ["", *(f"P{round(q * 100)}" for q in QUANTILES)],
        rows,
    )
    per_threshold = [
        [
            t,
            f"{np.mean(relevant >= t):.1%}",
            f"{np.mean(other >= t):.2%}",
            f"{np.mean(passing[t]):.2f}",
            f"{np.mean(hits[t]):.0%}" if hits[t] else "-",
            f"{np.mean(ndcg[t]):.3f}",
        ]
        for t in THRESHOLDS
    ]
    print_table(
        "per threshold",
        [
            "threshold",
            "relevant kept",
            "others kept",
            "top-5 results passing (mean)",
            "of which judged relevant",
            "nDCG@10 (exact, cut)",
        ],
        per_threshold,
    )
    write_json(
        f"similarity-{dataset}",
        {
            "model": model_id,
            "queries": queries,
            "quantiles": {n: {q: quantile(v, q) for q in QUANTILES} for n, v in groups.items()},
            "thresholds": {str(row[0]): row[1:] for row in per_threshold},
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
