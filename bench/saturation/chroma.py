"""Chroma's HTTP server (`chroma run`, the chromadb package's own binary) as the peer, cosine
space, default HNSW parameters, queried over HTTP with the vector given, in either layout:

- shared: one collection with every row, the tenant as metadata, a `where` tenant filter;
- per tenant (`per_tenant=True`): one collection per tenant, Chroma's documented
  multi-tenant layout, each query sent to its tenant's collection without a filter.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.kit.ports import free_port
from bench.kit.synthetic import Loaded, TenantSlice
from bench.peers.chroma import COSINE, add_batched
from bench.peers.store import limit_for, tenant_column, tenant_rows

API = "/api/v2/tenants/default_tenant/databases/default_database"


class ChromaServer:
    def __init__(self, *, per_tenant: bool = False) -> None:
        self.per_tenant = per_tenant
        self.directory = Path(tempfile.mkdtemp(prefix="rag-bench-chroma-server-"))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.collection_ids: dict[str, str] = {}  # tenant (shared layout: "") -> collection

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def query_path(self, tenant_id: str) -> str:
        """The query endpoint of the collection holding `tenant_id`'s rows."""
        collection = self.collection_ids[tenant_id if self.per_tenant else ""]
        return f"{API}/collections/{collection}/query"

    def __enter__(self) -> ChromaServer:
        binary = Path(sys.executable).with_name("chroma")
        self.process = subprocess.Popen(
            [
                str(binary),
                "run",
                "--path",
                str(self.directory),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/api/v2/heartbeat", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.3)
        raise RuntimeError("chroma run did not answer in 60 s")

    def __exit__(self, *_exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def load(self, loaded: Loaded) -> None:
        """Every row of `loaded` through the Python client over HTTP: into one collection
        with its tenant as metadata, or into its tenant's collection."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        client: Any = chromadb.HttpClient(
            host="127.0.0.1", port=self.port, settings=ChromaSettings(anonymized_telemetry=False)
        )
        if self.per_tenant:
            for rows in tenant_rows(loaded):
                collection = client.create_collection(
                    rows.tenant.tenant_id, embedding_function=None, configuration=COSINE
                )
                self.collection_ids[rows.tenant.tenant_id] = str(collection.id)
                add_batched(client, collection, rows.ids, rows.vectors)
            return
        collection = client.create_collection(
            "bench", embedding_function=None, configuration=COSINE
        )
        self.collection_ids[""] = str(collection.id)
        metadatas = [{"tenant": t} for t in tenant_column(loaded)]
        ids = [str(i) for i in loaded.ids]
        add_batched(client, collection, ids, loaded.vectors, metadatas=metadatas)

    def query_body(self, vector: list[float], tenant: TenantSlice) -> str:
        body: dict[str, Any] = {
            "query_embeddings": [vector],
            "n_results": limit_for(tenant),
            "include": ["distances", "metadatas"],
        }
        if not self.per_tenant:
            body["where"] = {"tenant": tenant.tenant_id}
        return json.dumps(body)
