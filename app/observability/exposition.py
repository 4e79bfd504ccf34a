"""The Prometheus text for GET /metrics, in one process or across `rag serve --workers N`.

One process: the default registry (the service's metrics, plus the process and Python
collectors prometheus_client registers). Several: prometheus_client's multiprocess mode,
chosen when PROMETHEUS_MULTIPROC_DIR is set before prometheus_client is imported (`rag serve
--workers N` sets it in the parent, so every worker inherits it); each worker writes its values
to files there and a scrape of any worker reads them all: counters and histograms summed,
gauges as their `multiprocess_mode` says. The process and Python collectors have no
multiprocess form, so they are absent in that mode.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST


def multiprocess_dir() -> Path | None:
    found = os.environ.get(MULTIPROC_ENV)
    return Path(found) if found else None


def render() -> bytes:
    """The metrics of this process, or of every worker in multiprocess mode."""
    directory = multiprocess_dir()
    if directory is None:
        return generate_latest(REGISTRY)
    _forget_dead_processes(directory)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def _forget_dead_processes(directory: Path) -> None:
    """Live gauges (connections in use, requests in progress) of a worker that died without
    saying so (killed, crashed) would count forever: drop them."""
    for path in glob.glob(str(directory / "gauge_live*_*.db")):
        pid = int(Path(path).stem.rsplit("_", 1)[1])
        if not _alive(pid):
            multiprocess.mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_exited() -> None:
    """A worker stopping: its live gauges leave the sums (no-op in one process)."""
    directory = multiprocess_dir()
    if directory is not None:
        multiprocess.mark_process_dead(os.getpid(), str(directory))  # type: ignore[no-untyped-call]


@contextmanager
def shared_between_workers() -> Iterator[Path]:
    """For `rag serve --workers N`, in the parent before it starts the workers: a directory
    for their metrics, empty (values of an earlier run would be added to this one's). A
    directory given in PROMETHEUS_MULTIPROC_DIR is used and emptied; one made here is removed
    at the end."""
    given = multiprocess_dir()
    directory = given or Path(tempfile.mkdtemp(prefix="rag-metrics-"))
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(directory)
    try:
        yield directory
    finally:
        if given is None:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(directory, ignore_errors=True)
