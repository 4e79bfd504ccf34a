"""Fusion study: both legs of hybrid search captured once per judged query through the
service's own code, then every fusion rule scored offline on the very same candidates.

    .venv/bin/python bench/fusion_study.py [--datasets nfcorpus,medline] [--depth 40]

Per dataset (../shared/data/<name>, test split; NFCorpus dev too): the corpus ingested through
``ingest_documents`` (vectors cached on disk as in quality_bench.py), then per query
- the vector leg: ``search`` in vector mode, `depth` chunks, no threshold (what hybrid fuses);
- the keyword leg: ``search`` in keyword mode, `depth` chunks (BM25 scores), each with its
  cosine similarity to the query;
- the BM25 score of every vector-leg chunk (0 when it holds no query term), and the query's
  BM25 ceiling, the sum over its terms of idf * (k1 + 1).
Every rule then ranks the union of the legs; a document ranks where its best chunk ranks, the
first 10 distinct documents of the best 20 chunks are scored (nDCG@10, as quality_bench.py).
The captured legs are written to bench/results/ so rules can be re-scored without the database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness import (
    RESULTS,
    BenchDatabase,
    CachingEmbedder,
    bench_database,
    create_tenants,
    log,
    print_table,
    vector_cache_path,
)
from quality_bench import DATA, ingest

from app.db.models import Chunk
from app.db.tenancy import tenant_transaction
from app.embeddings.local import LocalEmbedder
from app.evaluation import read_beir
from app.evaluation.metrics import ndcg_at_10
from app.evaluation.runner import first_documents
from app.retrieval import Bm25Params, SearchMode, SearchRequest, search
from app.retrieval.bm25 import bm25_statement, bounded_query, query_stats

TOP_CHUNKS = 20


@dataclass(frozen=True, slots=True)
class Candidate:
    chunk: str
    document: str
    cosine: float
    bm25: float


@dataclass(frozen=True, slots=True)
class Legs:
    query_id: str
    vector: list[dict[str, Any]]  # Candidate fields; nearest first
    keyword: list[dict[str, Any]]  # best BM25 first
    ceiling: float  # the largest BM25 score this query can reach


async def capture_query(
    db: BenchDatabase, embedder: CachingEmbedder, tenant: str, query: str, depth: int
) -> tuple[list[Candidate], list[Candidate], float]:
    params = Bm25Params()
    legs = {}
    for mode in (SearchMode.VECTOR, SearchMode.KEYWORD):
        request = SearchRequest(query=query, mode=mode, top_k=depth, candidates=depth)
        outcome = await search(db.sessions, embedder, tenant_id=tenant, request=request)
        legs[mode] = outcome.hits
    async with tenant_transaction(db.sessions, tenant) as session:
        bounded = bounded_query(query, params.max_terms)
        stats = await query_stats(session, tenant, bounded)
        ceiling = sum(t.idf * (params.k1 + 1.0) for t in stats.terms)
        scored: dict[uuid.UUID, float] = {}
        ids = [hit.chunk_id for hit in legs[SearchMode.VECTOR]]
        if stats.terms and ids:
            stmt = bm25_statement(
                bounded, stats, len(stats.terms), [Chunk.id.in_(ids)], len(ids), params
            )
            scored = {row.id: float(row.score) for row in await session.execute(stmt)}
    vector = [
        Candidate(str(h.chunk_id), h.external_id, h.score, scored.get(h.chunk_id, 0.0))
        for h in legs[SearchMode.VECTOR]
    ]
    keyword = [
        Candidate(str(h.chunk_id), h.external_id, h.similarity, h.score)
        for h in legs[SearchMode.KEYWORD]
    ]
    return vector, keyword, ceiling


async def capture(
    db: BenchDatabase, embedder: CachingEmbedder, name: str, splits: Sequence[str], depth: int
) -> dict[str, Any]:
    folder = DATA / name
    tenant = f"fusion-{name}"
    await create_tenants(db.sessions, [tenant])
    corpus = read_beir(folder, split=splits[0])
    log(f"{name}: ingesting {len(corpus.corpus or [])} documents")
    log(f"{name}: {await ingest(db, embedder, db.settings, tenant, corpus)}")
    out: dict[str, Any] = {}
    for split in splits:
        data = read_beir(folder, split=split)
        legs = []
        for query_id, text in data.queries.items():
            vector, keyword, ceiling = await capture_query(db, embedder, tenant, text, depth)
            legs.append(
                {
                    "query_id": query_id,
                    "vector": [asdict(c) for c in vector],
                    "keyword": [asdict(c) for c in keyword],
                    "ceiling": ceiling,
                }
            )
        out[split] = {"qrels": data.qrels, "legs": legs}
        log(f"{name}/{split}: {len(legs)} queries captured")
    return out


# --- fusion rules --------------------------------------------------------------------------

Rule = Callable[[Legs], dict[str, float]]  # chunk -> fused score


def _minmax(values: Mapping[str, float]) -> dict[str, float]:
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high <= low:
        return dict.fromkeys(values, 1.0)
    return {k: (v - low) / (high - low) for k, v in values.items()}


def _zscore(values: Mapping[str, float]) -> dict[str, float]:
    if len(values) < 2:
        return dict.fromkeys(values, 0.0)
    mean, sd = statistics.fmean(values.values()), statistics.pstdev(values.values())
    return {k: (v - mean) / sd if sd else 0.0 for k, v in values.items()}


def _dbsf(values: Mapping[str, float]) -> dict[str, float]:
    """Distribution-based score fusion: mean +- 3 sd mapped to [0, 1]."""
    if len(values) < 2:
        return dict.fromkeys(values, 1.0)
    mean, sd = statistics.fmean(values.values()), statistics.pstdev(values.values())
    if not sd:
        return dict.fromkeys(values, 1.0)
    low, high = mean - 3 * sd, mean + 3 * sd
    return {k: min(max((v - low) / (high - low), 0.0), 1.0) for k, v in values.items()}


def _leg(legs: Legs, which: str, field: str) -> dict[str, float]:
    return {c["chunk"]: c[field] for c in getattr(legs, which)}


def _union(legs: Legs) -> dict[str, tuple[float, float]]:
    """Every candidate of either leg with both its scores (cosine, BM25)."""
    both: dict[str, tuple[float, float]] = {}
    for c in (*legs.vector, *legs.keyword):
        both[c["chunk"]] = (c["cosine"], c["bm25"])
    return both


def leg_only(which: str, field: str) -> Rule:
    return lambda legs: _leg(legs, which, field)


def rrf(k: int = 60) -> Rule:
    def rule(legs: Legs) -> dict[str, float]:
        out: dict[str, float] = {}
        for ranking in (legs.vector, legs.keyword):
            for rank, c in enumerate(ranking, start=1):
                out[c["chunk"]] = out.get(c["chunk"], 0.0) + 1.0 / (k + rank)
        return out

    return rule


def per_leg(norm: Callable[[Mapping[str, float]], dict[str, float]], w: float) -> Rule:
    """Today's rule with `norm` per leg over its own candidates; missing from a leg: 0."""

    def rule(legs: Legs) -> dict[str, float]:
        v = norm(_leg(legs, "vector", "cosine"))
        k = norm(_leg(legs, "keyword", "bm25"))
        return {c: w * v.get(c, 0.0) + (1 - w) * k.get(c, 0.0) for c in {*v, *k}}

    return rule


