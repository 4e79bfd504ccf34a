"""CPU time of the processes behind a search: the service (supervisor and workers), every
PostgreSQL process, the Redis server and the load generator, read before and after a run; and
the time the service's workers were ready to run but waited for a core; and how the clients'
connections lie over the workers."""

from __future__ import annotations

import resource
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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


class Part(Protocol):
    def seconds(self) -> float: ...


@dataclass(frozen=True, slots=True)
class QueueWait:
    """The seconds the threads of `pids` spent runnable but waiting for a core: the second
    field of Linux's /proc/PID/task/TID/schedstat. On a machine a worker shares with
    PostgreSQL, each busy backend takes turns at the cores with it; while it waits, every
    request on its event loop waits too. A process gone counts nothing."""

    pids: tuple[int, ...]

    def seconds(self) -> float:
        waited = 0
        for pid in self.pids:
            for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
                try:
                    waited += int(stat.read_text().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        return waited / 1e9


class Meter:
    """CPU seconds (or waits) per named part between `start()` and `stop()`."""

    def __init__(self, parts: Mapping[str, Part]) -> None:
        self.parts = parts
        self._began: dict[str, float] = {}

    def start(self) -> None:
        self._began = {name: part.seconds() for name, part in self.parts.items()}

    def stop(self) -> dict[str, float]:
        return {name: part.seconds() - self._began[name] for name, part in self.parts.items()}


class ConnectionSplit:
    """How the clients' connections lie over the workers `pids`: the count of each one's
    established connections on `port`, read once `after` seconds into a run (wrk opens its
    connections at the start and keeps them). With a socket per worker (SO_REUSEPORT), the
    kernel places a connection by a hash of its addresses, so 16 connections may lie 8 / 8 or
    11 / 5; a worker's requests queue behind its own connections' only."""

    def __init__(self, pids: tuple[int, ...], port: int, after: float) -> None:
        self.pids, self.port, self.after = pids, port, after
        self.counts: list[int] = []
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        self.counts = []
        self._timer = threading.Timer(self.after, self._read)
        self._timer.start()

    def stop(self) -> list[int]:
        if self._timer is not None:
            self._timer.join()
        return sorted(self.counts, reverse=True)

    def _read(self) -> None:
        counts = []
        for pid in self.pids:
            try:
                connections = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            counts.append(
                sum(
                    1
                    for c in connections
                    if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == self.port
                )
            )
        self.counts = counts
