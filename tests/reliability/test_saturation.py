"""Saturation, bounded: `rag serve --workers 2` sharing a Redis, driven by wrk's closed-loop
clients (16 connections, new query texts each request, then keyword searches) for a few
seconds. Every request is answered with a 200, none is lost, and the workers' memory stays
flat from one run to the next. The figures of a full run are in docs/BENCHMARKS.md
(`python -m bench.saturation`)."""

from __future__ import annotations

import json

import psutil
import pytest

from bench.saturation.cpu import ConnectionSplit, Meter, ReapedChildren, worker_pids
from bench.saturation.texts import distinct_texts
from bench.saturation.wrk import Target as LoadTarget
from bench.saturation.wrk import run
from tests.blackbox.server import started_service

pytestmark = pytest.mark.slow
CLIENTS, SECONDS = 16, 4
DOCUMENTS = 24


def _workers(port: int) -> list[int]:
    """The workers: the children of the `rag serve --port PORT` process (its supervisor), the
    multiprocessing resource tracker left out."""
    [supervisor] = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "serve" in (p.info["cmdline"] or []) and str(port) in (p.info["cmdline"] or [])
    ]
    return worker_pids(supervisor.pid)


def _worker_rss_mb(port: int) -> list[float]:
    return [psutil.Process(w).memory_info().rss / 2**20 for w in _workers(port)]


def test_two_workers_answer_every_request_under_saturation(redis_url: str) -> None:
    texts = distinct_texts()
    with started_service(redis_url) as target:
        tenant = target.new_tenant("saturation")
        for i in range(DOCUMENTS):
            made = tenant.ingest(f"Abstract {i}", " ".join(texts[1000 + i * 20 : 1020 + i * 20]))
            assert made["chunks"], made
        load = LoadTarget(target.url, "/api/rag/search", tenant.token)
        meter = Meter({"wrk": ReapedChildren()})
        port = int(target.url.rsplit(":", 1)[1])
        split = ConnectionSplit(tuple(_workers(port)), port, after=SECONDS / 2)
        runs, splits = [], []
        for round_ in range(2):
            new = texts[5000 + round_ * 3000 : 8000 + round_ * 3000]
            bodies = [json.dumps({"query": t, "mode": "vector"}) for t in new]
            split.start()
            runs.append(run(load, bodies, clients=CLIENTS, seconds=SECONDS, meter=meter))
            splits.append(split.stop())
            keyword = [json.dumps({"query": t, "mode": "keyword"}) for t in new[:200]]
            runs.append(run(load, keyword, clients=CLIENTS, seconds=SECONDS, meter=meter))
            if round_ == 0:
                rss_before = _worker_rss_mb(port)
        rss_after = _worker_rss_mb(port)
    for result in runs:
        assert result.requests > CLIENTS, result  # every client got replies
        assert result.errors == 0, result  # no 5xx, no 429, no timeout, no dropped connection
    for counts in splits:  # every client's connection held by a worker (the bench reports it),
        assert len(counts) == 2, counts  # beside the test's own (its tenant's client)
        assert sum(counts) >= CLIENTS, counts
    assert len(rss_before) == 2, rss_before
    for before, after in zip(rss_before, rss_after, strict=True):
        assert after - before < 64, (rss_before, rss_after)  # MB: flat, not growing with load
