"""Stopping `rag serve`, with real processes: Ctrl-C or SIGTERM lets the
request in flight finish, then the app and the embedded database stop; a second Ctrl-C stops
at once; a run killed outright does not keep the embedded database running after later clean
stops."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import httpx
import psutil
import pytest

from app.db.embedded import HOLDER_STARTS_FILE, HOLDERS_FILE, forget_dead_holders
from tests.embeddings.fakes import FakeOpenAI
from tests.observability.serve import (
    OPENAI_KEY,
    Served,
    postmaster_pid,
    rag,
    running,
    serve,
    serve_env,
    stop_postmaster,
)
from tests.processes import scratch_directory

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """Not under pytest's basetemp, which is private (0700) to the server's system user."""
    with scratch_directory("rag-shutdown-") as data:
        yield data
        stop_postmaster(data / "pgdata")


@pytest.fixture
def openai(openai_server: tuple[FakeOpenAI, str]) -> Iterator[tuple[FakeOpenAI, str]]:
    fake, url = openai_server
    fake.reset()
    fake.api_key = OPENAI_KEY
    yield fake, url
    fake.reset()


@pytest.fixture
def env(data_dir: Path, openai: tuple[FakeOpenAI, str]) -> dict[str, str]:
    return serve_env(data_dir, openai[1], RAG_SHUTDOWN_GRACE_SECONDS="20")


def _search_in_flight(
    pool: ThreadPoolExecutor, served: Served, env: dict[str, str], fake: FakeOpenAI, delay: float
) -> Future[httpx.Response]:
    """A search whose query embedding takes `delay` seconds, once the provider has it."""
    rag(env, "tenant", "create", "shutdown")
    token = rag(env, "token", "--tenant", "shutdown")
    fake.delay, seen = delay, len(fake.requests)
    body = {"query": f"a question still in flight {time.monotonic()}"}
    headers = {"Authorization": f"Bearer {token}"}
    future = pool.submit(
        httpx.post, f"{served.url}/api/rag/search", json=body, headers=headers, timeout=60
    )
    deadline = time.monotonic() + 20
    while len(fake.requests) == seen:
        assert time.monotonic() < deadline, "the search never reached the provider"
        time.sleep(0.02)
    return future


def test_ctrl_c_lets_the_request_in_flight_finish(
    env: dict[str, str], data_dir: Path, openai: tuple[FakeOpenAI, str], tmp_path: Path
) -> None:
    served = serve(env, tmp_path / "serve.log")
    pgdata = data_dir / "pgdata"
    database = postmaster_pid(pgdata)
    assert running(database)
    with ThreadPoolExecutor(1) as pool:
        future = _search_in_flight(pool, served, env, openai[0], delay=2.0)
        served.interrupt()
        reply = future.result()
    assert reply.status_code == 200, reply.text  # answered after Ctrl-C
    assert served.process.wait(60) == 0, served.text()
    assert not running(database), "embedded PostgreSQL still running"
    assert postmaster_pid(pgdata) is None
    messages = served.messages()
    stopping = next(i for i, m in enumerate(messages) if m.startswith("stopping: 1 request"))
    answered = next(i for i, m in enumerate(messages) if m.startswith("POST /api/rag/search 200"))
    stopped = messages.index("stopped")
    assert stopping < answered < stopped
    assert messages[-1] == "database: embedded PostgreSQL stopped"


def test_a_second_ctrl_c_stops_at_once(
    env: dict[str, str], data_dir: Path, openai: tuple[FakeOpenAI, str], tmp_path: Path
) -> None:
    served = serve(env, tmp_path / "serve.log")
    database = postmaster_pid(data_dir / "pgdata")
    with ThreadPoolExecutor(1) as pool:
        future = _search_in_flight(pool, served, env, openai[0], delay=15.0)
        served.interrupt()
        time.sleep(0.5)
        assert served.process.poll() is None  # waiting for the search
        started = time.monotonic()
        served.interrupt()
        code = served.process.wait(30)
        took = time.monotonic() - started
        try:  # cancelled: uvicorn's bare 500, or the connection closed
            status: int | None = future.result().status_code
        except httpx.TransportError:
            status = None
    assert status in (500, None)
    assert code == 0, served.text()
    at = {line["message"]: line["timestamp"] for line in served.lines()}
    forced = datetime.fromisoformat(str(at["stopping at once: requests in flight are cancelled"]))
    stopped = datetime.fromisoformat(str(at["stopped"]))
    assert (stopped - forced).total_seconds() < 2  # the app; then PostgreSQL's clean stop
    assert took < 30
    assert "database: embedded PostgreSQL stopped" in at
    assert not running(database), "embedded PostgreSQL still running"


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_stops_like_ctrl_c(
    env: dict[str, str],
    data_dir: Path,
    openai: tuple[FakeOpenAI, str],
    tmp_path: Path,
    workers: int,
) -> None:
    """SIGTERM (systemd, `kill`, `docker stop`): the request in flight is answered, the
    process exits 0 (not 143) and the embedded PostgreSQL is stopped, not orphaned, with one
    worker or two."""
    served = serve(env, tmp_path / "serve.log", "--workers", str(workers))
    pgdata = data_dir / "pgdata"
    database = postmaster_pid(pgdata)
    assert running(database)
    with ThreadPoolExecutor(1) as pool:
        future = _search_in_flight(pool, served, env, openai[0], delay=2.0)
        served.process.send_signal(signal.SIGTERM)
        reply = future.result()
    assert reply.status_code == 200, reply.text
    assert served.process.wait(60) == 0, served.text()
    assert not running(database), "embedded PostgreSQL still running"
    assert postmaster_pid(pgdata) is None
    assert served.messages()[-1] == "database: embedded PostgreSQL stopped"


def test_a_killed_run_does_not_keep_the_database_running(
    env: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    pgdata = data_dir / "pgdata"
    killed = serve(env, tmp_path / "killed.log")
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait(30)
    database = postmaster_pid(pgdata)
    assert running(database)  # the server outlives a killed holder...
    assert killed.process.pid in json.loads((pgdata / HOLDERS_FILE).read_text())
    # ...and a later clean run stops it, instead of waiting for the dead one to detach
    served = serve(env, tmp_path / "serve.log")
    assert postmaster_pid(pgdata) == database  # it attached to the running server
    assert served.stop() == 0, served.text()
    assert not running(database), "embedded PostgreSQL kept running after a clean stop"
    assert any(f"(pids {killed.process.pid})" in m for m in served.messages())


def test_a_reused_pid_is_not_taken_for_a_holder(tmp_path: Path) -> None:
    """A holder's pid now running another program (its start time differs) is forgotten; a
    live holder is kept; a pid nothing runs is forgotten."""
    me = os.getpid()
    parent = os.getppid()
    gone = _a_pid_nothing_runs()
    (tmp_path / HOLDERS_FILE).write_text(json.dumps([me, parent, gone]))
    starts = {str(me): psutil.Process(me).create_time(), str(parent): 12.0}
    (tmp_path / HOLDER_STARTS_FILE).write_text(json.dumps(starts))
    assert sorted(forget_dead_holders(tmp_path)) == sorted([parent, gone])
    assert json.loads((tmp_path / HOLDERS_FILE).read_text()) == [me]
    assert forget_dead_holders(tmp_path) == []


def _a_pid_nothing_runs() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid -= 1
    return pid


SIGTERM_EXIT_SECONDS = 10.0  # RAG_SHUTDOWN_GRACE_SECONDS is 20 here: no request is in flight


def test_sigterm_with_the_database_down_exits_within_the_bound(
    env: dict[str, str], data_dir: Path, tmp_path: Path
) -> None:
    """Issue 47: with the database stopped, the process once took 18 s to exit after a
    SIGTERM. Nothing is in flight: the lifespan's shutdown (job workers, usage, pools) may not
    wait on a database that is not there."""
    served = serve(env, tmp_path / "serve.log")
    stop_postmaster(data_dir / "pgdata")
    time.sleep(4)  # the workers, the pools and the upkeep find the database gone
    started = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    try:
        code = served.process.wait(60)
    finally:
        took = time.monotonic() - started
    assert took < SIGTERM_EXIT_SECONDS, f"{took:.1f} s to exit\n{served.text()[-3000:]}"
    assert code == 0, served.text()
