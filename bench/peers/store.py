"""What every peer store shares: loaded with the rows of a `Loaded` (the same vectors and ids
the service holds), searched per tenant with a query vector given, its build timed and its
directory measured. A store blocks (the bench runs it on threads) and has no threshold."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.kit.synthetic import TOP_K, Loaded, TenantSlice

from .workload import Query


class PeerStore(Protocol):
    name: str
    blocking: bool  # True: run_cell calls it on threads
    min_similarity: float | None  # None: no threshold, recall against the exact top 10

    def load(self, loaded: Loaded) -> dict[str, float]: ...

    def search(self, tenant: TenantSlice, query: Query) -> list[str]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TenantRows:
    tenant: TenantSlice
    ids: list[str]
    vectors: np.ndarray  # float32, unit length, one row per id


def tenant_rows(loaded: Loaded) -> Iterator[TenantRows]:
    """Each tenant's rows as the service stores them: chunk ids as strings, their vectors."""
    for tenant in loaded.tenants:
        yield TenantRows(
            tenant,
            [str(i) for i in loaded.ids[tenant.start : tenant.stop]],
            loaded.vectors[tenant.start : tenant.stop],
        )


def tenant_column(loaded: Loaded) -> list[str]:
    """The tenant id of every row, in row order (for layouts that keep it as a field)."""
    column = np.empty(loaded.size, dtype=object)
    for tenant in loaded.tenants:
        column[tenant.start : tenant.stop] = tenant.tenant_id
    return list(column)


def limit_for(tenant: TenantSlice) -> int:
    """10 results, or every row of a tenant holding fewer (some stores refuse more)."""
    return min(TOP_K, tenant.stop - tenant.start)


class Scratch:
    """A temporary directory for one store's files, its size on disk, removed on close."""

    def __init__(self, prefix: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=f"rag-bench-{prefix}-"))

    def megabytes(self) -> float:
        total = sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        return total / 2**20

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class Stopwatch:
    """Seconds since it was made: a build's time, index included."""

    def __init__(self) -> None:
        self.began = time.perf_counter()

    def build(self, scratch: Scratch) -> dict[str, float]:
        return {
            "build_s": round(time.perf_counter() - self.began, 2),
            "disk_mb": round(scratch.megabytes(), 1),
        }
