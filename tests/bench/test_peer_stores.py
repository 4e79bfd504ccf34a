"""The peer stores of `python -m bench` (bench/peers) loaded for real, small: each answers a
tenant's search with that tenant's own rows only, as many as asked (fewer when the tenant
holds fewer), close to the exact answer; and Chroma's server with a collection per tenant
(`python -m bench.saturation --peers chroma-per-tenant`) answers wrk's load. Behaviour only,
never speed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from bench.kit.synthetic import TOP_K, Loaded, TenantSlice
from bench.peers.chroma import ChromaPerTenant, ChromaShared
from bench.peers.lance import INDEX_MIN_ROWS, LanceDbPerTenant
from bench.peers.milvus import MilvusLitePartitionKey
from bench.peers.store import PeerStore
from bench.peers.workload import Query, recall
from bench.saturation.chroma import ChromaServer
from bench.saturation.cpu import Meter, ProcessTree, ReapedChildren
from bench.saturation.wrk import Target, run

pytestmark = pytest.mark.slow

DIMS = 24
# the largest tenant reaches LanceDB's index threshold, the smallest holds fewer than 10 rows
SIZES = {"big": INDEX_MIN_ROWS, "mid": 400, "small": 30, "tiny": 4}


def make_loaded() -> Loaded:
    rng = np.random.default_rng(11)
    total = sum(SIZES.values())
    vectors = rng.normal(size=(total, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tenants, start = [], 0
    for name, count in SIZES.items():
        tenants.append(TenantSlice(name, name, start, start + count))
        start += count
    return Loaded(total, tenants, vectors, [uuid.uuid4() for _ in range(total)], {})


LOADED = make_loaded()
QUERIES = [
    Query(f"q{i}", (v / np.linalg.norm(v)).astype(np.float32))
    for i, v in enumerate(np.random.default_rng(5).normal(size=(20, DIMS)))
]


def exact(tenant: TenantSlice, query: Query) -> frozenset[str]:
    scores = LOADED.vectors[tenant.start : tenant.stop] @ query.vector
    best = np.argsort(-scores, kind="stable")[:TOP_K]
    return frozenset(str(LOADED.ids[tenant.start + int(i)]) for i in best)


STORES: dict[str, Callable[[], PeerStore]] = {
    "chroma-shared": ChromaShared,
    "chroma-per-tenant": ChromaPerTenant,
    "lancedb": LanceDbPerTenant,
    "milvus-lite": MilvusLitePartitionKey,
}


@pytest.fixture(scope="module", params=list(STORES))
def store(request: pytest.FixtureRequest) -> Iterator[PeerStore]:
    opened = STORES[request.param]()
    try:
        built = opened.load(LOADED)
        assert built["build_s"] >= 0, built
        assert built["disk_mb"] > 0, built
        yield opened
    finally:
        opened.close()


def test_a_search_returns_the_tenants_own_rows_and_nearly_the_exact_ones(
    store: PeerStore,
) -> None:
    for tenant in LOADED.tenants:
        own = {str(i) for i in LOADED.ids[tenant.start : tenant.stop]}
        recalls = []
        for query in QUERIES:
            found = store.search(tenant, query)
            assert set(found) <= own, f"{store.name}: another tenant's rows for {tenant}"
            assert len(found) == min(TOP_K, len(own)), (store.name, tenant, found)
            assert len(set(found)) == len(found), found
            recalls.append(recall(found, exact(tenant, query)))
        assert float(np.mean(recalls)) >= 0.9, (store.name, tenant.tenant_id, recalls)


def test_each_store_says_how_it_is_laid_out(store: PeerStore) -> None:
    described = store.describe()
    assert described, store.name
    if isinstance(store, LanceDbPerTenant):
        assert described["tables"] == len(SIZES)
        assert described["indexed"] == 1  # the tenant at the threshold; the others scanned
    if isinstance(store, ChromaPerTenant):
        assert described["collections"] == len(SIZES)


def test_a_store_loaded_again_holds_only_the_new_rows() -> None:
    """`python -m bench` loads each size into the same store: the previous size is gone."""
    store = ChromaPerTenant()
    try:
        store.load(LOADED)
        again = make_loaded()
        store.load(again)
        tenant = again.tenants[1]
        found = store.search(tenant, QUERIES[0])
        assert set(found) <= {str(i) for i in again.ids[tenant.start : tenant.stop]}
    finally:
        store.close()


def test_chroma_server_with_a_collection_per_tenant_answers_the_load() -> None:
    tenant = LOADED.tenants[1]
    with ChromaServer(per_tenant=True) as chroma:
        chroma.load(LOADED)
        assert set(chroma.collection_ids) == set(SIZES)
        bodies = [chroma.query_body(q.vector.tolist(), tenant) for q in QUERIES]
        assert all('"where"' not in body for body in bodies)
        meter = Meter({"chroma": ProcessTree(chroma.pid), "wrk": ReapedChildren()})
        target = Target(chroma.base_url, chroma.query_path(tenant.tenant_id))
        result = run(target, bodies, clients=2, seconds=1, meter=meter)
    assert result.requests > 2, result
    assert result.errors == 0, result
