"""`rag serve --workers 2`: the metrics of both workers in every scrape, whichever answers it
(prometheus_client's multiprocess mode), and both stopping cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from tests.embeddings.fakes import FakeOpenAI
from tests.observability.scrape import Scrape
from tests.observability.serve import (
    OPENAI_KEY,
    postmaster_pid,
    running,
    serve,
    serve_env,
    stop_postmaster,
)
from tests.processes import scratch_directory

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir() -> Iterator[Path]:
    with scratch_directory("rag-workers-") as data:
        yield data
        stop_postmaster(data / "pgdata")


def healthz_answered_by(metrics_dir: Path) -> dict[int, float]:
    """Per worker pid, the /healthz requests its own file counts."""
    counts = {}
    for path in metrics_dir.glob("counter_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        merged = MultiProcessCollector.merge([str(path)])  # type: ignore[no-untyped-call]
        counts[pid] = sum(
            sample.value
            for family in merged
            for sample in family.samples
            if sample.name == "rag_http_requests_total" and sample.labels["route"] == "/healthz"
        )
    return counts


def test_every_scrape_sums_both_workers(
    data_dir: Path, openai_server: tuple[FakeOpenAI, str], tmp_path: Path
) -> None:
    fake, url = openai_server
    fake.reset()
    fake.api_key = OPENAI_KEY
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_1.db").write_bytes(b"left by an earlier run")  # emptied at start
    env = serve_env(data_dir, url, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    served = serve(env, tmp_path / "serve.log", "--workers", "2")
    database = postmaster_pid(data_dir / "pgdata")
    sent, deadline = 0, time.monotonic() + 120
    while len([n for n in healthz_answered_by(metrics_dir).values() if n]) < 2:
        assert time.monotonic() < deadline, "one worker answered every request"
        for _ in range(10):  # a connection each: the kernel spreads them over the workers
            assert httpx.get(f"{served.url}/healthz", timeout=10).status_code == 200
        sent += 10
    scrapes = [Scrape.parse(httpx.get(f"{served.url}/metrics", timeout=10).text) for _ in range(8)]
    assert {s.value("rag_http_requests_total", route="/healthz") for s in scrapes} == {sent}
    assert {s.value("rag_http_requests_in_progress") for s in scrapes} == {1.0}  # the scrape
    assert served.stop() == 0, served.text()
    assert not running(database)
    assert "serving on" in served.text()


def test_connections_are_spread_over_the_workers_even_while_one_is_busy(
    data_dir: Path, openai_server: tuple[FakeOpenAI, str], tmp_path: Path
) -> None:
    """Keep-alive clients that connect while a worker is busy (here: stopped), as a chat
    backend's pool does under load: on one shared socket, the worker that was free accepted
    every one of them and kept them (app/cli/listening.py)."""
    fake, url = openai_server
    fake.reset()
    fake.api_key = OPENAI_KEY
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = serve_env(data_dir, url, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    served = serve(env, tmp_path / "serve.log", "--workers", "2")
    deadline = time.monotonic() + 120
    while len([n for n in healthz_answered_by(metrics_dir).values() if n]) < 2:
        assert time.monotonic() < deadline, "a worker never answered"
        httpx.get(f"{served.url}/healthz", timeout=10)
    before = healthz_answered_by(metrics_dir)
    busy = min(before)
    host, port = served.url.removeprefix("http://").split(":")
    os.kill(busy, signal.SIGSTOP)
    try:
        clients = [socket.create_connection((host, int(port)), timeout=10) for _ in range(32)]
        for client in clients:
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: rag\r\n\r\n")
    finally:
        os.kill(busy, signal.SIGCONT)
    try:
        for client in clients:
            assert client.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        for client in clients:
            client.close()
    answered: dict[int, float] = {}
    while sum(answered.values()) < 32:  # a request is counted as its reply goes out
        assert time.monotonic() < deadline + 30, f"counted {answered} of 32"
        after = healthz_answered_by(metrics_dir)
        answered = {pid: after[pid] - before.get(pid, 0) for pid in after}
    assert sum(answered.values()) == 32
    # each connection lands on a socket by a hash of its addresses: the busy worker gets
    # fewer than 4 of 32 about once in 800,000 runs
    assert answered[busy] >= 4, f"the free worker took the connections: {answered}"
    assert served.stop() == 0, served.text()
