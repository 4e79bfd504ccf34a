"""Slow and idle connections against `rag serve`: do they hold the server, do they delay
everyone else?

    python -m bench.slow_clients_bench [--each 200] [--head-seconds 10]
        [--body-seconds 30] [--keepalive-seconds 5] [--workers 1]

`rag serve` (the embedded database, the local model) is started with the given deadlines
(RAG_HTTP_HEAD_TIMEOUT_SECONDS, RAG_HTTP_BODY_TIMEOUT_SECONDS, RAG_HTTP_KEEPALIVE_SECONDS;
the service's defaults unless told). Then `each` connections of four kinds are opened at
once: idle (never send a byte), slow heads (a header byte per second), slow bodies (a POST
whose declared 10,000-byte body comes at 10 bytes a second) and kept-alive ones left idle
after one request. Meanwhile another client lists a tenant's documents, a new connection
each time, every 50 ms; it ran alone for a while before, for its baseline. Reported: the
connections the server held at once, when and how it closed each kind (P50 and the last
one, what it answered), and the other client's latency P50/P95/P99, errors included, alone
and during the attack. tests/reliability/test_slow_clients.py runs a bounded version.
"""

from __future__ import annotations

import argparse
import asyncio
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
KINDS = ("idle", "slow head", "slow body", "kept alive")
BODY_BYTES = 10_000
OTHER_EVERY = 0.05  # seconds between the other client's requests
NO_REPLY = 0


@dataclass(frozen=True, slots=True)
class SlowPlan:
    each: int = 200  # connections of every kind
    head_seconds: float | None = None  # None: the service's default
    body_seconds: float | None = None
    keepalive_seconds: float | None = None
    baseline_seconds: float = 5.0
    give_up_seconds: float = 120.0  # an attack connection still open then counts as held
    workers: int = 1


@dataclass(slots=True)
class Closed:
    kind: str
    opened: bool
    seconds: float | None  # from opening (kept alive: from its reply) to the server's close
    status: int | None  # what the server answered before closing, if anything


@dataclass(slots=True)
class SlowResult:
    plan: SlowPlan
    closed: list[Closed] = field(default_factory=list)
    baseline: list[tuple[int, float]] = field(default_factory=list)  # (status, seconds)
    during: list[tuple[int, float]] = field(default_factory=list)
    most_held: int = 0  # attack connections open at once, as the server's socket count saw

    def of(self, kind: str) -> list[Closed]:
        return [c for c in self.closed if c.kind == kind]

    def held_to_the_end(self) -> int:
        return sum(1 for c in self.closed if c.opened and c.seconds is None)


def percentiles(samples: list[tuple[int, float]]) -> tuple[float, float, float]:
    ms = sorted(seconds * 1000 for _, seconds in samples)
    if len(ms) < 2:
        return (ms[0],) * 3 if ms else (0.0, 0.0, 0.0)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return statistics.median(ms), q[94], q[98]


async def _status_and_close(
    reader: asyncio.StreamReader, started: float
) -> tuple[int | None, float]:
    """Read until the server closes; the status line it sent, and when it closed."""
    data = b""
    try:
        while chunk := await reader.read(65536):
            data += chunk
    except (ConnectionError, OSError):
        pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, time.monotonic() - started


async def _trickle(writer: asyncio.StreamWriter, piece: bytes, every: float) -> None:
    try:
        while not writer.is_closing():
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(every)
    except (ConnectionError, OSError):
        pass


async def _attack(kind: str, host: str, port: int, give_up: float) -> Closed:
    started, trickle = time.monotonic(), None  # before the server can have accepted it
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return Closed(kind, False, None, None)
    if kind == "slow head":
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Slow: ")
        trickle = asyncio.create_task(_trickle(writer, b"a", 1.0))
    elif kind == "slow body":
        writer.write(
            b"POST /api/rag/search HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % BODY_BYTES
        )
        trickle = asyncio.create_task(_trickle(writer, b" " * 10, 1.0))
    elif kind == "kept alive":
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
        await reader.readuntil(b'{"status":"ok"}')
        started = time.monotonic()
    try:
        status, seconds = await asyncio.wait_for(_status_and_close(reader, started), give_up)
        closed = Closed(kind, True, seconds, status)
    except TimeoutError:
        closed = Closed(kind, True, None, None)
    if trickle is not None:
        trickle.cancel()
    writer.close()
    return closed


async def _other_client(
    url: str, token: str, samples: list[tuple[int, float]], stop: asyncio.Event
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_keepalive_connections=0)  # a new connection each time
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        while not stop.is_set():
            started = time.monotonic()
            try:
                reply = await http.get("/api/rag/documents", headers=headers)
                status = reply.status_code
            except httpx.TransportError:
                status = NO_REPLY
            samples.append((status, time.monotonic() - started))
            await asyncio.sleep(OTHER_EVERY)


