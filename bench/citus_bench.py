"""One server beside a Citus cluster on the same machine, in one run: the same tenants, chunks
and queries through the service's own search and ingest, on the embedded PostgreSQL and
through a Citus coordinator with two workers (Citus 14.0.1 built from ../shared/vendor/citus,
as the tests build it: docs/SHARDING.md).

    python -m bench.citus_bench [--chunks 20000] [--queries 100]

Data (synthetic, no model): 384-d vectors in clusters, 4 chunks per document, each chunk 40
words: 15 of its cluster's own vocabulary, 25 of a shared one drawn by Zipf's law. Tenants
hold 50%, 10%, 1% and 0.1% of the chunks (the rest is spread over four more), ingested through
`ingest_documents` with their embeddings given (what /documents/batch does with precomputed
chunks: BM25 statistics, access lists, the whole transaction), `--concurrency` batches at once.

Measured, the two targets taking turns query by query so a noisy neighbour hits both alike:
- search P50/P95 per tenant size, vector (recall@10 against exact search over the tenant's
  rows) and keyword mode, `app.retrieval.search` as the runtime role under RLS;
- ingestion chunks/s;
- the coordinator's hop: a one-row read by primary key, routed (median);
- statements per search in each mode and how many of them went to more than one shard (the
  coordinator's citus_stat_counters around a loop of searches).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np

from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate
from app.db.tenancy import SessionMaker
from app.errors import AppError
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput, PrecomputedChunk
from app.ingest.parsing import SourceType
from app.resources import build_chunker
from app.retrieval import SearchMode, SearchRequest, search
from bench.kit.database import bench_database, bench_settings, create_tenants, server_settings
from bench.kit.report import log, print_table, write_json
from bench.kit.stats import latency_summary
from bench.kit.stubs import StubEmbedder
from bench.kit.synthetic import unit
from tests.citus.cluster import running_cluster

DIMENSIONS = 384
MODEL = "bench-synthetic"
TOP_K = 10
CHUNKS_PER_DOCUMENT = 4
ROWS_PER_CLUSTER = 50
SPREAD = 0.03
WORDS_PER_CHUNK, TOPIC_WORDS, CLUSTER_VOCABULARY, SHARED_VOCABULARY = 40, 15, 12, 5_000
MEASURED = {"50%": 0.5, "10%": 0.1, "1%": 0.01, "0.1%": 0.001}
FILLERS = 4
APP_ROLE, APP_PASSWORD = "rag_app", "rag-app-bench"
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    label: str  # its share of the chunks, e.g. "10%"
    rows: np.ndarray  # row numbers of the corpus
    documents: list[DocumentInput]


@dataclass(frozen=True, slots=True)
class Corpus:
    vectors: np.ndarray
    texts: list[str]
    clusters: np.ndarray  # per row
    words: list[list[str]]  # per cluster: its own vocabulary
    centres: np.ndarray
    tenants: list[Tenant]


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    sessions: SessionMaker
    superuser_url: str


def word(rng: np.random.Generator) -> str:
    return "".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), size=3))


def make_corpus(chunks: int, seed: int = 23) -> Corpus:
    rng = np.random.default_rng(seed)
    clusters_count = max(chunks // ROWS_PER_CLUSTER, 1)
    centres = unit(rng.normal(size=(clusters_count, DIMENSIONS)))
    clusters = rng.integers(0, clusters_count, size=chunks)
    vectors = unit(centres[clusters] + rng.normal(scale=SPREAD, size=(chunks, DIMENSIONS)))
    shared = [word(rng) for _ in range(SHARED_VOCABULARY)]
    zipf = 1 / np.arange(1, SHARED_VOCABULARY + 1)
    zipf /= zipf.sum()
    words = [[word(rng) for _ in range(CLUSTER_VOCABULARY)] for _ in range(clusters_count)]
    texts = []
    for cluster in clusters:
        own = rng.choice(words[cluster], size=TOPIC_WORDS)
        common = rng.choice(shared, size=WORDS_PER_CHUNK - TOPIC_WORDS, p=zipf)
        chunk_words = [*own, *common]
        rng.shuffle(chunk_words)
        texts.append(" ".join(chunk_words))
    order = rng.permutation(chunks)
    sizes = {label: max(int(chunks * share), CHUNKS_PER_DOCUMENT)
             for label, share in MEASURED.items()}  # fmt: skip
    rest = chunks - sum(sizes.values())
    sizes |= {f"filler {i}": rest // FILLERS for i in range(FILLERS)}
    tenants, start = [], 0
    for label, size in sizes.items():
        rows = order[start : start + size]
        start += size
        name = "tenant-" + label.rstrip("%").replace(" ", "-")
        tenants.append(Tenant(name, label, rows, documents_of(rows, vectors, texts)))
    return Corpus(vectors, texts, clusters, words, centres, tenants)


def documents_of(rows: np.ndarray, vectors: np.ndarray, texts: list[str]) -> list[DocumentInput]:
    out = []
    for start in range(0, len(rows), CHUNKS_PER_DOCUMENT):
        part = rows[start : start + CHUNKS_PER_DOCUMENT]
        out.append(
            DocumentInput(
                content="\n\n".join(texts[r] for r in part),
                source_type=SourceType.TEXT,
                title=f"document {int(part[0])}",
                external_id=f"doc-{int(part[0])}",
                chunks=[
                    PrecomputedChunk(content=texts[r], embedding=vectors[r].tolist()) for r in part
                ],
                embedding_model=MODEL,
            )
        )
    return out


# --- the two targets -----------------------------------------------------------------------


@asynccontextmanager
async def one_server() -> AsyncIterator[Target]:
    async with bench_database() as db:
        yield Target("one server", db.sessions, db.superuser_url)


@asynccontextmanager
async def citus_cluster() -> AsyncIterator[Target]:
    began = time.perf_counter()
    with running_cluster(workers=2) as cluster:
        cluster.create_database("rag_bench")
        owner_url = cluster.url(database="rag_bench")
        app_url = cluster.url(user=APP_ROLE, password=APP_PASSWORD, database="rag_bench")
        await migrate(owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE,
                      app_url=app_url)  # fmt: skip
        log(f"Citus cluster started and migrated in {time.perf_counter() - began:.1f} s")
        engine = create_engine(bench_settings(app_url).database_url.get_secret_value())
        try:
            yield Target("Citus, 2 workers", create_sessionmaker(engine), owner_url)
        finally:
            await engine.dispose()


# --- measurements --------------------------------------------------------------------------


async def ingest(target: Target, corpus: Corpus, *, concurrency: int, batch: int) -> float:
    """Chunks per second, every tenant's documents in batches of `batch`."""
    embedder = StubEmbedder(MODEL, DIMENSIONS)
    chunker = build_chunker(bench_settings("postgresql://unused/none"), embedder)
    await create_tenants(target.sessions, [t.name for t in corpus.tenants])
    calls = [
        (tenant.name, tenant.documents[i : i + batch])
        for tenant in corpus.tenants
        for i in range(0, len(tenant.documents), batch)
    ]
    calls.reverse()
    chunks = 0

    async def worker() -> None:
        nonlocal chunks
        while calls:
            tenant_id, documents = calls.pop()
            outcomes = await ingest_documents(
                target.sessions, embedder, chunker=chunker, tenant_id=tenant_id,
                documents=documents,
            )  # fmt: skip
            for outcome in outcomes:
                if isinstance(outcome, AppError):
                    raise outcome
                chunks += outcome.chunks

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    conn = await asyncpg.connect(target.superuser_url)
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return chunks / elapsed


