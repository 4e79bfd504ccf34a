"""Retrieval quality: nDCG@10 (recall@10, MRR@10) of keyword (BM25), vector and hybrid search
on BEIR folders, beside rank-bm25 and exact dense search on the same data, in one run.

    python -m bench.quality_bench [--datasets nfcorpus,medline] [--top-k 10]
        [--weights 0.3,0.4,0.5,0.6,0.7] [--sweep] [--title-apart] [--database-url URL]

Per dataset (../shared/data/<name>): every document ingested as plain text through
``ingest_documents`` (its BEIR title as its title and as its text's first line; with
``--title-apart`` as its title only; 100 per call; vectors from the local MiniLM model, cached
on disk by text hash in bench/results/), then every judged test query through
``app.retrieval.search`` as the runtime role, via ``app.evaluation`` (the code `rag eval`
runs): top_k chunks, no threshold, a document ranking where its best chunk ranks. Beside
the service:

- before: the previous keyword ranking (``ts_rank_cd`` over the same tsquery, best 40) and
  the previous hybrid (RRF k 60 of the service's vector candidates and those 40), computed
  in this run on the same rows;
- references on whole documents: BM25 (rank-bm25 ``BM25Okapi``, lowercase whitespace tokens),
  exact dense (numpy over the same chunk vectors, best chunk per document), their RRF (k 60)
  and their weighted fusion (min-max per leg, 0.5 / 0.5);
- ``--sweep``: BM25 k1 / b and the fusion weight on NFCorpus's *dev* queries (the defaults
  are chosen there, then reported on test).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import func, select

from app.db.models import Chunk
from app.db.tenancy import tenant_transaction
from app.embeddings.local import LocalEmbedder
from app.evaluation import EvalSetting, Scores, evaluate, read_beir, score_run
from app.evaluation.beir import BeirDoc, BeirSet
from app.evaluation.runner import first_documents
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.resources import build_chunker
from app.retrieval import (
    Bm25Params,
    FusionMethod,
    SearchMode,
    SearchRequest,
    fuse,
    search,
    search_request,
)
from app.retrieval.bm25 import keyword_query
from app.retrieval.fusion import normalised
from app.settings import Settings
from bench.kit.corpus import CachingEmbedder, vector_cache_path
from bench.kit.database import BenchDatabase, bench_database, connect_loader, create_tenants
from bench.kit.paths import DATA
from bench.kit.report import log, print_table, write_json
from bench.kit.stats import latency_summary


def document_input(doc: BeirDoc, *, title_apart: bool = False) -> DocumentInput:
    """The document's title is its title and, unless `title_apart`, its text's first line."""
    return DocumentInput(
        content=f"{doc.title}\n\n{doc.text}" if doc.title and not title_apart else doc.text,
        source_type=SourceType.TEXT,
        title=doc.title or None,
        external_id=doc.doc_id,
    )


async def ingest(
    db: BenchDatabase,
    embedder: CachingEmbedder,
    settings: Settings,
    tenant: str,
    data: BeirSet,
    *,
    title_apart: bool = False,
) -> dict[str, float]:
    assert data.corpus is not None
    chunker = build_chunker(settings, embedder.inner)
    docs = [document_input(d, title_apart=title_apart) for d in data.corpus]
    started = time.perf_counter()
    for start in range(0, len(docs), 100):
        await ingest_documents(
            db.sessions,
            embedder,
            chunker=chunker,
            tenant_id=tenant,
            documents=docs[start : start + 100],
        )
        embedder.save()
    async with tenant_transaction(db.sessions, tenant) as session:
        chunks = await session.scalar(select(func.count()).select_from(Chunk)) or 0
    return {"documents": len(docs), "chunks": chunks, "seconds": time.perf_counter() - started}


class Service:
    """Searches through the service's code, as the runtime role."""

    def __init__(
        self, db: BenchDatabase, embedder: CachingEmbedder, tenant: str, top_k: int
    ) -> None:
        self.db, self.embedder, self.tenant, self.top_k = db, embedder, tenant, top_k
        self.bm25: Bm25Params | None = None
        self.keyword_ms: list[float] = []

    def request(self, query: str, setting: EvalSetting) -> SearchRequest:
        request = search_request(
            self.db.settings,
            self.embedder.model_id,
            query=query,
            mode=setting.mode,
            top_k=self.top_k,
            fusion=setting.fusion,
            vector_weight=setting.vector_weight,
        )
        request = dataclasses.replace(request, threshold=None)
        if self.bm25 is not None:
            request = dataclasses.replace(request, bm25=self.bm25)
        return request

    async def __call__(self, query: str, setting: EvalSetting) -> list[str]:
        began = time.perf_counter()
        outcome = await search(
            self.db.sessions,
            self.embedder,
            tenant_id=self.tenant,
            request=self.request(query, setting),
        )
        if setting.mode is SearchMode.KEYWORD:
            self.keyword_ms.append((time.perf_counter() - began) * 1000)
        return [hit.external_id for hit in outcome.hits]


