"""The `rag` command on its embedded defaults, as a user runs it (separate processes)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

RAG = [sys.executable, "-m", "app.cli.main"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    return {**clean, "RAG_DATA_DIR": str(tmp_path_factory.mktemp("rag-data"))}


def rag(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAG, *args], env=env, capture_output=True, text=True, timeout=120)


def test_tenant_create_is_idempotent_and_survives_restarts(env: dict[str, str]) -> None:
    first = rag("tenant", "create", "acme", env=env)
    assert first.returncode == 0, first.stderr
    assert "tenant acme created" in first.stderr
    again = rag("tenant", "create", "acme", "--tier", "basic", env=env)
    assert again.returncode == 0, again.stderr
    assert "tenant acme already exists" in again.stderr


def test_tenant_create_rejects_bad_ids_and_tiers(env: dict[str, str]) -> None:
    bad_id = rag("tenant", "create", "not ok!", env=env)
    assert bad_id.returncode == 2
    assert "invalid tenant id" in bad_id.stderr
    bad_tier = rag("tenant", "create", "acme", "--tier", "platinum", env=env)
    assert bad_tier.returncode == 2
    assert "unknown tier" in bad_tier.stderr


def test_bad_setting_names_the_variable(env: dict[str, str]) -> None:
    result = rag("tenant", "create", "acme", env={**env, "RAG_CHUNK_TOKENS": "lots"})
    assert result.returncode == 2
    assert "RAG_CHUNK_TOKENS" in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_answers_and_stops_cleanly_on_ctrl_c(env: dict[str, str]) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [*RAG, "serve", "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert _wait_healthy(f"http://127.0.0.1:{port}/healthz"), "server did not come up"
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    pid_file = Path(env["RAG_DATA_DIR"]) / "pgdata" / "postmaster.pid"
    assert not pid_file.exists(), "embedded PostgreSQL still running after Ctrl-C"


def _wait_healthy(url: str, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.2)
    return False
