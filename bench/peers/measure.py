"""Latency with 1, 4 and 16 clients, and recall@10, of every engine on the same jobs."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from bench.kit.report import log
from bench.kit.stats import latency_summary

from .engines import AsyncEngine, BlockingEngine, Engine
from .workload import Job, recall


@dataclass(frozen=True, slots=True)
class Budget:
    """How long one cell (engine x tenant size x clients) may run: it stops taking new jobs
    after `seconds` once `min_jobs` are done (the naive peer at a large tenant takes seconds
    per query; the others finish every job)."""

    seconds: float
    min_jobs: int


@dataclass(frozen=True, slots=True)
class CellResult:
    latencies_ms: list[float]
    found: list[list[str]]  # per job, in job order, for the jobs that ran
    wall_s: float


async def run_cell(engine: Engine, jobs: list[Job], clients: int, budget: Budget) -> CellResult:
    """`clients` callers taking jobs from one queue until it is empty (or the budget is
    spent); each call timed on its own."""
    found: list[list[str] | None] = [None] * len(jobs)
    latencies: list[float] = []
    taken = 0
    started = time.perf_counter()
    deadline = started + budget.seconds

    def take() -> int | None:
        nonlocal taken
        if taken >= len(jobs) or (taken >= budget.min_jobs and time.perf_counter() > deadline):
            return None
        taken += 1
        return taken - 1

    if engine.blocking:
        blocking = cast(BlockingEngine, engine)
        lock = threading.Lock()

        def thread_worker() -> None:
            while True:
                with lock:
                    index = take()
                if index is None:
                    return
                job = jobs[index]
                began = time.perf_counter()
                result = blocking.search(job.tenant, job.query)
                latencies.append((time.perf_counter() - began) * 1000)
                found[index] = result

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(clients) as pool:
            await asyncio.gather(
                *(loop.run_in_executor(pool, thread_worker) for _ in range(clients))
            )
    else:
        waiting = cast(AsyncEngine, engine)

        async def task_worker() -> None:
            while (index := take()) is not None:
                job = jobs[index]
                began = time.perf_counter()
                result = await waiting.search(job.tenant, job.query)
                latencies.append((time.perf_counter() - began) * 1000)
                found[index] = result

        await asyncio.gather(*(task_worker() for _ in range(clients)))
    wall = time.perf_counter() - started
    return CellResult(latencies, [f for f in found if f is not None], wall)


async def warm_up(engines: list[Engine], jobs: list[Job]) -> None:
    """Each engine answers the warm-up jobs once (connections, caches, prepared statements)."""
    for engine in engines:
        await run_cell(engine, jobs, 1, Budget(seconds=5.0, min_jobs=1))


async def latency_rows(
    engines: list[Engine],
    jobs_by_class: dict[str, list[Job]],
    clients: list[int],
    budget: Budget,
    *,
    size: int,
) -> list[dict[str, Any]]:
    """Every engine on every tenant size at every client count, engines back to back within
    a (size, clients) cell so load drift hits them alike; recall from each cell's answers."""
    rows = []
    for count in clients:
        for size_class, jobs in jobs_by_class.items():
            for engine in engines:
                cell = await run_cell(engine, jobs, count, budget)
                recalls = [
                    recall(f, j.truth_at(engine.min_similarity))
                    for f, j in zip(cell.found, jobs, strict=False)
                ]
                row = {
                    "size": size,
                    "engine": engine.name,
                    "tenant": size_class,
                    "rows": jobs[0].tenant.stop - jobs[0].tenant.start,
                    "clients": count,
                    **latency_summary(cell.latencies_ms),
                    "qps": round(len(cell.latencies_ms) / cell.wall_s, 1),
                    "recall@10": round(float(np.mean(recalls)), 4),
                    "recall@10_min": round(float(np.min(recalls)), 2),
                }
                rows.append(row)
                log(
                    f"  {size} {size_class:>4} x{count:<2} {engine.name:<24}"
                    f" n {row['n']:>4}  P50 {row['p50_ms']:8.2f}  P95 {row['p95_ms']:8.2f}"
                    f"  recall {row['recall@10']:.3f}"
                )
    return rows


async def sweep_rows(
    engines: list[tuple[int, Engine]],
    jobs_by_class: dict[str, list[Job]],
    budget: Budget,
    *,
    size: int,
    label: str,
) -> list[dict[str, Any]]:
    """Recall@10 and single-client P50 per ef_search value."""
    rows = []
    for ef_search, engine in engines:
        for size_class, jobs in jobs_by_class.items():
            cell = await run_cell(engine, jobs, 1, budget)
            recalls = [
                recall(f, j.truth_at(engine.min_similarity))
                for f, j in zip(cell.found, jobs, strict=False)
            ]
            rows.append(
                {
                    "size": size,
                    "engine": label,
                    "ef_search": ef_search,
                    "tenant": size_class,
                    "n": len(recalls),
                    "p50_ms": latency_summary(cell.latencies_ms)["p50_ms"],
                    "recall@10": round(float(np.mean(recalls)), 4),
                }
            )
        log(f"  {size} sweep {label} ef_search {ef_search}: done")
    return rows
