"""Synthetic tenants made from NFCorpus chunk vectors: the layout (50%, 4 x 10%, 5 x 1%, the
rest 0.1%), the generator, the bulk load with the service's indexes, and exact search."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.db.indexes import (
    build_memory_mb,
    maintain_dedicated_indexes,
)
from bench.kit.corpus import PreparedDoc, corpus_vectors, query_pool
from bench.kit.database import (
    HNSW_DEFINITION,
    HNSW_INDEX,
    BenchDatabase,
    connect_loader,
    copy_rows,
    create_tenants,
)
from bench.kit.report import log
from bench.kit.stubs import StubEmbedder

TOP_K = 10


CLASSES = ("50%", "10%", "1%", "0.1%")


@dataclass(frozen=True, slots=True)
class TenantSlice:
    tenant_id: str
    size_class: str
    start: int  # rows [start, stop) of the generated matrix
    stop: int


@dataclass
class Loaded:
    size: int
    tenants: list[TenantSlice]
    vectors: np.ndarray  # (size, dims) float32, row i is chunk ids[i]
    ids: list[uuid.UUID]
    timings: dict[str, float]


def tenant_layout(size: int) -> list[TenantSlice]:
    """One tenant with 50% of the rows, four with 10%, five with 1%, the rest in tenants of
    0.1%."""
    prefix = f"s{size}"
    small = max(1, size // 1000)
    mid = size // 10
    one = max(1, size // 100)
    n_small = (size - size // 2 - 4 * mid - 5 * one) // small
    big = size - 4 * mid - 5 * one - n_small * small
    counts = [(f"{prefix}-big", "50%", big)]
    counts += [(f"{prefix}-mid-{i}", "10%", mid) for i in range(4)]
    counts += [(f"{prefix}-one-{i}", "1%", one) for i in range(5)]
    counts += [(f"{prefix}-small-{i:03d}", "0.1%", small) for i in range(n_small)]
    slices, start = [], 0
    for tenant_id, size_class, count in counts:
        slices.append(TenantSlice(tenant_id, size_class, start, start + count))
        start += count
    return slices


@dataclass(frozen=True, slots=True)
class Synthetic:
    """How rows beyond the corpus are made, and the HNSW index they get."""

    kind: str = "cov"  # "cov": noise shaped like the corpus; "noise": isotropic gaussian
    scale: float = 1.0  # cov: multiple of the corpus covariance's square root
    noise: float = 0.02  # noise: standard deviation per dimension
    m: int = 16
    ef_construction: int = 64
    dedicated_min_chunks: int | None = 5_000  # `rag index` after the load; None: no indexes
    # index builds get the memory their graph needs, as the service's do, up to this
    build_memory_max_mb: int = 4096


def synthetic_vectors(
    base: np.ndarray, size: int, spec: Synthetic, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row i: a corpus chunk vector (each used size/len(base) times, in random order) plus
    noise, renormalized. "noise": N(0, noise^2) per dimension; every chunk then has ~size/len
    near-duplicates far closer to each other than to anything else, which breaks HNSW graphs
    (a property of the generator, not of real data). "cov": noise drawn from N(0, scale^2 *
    corpus covariance), i.e. spread the way real chunks differ; at scale 1 the rows' 10th
    neighbour similarity is ~0.6, the corpus's own ~0.65."""
    rng = np.random.default_rng(seed)
    source = np.concatenate([rng.permutation(len(base)) for _ in range(size // len(base) + 1)])[
        :size
    ]
    shape = None
    if spec.kind == "cov":
        covariance = np.cov(base.T) + 1e-6 * np.eye(base.shape[1])
        shape = (spec.scale * np.linalg.cholesky(covariance)).astype(np.float32)
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    for start in range(0, size, 50_000):
        part = source[start : start + 50_000]
        z = rng.normal(size=(len(part), base.shape[1])).astype(np.float32)
        block = base[part] + (z @ shape.T if shape is not None else spec.noise * z)
        out[start : start + len(part)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out, source


async def load_size(
    db: BenchDatabase,
    size: int,
    corpus: list[PreparedDoc],
    base: np.ndarray,
    *,
    spec: Synthetic,
    model_id: str,
) -> Loaded:
    tenants = tenant_layout(size)
    vectors, source = synthetic_vectors(base, size, spec, seed=size)
    chunk_of = [(p, i) for p in corpus for i in range(len(p.texts))]
    await create_tenants(db.sessions, [t.tenant_id for t in tenants])
    collections, documents, chunks = [], [], []
    ids: list[uuid.UUID] = []
    for t in tenants:
        collection = uuid.uuid4()
        collections.append((collection, t.tenant_id, "default"))
        for doc_start in range(t.start, t.stop, 4):
            rows = range(doc_start, min(doc_start + 4, t.stop))
            document_id = uuid.uuid4()
            documents.append(
                (
                    document_id,
                    t.tenant_id,
                    collection,
                    f"syn-{doc_start}",
                    f"synthetic {doc_start}",
                    "text",
                    f"{doc_start:064x}",
                    len(rows),
                )
            )
            for index, row in enumerate(rows):
                prepared, k = chunk_of[source[row]]
                chunk_id = uuid.uuid4()
                ids.append(chunk_id)
                chunks.append(
                    (
                        chunk_id,
                        t.tenant_id,
                        document_id,
                        collection,
                        index,
                        prepared.contents[k],
                        prepared.token_counts[k],
                        vectors[row],
                        model_id,
                        f"{row:064x}",
                    )
                )
    conn = await connect_loader(db.superuser_url)
    timings: dict[str, float] = {}
    try:
        await conn.execute("TRUNCATE chunks, documents, collections")
        await conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        began = time.perf_counter()
        await copy_rows(conn, collections=collections, documents=documents, chunks=chunks)
        timings["copy_s"] = round(time.perf_counter() - began, 2)
        log(f"  COPY {size} chunks: {timings['copy_s']} s; building the HNSW index")
        began = time.perf_counter()
        memory_mb = build_memory_mb(size, base.shape[1], ceiling_mb=spec.build_memory_max_mb)
        await conn.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
        await conn.execute(
            HNSW_DEFINITION.replace("m = 16", f"m = {spec.m}").replace(
                "ef_construction = 64", f"ef_construction = {spec.ef_construction}"
            )
        )
        timings["hnsw_build_s"] = round(time.perf_counter() - began, 2)
        began = time.perf_counter()
        await conn.execute("VACUUM ANALYZE chunks")
        await conn.execute("ANALYZE documents")
        timings["vacuum_analyze_s"] = round(time.perf_counter() - began, 2)
        if spec.dedicated_min_chunks is not None:
            began = time.perf_counter()
            created = await dedicated_indexes_for(
                db, spec.dedicated_min_chunks, ceiling_mb=spec.build_memory_max_mb
            )
            timings["dedicated_indexes"] = len(created)
            timings["dedicated_build_s"] = round(time.perf_counter() - began, 2)
            await conn.execute("ANALYZE chunks")
        timings["hnsw_mb"] = round(
            await conn.fetchval(f"select pg_relation_size('{HNSW_INDEX}')") / 2**20, 1
        )
        timings["table_mb"] = round(
            await conn.fetchval("select pg_total_relation_size('chunks')") / 2**20, 1
        )
    finally:
        await conn.close()
    await db.engine.dispose()  # no pooled connection keeps plans from before the load
    return Loaded(size, tenants, vectors, ids, timings)


async def synthetic_tenants(
    db: BenchDatabase, size: int, queries: int, spec: Synthetic | None = None
) -> tuple[StubEmbedder, Loaded]:
    """What the service-only benches search: the local model's vectors of the first `queries`
    NFCorpus query texts, returned by a stub embedder (`.vectors`, in query order), and `size`
    synthetic chunks loaded in the tenant layout (`spec`: how, by default as the service's
    own indexes would be)."""
    local, _chunker, embedder, corpus, base = await corpus_vectors(db.settings)
    texts = query_pool(set())[:queries]
    vectors = {text: await embedder.embed_query(text) for text in texts}
    embedder.save()
    stub = StubEmbedder(local.model_id, local.dimensions, vectors)
    log(f"loading {size} chunks")
    spec = spec or Synthetic()
    loaded = await load_size(db, size, corpus, base, spec=spec, model_id=local.model_id)
    return stub, loaded


async def dedicated_indexes_for(
    db: BenchDatabase, min_chunks: int, *, ceiling_mb: int
) -> list[str]:
    """What `rag index --min-chunks N` does: a dedicated HNSW index per large tenant, each
    built with the memory its graph needs; the tenants whose index was built."""
    changes = await maintain_dedicated_indexes(
        db.sessions, db.owner_url, min_chunks=min_chunks, build_memory_max_mb=ceiling_mb
    )
    return [change.tenant_id for change in changes if change.action == "created"]


def pick_tenant(loaded: Loaded, size_class: str, i: int) -> TenantSlice:
    members = [t for t in loaded.tenants if t.size_class == size_class]
    return members[i % len(members)]


def exact_top(loaded: Loaded, tenant: TenantSlice, vector: np.ndarray) -> set[uuid.UUID]:
    # in the matrix's float32: a float64 vector would make numpy copy the tenant's rows to
    # float64 first (1.5 GB for 500,000 rows), churn that stalls the server's next search
    scores = loaded.vectors[tenant.start : tenant.stop] @ vector.astype(np.float32, copy=False)
    best = np.argsort(-scores, kind="stable")[:TOP_K]
    return {loaded.ids[tenant.start + int(i)] for i in best}


def exact_tops(
    loaded: Loaded, tenant: TenantSlice, vectors: Sequence[np.ndarray]
) -> list[set[uuid.UUID]]:
    """`exact_top` of each vector, for a timed loop to compute before it: a product over the
    tenant's rows between two searches streams them through the CPU's caches (77 MB for a
    50,000-row tenant), and the next search starts cold (at 100k, 1.5x the median search of
    the 50% tenant and 2.4x its P95; docs/BENCHMARKS.md)."""
    return [exact_top(loaded, tenant, vector) for vector in vectors]


def unit(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (cosine = dot product), as float32."""
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)
    return out
