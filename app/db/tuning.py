"""The embedded server's settings, sized to the memory of the machine (or container) it runs on.

initdb sizes PostgreSQL for a small shared machine. The embedded server is the service's own,
so it gets settings for its work:

- shared buffers of a quarter of the memory (PostgreSQL's own advice for a server of its own),
  so HNSW graphs and the rows they point to are read from shared buffers, not copied in from
  the OS page cache (or the disk) page by page. At 1M chunks, with 512MB, a third of the pages
  the largest tenants' searches read came from outside shared buffers; with 6GB none did, and
  their median search took 0.42-0.71x the time (docs/BENCHMARKS.md, "Shared buffers at 1M").
  Linux gives the server this memory as pages are first used, not at start;
  `RAG_EMBEDDED_SHARED_BUFFERS_MB` sets it instead;
- 256MB of maintenance_work_mem for maintenance (a dedicated index's build sets what its graph
  needs: app/db/indexes.py);
- 4GB of WAL between checkpoints, so bulk ingestion does not force a checkpoint (and full-page
  images) every 1GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import psutil

FIXED: Mapping[str, str] = {
    "maintenance_work_mem": "256MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "wal_compression": "pglz",
}
SHARED_BUFFERS_SHARE = 4  # a quarter of the memory
SHARED_BUFFERS_MIN_MB = 128  # initdb's own
SHARED_BUFFERS_MAX_MB = 16_384  # past this, the OS page cache serves as well
SHARED_BUFFERS_STEP_MB = 128
CGROUP = Path("/sys/fs/cgroup")
# cgroup v2, then v1: a container's limit, when lower than the machine's memory
CGROUP_LIMITS = ("memory.max", "memory/memory.limit_in_bytes")


def memory_bytes(cgroup: Path = CGROUP) -> int:
    """The memory this process may use: the machine's, or its cgroup's limit when lower."""
    total = psutil.virtual_memory().total
    for name in CGROUP_LIMITS:
        try:
            limit = (cgroup / name).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():  # "max" (v2) means no limit
            total = min(total, int(limit))
    return total


def shared_buffers_mb(memory: int) -> int:
    """A quarter of `memory`, in steps of 128MB, between initdb's 128MB and 16GB."""
    share = memory // SHARED_BUFFERS_SHARE // 2**20
    stepped = share // SHARED_BUFFERS_STEP_MB * SHARED_BUFFERS_STEP_MB
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, stepped))


def embedded_tuning(shared_buffers: int | None = None) -> dict[str, str]:
    """The embedded server's settings; `shared_buffers` (MB) instead of the sized one."""
    sized = shared_buffers if shared_buffers is not None else shared_buffers_mb(memory_bytes())
    return {"shared_buffers": f"{sized}MB", **FIXED}