def completed(norm: Callable[[Mapping[str, float]], dict[str, float]], w: float) -> Rule:
    """Both scores known for every candidate of the union; `norm` over the union."""

    def rule(legs: Legs) -> dict[str, float]:
        both = _union(legs)
        v = norm({c: s[0] for c, s in both.items()})
        k = norm({c: s[1] for c, s in both.items()})
        return {c: w * v[c] + (1 - w) * k[c] for c in both}

    return rule


def ceiling_scaled(w: float, *, cosine_floor: float = 0.0, complete: bool = True) -> Rule:
    """Absolute scales: BM25 / the query's ceiling (a match on common words stays small),
    cosine rescaled from [floor, 1] to [0, 1]."""

    def rule(legs: Legs) -> dict[str, float]:
        both = _union(legs) if complete else None
        ceiling = legs.ceiling or 1.0
        out: dict[str, float] = {}
        if both is not None:
            for c, (cos, bm) in both.items():
                v = max(cos - cosine_floor, 0.0) / (1 - cosine_floor)
                out[c] = w * v + (1 - w) * bm / ceiling
            return out
        v = _leg(legs, "vector", "cosine")
        k = _leg(legs, "keyword", "bm25")
        for c in {*v, *k}:
            vv = max(v.get(c, cosine_floor) - cosine_floor, 0.0) / (1 - cosine_floor)
            out[c] = w * vv + (1 - w) * k.get(c, 0.0) / ceiling
        return out

    return rule


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {
        "vector": leg_only("vector", "cosine"),
        "keyword": leg_only("keyword", "bm25"),
        "rrf 60": rrf(60),
    }
    for w in (0.3, 0.4, 0.5, 0.6, 0.7):
        out[f"minmax per leg {w}"] = per_leg(_minmax, w)
        out[f"minmax union {w}"] = completed(_minmax, w)
        out[f"zscore union {w}"] = completed(_zscore, w)
        out[f"dbsf union {w}"] = completed(_dbsf, w)
        out[f"ceiling union {w}"] = ceiling_scaled(w)
        out[f"ceiling per leg {w}"] = ceiling_scaled(w, complete=False)
    return out


