"""`rag serve` as its own process for these tests, on a fake OpenAI provider (no model to
load: it starts in seconds) and, unless told otherwise, the embedded database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from tests.processes import free_port

RAG = [sys.executable, "-m", "app.cli.main"]
OPENAI_KEY = "sk-proj-Observability0penAIKey4f9c2d7e1b"


def serve_env(data_dir: Path, openai_url: str, **settings: str) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RAG_") and k != "PROMETHEUS_MULTIPROC_DIR"
    }
    return {
        **clean,
        "RAG_DATA_DIR": str(data_dir),
        "RAG_EMBEDDING_PROVIDER": "openai",
        "RAG_OPENAI_BASE_URL": openai_url,
        "RAG_OPENAI_API_KEY": OPENAI_KEY,
        "RAG_OPENAI_MAX_RETRIES": "0",
        "RAG_EMBEDDING_DIMENSIONS": "384",
        "RAG_LOG_FORMAT": "json",
        "HF_HUB_OFFLINE": "1",
        **settings,
    }


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> list[dict[str, object]]:
        found = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def messages(self) -> list[str]:
        return [str(line.get("message")) for line in self.lines()]

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def stop(self, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.interrupt()
        return self.process.wait(timeout)


def serve(env: dict[str, str], log: Path, *args: str, ready_timeout: float = 120) -> Served:
    """Start `rag serve` and wait until /readyz answers 200 (stderr goes to `log`)."""
    port = free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [*RAG, "serve", "--port", str(port), *args], env=env, stderr=sink, stdout=sink
        )
    served = Served(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"rag serve exited {process.returncode}:\n{served.text()}")
        try:
            if httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    served.stop()
    raise RuntimeError(f"rag serve was not ready in {ready_timeout} s:\n{served.text()}")


def rag(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*RAG, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def postmaster_pid(pgdata: Path) -> int | None:
    """The embedded server's pid while its postmaster.pid file says it runs."""
    path = pgdata / "postmaster.pid"
    if not path.exists():
        return None
    return int(path.read_text().splitlines()[0])


def running(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_postmaster(pgdata: Path) -> None:
    """After a failed test: the server these tests started must not outlive them."""
    pid = postmaster_pid(pgdata)
    if running(pid):
        assert pid is not None
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        psutil.Process(pid).wait(30)
