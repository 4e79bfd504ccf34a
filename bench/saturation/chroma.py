"""Chroma's HTTP server (`chroma run`, the chromadb package's own binary) as the peer: one
collection with every row, the tenant as metadata, cosine space, default HNSW parameters;
queried over HTTP with the vector given and a `where` filter on the tenant."""

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
import numpy as np

from bench.kit.server import free_port
from bench.kit.synthetic import TOP_K, Loaded

API = "/api/v2/tenants/default_tenant/databases/default_database"


class ChromaServer:
    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="rag-bench-chroma-server-"))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.collection_id = ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def query_path(self) -> str:
        return f"{API}/collections/{self.collection_id}/query"

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
        """Every row of `loaded`, with its tenant, through the Python client over HTTP."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        client: Any = chromadb.HttpClient(
            host="127.0.0.1", port=self.port, settings=ChromaSettings(anonymized_telemetry=False)
        )
        collection = client.create_collection(
            "bench", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        self.collection_id = str(collection.id)
        tenant_of = np.empty(loaded.size, dtype=object)
        for tenant in loaded.tenants:
            tenant_of[tenant.start : tenant.stop] = tenant.tenant_id
        batch = int(client.get_max_batch_size())
        for start in range(0, loaded.size, batch):
            stop = min(start + batch, loaded.size)
            collection.add(
                ids=[str(i) for i in loaded.ids[start:stop]],
                embeddings=loaded.vectors[start:stop],
                metadatas=[{"tenant": t} for t in tenant_of[start:stop]],
            )

    @staticmethod
    def query_body(vector: list[float], tenant_id: str) -> str:
        return json.dumps(
            {
                "query_embeddings": [vector],
                "n_results": TOP_K,
                "where": {"tenant": tenant_id},
                "include": ["distances", "metadatas"],
            }
        )