def _connections(pid: int, port: int) -> int:
    """Established TCP connections the server's processes hold on `port`."""
    import psutil

    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    found = 0
    for process in processes:
        try:
            for conn in process.net_connections(kind="tcp"):
                if conn.laddr and conn.laddr.port == port and conn.status == "ESTABLISHED":
                    found += 1
        except psutil.Error:
            continue
    return found


async def _run(plan: SlowPlan, url: str, port: int, pid: int, token: str) -> SlowResult:
    result = SlowResult(plan)
    stop = asyncio.Event()
    other = asyncio.create_task(_other_client(url, token, result.baseline, stop))
    await asyncio.sleep(plan.baseline_seconds)
    stop.set()
    await other
    stop = asyncio.Event()
    other = asyncio.create_task(_other_client(url, token, result.during, stop))
    attacks = [
        asyncio.create_task(_attack(kind, "127.0.0.1", port, plan.give_up_seconds))
        for _ in range(plan.each)
        for kind in KINDS
    ]

    async def count() -> None:
        while not all(a.done() for a in attacks):
            held = await asyncio.to_thread(_connections, pid, port)
            result.most_held = max(result.most_held, held)
            await asyncio.sleep(0.5)

    counting = asyncio.create_task(count())
    result.closed = list(await asyncio.gather(*attacks))
    stop.set()
    await asyncio.gather(other, counting)
    return result


def _settings(plan: SlowPlan) -> dict[str, str]:
    chosen = {
        "RAG_HTTP_HEAD_TIMEOUT_SECONDS": plan.head_seconds,
        "RAG_HTTP_BODY_TIMEOUT_SECONDS": plan.body_seconds,
        "RAG_HTTP_KEEPALIVE_SECONDS": plan.keepalive_seconds,
    }
    return {name: f"{value:g}" for name, value in chosen.items() if value is not None}


def run_slow_clients(plan: SlowPlan, *, data_dir: Path, port: int) -> SlowResult:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env = {**clean, "RAG_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", **_settings(plan)}
    tenant = f"slow-{os.getpid()}"
    subprocess.run(
        [*RAG, "tenant", "create", tenant, "--tier", "enterprise"],
        env=env,
        check=True,
        capture_output=True,
    )
    token = subprocess.run(
        [*RAG, "token", "--tenant", tenant], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*RAG, "serve", "--port", str(port), "--workers", str(plan.workers)],
        env=env,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_ready(url)
        return asyncio.run(_run(plan, url, port, server.pid, token))
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)


def report(result: SlowResult) -> str:
    plan = result.plan
    opened = sum(1 for c in result.closed if c.opened)
    lines = [
        f"{len(KINDS)} x {plan.each} attack connections ({opened} opened; "
        f"the server held at most {result.most_held} connections at once, the other "
        "client's included; "
        f"{result.held_to_the_end()} still open after {plan.give_up_seconds:g} s)",
        "deadlines: " + (", ".join(f"{k}={v}" for k, v in _settings(plan).items()) or "defaults"),
    ]
    for kind in KINDS:
        closed = [c for c in result.of(kind) if c.seconds is not None]
        times = sorted(c.seconds for c in closed if c.seconds is not None)
        statuses: dict[str, int] = {}
        for c in closed:
            statuses[str(c.status or "none")] = statuses.get(str(c.status or "none"), 0) + 1
        if times:
            lines.append(
                f"{kind}: closed by the server after P50 {statistics.median(times):.1f} s, "
                f"last {times[-1]:.1f} s; replies {dict(sorted(statuses.items()))}"
            )
    for name, samples in (("alone", result.baseline), ("during the attack", result.during)):
        p50, p95, p99 = percentiles(samples)
        failed = sum(1 for status, _ in samples if status != 200)
        lines.append(
            f"other client {name}: {len(samples)} requests, {failed} not 200, "
            f"P50 {p50:.1f} ms, P95 {p95:.1f} ms, P99 {p99:.1f} ms"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--each", type=int, default=200)
    parser.add_argument("--head-seconds", type=float)
    parser.add_argument("--body-seconds", type=float)
    parser.add_argument("--keepalive-seconds", type=float)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--port", type=int, default=8019)
    args = parser.parse_args()
    plan = SlowPlan(
        each=args.each,
        head_seconds=args.head_seconds,
        body_seconds=args.body_seconds,
        keepalive_seconds=args.keepalive_seconds,
        workers=args.workers,
    )
    data = Path(tempfile.mkdtemp(prefix="rag-slow-"))
    result = run_slow_clients(plan, data_dir=data, port=args.port)
    sys.stdout.write(report(result) + "\n")


if __name__ == "__main__":
    main()
