"""A live `rag serve` for the HTTP parts, and the client that talks to it."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp
import httpx

from bench.kit.database import BenchDatabase
from bench.kit.paths import ROOT
from bench.kit.ports import free_port


class ApiClient:
    """JSON POSTs to a live `rag serve` on kept-alive connections, as a chat backend would send
    them. aiohttp: its own time per request is a fraction of httpx's (2026-11-26, a cached search
    on this machine: P50 +0.7 ms over a bare socket client for aiohttp, +2.2 ms for httpx), so
    the figures are the service's more than the client's."""

    def __init__(self, base_url: str, *, timeout_seconds: float = 120) -> None:
        self.base_url = base_url
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        # no connection limit: the concurrent parts open as many as they have clients
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(
            self.base_url, timeout=self.timeout, connector=connector
        )
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, path: str, body: dict[str, Any], *, token: str) -> dict[str, Any]:
        """The reply's JSON; an HTTP error status raises."""
        assert self._session is not None, "use `async with ApiClient(...)`"
        headers = {"Authorization": f"Bearer {token}"}
        async with self._session.post(path, json=body, headers=headers) as reply:
            reply.raise_for_status()
            payload: dict[str, Any] = await reply.json()
            return payload


@contextmanager
def serve(db: BenchDatabase, *, redis_url: str | None) -> Iterator[str]:
    """`rag serve` in a subprocess, as the runtime role, with the local model: its URL."""
    with serve_process(db, redis_url=redis_url) as (url, _process, _log):
        yield url


@contextmanager
def serve_process(
    db: BenchDatabase,
    *,
    redis_url: str | None,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes], str]]:
    """`rag serve --workers N` as above, `env` added to its environment: its URL, process
    (the workers are the process's children) and the file its output goes to (JSON lines)."""
    port = free_port()
    settings = db.settings
    environment = {
        **os.environ,
        "RAG_DATABASE_URL": db.app_url,
        "RAG_JWT_SECRET": settings.jwt_secret.get_secret_value() if settings.jwt_secret else "",
        "RAG_EMBEDDING_PROVIDER": "local",
        "RAG_RATE_LIMIT_TIERS": json.dumps(settings.rate_limit_tiers),
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }
    environment.pop("RAG_REDIS_URL", None)
    if redis_url:
        environment["RAG_REDIS_URL"] = redis_url
    logfile = tempfile.NamedTemporaryFile(prefix="rag-serve-", suffix=".log", delete=False)  # noqa: SIM115
    command = [str(ROOT / ".venv/bin/rag"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--workers", str(workers)],
        env=environment,
        cwd=ROOT,
        stdout=logfile,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"rag serve exited; see {logfile.name}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"rag serve not ready after 180 s; see {logfile.name}")
            time.sleep(0.5)
        yield url, process, logfile.name
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        logfile.close()
        os.unlink(logfile.name)


def wait_ready(url: str, seconds: float = 300) -> None:
    """Until `url`/readyz answers 200; RuntimeError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the service at {url} did not become ready in {seconds:.0f} s")
