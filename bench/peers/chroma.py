"""Embedded Chroma (PersistentClient, no embedding function: vectors given; cosine space,
Chroma's default HNSW parameters) in its two multi-tenant layouts:

- `ChromaShared`: one collection with every row, the tenant as metadata, queried with a
  `where` filter: the layout a single collection invites;
- `ChromaPerTenant`: one collection per tenant, queried without a filter: the layout Chroma
  documents for multi-tenancy (a collection, or a tenant/database, per tenant).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.kit.synthetic import TOP_K, Loaded, TenantSlice

from .store import Scratch, Stopwatch, limit_for, tenant_column, tenant_rows
from .workload import Query

COSINE = {"hnsw": {"space": "cosine"}}


def open_client(scratch: Scratch) -> Any:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    return chromadb.PersistentClient(
        path=str(scratch.path), settings=ChromaSettings(anonymized_telemetry=False)
    )


def add_batched(
    client: Any, collection: Any, ids: list[str], vectors: np.ndarray, **kw: Any
) -> None:
    """`collection.add` in batches of the client's largest; `metadatas` (in `kw`) sliced too."""
    batch = int(client.get_max_batch_size())
    for start in range(0, len(ids), batch):
        stop = start + batch
        extra = {k: v[start:stop] for k, v in kw.items()}
        collection.add(ids=ids[start:stop], embeddings=vectors[start:stop], **extra)


class ChromaShared:
    """One collection with every row and its tenant as metadata, a `where` tenant filter."""

    blocking = True
    min_similarity: float | None = None
    name = "Chroma, tenant filter"

    def __init__(self) -> None:
        self.scratch = Scratch("chroma")
        self.client = open_client(self.scratch)
        self.collection: Any = None

    def load(self, loaded: Loaded) -> dict[str, float]:
        """A new collection with the size's rows; build time (add, index included) and size."""
        if self.collection is not None:
            self.client.delete_collection(self.collection.name)
        self.collection = self.client.create_collection(
            f"bench-{loaded.size}", embedding_function=None, configuration=COSINE
        )
        clock = Stopwatch()
        self.add([str(i) for i in loaded.ids], loaded.vectors, tenant_column(loaded))
        return clock.build(self.scratch)

    def add(self, ids: list[str], vectors: np.ndarray, tenants: list[str]) -> None:
        metadatas = [{"tenant": t} for t in tenants]
        add_batched(self.client, self.collection, ids, vectors, metadatas=metadatas)

    def describe(self) -> dict[str, Any]:
        hnsw: dict[str, Any] = dict(self.collection.configuration["hnsw"])
        return hnsw

    def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        found = self.collection.query(
            query_embeddings=[query.vector],
            n_results=TOP_K,
            where={"tenant": tenant.tenant_id},
            include=[],
        )
        return [str(i) for i in found["ids"][0]]

    def close(self) -> None:
        self.scratch.remove()


class ChromaPerTenant:
    """One collection per tenant (Chroma's multi-tenant layout), queried without a filter."""

    blocking = True
    min_similarity: float | None = None
    name = "Chroma, collection per tenant"

    def __init__(self) -> None:
        self.scratch = Scratch("chroma-per-tenant")
        self.client = open_client(self.scratch)
        self.collections: dict[str, Any] = {}

    def load(self, loaded: Loaded) -> dict[str, float]:
        for collection in self.collections.values():
            self.client.delete_collection(collection.name)
        self.collections = {}
        clock = Stopwatch()
        for rows in tenant_rows(loaded):
            collection = self.client.create_collection(
                rows.tenant.tenant_id, embedding_function=None, configuration=COSINE
            )
            add_batched(self.client, collection, rows.ids, rows.vectors)
            self.collections[rows.tenant.tenant_id] = collection
        return clock.build(self.scratch)

    def describe(self) -> dict[str, Any]:
        first = next(iter(self.collections.values()))
        hnsw: dict[str, Any] = dict(first.configuration["hnsw"])
        return {"collections": len(self.collections), **hnsw}

    def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        found = self.collections[tenant.tenant_id].query(
            query_embeddings=[query.vector], n_results=limit_for(tenant), include=[]
        )
        return [str(i) for i in found["ids"][0]]

    def close(self) -> None:
        self.scratch.remove()