async def routed_read_ms(target: Target, tenant_id: str, rounds: int = 400) -> float:
    """Median of a one-row read by primary key (tenant_id, id) on a kept connection."""
    conn = await asyncpg.connect(target.superuser_url)
    try:
        row = await conn.fetchrow("select id from documents where tenant_id = $1 limit 1",
                                  tenant_id)  # fmt: skip
        assert row is not None
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            await conn.fetchval(
                "select title from documents where tenant_id = $1 and id = $2", tenant_id, row[0]
            )
            samples.append((time.perf_counter() - began) * 1000)
        return statistics.median(samples)
    finally:
        await conn.close()


async def counters(target: Target) -> tuple[int, int] | None:
    """(single-shard, multi-shard) statements the coordinator ran so far; None off Citus."""
    conn = await asyncpg.connect(target.superuser_url)
    try:
        if not await conn.fetchval(
            "select exists (select from pg_extension where extname = 'citus')"
        ):
            return None
        row = await conn.fetchrow(
            "select query_execution_single_shard, query_execution_multi_shard"
            " from citus_stat_counters where name = current_database()"
        )
        assert row is not None
        return int(row[0]), int(row[1])
    finally:
        await conn.close()


def keyword_query(corpus: Corpus, rng: np.random.Generator) -> str:
    words = corpus.words[int(rng.integers(0, len(corpus.words)))]
    return " ".join(rng.choice(words, size=2, replace=False))