async def legacy_runs(
    service: Service, queries: dict[str, str]
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[float]]:
    """The previous keyword ranking (ts_rank_cd, no IDF, no length normalisation) and the
    previous hybrid (RRF of the vector candidates and it), on the same rows."""
    keyword: dict[str, list[str]] = {}
    hybrid: dict[str, list[str]] = {}
    latency: list[float] = []
    for qid, query in queries.items():
        request = service.request(query, EvalSetting(SearchMode.VECTOR))
        began = time.perf_counter()
        async with tenant_transaction(service.db.sessions, service.tenant) as session:
            tsquery = keyword_query(query)
            rank = func.ts_rank_cd(Chunk.search_vector, tsquery).label("rank")
            rows = (
                await session.execute(
                    select(Chunk.id, rank)
                    .where(Chunk.search_vector.op("@@")(tsquery), Chunk.tenant_id == service.tenant)
                    .order_by(rank.desc(), Chunk.id)
                    .limit(request.candidates)
                )
            ).all()
        latency.append((time.perf_counter() - began) * 1000)
        lexical = [(r.id, float(r.rank)) for r in rows]
        vector_leg = await search(
            service.db.sessions,
            service.embedder,
            tenant_id=service.tenant,
            request=dataclasses.replace(request, top_k=request.candidates),
        )
        nearest = [(hit.chunk_id, hit.score) for hit in vector_leg.hits]
        owners = await external_ids(service, [*(i for i, _ in lexical), *(i for i, _ in nearest)])
        keyword[qid] = first_documents([owners[i] for i, _ in lexical[: service.top_k]])
        fused = fuse([nearest, lexical], k=60)[: service.top_k]
        hybrid[qid] = first_documents([owners[i] for i, _ in fused])
    return keyword, hybrid, latency


