"""Load on loopback: `rag serve --workers 2` sharing one Redis, several tenants each sending
twice what their limit admits, for a bounded time.

    python -m bench.load_bench [--tenants 4] [--limit 50] [--window 10]
        [--windows 3] [--factor 2] [--redis-url redis://127.0.0.1:6379/14]

Each tenant sends `factor` x `limit` requests per `window` seconds, evenly spaced, half
searches (the query embedded by the local model) and half document lists, each on a new
connection, so the kernel spreads them over the workers, after 40 requests of a warm-up
tenant (connection pools filled, the model's first calls done). Reported: throughput, latency
P50/P95/P99 of the admitted requests and of the refused ones, statuses, the most admissions
of one tenant that certainly fell in one window (each was decided between its send and its
reply: those sent after `s` and answered before `s + window` were decided inside the
window), and the workers' resident memory before and after. tests/reliability/test_load.py
runs a bounded version and holds the service to zero 5xx, the limit and flat memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.kit.server import wait_ready

RAG = [sys.executable, "-m", "app.cli.main"]
NO_REPLY = 0  # the status recorded for a request that got no reply within the timeout
TIMEOUT_SECONDS = 60


@dataclass(frozen=True, slots=True)
class LoadPlan:
    tenants: int = 4
    limit: int = 50
    window: int = 10
    windows: int = 3
    factor: float = 2.0
    workers: int = 2


@dataclass(slots=True)
class Sent:
    tenant: str
    at: float
    status: int
    seconds: float
    kind: str = ""


@dataclass(slots=True)
class LoadResult:
    plan: LoadPlan
    sent: list[Sent] = field(default_factory=list)
    rss_before_mb: list[float] = field(default_factory=list)
    rss_after_mb: list[float] = field(default_factory=list)
    duration: float = 0.0

    def statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for s in self.sent:
            counts[s.status] = counts.get(s.status, 0) + 1
        return counts

    def most_admitted_in_a_window(self) -> int:
        """Per tenant, the most admissions that certainly fell in one window of the server's:
        each was decided between its send and its reply, so admissions sent at or after `s`
        and answered before `s + window` were all decided inside [s, s + window)."""
        most = 0
        for tenant in {s.tenant for s in self.sent}:
            admitted = sorted(
                (s.at, s.at + s.seconds)
                for s in self.sent
                if s.tenant == tenant and s.status == 200
            )
            for i, (start, _) in enumerate(admitted):
                inside = sum(1 for _, done in admitted[i:] if done < start + self.plan.window)
                most = max(most, inside)
        return most

    def percentiles(self, status: int) -> tuple[float, float, float]:
        ms = sorted(s.seconds * 1000 for s in self.sent if s.status == status)
        if len(ms) < 2:
            return (ms[0],) * 3 if ms else (0.0, 0.0, 0.0)
        q = statistics.quantiles(ms, n=100, method="inclusive")
        return statistics.median(ms), q[94], q[98]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _workers(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


async def _tenant_load(
    url: str, tenant: str, token: str, plan: LoadPlan, result: LoadResult, t0: float
) -> None:
    count = int(plan.factor * plan.limit * plan.windows)
    interval = plan.window * plan.windows / count
    headers = {"Authorization": f"Bearer {token}"}

    # a connection per request (none kept alive), so the kernel spreads them over the workers
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_SECONDS, limits=limits) as http:

        async def one(n: int) -> None:
            await asyncio.sleep(max(0.0, t0 + n * interval - time.monotonic()))
            started = time.monotonic()
            try:
                if n % 2:
                    reply = await http.get("/api/rag/documents", headers=headers)
                else:
                    body = {"query": f"harbour ships {n}"}
                    reply = await http.post("/api/rag/search", json=body, headers=headers)
                status = reply.status_code
            except httpx.TransportError:  # no reply (NO_REPLY below), counted as such
                status = NO_REPLY
            elapsed = time.monotonic() - started
            kind = "list" if n % 2 else "search"
            result.sent.append(Sent(tenant, started, status, elapsed, kind))

        await asyncio.gather(*(one(n) for n in range(count)))


def run_load(plan: LoadPlan, *, redis_url: str, data_dir: Path, port: int) -> LoadResult:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env = {
        **clean,
        "RAG_DATA_DIR": str(data_dir),
        "RAG_REDIS_URL": redis_url,
        "RAG_RATE_LIMIT_WINDOW_SECONDS": str(plan.window),
        "RAG_RATE_LIMIT_TIERS": json.dumps({"basic": plan.limit, "pro": 1000, "enterprise": 10000}),
        "HF_HUB_OFFLINE": "1",
    }
    tenants = [f"load-{n}-{os.getpid()}" for n in range(plan.tenants)]
    warm = f"warm-{os.getpid()}"  # fills the pools and warms the model, not measured
    for tenant in [*tenants, warm]:
        subprocess.run([*RAG, "tenant", "create", tenant], env=env, check=True, capture_output=True)
    tokens = {
        t: subprocess.run(
            [*RAG, "token", "--tenant", t], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        for t in [*tenants, warm]
    }
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*RAG, "serve", "--port", str(port), "--workers", str(plan.workers)],
        env=env,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    result = LoadResult(plan)
    try:
        wait_ready(url)
        workers = _workers(server.pid)
        warm_plan = LoadPlan(1, 40, 2, 1, 1.0, plan.workers)  # 40 requests in 2 s
        asyncio.run(_tenant_load(url, warm, tokens[warm], warm_plan, LoadResult(warm_plan), 0.0))
        result.rss_before_mb = [_rss_mb(pid) for pid in workers]

        async def everything() -> None:
            t0 = time.monotonic() + 0.5
            await asyncio.gather(
                *(_tenant_load(url, t, tokens[t], plan, result, t0) for t in tenants)
            )

        started = time.monotonic()
        asyncio.run(everything())
        result.duration = time.monotonic() - started
        result.rss_after_mb = [_rss_mb(pid) for pid in workers]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    return result


def report(result: LoadResult) -> str:
    plan, statuses = result.plan, result.statuses()
    lines = [
        f"{plan.workers} workers, {plan.tenants} tenants x {plan.factor:g} x limit "
        f"{plan.limit}/{plan.window} s for {plan.windows} windows: {len(result.sent)} requests "
        f"in {result.duration:.1f} s ({len(result.sent) / result.duration:.1f}/s)",
        f"statuses: {dict(sorted(statuses.items()))}",
        f"most admitted for one tenant certainly within one {plan.window} s window: "
        f"{result.most_admitted_in_a_window()} (limit {plan.limit})",
    ]
    for status in sorted(statuses):
        p50, p95, p99 = result.percentiles(status)
        lines.append(f"latency of {status}: P50 {p50:.1f} ms, P95 {p95:.1f} ms, P99 {p99:.1f} ms")
    before, after = result.rss_before_mb, result.rss_after_mb
    lines.append(
        "worker RSS MB before/after: "
        + ", ".join(f"{b:.0f} -> {a:.0f}" for b, a in zip(before, after, strict=True))
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--port", type=int, default=8017)
    args = parser.parse_args()
    plan = LoadPlan(args.tenants, args.limit, args.window, args.windows, args.factor, args.workers)
    data = Path(tempfile.mkdtemp(prefix="rag-load-"))
    result = run_load(plan, redis_url=args.redis_url, data_dir=data, port=args.port)
    sys.stdout.write(report(result) + "\n")


if __name__ == "__main__":
    main()
