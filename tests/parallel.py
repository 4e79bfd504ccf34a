"""Running the suite on every core (pytest-xdist, docs/TESTING.md).

`ModuleScheduling` hands each worker whole modules, so a module's fixtures (a service process, a
built wheel, a browser) start once, on one worker; the folder tests/citus goes to one worker
as a whole, so its cluster starts once per run. The conftest puts the modules that hold slow
tests first, so the longest ones start early and no worker is left with a long tail.

`RssLog` writes, with RAG_TEST_RSS_LOG=FILE, one line per test (the worker, the test's node id,
the resident memory of the pytest process after it in MB): what grows, and when.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPED_FOLDERS = ("tests/citus/",)


class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with a module as the unit of work (a grouped folder as one),
    in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        for folder in GROUPED_FOLDERS:
            if nodeid.startswith(folder):
                return folder
        return nodeid.split("::", 1)[0]


def slow_modules_first(items: list[pytest.Item]) -> None:
    """Reorder in place: the modules with a test marked slow first (then the rest), each
    module's tests kept together and in their order."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


class RssLog:
    def __init__(self, path: Path, worker: str) -> None:
        self.path, self.worker = path, worker
        self.process = psutil.Process()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        rss = self.process.memory_info().rss // 2**20
        with self.path.open("a") as log:
            log.write(f"{self.worker}\t{nodeid}\t{rss}\n")


def register_rss_log(config: pytest.Config) -> None:
    """On the process that runs the tests: a worker, or pytest alone (not xdist's controller,
    which only relays its workers' reports)."""
    controller = config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput")
    if (path := os.environ.get("RAG_TEST_RSS_LOG")) and not controller:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        config.pluginmanager.register(RssLog(Path(path), worker), "rag-rss-log")
