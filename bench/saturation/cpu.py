"""CPU time of the processes behind a search: the service (supervisor and workers), every
PostgreSQL process, the Redis server and the load generator, read before and after a run."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis


def _seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@dataclass(frozen=True, slots=True)
class ProcessTree:
    """A process and its descendants; CPU of descendants that exited and were reaped is
    counted through the parent's `children_*` times."""

    root_pid: int

    def seconds(self) -> float:
        root = psutil.Process(self.root_pid)
        times = root.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in root.children(recursive=True):
            try:
                total += _seconds(child)
            except psutil.NoSuchProcess:
                continue
        return float(total)


def worker_pids(pid: int) -> list[int]:
    """The worker processes of the `rag serve` process `pid` (its children but
    multiprocessing's resource tracker); none when it serves in its own process."""
    return [
        child.pid
        for child in psutil.Process(pid).children()
        if "resource_tracker" not in " ".join(child.cmdline())
    ]


def postmaster_pid(pgdata: Path) -> int:
    """The PostgreSQL server's pid, from its data directory."""
    return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])


class RedisServer:
    """The Redis server's own CPU, as INFO reports it (it may run under another user)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)

    def seconds(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class ReapedChildren:
    """This process's reaped children (the load generator run with subprocess.run)."""

    def seconds(self) -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


class Meter:
    """CPU seconds per named part between `start()` and `stop()`."""

    def __init__(self, parts: dict[str, ProcessTree | RedisServer | ReapedChildren]) -> None:
        self.parts = parts
        self._began: dict[str, float] = {}

    def start(self) -> None:
        self._began = {name: part.seconds() for name, part in self.parts.items()}

    def stop(self) -> dict[str, float]:
        return {name: part.seconds() - self._began[name] for name, part in self.parts.items()}
