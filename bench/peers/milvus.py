"""Milvus Lite (pymilvus's MilvusClient on a local file) with the tenant as a partition key,
Milvus's documented multi-tenancy for many tenants in one collection, each search filtered
on the key.

Cosine, `AUTOINDEX`. Milvus Lite 3 is pure Python: MilvusClient starts its gRPC server on
threads of this process (no server process of its own). It builds AUTOINDEX as a FAISS HNSW
index per flushed segment (M 16, efConstruction 200, ef 64; brute force without faiss-cpu,
which it depends on) and searches rows not yet flushed brute force; `load` flushes, so every
row is in an indexed segment before the first search. It hashes rows into 16 partitions by
the key on insert but does not prune them on search: a filtered search walks every segment's
graph with the tenant's rows as an id selector.
"""

from __future__ import annotations

from typing import Any

from bench.kit.synthetic import Loaded, TenantSlice

from .store import Scratch, Stopwatch, limit_for, tenant_column
from .workload import Query

COLLECTION = "chunks"
BATCH = 2_000  # rows per insert call (a gRPC message stays well under its size limit)


class MilvusLitePartitionKey:
    blocking = True
    min_similarity: float | None = None
    name = "Milvus Lite, partition key"

    def __init__(self) -> None:
        from pymilvus import MilvusClient

        self.scratch = Scratch("milvus")
        self.client: Any = MilvusClient(str(self.scratch.path / "bench.db"))

    def load(self, loaded: Loaded) -> dict[str, float]:
        from pymilvus import DataType

        if self.client.has_collection(COLLECTION):
            self.client.drop_collection(COLLECTION)
        schema = self.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("tenant", DataType.VARCHAR, max_length=128, is_partition_key=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=loaded.vectors.shape[1])
        index = self.client.prepare_index_params()
        index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
        self.client.create_collection(COLLECTION, schema=schema, index_params=index)
        clock = Stopwatch()
        tenants = tenant_column(loaded)
        for start in range(0, loaded.size, BATCH):
            stop = min(start + BATCH, loaded.size)
            rows = [
                {"id": str(loaded.ids[i]), "tenant": tenants[i], "vector": loaded.vectors[i]}
                for i in range(start, stop)
            ]
            self.client.insert(COLLECTION, rows)
        self.client.flush(COLLECTION)
        return clock.build(self.scratch)

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(self.client.describe_index(COLLECTION, "vector"))
        return {k: described[k] for k in ("index_type", "metric_type", "indexed_rows")}

    def search(self, tenant: TenantSlice, query: Query) -> list[str]:
        found = self.client.search(
            COLLECTION,
            data=[query.vector],
            limit=limit_for(tenant),
            filter=f'tenant == "{tenant.tenant_id}"',
            output_fields=[],
        )
        return [str(hit["id"]) for hit in found[0]]

    def close(self) -> None:
        self.client.close()
        self.scratch.remove()