def _ranked_documents(
    scores: Mapping[str, float], documents: Mapping[str, str], cosines: Mapping[str, float]
) -> list[str]:
    order = sorted(scores, key=lambda c: (-scores[c], -cosines.get(c, 0.0), c))
    return first_documents([documents[c] for c in order[:TOP_CHUNKS]])


def score_rule(rule: Rule, split: Mapping[str, Any]) -> tuple[float, list[float]]:
    per_query = []
    legs_by_query = {entry["query_id"]: entry for entry in split["legs"]}
    for query_id, relevant in split["qrels"].items():
        entry = legs_by_query.get(query_id)
        if entry is None:
            per_query.append(0.0)
            continue
        legs = Legs(**entry)
        documents = {c["chunk"]: c["document"] for c in (*legs.vector, *legs.keyword)}
        cosines = {c: s[0] for c, s in _union(legs).items()}
        ranked = _ranked_documents(rule(legs), documents, cosines)
        per_query.append(ndcg_at_10(ranked, relevant))
    return statistics.fmean(per_query), per_query


def report(captured: Mapping[str, Any]) -> dict[str, Any]:
    table: dict[str, dict[str, float]] = {}
    per_query: dict[str, dict[str, list[float]]] = {}
    for dataset, splits in captured.items():
        for split, data in splits.items():
            column = f"{dataset}/{split}"
            for label, rule in rules().items():
                mean, values = score_rule(rule, data)
                table.setdefault(label, {})[column] = round(mean, 4)
                per_query.setdefault(column, {})[label] = values
    columns = sorted({c for row in table.values() for c in row})
    print_table(
        "nDCG@10 by fusion rule (same captured candidates)",
        ["rule", *columns],
        [[label, *(row.get(c, "") for c in columns)] for label, row in table.items()],
    )
    paired = {}
    for column, values in per_query.items():
        base = values["vector"]
        for label, scores in values.items():
            diffs = [a - b for a, b in zip(scores, base, strict=True)]
            se = statistics.pstdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
            paired.setdefault(label, {})[column] = f"{statistics.fmean(diffs):+.4f}±{se:.4f}"
    print_table(
        "Paired difference to vector (mean ± standard error over queries)",
        ["rule", *columns],
        [[label, *(row.get(c, "") for c in columns)] for label, row in paired.items()],
    )
    return {"ndcg_at_10": table, "vs_vector": paired}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    captured: dict[str, Any] = {}
    async with bench_database(superuser_url=args.database_url) as db:
        local = LocalEmbedder.load(db.settings)
        embedder = CachingEmbedder(local, vector_cache_path(local.model_id))
        for name in args.datasets:
            folder = DATA / name
            splits = [s for s in ("dev", "test") if (folder / "qrels" / f"{s}.tsv").is_file()]
            captured[name] = await capture(db, embedder, name, splits, args.depth)
    return captured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=lambda s: s.split(","), default=["nfcorpus", "medline"])
    parser.add_argument("--depth", type=int, default=40, help="candidates per leg (service: 40)")
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    parser.add_argument("--from-capture", help="re-score a capture file instead of searching")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.from_capture:
        with open(args.from_capture) as handle:
            captured = json.load(handle)
    else:
        captured = asyncio.run(run(args))
        path = RESULTS / f"fusion-capture-{int(time.time())}.json"
        path.write_text(json.dumps(captured))
        log(f"captured: {path}")
    result = report(captured)
    path = RESULTS / f"fusion-study-{int(time.time())}.json"
    path.write_text(json.dumps(result, indent=1))
    log(f"{time.perf_counter() - started:.0f} s; written: {path}")


if __name__ == "__main__":
    main()
