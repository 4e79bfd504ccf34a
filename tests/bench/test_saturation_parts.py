"""The saturation bench's parts that the reliability test does not drive: Chroma's HTTP
server as the peer (started, loaded, queried by wrk), the profile's sums by part, the
latency inside the service read from its access lines and the command line's own checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from bench.kit.synthetic import Loaded, TenantSlice
from bench.saturation.chroma import ChromaServer
from bench.saturation.cpu import Meter, ProcessTree, QueueWait, ReapedChildren
from bench.saturation.inside import AccessLog, percentiles
from bench.saturation.profile import shares
from bench.saturation.wrk import Target, run


def test_the_profile_sums_samples_by_part_and_leaves_waits_out() -> None:
    collapsed = "\n".join(
        [
            "main;Server.run (uvicorn/server.py:86);Session.run (onnxruntime/x.py:1) 30",
            "main;APIRoute.handle (fastapi/routing.py:1);execute (asyncpg/connection.py:1) 20",
            "main;search (app/retrieval/search.py:59) 10",
            "thread;Condition.wait (threading.py:327) 500",  # a waiting thread: not CPU
        ]
    )
    found = shares(collapsed)
    assert found == pytest.approx(
        {
            "query embedding (ONNX, tokenizer)": 0.5,
            "database driver (asyncpg)": 1 / 3,
            "service code (app/)": 1 / 6,
        }
    )


@pytest.mark.slow
def test_chroma_server_is_loaded_and_answers_the_load() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(400, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tenants = [TenantSlice("a", "50%", 0, 200), TenantSlice("b", "50%", 200, 400)]
    loaded = Loaded(400, tenants, vectors, [uuid.uuid4() for _ in range(400)], {})
    with ChromaServer() as chroma:
        chroma.load(loaded)
        bodies = [chroma.query_body(v.tolist(), tenants[1]) for v in vectors[:50]]
        meter = Meter({"chroma": ProcessTree(chroma.pid), "wrk": ReapedChildren()})
        result = run(
            Target(chroma.base_url, chroma.query_path("b")),
            bodies,
            clients=4,
            seconds=2,
            meter=meter,
        )
    assert result.requests > 4, result
    assert result.errors == 0, result
    assert result.cpu_s["chroma"] > 0


def access(route: str, ms: float) -> str:
    return json.dumps({"level": "INFO", "logger": "app.access", "route": route, "duration_ms": ms})


def test_the_durations_of_one_route_written_after_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    path.write_text(access("/api/rag/search", 99.0) + "\n")
    log = AccessLog(path)
    since = log.mark()
    lines = [
        access("/api/rag/search", 4.0),
        access("/healthz", 50.0),
        json.dumps({"logger": "app.serve", "message": "route /api/rag/search"}),
        "a line that is not JSON",
        access("/api/rag/search", 2.0),
    ]
    with path.open("a") as file:
        file.write("\n".join(lines) + "\n")
    durations = log.durations(since, "/api/rag/search")
    assert durations == [4.0, 2.0]
    assert percentiles([float(ms) for ms in range(1, 101)]) == {
        "inside_p50_ms": 50.5,
        "inside_p99_ms": 99.0,
    }
    assert percentiles(durations[:1]) == {}


def test_queue_wait_counts_the_time_processes_waited_for_a_core() -> None:
    """More busy processes than cores: together they wait about as long as they run beyond
    the cores; a sleeping process waits for nothing, and one gone counts nothing."""
    cores = len(os.sched_getaffinity(0))
    busy = [
        subprocess.Popen(
            [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<1: pass"]
        )
        for _ in range(cores * 2)
    ]
    sleeper = subprocess.Popen(["sleep", "1"])
    waits = Meter(
        {"busy": QueueWait(tuple(p.pid for p in busy)), "sleeping": QueueWait((sleeper.pid,))}
    )
    waits.start()
    try:
        while not all(_finished(process.pid) for process in [*busy, sleeper]):
            time.sleep(0.05)
        waited = waits.stop()  # before they are reaped: their counters are still there
    finally:
        for process in [*busy, sleeper]:
            process.wait()
    assert waited["busy"] > 0.3 * cores  # ~1 s each core's worth beyond the cores
    assert waited["sleeping"] < waited["busy"] / len(busy) / 5
    assert QueueWait((sleeper.pid,)).seconds() == 0  # reaped: gone


def _finished(pid: int) -> bool:
    """The process ran its code and is a zombie (its counters are still readable)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_an_unknown_peer_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A misspelt peer used to fail after the service's runs, their results lost."""
    from bench.saturation.__main__ import parse

    with pytest.raises(SystemExit):
        parse(["--peers", "chroma,lancedb"])
    assert "unknown peers ['lancedb']" in capsys.readouterr().err
    assert parse(["--peers", "chroma,chroma-per-tenant"]).peers == ["chroma", "chroma-per-tenant"]