async def measure_searches(
    targets: Sequence[Target], corpus: Corpus, *, queries: int, warm: int = 10
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    row_of = index_rows(corpus)
    measured = [t for t in corpus.tenants if t.label in MEASURED]
    embedder = StubEmbedder(MODEL, DIMENSIONS)
    samples: dict[tuple[str, str, str], list[float]] = {}
    recalls: dict[tuple[str, str], list[float]] = {}
    for i in range(queries + warm):
        centre = corpus.centres[int(rng.integers(0, len(corpus.centres)))]
        vector = unit(centre[None, :] + rng.normal(scale=SPREAD, size=(1, DIMENSIONS)))
        text = keyword_query(corpus, rng)
        embedder.current = vector[0].tolist()
        for tenant in measured:
            scores = corpus.vectors[tenant.rows] @ vector[0]
            wanted = {int(r) for r in tenant.rows[np.argsort(-scores, kind="stable")[:TOP_K]]}
            for target in targets:
                for mode, query in ((SearchMode.VECTOR, "q"), (SearchMode.KEYWORD, text)):
                    request = SearchRequest(query=query, mode=mode, top_k=TOP_K)
                    began = time.perf_counter()
                    outcome = await search(
                        target.sessions, embedder, tenant_id=tenant.name, request=request
                    )
                    elapsed = (time.perf_counter() - began) * 1000
                    if i < warm:
                        continue
                    samples.setdefault((target.name, tenant.name, mode.value), []).append(elapsed)
                    if mode is SearchMode.VECTOR:
                        found = {row_of[(hit.external_id, hit.chunk_index)] for hit in outcome.hits}
                        recalls.setdefault((target.name, tenant.name), []).append(
                            len(found & wanted) / len(wanted)
                        )
    rows = []
    for tenant in measured:
        for mode in (SearchMode.VECTOR, SearchMode.KEYWORD):
            for target in targets:
                row: dict[str, Any] = {
                    "tenant": tenant.label,
                    "chunks": len(tenant.rows),
                    "mode": mode.value,
                    "target": target.name,
                    **latency_summary(samples[(target.name, tenant.name, mode.value)]),
                }
                if mode is SearchMode.VECTOR:
                    row["recall@10"] = round(float(np.mean(recalls[(target.name, tenant.name)])), 3)
                rows.append(row)
    return rows


async def statements_per_search(
    target: Target, corpus: Corpus, *, rounds: int = 20
) -> dict[str, dict[str, float]]:
    """Per mode, the statements the coordinator ran per search (`citus_stat_counters` around
    `rounds` searches of every measured tenant, after a warm-up round)."""
    rng = np.random.default_rng(11)
    embedder = StubEmbedder(MODEL, DIMENSIONS)
    measured = [t for t in corpus.tenants if t.label in MEASURED]
    found: dict[str, dict[str, float]] = {}
    for mode in (SearchMode.VECTOR, SearchMode.KEYWORD, SearchMode.HYBRID):
        start: tuple[int, int] | None = None
        for round_ in range(rounds + 1):
            if round_ == 1:
                start = await counters(target)
            embedder.current = corpus.vectors[int(rng.integers(0, len(corpus.vectors)))].tolist()
            request = SearchRequest(query=keyword_query(corpus, rng), mode=mode, top_k=TOP_K)
            for tenant in measured:
                await search(target.sessions, embedder, tenant_id=tenant.name, request=request)
        end = await counters(target)
        if start is None or end is None:
            return {}
        searches = rounds * len(measured)
        found[mode.value] = {
            "single_shard": round((end[0] - start[0]) / searches, 2),
            "multi_shard": round((end[1] - start[1]) / searches, 2),
        }
    return found


def index_rows(corpus: Corpus) -> dict[tuple[str | None, int], int]:
    """(external id, chunk index) -> the corpus row it holds."""
    row_of: dict[tuple[str | None, int], int] = {}
    for tenant in corpus.tenants:
        for start in range(0, len(tenant.rows), CHUNKS_PER_DOCUMENT):
            part = tenant.rows[start : start + CHUNKS_PER_DOCUMENT]
            for index, row in enumerate(part):
                row_of[(f"doc-{int(part[0])}", index)] = int(row)
    return row_of


async def run(args: argparse.Namespace) -> dict[str, Any]:
    began = time.perf_counter()
    corpus = make_corpus(args.chunks)
    async with one_server() as single, citus_cluster() as citus:
        targets = [single, citus]
        ingestion = {}
        for target in targets:
            log(f"ingesting {args.chunks} chunks into {target.name}")
            rate = await ingest(target, corpus, concurrency=args.concurrency, batch=args.batch)
            ingestion[target.name] = round(rate, 1)
        log(f"{args.queries} queries per tenant and mode on each target")
        rows = await measure_searches(targets, corpus, queries=args.queries)
        statements = await statements_per_search(citus, corpus)
        largest = corpus.tenants[0].name
        hop = {t.name: round(await routed_read_ms(t, largest), 3) for t in targets}
        servers = {t.name: await server_settings(t.superuser_url) for t in targets}
    return {
        "chunks": args.chunks,
        "queries": args.queries,
        "ingest_batch": args.batch,
        "ingest_concurrency": args.concurrency,
        "ingest_chunks_per_s": ingestion,
        "routed_read_median_ms": hop,
        "statements": statements,
        "searches": rows,
        "servers": servers,
        "seconds": round(time.perf_counter() - began, 1),
    }


def report(result: dict[str, Any]) -> None:
    header = ["tenant", "chunks", "mode", "target", "p50_ms", "p95_ms", "recall@10"]
    print_table(
        f"search through the service, {result['chunks']} chunks, top 10",
        header,
        [[row.get(h, "") for h in header] for row in result["searches"]],
    )
    print_table(
        "ingestion and the coordinator's hop",
        ["target", "ingest chunks/s", "routed one-row read, median ms"],
        [
            [name, rate, result["routed_read_median_ms"][name]]
            for name, rate in result["ingest_chunks_per_s"].items()
        ],
    )
    print_table(
        "statements per search through the coordinator",
        ["mode", "single-shard", "multi-shard"],
        [[mode, s["single_shard"], s["multi_shard"]] for mode, s in result["statements"].items()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--batch", type=int, default=25, help="documents per ingest call")
    parser.add_argument("--concurrency", type=int, default=2, help="ingest calls at once")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    report(result)
    log(f"written {write_json('citus_bench', result)} in {result['seconds']} s")


if __name__ == "__main__":
    main()
