"""The searchers compared: this service (in process and over HTTP), numpy and PostgreSQL;
the other stores beside them (Chroma, LanceDB, Milvus Lite) are in chroma.py, lance.py and
milvus.py, on store.py's protocol.

Each answers `search(tenant, query)` with the ids of the tenant's 10 nearest chunks by
cosine. The service is called only through public functions with its settings' defaults
(`search_request` builds the request every door builds, so a change of default search
parameters shows here without touching this file); the threshold is dropped because no peer
has one. Peers that block (numpy, the stores) run on threads; the others on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from app.retrieval import search, search_request
from bench.kit.database import BenchDatabase
from bench.kit.server import ApiClient
from bench.kit.stubs import StubEmbedder
from bench.kit.synthetic import TOP_K, Loaded, TenantSlice

from .workload import Query

HTTP_THRESHOLD = 0.1  # the lowest the API accepts


class AsyncEngine(Protocol):
    name: str
    blocking: bool
    min_similarity: float | None  # the threshold it cannot search without, if any

    async def search(self, tenant: TenantSlice, query: Query) -> list[str]: ...


class BlockingEngine(Protocol):
    name: str
    blocking: bool
    min_similarity: float | None

    def search(self, tenant: TenantSlice, query: Query) -> list[str]: ...


Engine = AsyncEngine | BlockingEngine


def top_ids(scores: np.ndarray, ids: list[str]) -> list[str]:
    k = min(TOP_K, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return [ids[int(i)] for i in best[np.argsort(-scores[best], kind="stable")]]


class ServiceEngine:
    """`app.retrieval.search` as the runtime role under RLS, the query vector precomputed."""

    blocking = False
    min_similarity: float | None = None

    def __init__(
        self, db: BenchDatabase, stub: StubEmbedder, *, ef_search: int | None = None
    ) -> None:
        self.name = "service" if ef_search is None else f"service, ef_search {ef_search}"
        self.db = db
        self.stub = stub
        self.ef_search = ef_search

    async def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        request = search_request(
            self.db.settings,
            self.stub.model_id,
            query=query.text,
            top_k=TOP_K,
            ef_search=self.ef_search,
        )
        outcome = await search(
            self.db.sessions,
            self.stub,
            tenant_id=tenant.tenant_id,
            request=dataclasses.replace(request, threshold=None),
        )
        return [str(hit.chunk_id) for hit in outcome.hits]


class HttpEngine:
    """POST /api/rag/search on a live `rag serve` (the server embeds the text with the same
    model; once warmed, from its query cache). The API's lowest threshold, 0.1: its recall
    is counted against the exact top 10 that pass it."""

    blocking = False
    min_similarity: float | None = HTTP_THRESHOLD
    name = "service over HTTP"

    def __init__(self, client: ApiClient, tokens: dict[str, str]) -> None:
        self.client = client
        self.tokens = tokens
        self.embed_ms: list[float] = []

    async def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        body = await self.client.post(
            "/api/rag/search",
            {"query": query.text, "max_results": TOP_K, "threshold": HTTP_THRESHOLD},
            token=self.tokens[tenant.tenant_id],
        )
        self.embed_ms.append(float(body["timings"]["embed_ms"]))
        return [str(chunk["chunk_id"]) for chunk in body["chunks"]]


class NumpyEngine:
    """Brute force in memory: each tenant's rows as one float32 matrix, a product per query."""

    blocking = True
    min_similarity: float | None = None
    name = "numpy brute force"

    def __init__(self, loaded: Loaded) -> None:
        self.vectors = loaded.vectors
        self.ids = [str(i) for i in loaded.ids]

    def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        scores = self.vectors[tenant.start : tenant.stop] @ query.vector
        return top_ids(scores, self.ids[tenant.start : tenant.stop])


async def open_pool(url: str, size: int, **server_settings: str) -> asyncpg.Pool:
    async def init(conn: asyncpg.Connection) -> None:
        await register_vector(conn)

    pool = await asyncpg.create_pool(
        url, min_size=size, max_size=size, init=init, server_settings=server_settings
    )
    assert pool is not None
    return pool


EXACT_SQL = "SELECT id FROM chunks WHERE tenant_id = $1 ORDER BY embedding <=> $2 LIMIT 10"


class PgExactEngine:
    """pgvector exact scan: the tenant's rows sorted by cosine distance in the database, index
    scans off (so no HNSW index can answer: the tenant's btree feeds a bitmap scan and a top-N
    sort). One statement per query on the superuser's connections (no RLS)."""

    blocking = False
    min_similarity: float | None = None
    name = "pgvector exact scan"

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        rows = await self.pool.fetch(EXACT_SQL, tenant.tenant_id, query.vector)
        return [str(r[0]) for r in rows]

    async def plan(self, tenant: TenantSlice, query: Query) -> str:
        rows = await self.pool.fetch(f"EXPLAIN {EXACT_SQL}", tenant.tenant_id, query.vector)
        return "\n".join(r[0] for r in rows)


class NaiveEngine:
    """What simple systems do: read every embedding of the tenant from the database, then
    cosine in numpy, per query (superuser connections, vectors in pgvector's binary format)."""

    blocking = False
    min_similarity: float | None = None
    name = "naive: load + numpy"

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        rows = await self.pool.fetch(
            "SELECT id, embedding FROM chunks WHERE tenant_id = $1", tenant.tenant_id
        )
        matrix = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)
        scores = (matrix @ query.vector) / np.linalg.norm(matrix, axis=1)
        return top_ids(scores, [str(r[0]) for r in rows])
