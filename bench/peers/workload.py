"""What every peer is given: the same rows, the same query vectors, the same exact answers.

Rows are bench.kit.synthetic's (NFCorpus chunk vectors from the local model, each
reused size / chunks times with noise shaped like the corpus's covariance, loaded by binary
COPY with its tenant layout: one tenant of 50% of the rows, four of 10%, five of 1%, the rest
of 0.1%). Queries are NFCorpus query texts; their vectors come from the same model, so the
HTTP path (which embeds the text itself) searches with the same vectors as the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.embeddings.local import LocalEmbedder
from app.ingest.chunking import Chunker
from bench.kit.corpus import (
    CachingEmbedder,
    PreparedDoc,
    cached_corpus,
    prepare_corpus,
    query_pool,
    read_corpus,
    vector_cache_path,
)
from bench.kit.database import BenchDatabase
from bench.kit.stubs import StubEmbedder
from bench.kit.synthetic import TOP_K, Loaded, TenantSlice, pick_tenant


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    vector: np.ndarray  # float32, unit length


@dataclass(frozen=True, slots=True)
class Workload:
    corpus: list[PreparedDoc]
    base: np.ndarray  # the corpus's chunk vectors, one row per chunk
    queries: list[Query]
    stub: StubEmbedder  # the query vectors by text, for the service-only path
    embedder: CachingEmbedder  # the local model behind bench.kit.corpus's disk cache


@dataclass(frozen=True, slots=True)
class Job:
    """One search: a tenant, a query, and the exact top 10 of that tenant's rows (chunk ids)."""

    tenant: TenantSlice
    query: Query
    truth: frozenset[str]
    similarity: dict[str, float]  # of each chunk in `truth`

    def truth_at(self, min_similarity: float | None) -> frozenset[str]:
        """The exact top 10 that a search with this threshold can return."""
        if min_similarity is None:
            return self.truth
        return frozenset(c for c in self.truth if self.similarity[c] >= min_similarity)


async def build_workload(
    db: BenchDatabase, local: LocalEmbedder, chunker: Chunker, *, docs: int | None, queries: int
) -> Workload:
    """The corpus (all of NFCorpus when `docs` is None, chunked once and cached as
    bench.kit.corpus caches it; else its first `docs` documents), its chunk vectors and the first
    `queries` NFCorpus query texts with theirs. Vectors come from the disk cache the other
    benchmarks share, so only the first run on a machine spends model time on them."""
    embedder = CachingEmbedder(local, vector_cache_path(local.model_id))
    if docs is None:
        corpus = cached_corpus(chunker, local, db.settings)
    else:
        corpus = prepare_corpus(read_corpus(docs), chunker)
    texts = [t for p in corpus for t in p.texts]
    base = np.asarray(await embedder.embed_documents(texts), dtype=np.float32)
    chosen = query_pool(set())[:queries]
    vectors = {t: await embedder.embed_query(t) for t in chosen}
    embedder.save()
    stub = StubEmbedder(local.model_id, local.dimensions, vectors)
    return Workload(
        corpus=corpus,
        base=base,
        queries=[Query(t, np.asarray(vectors[t], dtype=np.float32)) for t in chosen],
        stub=stub,
        embedder=embedder,
    )


def jobs_for(loaded: Loaded, queries: list[Query], size_class: str, count: int) -> list[Job]:
    """`count` searches in tenants of `size_class`, round robin over its tenants and the
    queries (the same list for every peer)."""
    jobs = []
    for i in range(count):
        tenant = pick_tenant(loaded, size_class, i)
        query = queries[i % len(queries)]
        # bench.kit.synthetic's exact_top, keeping the similarities
        scores = loaded.vectors[tenant.start : tenant.stop] @ query.vector
        best = np.argsort(-scores, kind="stable")[:TOP_K]
        similarity = {str(loaded.ids[tenant.start + int(i)]): float(scores[i]) for i in best}
        jobs.append(Job(tenant, query, frozenset(similarity), similarity))
    return jobs


def recall(found: list[str], truth: frozenset[str]) -> float:
    """recall@10: the share of the exact top 10 (fewer when the tenant holds fewer rows)."""
    return len(truth.intersection(found[:TOP_K])) / len(truth) if truth else 1.0