async def external_ids(service: Service, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    from app.db.models import Document

    async with tenant_transaction(service.db.sessions, service.tenant) as session:
        rows = await session.execute(
            select(Chunk.id, Document.external_id)
            .join(Document, Document.id == Chunk.document_id)
            .where(Chunk.id.in_(list(set(ids))))
        )
        return {r.id: r.external_id for r in rows}


async def references(
    db: BenchDatabase, embedder: CachingEmbedder, tenant: str, data: BeirSet
) -> dict[str, dict[str, list[str]]]:
    from rank_bm25 import BM25Okapi

    assert data.corpus is not None
    conn = await connect_loader(db.superuser_url)
    try:
        rows = await conn.fetch(
            "select d.external_id, c.embedding from chunks c"
            " join documents d on d.id = c.document_id where c.tenant_id = $1",
            tenant,
        )
    finally:
        await conn.close()
    owner = [r["external_id"] for r in rows]
    matrix = np.stack([np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows])
    ids = [d.doc_id for d in data.corpus]
    bm25 = BM25Okapi([f"{d.title} {d.text}".lower().split() for d in data.corpus])
    out: dict[str, dict[str, list[str]]] = {
        "ref: BM25 (rank-bm25), documents": {},
        "ref: exact dense, documents": {},
        "ref: RRF of exact dense + rank-bm25": {},
        "ref: weighted 0.5 of exact dense + rank-bm25": {},
    }
    for qid, query in data.queries.items():
        vector = np.asarray(await embedder.embed_query(query), dtype=np.float32)
        sims = matrix @ vector
        best: dict[str, float] = {}
        for i in np.argsort(-sims, kind="stable"):
            best.setdefault(owner[i], float(sims[i]))
            if len(best) >= 100:
                break
        dense = list(best.items())
        scores = bm25.get_scores(query.lower().split())
        lexical = [(ids[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:100]]
        out["ref: BM25 (rank-bm25), documents"][qid] = [d for d, _ in lexical[:10]]
        out["ref: exact dense, documents"][qid] = [d for d, _ in dense[:10]]
        as_uuid = {d: uuid.uuid5(uuid.NAMESPACE_URL, d) for d, _ in [*dense, *lexical]}
        back = {u: d for d, u in as_uuid.items()}
        dense_u = [(as_uuid[d], s) for d, s in dense]
        lexical_u = [(as_uuid[d], s) for d, s in lexical]
        out["ref: RRF of exact dense + rank-bm25"][qid] = [
            back[u] for u, _ in fuse([dense_u, lexical_u], k=60)[:10]
        ]
        out["ref: weighted 0.5 of exact dense + rank-bm25"][qid] = [
            back[u] for u, _ in minmax_fuse(dense_u, lexical_u, vector_weight=0.5)[:10]
        ]
    return out


def minmax_fuse(
    vector: Sequence[tuple[uuid.UUID, float]],
    keyword: Sequence[tuple[uuid.UUID, float]],
    *,
    vector_weight: float,
) -> list[tuple[uuid.UUID, float]]:
    """The reference weighted fusion: each leg min-max normalised over its own candidates, a
    candidate missing from a leg scored 0 there (the service's rule until 2026-11-24)."""
    scores: dict[uuid.UUID, float] = {}
    for ranking, weight in ((vector, vector_weight), (keyword, 1.0 - vector_weight)):
        for chunk_id, value in normalised(ranking):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight * value
    return sorted(scores.items(), key=lambda item: (-item[1], str(item[0])))


async def sweep(service: Service, dev: BeirSet, weights: Sequence[float]) -> dict[str, Any]:
    """BM25 k1 / b, then the fusion weight, on the dev queries."""
    bm25: dict[str, float] = {}
    for k1 in (0.9, 1.2, 1.5):
        for b in (0.4, 0.75):
            service.bm25 = Bm25Params(k1=k1, b=b)
            result = await evaluate(
                service, dev.queries, dev.qrels, [EvalSetting(SearchMode.KEYWORD)]
            )
            bm25[f"k1 {k1}, b {b}"] = result["keyword"].ndcg_at_10
    service.bm25 = None
    settings = [
        EvalSetting(SearchMode.HYBRID, FusionMethod.RRF),
        *(EvalSetting(SearchMode.HYBRID, FusionMethod.WEIGHTED, w) for w in weights),
    ]
    fusion = await evaluate(service, dev.queries, dev.qrels, settings)
    return {"bm25": bm25, "fusion": {k: v.ndcg_at_10 for k, v in fusion.items()}}


async def run_dataset(
    db: BenchDatabase, embedder: CachingEmbedder, name: str, args: argparse.Namespace
) -> dict[str, Any]:
    folder = DATA / name
    data = read_beir(folder, split="test")
    tenant = f"eval-{name}"
    await create_tenants(db.sessions, [tenant])
    log(f"{name}: ingesting {len(data.corpus or [])} documents")
    loaded = await ingest(db, embedder, db.settings, tenant, data, title_apart=args.title_apart)
    log(f"{name}: {loaded}")
    service = Service(db, embedder, tenant, args.top_k)
    entry: dict[str, Any] = {"corpus": loaded, "queries": len(data.queries)}
    if args.sweep and (folder / "qrels" / "dev.tsv").is_file():
        log(f"{name}: sweeping BM25 and fusion parameters on dev")
        entry["dev_sweep"] = await sweep(service, read_beir(folder, split="dev"), args.weights)
    settings = [
        EvalSetting(SearchMode.KEYWORD),
        EvalSetting(SearchMode.VECTOR),
        EvalSetting(SearchMode.HYBRID),  # the configured default
        EvalSetting(SearchMode.HYBRID, FusionMethod.RRF),
        *(EvalSetting(SearchMode.HYBRID, FusionMethod.WEIGHTED, w) for w in args.weights),
    ]
    log(f"{name}: {len(data.queries)} queries x {len(settings)} settings")
    scores: dict[str, Scores] = {}
    for setting in settings:
        label = (
            setting.name
            if setting.fusion or setting.mode is not SearchMode.HYBRID
            else ("hybrid (default)")
        )
        scores[label] = (await evaluate(service, data.queries, data.qrels, [setting]))[setting.name]
    keyword_ms = list(service.keyword_ms)
    legacy_keyword, legacy_hybrid, legacy_ms = await legacy_runs(service, data.queries)
    scores["before: keyword (ts_rank_cd)"] = score_run(legacy_keyword, data.qrels)
    scores["before: hybrid (RRF with ts_rank_cd)"] = score_run(legacy_hybrid, data.qrels)
    for label, run in (await references(db, embedder, tenant, data)).items():
        scores[label] = score_run(run, data.qrels)
    entry["scores"] = {k: dataclasses.asdict(v) for k, v in scores.items()}
    entry["keyword_latency_ms"] = {
        "bm25 (service search)": latency_summary(keyword_ms[-len(data.queries) :]),
        "before: ts_rank_cd statement": latency_summary(legacy_ms),
    }
    print_table(
        f"{name}: {len(data.queries)} test queries, {loaded['chunks']} chunks, top_k {args.top_k}",
        ["run", "nDCG@10", "recall@10", "MRR@10"],
        [[k, v.ndcg_at_10, v.recall_at_10, v.mrr_at_10] for k, v in scores.items()],
    )
    if "dev_sweep" in entry:
        sweep_rows = [[k, v] for k, v in entry["dev_sweep"]["bm25"].items()]
        sweep_rows += [[k, v] for k, v in entry["dev_sweep"]["fusion"].items()]
        print_table(f"{name}: dev sweep (nDCG@10)", ["setting", "nDCG@10"], sweep_rows)
    return entry


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"top_k": args.top_k}
    async with bench_database(superuser_url=args.database_url) as db:
        local = LocalEmbedder.load(db.settings)
        embedder = CachingEmbedder(local, vector_cache_path(local.model_id))
        for name in args.datasets:
            results[name] = await run_dataset(db, embedder, name, args)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=lambda s: s.split(","), default=["nfcorpus", "medline"])
    parser.add_argument("--top-k", type=int, default=10, help="chunks per search")
    parser.add_argument(
        "--weights",
        type=lambda s: [float(w) for w in s.split(",")],
        default=[0.3, 0.4, 0.5, 0.6, 0.7],
    )
    parser.add_argument("--sweep", action="store_true", help="k1 / b / weight on dev queries")
    parser.add_argument(
        "--title-apart",
        action="store_true",
        help="a document's title is its title only, not also the first line of its text",
    )
    parser.add_argument("--database-url", help="a superuser URL instead of the embedded server")
    args = parser.parse_args()
    started = time.perf_counter()
    results = asyncio.run(run(args))
    results["seconds"] = round(time.perf_counter() - started, 1)
    print(f"JSON: {write_json('quality_bench', results)}")  # noqa: T201


if __name__ == "__main__":
    main()
