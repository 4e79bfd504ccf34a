"""The cluster answers what one server answers: BM25 keyword results identical (documents,
order and scores) on the same data, and a single-server database moved onto the cluster by the
documented procedure (docs/operations.md: `rag migrate` on the coordinator, then the rows
copied with pg_dump --data-only) serves the same searches, its keyword statistics exact."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from app.db import bm25 as bm25_stats
from app.db.embedded import with_database
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.retrieval import SearchMode, SearchRequest, search
from tests.citus.build import ensure_built
from tests.conftest import DatabaseUrls, fresh_database, registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow

NFCORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "nfcorpus"
DOCUMENTS, QUERIES = 300, 25


def corpus() -> tuple[dict[str, str], list[str]]:
    """The first documents of NFCorpus (title and abstract) and the first queries."""
    documents: dict[str, str] = {}
    with (NFCORPUS / "corpus.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            documents[row["_id"]] = f"{row.get('title', '')}\n\n{row['text']}"
            if len(documents) == DOCUMENTS:
                break
    with (NFCORPUS / "queries.jsonl").open() as lines:
        queries = [json.loads(line)["text"] for _, line in zip(range(QUERIES), lines, strict=False)]
    return documents, queries


async def _load(
    sessions: SessionMaker, embedder: WordHashEmbedder, documents: dict[str, str]
) -> str:
    tenant_id = await registered_tenant(sessions, "same")
    inputs = [
        DocumentInput(content=text, source_type=SourceType.TEXT, title=key, external_id=key)
        for key, text in documents.items()
    ]
    await ingest_documents(
        sessions, embedder, chunker=small_chunker(), tenant_id=tenant_id, documents=inputs
    )
    return tenant_id


async def _answers(
    sessions: SessionMaker, embedder: WordHashEmbedder, tenant_id: str, queries: list[str]
) -> list[list[tuple[str, int, float]]]:
    found = []
    for query in queries:
        request = SearchRequest(query=query, mode=SearchMode.KEYWORD, top_k=10)
        outcome = await search(sessions, embedder, tenant_id=tenant_id, request=request)
        found.append(
            canonical([(h.external_id, h.chunk_index, round(h.score, 6)) for h in outcome.hits])
        )
    return found


def canonical(hits: list[tuple[str, int, float]]) -> list[tuple[str, int, float]]:
    """Equal scores in one order (a tie is broken by chunk id, a random UUID per database);
    the hits tied with the last one only by their score, since which of them made the cut is
    the same coin toss."""
    ordered = sorted(hits, key=lambda hit: (-hit[2], hit[0], hit[1]))
    if len(ordered) < 10:
        return ordered
    last = ordered[-1][2]
    return [hit if hit[2] > last else ("", 0, last) for hit in ordered]


async def test_keyword_results_are_those_of_one_server(
    database: DatabaseUrls, citus_db: DatabaseUrls, embedder: WordHashEmbedder
) -> None:
    documents, queries = corpus()
    answers = []
    for urls in (database, citus_db):
        engine = create_engine(urls.app_url, pool_size=2)
        try:
            sessions = create_sessionmaker(engine)
            tenant_id = await _load(sessions, embedder, documents)
            answers.append(await _answers(sessions, embedder, tenant_id, queries))
            assert (await bm25_stats.verify(sessions, tenant_id)).ok
        finally:
            await engine.dispose()
    single, cluster = answers
    assert sum(len(a) for a in single) > QUERIES * 5  # the queries find something
    assert cluster == single


# Every table the service writes, parents first (pg_dump orders the data by the foreign keys
# anyway); the job queue's tables are left behind with the jobs finished before the move.
MOVED_TABLES = (
    "tenants",
    "collections",
    "documents",
    "chunks",
    "bm25_corpus",
    "bm25_terms",
    "bm25_postings",
    "audit_log",
    "tenant_usage",
)


async def test_a_single_server_database_moves_onto_the_cluster(
    database: DatabaseUrls, citus_db: DatabaseUrls, embedder: WordHashEmbedder
) -> None:
    name = f"rag_move_{uuid.uuid4().hex[:6]}"
    source_url = await fresh_database(database, name)
    documents, queries = corpus()
    documents = dict(list(documents.items())[:80])
    engine = create_engine(source_url, pool_size=2)
    try:
        sessions = create_sessionmaker(engine)
        tenant_id = await _load(sessions, embedder, documents)
        before = await _answers(sessions, embedder, tenant_id, queries)
    finally:
        await engine.dispose()
    # the procedure of docs/operations.md: the schema is the coordinator's (rag migrate, done
    # by `citus_db`), the rows come from the single server, data only
    _copy_rows(with_database(database.superuser_url, name), citus_db.owner_url)
    engine = create_engine(citus_db.app_url, pool_size=2)
    try:
        sessions = create_sessionmaker(engine)
        assert await _answers(sessions, embedder, tenant_id, queries) == before
        assert (await bm25_stats.verify(sessions, tenant_id)).ok
    finally:
        await engine.dispose()


def _copy_rows(source_url: str, target_url: str) -> None:
    """pg_dump --data-only of the service's tables, restored through the coordinator, which
    routes every row to its shard."""
    bin_dir = ensure_built().bin_dir
    tables = [arg for table in MOVED_TABLES for arg in ("--table", table)]
    dump = subprocess.run(
        [str(bin_dir / "pg_dump"), "--data-only", "--no-owner", *tables, source_url],
        capture_output=True,
        check=True,
        timeout=120,
    )
    subprocess.run(
        [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", target_url],
        input=dump.stdout,
        capture_output=True,
        check=True,
        timeout=300,
    )
